"""bubblewrap backend (Linux): a Policy -> the bwrap call (Call), built once as options and the
fds they need together; the launcher adds the fds and flattens it once, right before exec. Pure."""

from __future__ import annotations

import os

from ..subpath import inside, inside_any
from . import HostLayout

TYPE_CHECKING = False  # typing is not imported: the launcher derives this call on every start
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    Entry = tuple[str, ...]  # one option with its operands, e.g. ("--ro-bind", src, dest)

NAME = "bwrap"
SYSTEM_DIRS = ("/usr", "/etc", "/opt")
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
FIXED_PATHS = ("/usr/bin/bwrap", "/bin/bwrap")
# A fresh /proc, with the kernel's tunables read-only. bwrap covers /proc/sys only when it finds
# the directory writable, and the directory itself never is; the files in it are, for root: a
# jail run by root could otherwise set host sysctls (kernel.core_pattern runs a program as host
# root). The bind's source is the host's /proc/sys; sysctls are global or follow the caller's
# namespaces, so the jail sees the same values either way.
PROC = (("--proc", "/proc"), ("--ro-bind", "/proc/sys", "/proc/sys"))
# Every tmpfs is sized: bwrap's default is half the host's RAM, charged to host memory. The masks
# (tmpfs over a hidden directory) need next to nothing.
MASK_BYTES = 1 << 20
PRLIMIT = "/usr/bin/prlimit"
# The binds the launcher makes from an fd (pane/binds.py) instead of a path bwrap would resolve.
BIND_FD = {"--bind": "--bind-fd", "--bind-try": "--bind-fd", "--ro-bind": "--ro-bind-fd",
           "--ro-bind-try": "--ro-bind-fd"}


def _depth(path: str) -> tuple[int, str]:
    return (path.rstrip("/").count("/"), path)


def _ancestors(paths: Iterable[str]) -> list[str]:
    out: set[str] = set()
    for p in paths:
        p = os.path.dirname(p.rstrip("/"))
        while p not in ("/", ""):
            out.add(p)
            p = os.path.dirname(p)
    return sorted(out, key=_depth)


class Call:
    """One bubblewrap call, held in the sections it is built in, its options and the fds they
    need together (as Flatpak's FlatpakBwrap accumulates them): whoever adds to it (the builder,
    the launcher's binds from fds, the executables' binds, the network bridge) adds to a section,
    and nobody parses an argv. `setup`: the options, one entry each with its operands;
    `beneath`: which of those binds has its source in a tree a jail can write, with that tree's
    outermost root (the builder knows from the policy; the launcher opens exactly these without
    following a link: pane/binds.py); `seal`: the last setup steps (read-only remounts, --chdir),
    apart so that binds can still go before them; `late`: binds after the seal (the launcher's
    checked executables); `prefix`: what the command runs under (prlimit ... --); `command`.
    argv() flattens it; asdict() is the launch spec's form (without the command: the spec's argv)."""

    __slots__ = ("beneath", "command", "late", "path", "prefix", "seal", "setup")

    def __init__(self, path: str) -> None:
        self.path = path
        self.setup: list[Entry] = []
        self.beneath: dict[int, str] = {}
        self.seal: list[Entry] = []
        self.late: list[Entry] = []
        self.prefix: list[str] = []
        self.command: list[str] = []

    def mark_beneath(self, roots: list[str]) -> None:
        """Each bind whose source lies in one of roots, with the outermost of them."""
        for i, (op, *operands) in enumerate(self.setup):
            under = [r for r in roots if inside(operands[0], r)] if op in BIND_FD else []
            if under:
                self.beneath[i] = min(under, key=len)

    def argv(self, *first: str) -> list[str]:
        """The flat argv, `first` right after bubblewrap's path (the launcher's --seccomp FD ...)."""
        out = [self.path, *first]
        for entry in (*self.setup, *self.seal, *self.late):
            out += entry
        return [*out, "--", *self.prefix, *self.command]

    def asdict(self) -> dict[str, Any]:
        return {"bwrap": self.path, "setup": [list(e) for e in self.setup],
                "beneath": [[i, root] for i, root in sorted(self.beneath.items())],
                "seal": [list(e) for e in self.seal], "prefix": list(self.prefix)}


def agent_roots(policy: dict[str, Any]) -> list[str]:
    """The trees a jail can write: a bind from inside one is made from an fd (Call.beneath)."""
    # A private copy of a state file is written by the jail (through its bind): opened as a root.
    return [*policy["workspace_write"], *policy["workspace_read"], *policy["host_write"],
            *policy["host_read"], *filter(None, [policy.get("private_home")]),
            *(copy for _, copy in policy.get("state_copies", ())), *policy.get("worktree", ()),
            *(store for store, _ in policy.get("credentials", ()))]


