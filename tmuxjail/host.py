"""Looks at the host so that policy and argv builders can stay pure: the layout of /, where tmux
sockets live, which workspaces are git repos, what declared paths resolve to, and whether user
namespaces work."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .sandbox import HostLayout
from .sandbox.bwrap import TOP_LINKS

ETC_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")


def layout(tmux_socket: str | None, env: dict) -> HostLayout:
    top: dict[str, str] = {}
    for p in TOP_LINKS:
        if os.path.islink(p):
            top[p] = os.readlink(p)
        elif os.path.isdir(p):
            top[p] = "dir"
    # Every place tmux may keep sockets for this uid: the default dirs for -L, and the dir of the
    # server we drive (for -S anywhere).
    uid = os.getuid()
    dirs = {f"/tmp/tmux-{uid}"}
    if env.get("TMUX_TMPDIR"):
        dirs.add(os.path.join(env["TMUX_TMPDIR"], f"tmux-{uid}"))
    files: set[str] = set()
    for sock in filter(None, [tmux_socket, env.get("TMUX", "").split(",")[0]]):
        parent = os.path.dirname(sock)
        if os.path.basename(parent).startswith("tmux-"):
            dirs.add(parent)
        else:
            files.add(sock)
    resolv = None
    if os.path.islink("/etc/resolv.conf"):
        target = os.path.realpath("/etc/resolv.conf")
        if not target.startswith("/etc/"):
            resolv = os.path.dirname(target)
    return HostLayout(
        top=top,
        tmux_dirs=tuple(sorted(d for d in dirs if os.path.isdir(d))),
        tmux_files=tuple(sorted(f for f in files if os.path.exists(f))),
        etc_secrets=tuple(p for p in ETC_SECRETS if os.path.isfile(p)),
        resolv_dir=resolv,
    )


def git_dirs(workspaces) -> tuple[str, ...]:
    out = []
    for ws in workspaces:
        git = Path(ws, ".git")
        if git.is_dir() and not git.is_symlink():
            out.append(ws)
    return tuple(out)


def realpaths(paths) -> dict[str, str]:
    return {p: os.path.realpath(p) for p in paths}


def userns_works(bwrap: str) -> tuple[bool, str]:
    """Can bwrap make an unprivileged user namespace here? (The jail needs one.)"""
    try:
        proc = subprocess.run(
            [bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc",
             "--dev", "/dev", "--", "/bin/true"],
            capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr.strip()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def jail_exec_started(sandbox_pid: int) -> bool:
    """True once the command inside the sandbox is running. bwrap reports its child's pid before
    that child has set the sandbox up, so the pid alone proves nothing: wait until a descendant
    has exec'd something other than bwrap (setup succeeded and the CLI was exec'd)."""
    todo = [sandbox_pid]
    while todo:
        pid = todo.pop()
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
                return True
        except OSError:
            pass
        todo += _children(pid)
    return False
