"""Looks at the host so that policy and argv builders can stay pure: the layout of /, where tmux
sockets live, which workspaces are git repos, what declared paths resolve to, and whether user
namespaces work."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import tmuxjail

from . import ahead, gitconfig, gitglobal, trust
from .ahead import Ahead
from .budget import USER_COUNTS
from .gitglobal import read_regular as _read
from .pane.command import is_launcher
from .record import Record
from .sandbox import HostLayout
from .sandbox.bwrap import FIXED_PATHS, NAME, PRLIMIT, TOP_LINKS
from .subpath import below, inside, inside_any

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

ETC_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
# Walked for what others cannot read when tmuxjail runs as root (uid 0 in the jail owns it all),
# with the /opt trees the jail gets (bwrap.opt_trees): never all of /opt, whose size is the
# host's (38,000 entries of npm trees and venvs cost a root start ~330 ms). /usr is not walked:
# 138k entries, ~0.9 s warm here, and Debian ships nothing secret there.
ROOT_WALK = ("/etc",)
PACKAGES = ("tmuxjail", "tmuxjail.adapters", "tmuxjail.profile_data")  # what tmuxjail installs


def root_only(roots=ROOT_WALK) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(files, dirs) under roots that an ordinary user could not read: files without o+r, and
    directories without o+r or o+x (not descended). Symlinks are not followed."""
    files: list[str] = []
    dirs: list[str] = []
    todo = list(roots)
    while todo:
        try:
            it = os.scandir(todo.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_symlink():  # from readdir's d_type, no lstat: a link is neither kind
                        continue
                    mode = e.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode):
                    (todo if mode & 0o005 == 0o005 else dirs).append(e.path)
                elif stat.S_ISREG(mode) and not mode & 0o004:
                    files.append(e.path)
    return tuple(sorted(files)), tuple(sorted(dirs))


_AHEAD: tuple[Ahead | None, tuple[str, ...]] | None = None  # the walk started ahead, and its roots


def root_only_ahead(roots: tuple[str, ...] = ROOT_WALK) -> None:
    """Start root_only() in a child process (ahead.py), so that the walk (~15 ms of stat calls)
    runs on another core while this one imports and resolves; root_only_walked() takes its answer."""
    global _AHEAD
    if _AHEAD is None:
        _AHEAD = (ahead.start(_walk, roots), roots)