def jail_mcp_paths(policy: dict[str, Any]) -> list[str]:
    """What the MCP servers that run in the agent's jail (run = "jail") need there: each command
    and read path, bound read-only (policy._check_mcp: none of them is a tree the jail can write)."""
    return sorted({p for s in policy.get("mcp", ()) if s.get("run") == "jail" for p in (s["command"], *s.get("read", ()))})


class Bwrap:
    name = NAME

    def __init__(self, path: str = "/usr/bin/bwrap"):
        self.path = path

    def available(self) -> str | None:
        if not os.access(self.path, os.X_OK):
            return f"bubblewrap is not installed ({self.path} missing)"
        if not os.access(PRLIMIT, os.X_OK):
            return f"{PRLIMIT} (util-linux) is missing: the jail's process limit cannot be set"
        return None

    def wrap(self, policy: dict[str, Any], argv: list[str], host: HostLayout) -> list[str]:
        return self.call(policy, argv, host).argv()

    def call(self, policy: dict[str, Any], argv: list[str], host: HostLayout) -> Call:
        mode = policy["mode"]
        out: list[Entry] = [(flag,) for flag in (
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        )]
        out.append(("--cap-drop", "ALL"))
        if policy.get("network", "host") != "host":
            # none: a network namespace of its own, with only its own loopback (bwrap brings it up).
            out.append(("--unshare-net",))
        if mode == "compatibility":
            setup, sealed = self._compatibility(policy, host)
        else:
            setup, sealed = self._strict(policy, host)
            setup = [("--disable-userns",), *setup]
        call = Call(self.path)
        call.setup = [*out, *setup]
        call.mark_beneath(agent_roots(policy))
        # The last setup steps: the sealed mount points remounted read-only, once every mount point
        # under them exists, so none of them is writable storage in the jail.
        call.seal = [*(("--remount-ro", path) for path in sealed),
                     ("--chdir", policy["workspace_write"][0] if policy["workspace_write"] else policy["workspace_read"][0])]
        call.prefix, call.command = _nproc(policy), list(argv)
        return call

    def _compatibility(self, policy: dict[str, Any], host: HostLayout) -> tuple[list[Entry], list[str]]:
        # Today's behaviour: the whole host, writable. What is taken away: tmuxjail's own state
        # and private homes (hidden), its config (read-only), the tmux sockets (hidden), and the
        # host's processes: /proc/<pid>/root of the tmux server would otherwise reach its socket.
        # /sys is read-only: root may write module parameters and other knobs there without any
        # capability.
        out: list[Entry] = [("--bind", "/", "/"), ("--ro-bind-try", "/sys", "/sys"), *_dev(policy), *PROC]
        # Every ancestor of a mask becomes a mount point of its own (bound onto itself, as
        # writable as it was), so it cannot be renamed (EBUSY): `mv ~/.local/state x` would move
        # the mask along and leave a fresh, unmasked state dir at the path tmuxjail uses later.
        for path in _ancestors((*policy["protected"], *policy["hidden"])):
            out.append(("--bind", path, path))
        for path in policy["protected"]:
            out.append(("--ro-bind-try", path, path))
        for path in policy["hidden"]:
            out += _tmpfs(path, MASK_BYTES)
        out += self._tmux_masks(host)
        return out, [*policy["hidden"], *host.tmux_dirs]

    def _strict(self, policy: dict[str, Any], host: HostLayout) -> tuple[list[Entry], list[str]]:
        out: list[Entry] = [("--ro-bind", "/usr", "/usr")]
        for top in TOP_LINKS:
            kind = host.top.get(top)
            if kind == "dir":
                out.append(("--ro-bind", top, top))
            elif kind:
                out.append(("--symlink", kind, top))
        out += [("--ro-bind", "/etc", "/etc"), *_opt_binds(policy)]
        lim = limits(policy)
        out += [*PROC, *_dev(policy)]
        out += [*_tmpfs("/tmp", lim["tmp_bytes"]), *_tmpfs("/var/tmp", lim["tmp_bytes"]),
                *_tmpfs("/run", lim["run_bytes"])]
        if host.resolv_dir:
            out.append(("--ro-bind-try", host.resolv_dir, host.resolv_dir))
        home = policy["home"]
        if policy["private_home"]:
            out.append(("--bind", policy["private_home"], home))
        else:
            out += _tmpfs(home, lim["home_bytes"])
        binds: list[tuple[str, str]] = []
        for root in policy["install_roots"]:
            if not inside_any(root, SYSTEM_DIRS):
                binds.append(("--ro-bind", root))
        binds += [("--ro-bind-try", p) for p in policy["host_read"]]
        binds += [("--ro-bind", p) for p in jail_mcp_paths(policy)]
        binds += [("--bind-try", p) for p in policy["host_write"]]
        binds += [("--ro-bind", p) for p in policy["workspace_read"]]
        binds += [("--bind", p) for p in policy["workspace_write"]]
        binds += self._above_guards(policy)
        for flag, path in sorted(binds, key=lambda b: _depth(b[1])):
            out.append((flag, path, path))
        out += _state_binds(policy) + _worktree_binds(policy)
        # The stored login's files, each bound writable where the CLI reads it (`tmuxjail login`).
        out += [("--bind", store, dest) for store, dest in policy.get("credentials", ())]
        # Each guarded .git path (README, "Git metadata") read-only onto itself. Not -try: each
        # existed at start; the launcher opens it without following links and refuses one that
        # is gone or is a link.
        for path in sorted(policy["protected"], key=_depth):
            out.append(("--ro-bind", path, path))
        out += _masks(host) + _agent(policy, host)
        visible = (*policy["workspace_write"], *policy["workspace_read"], *policy["host_write"],
                   *policy["host_read"], *policy["install_roots"], *jail_mcp_paths(policy))
        out += self._tmux_masks(host, within=visible)
        # bwrap's own root is an unsized tmpfs, and the directories it made there for mount points
        # (/home, /home/you, ...) are in it: read-only from here on.
        return out, ["/", *(d for d in host.tmux_dirs if inside_any(d, visible))]

    @staticmethod
    def _above_guards(policy: dict[str, Any]) -> list[tuple[str, str]]:
        """Every directory between a workspace and a guarded path in it, bound onto itself as it
        is: a mount point cannot be renamed (EBUSY), so from inside neither a guard nor a directory
        above it can be moved away and replaced with the agent's own."""
        guards = policy["protected"]
        above: dict[str, str] = {}
        for flag, roots in (("--ro-bind", policy["workspace_read"]), ("--bind", policy["workspace_write"])):
            for ws in roots:
                for g in guards:
                    a = os.path.dirname(g)
                    while a != ws and inside_any(a, (ws,)):
                        if not inside_any(a, guards):
                            above[a] = flag
                        a = os.path.dirname(a)
        return [(flag, a) for a, flag in above.items()]

    @staticmethod
    def _tmux_masks(host: HostLayout, within: Iterable[str] | None = None) -> list[Entry]:
        """Hide tmux sockets. In strict modes only those inside a path bound into the jail can be
        there at all (the rest of the host is simply not mounted)."""
        out: list[Entry] = []
        for d in host.tmux_dirs:
            if within is None or inside_any(d, within):
                out += _tmpfs(d, MASK_BYTES)
        for f in host.tmux_files:
            if within is None or inside_any(f, within):
                out.append(("--ro-bind", "/dev/null", f))
        return out


