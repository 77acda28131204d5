"""The launch's MCP broker (issue 31, DESIGN §10): when the policy attaches MCP servers, the
launcher makes the broker's socket in the session's directory under tmuxjail's state (which no
jail sees), forks the broker, and binds into the jail exactly two things: that socket, at
net.stub.SOCKET, and the servers' MCP configuration (the stub's command per server), read-only,
at net.stub.CONFIG. The broker runs outside the jail, as the user, and dies with the jail
(PR_SET_PDEATHSIG on the launcher, which becomes bubblewrap); each server runs in a jail of its
own (sandbox/mcpjail.py) with the secrets the spec carried, which never enter the agent's jail."""

from __future__ import annotations

import os

from .refuse import EXIT_UNAVAILABLE, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any

STRICT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")  # of the jail's own environment, to each server
PR_SET_PDEATHSIG = 1
LOG_NAME = "calls.jsonl"
ERR_NAME = "broker.err"
ERR_MAX = 1 << 20


def session_dir(store: str, session_id: str) -> str:
    """state/mcp/<session id>: the broker's sockets and the session's call log."""
    sid = "".join(c for c in session_id if c.isalnum() or c in "-_")[:64] or "session"
    return os.path.join(os.path.dirname(store), "mcp", sid)


def servers(spec: dict[str, Any], policy: dict[str, Any], bwrap: str) -> dict[str, dict[str, Any]]:
    """What the broker runs for each attached server: its jail's argv, its environment (the
    secrets the start read for it, and nothing of the agent's), its tools allowlist, its digest."""
    from ..sandbox import mcpjail

    secrets = spec.get("mcp_env") or {}
    base = {"PATH": STRICT_PATH, "HOME": policy["home"]}
    base.update({k: v for k, v in spec["env"].items() if k in PASSED})
    out = {}
    for s in on_host(policy):
        env = dict(base)
        env.update({k: str(v) for k, v in (secrets.get(s["name"]) or {}).items() if not k.startswith("TMUX")})
        out[s["name"]] = {
            "argv": mcpjail.argv(bwrap, s["command"], list(s.get("args", ())), list(s.get("read", ())),
                                 s.get("network", "host"), policy["home"]),
            "env": env, "tools": s.get("tools"), "cwd": "/"}
    return out


def on_host(policy: dict[str, Any]) -> list[dict[str, Any]]:
    """The servers the broker runs (run = "host"); one with run = "jail" is the CLI's own child,
    and a broker asked for it refuses it as a server it was not given."""
    return [s for s in policy.get("mcp", ()) if s.get("run", "host") == "host"]


def config_data(policy: dict[str, Any]) -> bytes:
    """The CLI's MCP configuration: one stdio server per attached server (the `mcpServers` form
    Claude Code's --mcp-config and Cursor's mcp.json read), whose command is the stub, or for a
    server that runs in the jail its own command (net.stub.command)."""
    from ..canon import canonical_json  # (loaded already: json itself would cost the launch ~3 ms)
    from ..net import stub

    entries = {}
    for s in policy.get("mcp", ()):
        command, *args = stub.command(policy["mcp_stub"], s)
        entries[s["name"]] = {"type": "stdio", "command": command, "args": args, "env": {}}
    return canonical_json({"mcpServers": entries}).encode()


def start(spec: dict[str, Any], policy: dict[str, Any], bwrap: str) -> str:
    """Start the broker (before the launcher enters the jail's own namespaces, which it must not
    share); the path of its socket."""
    import _socket

    directory = session_dir(str(spec["store"]), str(spec["session_id"]))
    path = os.path.join(directory, f"broker-{os.getpid()}.sock")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.lstat(directory)
        if not os.path.isdir(directory) or os.path.islink(directory) or st.st_uid != os.getuid():
            raise OSError(f"{directory} is not a directory of ours")
        _sweep(directory)
        try:
            os.unlink(path)  # a launcher of this pid that was killed
        except FileNotFoundError:
            pass
        listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        # A long state path does not fit sun_path: bound through the directory's fd.
        dir_fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            listener.bind(f"/proc/self/fd/{dir_fd}/{os.path.basename(path)}")
        finally:
            os.close(dir_fd)
        os.chmod(path, 0o600)
        listener.listen(16)
        table = servers(spec, policy, bwrap)
    except OSError as exc:
        die(f"cannot start the session's MCP broker: {exc.strerror or exc}", EXIT_UNAVAILABLE)
    parent = os.getpid()
    # The broker loads its code once this process has exec'd bubblewrap (the write end closes on
    # exec): not on this launch's way, nor competing with it for a CPU. A stub that connects
    # before waits in the listener's backlog.
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(go_w)
            _broker(listener, table, os.path.join(directory, LOG_NAME), path, parent, go_r)
        finally:
            os._exit(0)
    os.close(go_r)  # go_w stays open until exec_closing closes it, just before the exec
    listener.close()
    return path