def _walk(roots: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return root_only(roots)  # looked up when the child runs


def root_only_walked(roots: tuple[str, ...] = ROOT_WALK) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """root_only(roots): the walk root_only_ahead started, when it finished well; else walked now."""
    global _AHEAD
    if _AHEAD is not None:
        child, walked = _AHEAD
        _AHEAD = None
        got = child.result() if child is not None else None
        if walked == roots and isinstance(got, tuple) and len(got) == 2 and all(
                isinstance(part, tuple) and all(isinstance(p, str) for p in part) for part in got):
            return got[0], got[1]
    return root_only(roots)


def root_only_with(opt: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """root_only() of ROOT_WALK (walked ahead) and of the /opt trees a jail gets (walked here:
    they are the CLI's own, known once its policy is)."""
    files, dirs = root_only_walked()
    if not opt:
        return files, dirs
    more_files, more_dirs = root_only(opt)
    return tuple(sorted({*files, *more_files})), tuple(sorted({*dirs, *more_dirs}))


def layout(tmux_socket: str | None, env: dict, opt: tuple[str, ...] = ()) -> HostLayout:
    """The host's layout for a jail; opt: the /opt trees it gets (bwrap.opt_trees)."""
    top: dict[str, str] = {}
    for p in TOP_LINKS:
        if os.path.islink(p):
            top[p] = os.readlink(p)
        elif os.path.isdir(p):
            top[p] = "dir"
    # Every place tmux may keep sockets for this uid: the default dirs for -L (made now if
    # missing, as tmux would: a server started after this call must still land in a masked dir),
    # the dir of the server we drive (for -S anywhere), and every tmux server running now.
    uid = os.getuid()
    dirs = {d for d in map(ensure_socket_dir, socket_dir_candidates(env, uid)) if d}
    files: set[str] = set()
    ours = {tmux_socket} if tmux_socket else set()
    running = set(running_servers(uid))
    for sock in [*ours, *filter(None, [env.get("TMUX", "").split(",")[0]]), *sorted(running)]:
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
    secrets = {p for p in ETC_SECRETS if os.path.isfile(p)}
    hidden_dirs: tuple[str, ...] = ()
    if uid == 0:
        unreadable, hidden_dirs = root_only_with(opt)
        secrets.update(unreadable)
    tmux_dirs = tuple(sorted(d for d in dirs if os.path.isdir(d)))
    # Our own server may not run yet: tmuxjail starts it before the jail, so mask it anyway.
    # A running server's socket is masked even when a jail made its directory unreadable to us
    # (exists() is then False): bwrap then cannot mount the mask, and the start fails, closed.
    tmux_files = tuple(sorted(f for f in files if f in ours or f in running or os.path.exists(f)))
    return HostLayout(
        agent_socket=agent_socket(env.get("SSH_AUTH_SOCK"), uid, (*tmux_dirs, *tmux_files)),
        top=top,
        tmux_dirs=tmux_dirs,
        tmux_files=tmux_files,
        etc_secrets=tuple(sorted(secrets)),
        root_only_dirs=hidden_dirs,
        resolv_dir=resolv,
    )


def socket_dir_candidates(env: dict, uid: int) -> list[str]:
    out = [f"/tmp/tmux-{uid}"]
    if env.get("TMUX_TMPDIR"):
        out.append(os.path.join(env["TMUX_TMPDIR"], f"tmux-{uid}"))
    return out


def ensure_socket_dir(path: str) -> str | None:
    """Make tmux's socket dir 0700 if it is missing (mkdir never follows a symlink at the last
    component) and return it when it is a real directory. tmux itself refuses a dir that is a
    symlink or not ours, so no server of ours can be behind anything else."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None  # its parent is missing or not ours: tmux cannot make a server there either
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return path if stat.S_ISDIR(st.st_mode) else None


def running_servers(uid: int) -> list[str]:
    """Socket paths of the tmux servers running now that this uid could reach (its own; every
    one when we are root, whom tmux always lets in): the listening unix sockets held by them."""
    inodes: dict[str, tuple[str, int]] = {}  # socket inode -> (server cwd, server uid)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            # Every start reads every process's comm: raw reads, and the owner only of a tmux.
            comm = os.open(f"/proc/{pid}/comm", os.O_RDONLY)
            try:
                if not os.read(comm, 64).startswith(b"tmux"):
                    continue
            finally:
                os.close(comm)
            owner = os.stat(f"/proc/{pid}").st_uid
            if uid != 0 and owner != uid:
                continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = (cwd, owner)
        except OSError:
            continue  # gone, or not ours to read
    out = []
    try:
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                cols = line.rstrip("\n").split(None, 7)
                # Flags 00010000: listening. Only a socket with a path can be reached by name.
                # An abstract name (`@...`, certify's test servers) is no path: joined to the
                # server's cwd it named a file that masking it then created there (28.8).
                if len(cols) == 8 and cols[3] == "00010000" and cols[6] in inodes and not cols[7].startswith("@"):
                    cwd, owner = inodes[cols[6]]
                    out.append((os.path.normpath(os.path.join(cwd, cols[7])), owner))
    except OSError:
        pass
    # Our own servers are masked whatever their directory's mode says now: a jail can chmod it
    # 000 before the next start and back afterwards (if bwrap then cannot mount the mask, the
    # start fails, closed). Only another user's server (we are root) is skipped when a jail
    # could not reach it anyway.
    return [p for p, owner in out if owner == uid or _reachable(p)]


def _reachable(sock: str) -> bool:
    """Could a process of ours with no capabilities (a jail) connect to sock? As root, another
    user's server in a 0700 dir is not, and bwrap could not even mount over it."""
    uid, gids = os.getuid(), {os.getgid(), *os.getgroups()}

    def allowed(st, bit: int) -> bool:
        if st.st_uid == uid:
            return bool(st.st_mode & (bit << 6))
        if st.st_gid in gids:
            return bool(st.st_mode & (bit << 3))
        return bool(st.st_mode & bit)

    try:
        parts = sock.split("/")
        for i in range(1, len(parts)):
            if not allowed(os.stat("/".join(parts[:i]) or "/"), 1):
                return False
        return allowed(os.stat(sock), 2)
    except OSError:
        return False


# The walk for guarded paths (README, "Git metadata"; docs/workspace-trust.md): bounded, never
# following a link. Directories scanned, and how deep: past either the walk cannot promise every
# guarded path was seen, so a strict start refuses (plan.guard_paths) rather than leave one
# writable. Counting directories and names listed, not files: a jail that fills a directory with
# files pays the listing's time and cannot switch the walk off below MAX_LISTED names.
MAX_DIRS = 20000
MAX_HEAVY_DIRS = 50000  # directories listed inside trust.HEAVY_DIRS (catalogue names only)
MAX_LISTED = 2_000_000
MAX_DEPTH = 48
HEAVY_DIRS = trust.HEAVY_DIRS
MAX_CONFIG = 256 << 10


class Guards(Record):
    git: tuple[str, ...]  # repositories, and what their configs name: git-metadata-write lifts these
    trusted: tuple[str, ...]  # the catalogue's other guard entries: workspace-trust-write lifts these
    capped: str | None  # why the walk may have missed one (the start refuses), or None


def _gitdir_of(dot_git: str) -> str | None:
    """The `gitdir:` a `.git` file names (worktrees, submodules), or None."""
    line = (_read(dot_git, 4096) or "").split("\n", 1)[0].strip()
    if not line.startswith("gitdir:"):
        return None
    return line[len("gitdir:"):].strip() or None


def _submodule_paths(gitmodules: str) -> list[str]:
    """The `path = ...` values of a .gitmodules file (read without following a link)."""
    out = []
    for line in (_read(gitmodules, 1 << 20) or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() == "path" and value.strip() and ".." not in value.strip().split("/"):
            out.append(value.strip().strip('"'))
    return out


def _config_targets(gitdir: str, top: str | None) -> list[str]:
    """What a repository's config names by path (gitconfig.targets), read without running git."""
    out = []
    for name in ("config", "config.worktree"):
        text = _read(os.path.join(gitdir, name), MAX_CONFIG + 1)
        if text:
            entries, _ = gitconfig.parse(text)
            out += [p for _, p in gitconfig.targets(entries, gitdir, top)]
    return out


def guards(workspaces) -> Guards:
    """Every guarded path in the workspaces at start. Repositories: every `.git`, `.hg`, `.jj`,
    `.sl` (a directory, a file or a symlink: each is listed, the launcher refuses a symlink), the
    gitdir a `.git` file points at when that lies inside a workspace (listed as written, so the
    launcher's walk, which follows no link, refuses one reached through a link, and as resolved),
    and what their configs name inside a workspace (include targets, core.hooksPath, a command
    key's program). Then the catalogue's guard entries by name (a symlink is not guarded: the
    audit reports it). Directories in trust.HEAVY_DIRS are looked into for the same names down
    to trust.HEAVY_DEPTH levels, never listed in full."""
    cat = trust.catalogue()
    maybe = cat.maybe
    roots = [w.rstrip("/") or "/" for w in workspaces]

    git: set[str] = set()
    trusted: set[str] = set()
    repos: list[tuple[str, str | None]] = []  # (gitdir, worktree top)
    dirs = heavy = listed = 0
    capped: str | None = None
    todo: list[tuple[str, int, int]] = [(ws, 0, -1) for ws in roots]  # (dir, depth, depth below a heavy name)
    while todo and capped is None:
        d, depth, hd = todo.pop()
        if hd < 0:
            dirs += 1
        else:
            heavy += 1
        if dirs > MAX_DIRS or heavy > MAX_HEAVY_DIRS:
            capped = f"more than {MAX_DIRS} directories (or {MAX_HEAVY_DIRS} inside {', '.join(sorted(HEAVY_DIRS))})"
            break
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        listed += len(entries)
        if listed > MAX_LISTED:
            capped = f"more than {MAX_LISTED} names"
            break
        parent = os.path.basename(d)
        for e in entries:
            name = e.name
            if name in trust.VCS_DIRS:
                git.add(e.path)
                if name != ".git":
                    continue
                if e.is_dir(follow_symlinks=False):
                    repos.append((e.path, d))
                elif e.is_file(follow_symlinks=False) and (gitdir := _gitdir_of(e.path)):
                    target = os.path.join(d, gitdir)
                    for p in {os.path.normpath(target), os.path.realpath(target)}:
                        if inside_any(p, roots):
                            git.add(p)
                            repos.append((p, d))
                continue
            if name == ".gitmodules" and e.is_file(follow_symlinks=False):
                # A submodule under a name the walk does not list in full (vendor/node_modules/x
                # deeper than HEAVY_DEPTH) is still recursed into by the host's git status.
                for rel in _submodule_paths(e.path):
                    sub = os.path.normpath(os.path.join(d, rel, ".git"))
                    if below(sub, d) and os.path.lexists(sub):
                        git.add(sub)
            is_dir = e.is_dir(follow_symlinks=False)
            if hd < 0 and maybe(name) and not e.is_symlink():  # below a heavy name: audited only
                m = cat.match(name, parent, is_dir)
                if m is not None and m.treatment == "guard":
                    (git if m.vcs else trusted).add(e.path)
                    if is_dir:
                        continue  # read-only as a whole
            if not is_dir:
                continue
            if depth + 1 > MAX_DEPTH:
                capped = f"deeper than {MAX_DEPTH} levels"
                break
            sub_hd = trust.descend(name, hd)
            if sub_hd is not None:
                todo.append((e.path, depth + 1, sub_hd))
    glob = gitglobal.configs()
    for gitdir, top in repos:
        named = _config_targets(gitdir, top)
        for name, _, entries in glob:
            named += [p for _, p in gitconfig.targets(entries, os.path.dirname(name), top)]
        for p in named:
            if inside_any(p, roots) and os.path.lexists(p) and not inside_any(p, git):
                git.add(p)
    for p in gitglobal.files(glob):  # a dotfiles workspace: ~/.gitconfig -> ws/gitconfig, repository or not
        if inside_any(p, roots) and os.path.lexists(p) and not inside_any(p, git):
            git.add(p)
    return Guards(tuple(sorted(git)), tuple(sorted(trusted - git)), capped)


def mac_layout(policy: dict, tmux_socket: str | None, env: dict, tty: str | None = None,
               session_tmp: str | None = None, proxy_port: int | None = None) -> HostLayout:
    """layout() for the Seatbelt backend: Seatbelt matches resolved paths, so every path the
    profile will name is canonicalised here (HOME and all derived from it, the -S socket,
    $TMUX_TMPDIR, the pane's tty), and the tmux socket dirs are listed whether or not they exist
    (a path rule needs no target, and a jail must not create one)."""
    uid = os.getuid()
    cands = {*socket_dir_candidates(env, uid), f"/private/tmp/tmux-{uid}"}
    files: set[str] = set()
    for sock in filter(None, [tmux_socket, env.get("TMUX", "").split(",")[0]]):
        parent = os.path.dirname(sock)
        (cands.add(parent) if os.path.basename(parent).startswith("tmux-") else files.add(sock))
    real = os.path.realpath
    names = [policy["home"], policy.get("private_home")]
    for key in ("install_roots", "workspace_read", "workspace_write", "host_read", "host_write",
                "protected", "hidden", "state_guards"):
        names += policy.get(key, ())
    if session_tmp:
        names.append(session_tmp)
    return HostLayout(
        tmux_dirs=tuple(sorted({real(d) for d in cands if os.path.isdir(d)})),
        tmux_files=tuple(sorted({real(f) for f in files})),  # a path rule needs no target
        tmux_dir_candidates=tuple(sorted({real(d) for d in cands} | cands)),
        tty=real(tty) if tty else None,
        session_tmp=session_tmp,
        realpaths={p: real(p) for p in names if p},
        proxy_port=proxy_port,
    )


def agent_socket(path: str | None, uid: int, avoid=()) -> str | None:
    """SSH_AUTH_SOCK when it is safe to bind into a jail, else None: an absolute canonical path
    with no symlink in it, a socket owned by the user, in a directory the user owns that nobody
    else can write, and nothing of tmux's (a socket there would reach the tmux server)."""
    if not path or not os.path.isabs(path) or os.path.normpath(path) != path:
        return None
    if inside_any(path, avoid):
        return None
    prefix = ""
    for part in path.strip("/").split("/"):
        prefix += "/" + part
        try:
            st = os.lstat(prefix)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return None
    parent = os.lstat(os.path.dirname(path))
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
        return None
    if parent.st_uid != uid or parent.st_mode & 0o022:
        return None
    return path


def own_install() -> tuple[str, ...]:
    """The paths of tmuxjail's own install that the launcher executes or imports outside the jail
    (package, venv, interpreter, stdlib, bwrap) and that a capability-less process of this user
    could change: a compatibility jail must get them read-only."""
    pkg = os.path.dirname(tmuxjail.__file__)
    candidates = [pkg, *_outside(pkg, package_dirs()), sys.prefix, sys.executable,
                  *interpreter_dirs(), os.path.dirname(os.__file__), *FIXED_PATHS]
    # The package's parent too: the launcher puts it first on its sys.path (pane/command.py STUB), so a
    # __future__.py or _sqlite3.py added there is what it imports (a --user or --target install
    # keeps it outside any venv; an editable one is the checkout).
    candidates.append(os.path.dirname(pkg))
    out: list[str] = []
    for c in candidates:
        real = os.path.realpath(c)
        if os.path.exists(real) and _writable(real) and real not in out:
            out.append(real)
    return tuple(sorted(out))


# Where the system's own interpreters live: root's compatibility jails can write them anyway
# (README: when tmuxjail runs as root), and a read-only /usr/bin would change them for nothing.
# (A user's own /usr/local stays protected: own_install keeps what the user could write.)
SYSTEM_DIRS = ("/", "/usr", "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/local", "/usr/local/bin",
               "/usr/local/lib", "/bin", "/lib", "/lib64")


def interpreter_dirs() -> list[str]:
    """The directories the interpreter itself reads before any of tmuxjail's code, beyond its
    executable and stdlib: a file a jail adds there redirects the launcher's imports, even under
    -I -S: `python3.X._pth` beside the real executable or `libpython3.X.so.1.0._pth` beside the
    shared library replaces sys.path outright, `pybuilddir.txt` beside the executable moves the
    stdlib, and prefix/lib/python3X.zip comes before the stdlib on sys.path. So the interpreter's
    install (sys.base_prefix, as pyenv, uv or conda make one), the real executable's directory
    and the shared library's (read from this process's mappings); for root, not the system's."""
    dirs = [sys.base_prefix, sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").partition("/")[2]
                if path and os.path.basename(path).startswith("libpython"):
                    dirs.append(os.path.dirname("/" + path))
    except OSError:
        pass
    out: list[str] = []
    for d in dirs:
        real = os.path.realpath(d)
        if not (real in SYSTEM_DIRS and os.getuid() == 0) and real not in out:
            out.append(real)
    return out


def package_dirs() -> list[str]:
    """Where each package of tmuxjail lives (warm.py keys the policy cache on these files)."""
    return [os.path.dirname(str(import_module(m).__file__)) for m in PACKAGES]


def _outside(pkg: str, dirs: list[str]) -> list[str]:
    """An editable install keeps adapters/ and profiles/ outside the package: the profiles and
    adapter code every start resolves its policy from. Inside it, the package's own bind covers them."""
    root = os.path.realpath(pkg)
    return [d for d in dirs if not inside(os.path.realpath(d), root)]


def _writable(path: str) -> bool:
    """Could a process of this uid with no capabilities write path or rename it? (An install
    owned by this user is writable all the way down; one owned by root is not, except for root.)"""
    uid, gids = os.getuid(), {os.getgid(), *os.getgroups()}

    def w(st) -> bool:
        if st.st_uid == uid:
            return bool(st.st_mode & 0o200)
        if st.st_gid in gids:
            return bool(st.st_mode & 0o020)
        return bool(st.st_mode & 0o002)

    try:
        return w(os.stat(path)) or w(os.stat(os.path.dirname(path)))
    except OSError:
        return True  # cannot tell: protect it




def _proc_int(path: str, default: int) -> int:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def user_limits() -> dict[str, Any]:
    """The user's real per-user kernel limits, which a jail gets a share of (budget.jail_limits):
    soft rlimits (-1: unlimited), the system's file table and pty pool, and /proc/sys/user/*."""
    import resource

    def soft(name: str) -> int:
        which = getattr(resource, name, None)  # macOS has no RLIMIT_SIGPENDING or RLIMIT_MSGQUEUE
        if which is None:
            return -1
        cur = resource.getrlimit(which)[0]
        return -1 if cur == resource.RLIM_INFINITY else cur

    big = 1 << 62
    return {
        "nproc": soft("RLIMIT_NPROC"), "nofile": soft("RLIMIT_NOFILE"),
        "sigpending": soft("RLIMIT_SIGPENDING"), "msgqueue": soft("RLIMIT_MSGQUEUE"),
        "memlock": soft("RLIMIT_MEMLOCK"),
        "file_max": _proc_int("/proc/sys/fs/file-max", big), "nr_open": _proc_int("/proc/sys/fs/nr_open", 1 << 20),
        "threads_max": _proc_int("/proc/sys/kernel/threads-max", big),
        "pty_max": _proc_int("/proc/sys/kernel/pty/max", 4096), "pty_reserve": _proc_int("/proc/sys/kernel/pty/reserve", 1024),
        "user": {name: _proc_int(f"/proc/sys/user/{name}", -1) for name in USER_COUNTS
                 if os.path.exists(f"/proc/sys/user/{name}")},
    }


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


def foreign_pane_process(pid: int) -> str | None:
    """The command name of a live pane process that is neither tmuxjail's launcher nor what it
    execs (bwrap, or a tracer with bwrap in its argv), nor tmux between its fork and exec:
    something replaced the launcher (a hook's respawn-pane), and the jail will never come up.
    None otherwise, and when unreadable."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return None
    if state in ("Z", "X") or not cmdline or comm == "bwrap" or comm.startswith("tmux"):
        return None
    ours = is_launcher(cmdline.decode(errors="replace")) or any(w.endswith(b"/bwrap") for w in cmdline.split(b"\0"))
    return None if ours else comm


def jail_exec_started(sandbox_pid: int) -> bool:
    """True once the command inside the sandbox is running. bwrap reports its child's pid before
    that child has set the sandbox up, so the pid alone proves nothing: wait until a descendant
    has exec'd something other than the steps before the command (bwrap, prlimit): setup
    succeeded (under the proxy, bubblewrap runs the command only once the proxy listens inside),
    and the CLI was exec'd. Until then, the caller's own work after the start (store, tmux) would
    take the CPU the jail's last steps need."""
    todo = [sandbox_pid]
    while todo:
        pid = todo.pop()
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            if comm not in (NAME, os.path.basename(PRLIMIT)):
                return True
        except OSError:
            pass
        todo += _children(pid)
    return False