def opt_trees(policy: dict[str, Any]) -> tuple[str, ...]:
    """What a strict jail gets of /opt: each top-level entry holding one of the CLI's install
    roots, its executable or its interpreter (resolved paths, all in the policy, so fingerprinted;
    /opt whole when one of them is /opt itself). Nothing else of /opt is mounted, so a root-run
    start looks for root-only files in these trees only (host.layout), never in all of /opt."""
    exe = policy.get("executable") or {}
    paths = (*policy.get("install_roots", ()), exe.get("path", ""), *(e[0] for e in exe.get("extra", ())))
    out: set[str] = set()
    for path in paths:
        if inside_any(path, ("/opt",)):
            top = path[len("/opt/"):].split("/", 1)[0]
            out.add("/opt/" + top if top not in ("", ".", "..") else "/opt")
    return ("/opt",) if "/opt" in out else tuple(sorted(out))


def _opt_binds(policy: dict[str, Any]) -> list[Entry]:
    """The /opt trees the jail gets, read-only. Not -try: each held a resolved path at start."""
    out: list[Entry] = []
    for tree in opt_trees(policy):
        out.append(("--ro-bind", tree, tree))
    return out


def _worktree_binds(policy: dict[str, Any]) -> list[Entry]:
    """A worktree session's git directory, writable, and the repository's objects, read-only, at
    paths that exist only in the jail (docs/worktrees.md): on the host, the worktree's `.git` names
    a directory that is not there, so no git on the host ever reads what the agent wrote in it."""
    if not policy.get("worktree"):
        return []
    from ..effective import JAIL_GITDIR, JAIL_OBJECTS

    gitdir, objects = policy["worktree"]
    return [("--bind", gitdir, JAIL_GITDIR), ("--ro-bind", objects, JAIL_OBJECTS)]


def _state_binds(policy: dict[str, Any]) -> list[Entry]:
    """The CLI's command files in its state bound back writable (docs/provider-state.md): each
    guard read-only onto itself (-try: ~/.claude.json may not exist; jail.prepare_dirs creates the
    ones inside a bound directory, so the jail cannot create them instead), and each private copy
    over the host's file. A mount point cannot be renamed or removed from inside, so each directory
    between the bound root and a guard or copy (Pi's ~/.pi/agent) is bound onto itself first:
    otherwise it could be renamed away, guards and all, and replaced with the jail's own."""
    guarded = (*policy.get("state_guards", ()), *(dest for dest, _ in policy.get("state_copies", ())))
    above: set[str] = set()
    for root in policy["host_write"]:
        for g in guarded:
            a = os.path.dirname(g.rstrip("/"))
            while a != root and inside_any(a, (root,)):
                above.add(a)
                a = os.path.dirname(a)
    out: list[Entry] = []
    for path in sorted(above, key=_depth):
        out.append(("--bind", path, path))
    for path in sorted(policy.get("state_guards", ()), key=_depth):
        out.append(("--ro-bind-try", path, path))
    for dest, copy in sorted(policy.get("state_copies", ()), key=lambda c: _depth(c[0])):
        out.append(("--bind", copy, dest))
    return out


def limits(policy: dict[str, Any]) -> dict[str, Any]:
    if "limits" not in policy:  # a policy recorded before limits existed
        from ..effective import Limits

        return Limits().to_data()
    out: dict[str, Any] = policy["limits"]
    return out


def _tmpfs(path: str, size: int) -> list[Entry]:
    return [("--size", str(size)), ("--tmpfs", path)]


def _dev(policy: dict[str, Any]) -> list[Entry]:
    """bwrap's /dev is an unsized tmpfs: give /dev/shm a sized one and make /dev itself read-only
    (the device nodes are separate binds and stay usable). Its /dev/pts is replaced with the one
    the launcher mounted with the jail's pty share (pane/narrow.py own_namespace: bwrap's has no max=)."""
    pts = [("--dev-bind", "/dev/pts", "/dev/pts")] if limits(policy).get("ptys", -1) >= 0 else []
    return [("--dev", "/dev"), *pts, *_tmpfs("/dev/shm", limits(policy)["tmp_bytes"]), ("--remount-ro", "/dev")]


def _nproc(policy: dict[str, Any]) -> list[str]:
    """The jail's share of the per-user rlimits (budget.py), set inside the jail's user namespace,
    where the kernel counts each per namespace (set before bwrap, it would count every process
    of the user on the host), soft and hard alike. -1: the user has no limit to share. The kernel
    does not enforce RLIMIT_NPROC for root everywhere: a root-run jail has a pids cgroup too."""
    lim = limits(policy)
    opts = [f"--{k}={lim[k]}" for k in ("nofile", "sigpending", "msgqueue", "memlock") if lim.get(k, -1) >= 0]
    return [PRLIMIT, *opts, f"--nproc={lim['nproc']}", "--"]


def _masks(host: HostLayout) -> list[Entry]:
    """Files under the bound system directories that uid 0 inside could read and an ordinary user
    could not (a root-run jail): /dev/null over files, an empty read-only tmpfs over directories."""
    out: list[Entry] = []
    for path in host.etc_secrets:
        out.append(("--ro-bind", "/dev/null", path))
    for path in host.root_only_dirs:
        out += [*_tmpfs(path, MASK_BYTES), ("--remount-ro", path)]
    return out


def _agent(policy: dict[str, Any], host: HostLayout) -> list[Entry]:
    """The ssh-agent capability: the checked socket, at its own path (SSH_AUTH_SOCK is passed
    unchanged). Read-only is enough to connect to a socket, and keeps it from being replaced."""
    if "ssh-agent" in policy["capabilities"] and policy["mode"] == "verified" and host.agent_socket:
        return [("--ro-bind", host.agent_socket, host.agent_socket)]
    return []


def find() -> Bwrap:
    """The system bwrap by fixed path; never one found through PATH (a workspace could plant it)."""
    for path in FIXED_PATHS:
        if os.access(path, os.X_OK):
            return Bwrap(path)
    return Bwrap(FIXED_PATHS[0])