def binds(path: str | None, policy: dict[str, Any]) -> tuple[list[tuple[str, ...]], list[int]]:
    """The jail's binds of the broker's socket (none without a broker: every server in the jail)
    and of the MCP configuration (bubblewrap options), and the fds they need: opened in the
    launcher's own mount namespace (bubblewrap binds from an fd only a mount of its namespace)."""
    from ..net import stub

    try:
        sock_fd = None if path is None else os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        conf_fd = os.memfd_create("tmuxjail-mcp", os.MFD_CLOEXEC)
        os.write(conf_fd, config_data(policy))
        os.lseek(conf_fd, 0, os.SEEK_SET)
    except OSError as exc:
        die(f"cannot bind the session's MCP broker into the jail: {exc.strerror or exc}", EXIT_UNAVAILABLE)
    conf = ("--ro-bind-data", str(conf_fd), stub.CONFIG)
    if sock_fd is None:
        return [conf], [conf_fd]
    return [("--ro-bind-fd", str(sock_fd), stub.SOCKET), conf], [sock_fd, conf_fd]


def _broker(listener: Any, table: dict[str, Any], log_path: str, path: str, parent: int, go: int) -> None:
    """The forked broker: bound to the launcher's life, nothing of the launcher's kept open but
    its listener, then serving until killed."""
    import _signal  # type: ignore[import-not-found]

    from ..sandbox import libc

    libc.prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
    try:
        # The launcher's end (it became bubblewrap), watched on a pidfd: the parent-death signal
        # does not reach this process from a bubblewrap that runs in the jail's user namespace.
        ended = os.pidfd_open(parent)
    except OSError:
        return
    if os.getppid() != parent:  # the launcher is already gone
        return
    os.setsid()  # not the pane's process group: tmux's signals to it are the jail's
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    # What goes wrong in the broker (a server that cannot start) is kept for `show --mcp`.
    err = os.open(os.path.join(os.path.dirname(log_path), ERR_NAME),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    if os.fstat(err).st_size > ERR_MAX:
        os.ftruncate(err, 0)
    os.dup2(err, 2)
    fd = listener.detach()  # the broker's socket object owns it from here
    keep = sorted({0, 1, 2, fd, ended, go})
    for lo, hi in zip(keep, [*keep[1:], 65536], strict=True):
        os.closerange(lo + 1, hi)
    os.read(go, 1)  # EOF: the launcher has exec'd bubblewrap (or ended)
    os.close(go)
    import threading

    threading.Thread(target=_end_with, args=(ended, path), daemon=True).start()
    from ..net import broker

    try:
        broker.serve_forever(fd, table, log_path)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def _end_with(pidfd: int, path: str) -> None:
    """When the launcher (bubblewrap) ends, this process group ends: the broker and the outer
    bubblewrap of each server, whose inner one dies with it (--die-with-parent)."""
    import select
    import signal  # (the broker has loaded it: subprocess imports it)

    select.select([pidfd], [], [])
    try:
        os.unlink(path)
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)


def _sweep(directory: str) -> None:
    """Sockets of launchers that are gone (a broker removes its own as it ends; this catches one
    that was killed)."""
    for name in os.listdir(directory):
        pid = name[len("broker-"):-len(".sock")]
        if name.startswith("broker-") and name.endswith(".sock") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass
