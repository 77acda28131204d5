"""The in-pane launcher: the pane's own process. It reads and deletes its spec, re-checks the
policy fingerprint against its argv and the store, then execs bubblewrap, which execs the CLI.
Stdlib only, and nothing it does not need: it runs on every start. It runs with -S (no site
processing, ~30 ms) and -I (no cwd on sys.path, no PYTHON* variables), with the directory that holds this very package put first on sys.path:

    python -I -S -c 'import sys; sys.path[:0] = [ROOT]; from tmuxjail.launch import main; ...' --fp sha256:... SPEC
"""

from __future__ import annotations

import itertools
import os
import sys

from .errors import INSIDE_JAIL
from .subpath import inside

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .netlisten import Early

EXIT_REFUSED = 3
STUB = "import sys; sys.path[:0] = [{root!r}]; from tmuxjail.launch import main; main(sys.argv[1:])"
EXIT_UNAVAILABLE = 5
TRACE_HEAD: list[str] = []  # a discovery run: strace in front of bubblewrap (traced())


def die(message: str, code: int) -> NoReturn:
    from .render import fail

    fail(message)
    raise SystemExit(code)


def read_spec(path: str) -> dict[str, Any]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        die(f"launch spec {path} is gone ({exc.strerror}); this pane was not started by tmuxjail "
            "start/resume, refusing to run anything", EXIT_REFUSED)
    try:
        os.unlink(path)  # read once, and first: it holds credential values
    except OSError:
        pass
    if os.fstat(fd).st_uid != os.getuid():
        die("launch spec is not owned by you; refusing", EXIT_REFUSED)
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    from .canon import loads

    try:
        spec = loads(data)
    except (ValueError, RecursionError):
        die("launch spec is not valid JSON; refusing", EXIT_REFUSED)
    if not isinstance(spec, dict):
        die("launch spec is not a JSON object; refusing", EXIT_REFUSED)
    return spec


def stored_fingerprint(store: str, session_id: str, files: list[Any] | None = None) -> tuple[str | None, list[str]]:
    """The session's fingerprint (None: no such live session, or no answer), and the digest the
    identity cache holds for each (path, stat key) of files ("" for none)."""
    # sqlite3's own module, which sqlite3.connect and sqlite3.Error are: the package adds only
    # adapters (datetime, collections) this query does not use and the launcher would load.
    import _sqlite3 as sqlite3

    from .canon import canonical_json

    digests: list[str] = []
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10)
        row = db.execute("SELECT fingerprint, status FROM sessions WHERE id=?", (session_id,)).fetchone()
    except sqlite3.Error:
        return None, []
    try:  # no answer here only costs a hash: the launcher then hashes the file itself
        for path, key in files or ():
            hit = db.execute("SELECT stat_key, digest FROM identity_cache WHERE path=?", (path,)).fetchone()
            # store.put_digest writes the key as json.dumps(list): the same text for a list of ints
            digests.append(hit[1] if hit and hit[0].replace(" ", "") == canonical_json(key) else "")
    except sqlite3.Error:
        digests = []
    db.close()
    return (row[0] if row and row[1] != "stopped" else None), digests


class Helper:
    """The launch's helper child (start_helper): its pid, and this process's ends of the pipes:
    the request it writes (ask_helper), the answers (the store's; the proxy's socket, -1 without
    the proxy), and the go pipe the proxy waits on (closed by this process's exec)."""

    __slots__ = ("ask", "go", "pid", "ready", "store")

    def __init__(self, pid: int, ask: int, store: int, ready: int, go: int) -> None:
        self.pid, self.ask, self.store, self.ready, self.go = pid, ask, store, ready, go


def start_helper() -> Helper:
    """Fork the helper child, first thing: it loads SQLite (as costly as the rest of this launch)
    while this process reads and checks its spec, and then does what ask_helper() asks. It checks
    the store (stored_fingerprint: "=" and the stored fingerprint, or "-" for none, on `store`);
    under the network proxy it then listens (netlisten.begin: lean, and says so on `ready`, or why
    it cannot); root only, it then sweeps finished jails' pids cgroups; then it exits or, under
    the proxy, waits until this process has exec'd bwrap before it loads the proxy's code (sockets, threads,
    json) and serves (netproxy.run): its start-up is off this launch's path and does not compete
    with it for the CPU. It is forked before anything narrows this process (keyring, cgroup,
    Landlock); a launch refused before it asks leaves it nothing to do (EOF)."""
    ask_r, ask_w = os.pipe()
    store_r, store_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()  # go_w: this process's only
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:  # whatever happens, this child never returns into the launcher
            for fd in (ask_w, store_r, ready_r, go_w):
                os.close(fd)
            helper(parent, ask_r, store_w, ready_w, go_r)
        finally:
            os._exit(0)
    for fd in (ask_r, store_w, ready_w, go_r):
        os.close(fd)
    return Helper(pid, ask_w, store_r, ready_r, go_w)


def ask_helper(helper: Helper, spec: dict[str, Any], policy: dict[str, Any], proxied: bool,
               files: list[Any] | None = None) -> None:
    """Tell the helper this launch's store and session, the executable files whose cached digest
    it looks up ((path, stat key): Executable.open_all), and the proxy's settings if it has one."""
    from .canon import canonical_json

    proxy = {"allow_domains": policy.get("allow_domains", []), "resolve": policy.get("resolve", [])}
    nproc = (policy.get("limits") or {}).get("nproc")
    data = canonical_json({"store": str(spec["store"]), "session_id": str(spec["session_id"]),
                           "detach": spec.get("trace") is not None, "proxy": proxy if proxied else None,
                           "files": files or [],
                           "nproc": nproc if isinstance(nproc, int) else None}).encode()
    try:
        while data:
            data = data[os.write(helper.ask, data):]
    except BrokenPipeError:
        pass  # the helper is gone: its store check gives no answer, which refuses (store_holds)
    os.close(helper.ask)
    if not proxied:
        os.close(helper.ready)
        helper.ready = -1


def helper(parent: int, ask: int, store: int, ready: int, go: int) -> None:
    """The helper child's work (start_helper)."""
    import _sqlite3  # now, while the launcher reads its spec; stored_fingerprint uses it

    del _sqlite3
    data = b""
    while chunk := os.read(ask, 65536):
        data += chunk
    if not data:
        return  # the launch was refused before it asked
    from .canon import loads

    req = loads(data)
    assert isinstance(req, dict)
    early: Early | None = None
    try:
        fp, digests = stored_fingerprint(req["store"], req["session_id"], req.get("files"))
        answer = ("=" + fp) if isinstance(fp, str) else "-"
        data = "\n".join([answer, *digests]).encode()
        while data:
            data = data[os.write(store, data):]
        os.close(store)
        # On a discovery run strace replaces the launcher and waits for every child of it, while
        # the proxy waits for it to exit: there the proxy is a grandchild (detach).
        if req["proxy"] is not None:
            from . import netlisten

            early = netlisten.begin(req["store"], req["session_id"], parent, ready, req["detach"])
        if os.getuid() == 0:
            from .sandbox import pids

            if early is not None and req.get("nproc") and pids.hierarchy() is not None:
                # The proxy's threads count toward the jail's pids.max (a root-run proxy is held to
                # no RLIMIT_NPROC): it joins the group its launcher joins (root_process_limit).
                try:
                    pids.join(int(req["nproc"]), pids_group(str(req["session_id"]), parent))
                except OSError:
                    pass  # it still serves at most netproxy.MAX_CONNECTIONS, 2 threads each
            if early is None:
                for fd in (0, 1, 2):  # nobody waits for the sweep on the pane's terminal
                    os.close(fd)
            pids.sweep()
        if early is None:
            return
        os.read(go, 1)  # EOF: the launcher has exec'd, or is exiting
        os.close(go)
        if netlisten.ended(early[2], 0.01):
            return
        from . import netproxy

        netproxy.run(req["proxy"], early, parent, req["detach"])
    finally:
        if early is not None:
            netlisten.exit_removing(early[1])  # (imported: early is its)


def store_holds(helper: Helper, expected: str) -> list[str]:
    """Refuse the launch unless the helper's store check answered, and with this fingerprint; the
    cached digests it found (ask_helper's files). Reading to EOF: the answer is whole, and a check
    that died without one is no answer."""
    data = b""
    while chunk := os.read(helper.store, 4096):
        data += chunk
    os.close(helper.store)
    try:
        os.waitpid(helper.pid, os.WNOHANG)  # done, unless it serves the proxy; bwrap reaps it otherwise
    except ChildProcessError:
        pass
    if not data:
        die("the store check gave no answer (it exited); refusing", EXIT_REFUSED)
    answer, *digests = data.decode(errors="replace").split("\n")
    if answer != "=" + expected:
        die("the store does not hold this fingerprint for this session; refusing", EXIT_REFUSED)
    return digests


def seccomp_fd(machine: str, strict: bool = True) -> int:
    from .sandbox.seccomp import program

    try:
        prog = program(machine, strict)
    except KeyError:
        die(f"no seccomp filter for machine {machine!r}; refusing to run without it", EXIT_UNAVAILABLE)
    fd = os.memfd_create("tmuxjail-seccomp", 0)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


KEYCTL = {"x86_64": 250, "aarch64": 219}
KEYCTL_JOIN_SESSION_KEYRING = 1


def own_session_keyring() -> None:
    """Join a fresh anonymous session keyring, so the jail does not possess the host session's
    keys (Kerberos KEYRING caches, AFS tokens; the kernel also uses them on the process's behalf,
    e.g. for network filesystems). Inside, seccomp refuses the keyring syscalls altogether."""
    import errno

    from .sandbox import libc

    machine = os.uname().machine  # platform.machine(), without importing platform (re, ...)
    nr = KEYCTL.get(machine)
    if nr is None:
        die(f"no keyctl number for {machine}; refusing to share the host's keyring", EXIT_UNAVAILABLE)
    if libc.syscall(nr, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        err = libc.get_errno()
        if err not in (errno.ENOSYS, errno.EPERM):  # no keyrings here, or a filter above us denies them
            die(f"cannot give the jail its own session keyring: {os.strerror(err)}", EXIT_UNAVAILABLE)


def root_process_limit(policy: dict[str, Any], session_id: str) -> None:
    """RLIMIT_NPROC means nothing to uid 0: a root-run jail gets a pids cgroup instead. A host
    without a pids controller was refused (or accepted by the operator) at start."""
    from .sandbox import pids

    nproc = (policy.get("limits") or {}).get("nproc")
    if not nproc or pids.hierarchy() is None:
        return
    try:
        pids.join(int(nproc), pids_group(session_id, os.getpid()))
    except OSError as exc:
        die(f"cannot put this root-run jail into its pids cgroup: {exc}", EXIT_UNAVAILABLE)


CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_NOSUID, MS_NOEXEC, MS_REC, MS_SLAVE = 2, 8, 1 << 14, 1 << 19


def own_namespace(policy: dict[str, Any]) -> None:
    """The jail's own user and mount namespace, made here and entered before bwrap, which nests
    its own in it: the kernel checks a per-user count at every namespace level, so the lowered
    /proc/sys/user/* values (the jail's share, budget.py) bind everything bwrap and the jail make.
    Set while this process holds the namespace's capabilities; exec drops them (uid != 0), and a
    root-run bwrap drops them for the jail, whose own namespace is a child of this one: nothing
    in the jail can raise them again. In the same mount namespace, a devpts of the jail's own with
    max= (bwrap's has none): the bwrap argv binds it at /dev/pts. Before fd_binds: bwrap can bind
    from an fd only a mount of its own namespace."""
    lim = policy.get("limits") or {}
    counts, ptys = lim.get("user") or [], lim.get("ptys", -1)
    if not counts and ptys < 0:
        return  # a policy without the jail's share (or one whose config accepts its absence)
    try:
        enter_own_namespace(counts, int(ptys))
    except (OSError, ValueError) as exc:
        die(f"cannot give the jail its own user namespace and limits ({getattr(exc, 'filename', None) or 'limits'}: "
            f"{getattr(exc, 'strerror', None) or exc}); refusing to start it without them (see `tmuxjail doctor`; "
            'to run jails without them: accept_missing_guards = ["jail-namespace-limits"] in the config)',
            EXIT_UNAVAILABLE)


def enter_own_namespace(counts: list[Any], ptys: int) -> None:
    """own_namespace()'s work (also tried by `tmuxjail doctor`, in a child); OSError names the step."""
    from .sandbox import libc

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = libc.get_errno()
            raise OSError(err, os.strerror(err), what)

    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    # The caller's own ids only, as bwrap maps them in its namespace (root's too: a process inside
    # may map only itself).
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as f:
            f.write(text)
    for name, value in counts:
        with open("/proc/sys/user/" + str(name), "w") as f:
            f.write(str(int(value)))
    check(libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None), "mount propagation")
    if ptys >= 0:
        check(libc.mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC,
                         f"newinstance,ptmxmode=0666,mode=620,max={ptys}".encode()), "devpts")


def pids_group(session_id: str, launcher: int) -> str:
    """The pids cgroup of a root-run launch: its launcher, bwrap, the jail, and the proxy."""
    return "".join(c for c in session_id if c.isalnum() or c in "-_")[:64] + f"-{launcher}"


def pane_command(python: str, fp: str, spec: str) -> list[str]:
    """The pane's argv: this launcher, from the installed package the caller runs."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # -I: no PYTHON* variables and, above all, not the cwd on sys.path: the pane starts in the
    # workspace, where the agent could plant json.py for this process, which runs outside the jail.
    return [python, "-I", "-S", "-c", STUB.format(root=root), "--fp", fp, spec]


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[0] != "--fp":
        die("usage: python -m tmuxjail.launch --fp FINGERPRINT SPEC", 2)
    # SIGCHLD ignored (inherited from whoever started the pane) would stay ignored through the
    # execs: the kernel reaps bwrap's own child, whose exit bubblewrap then waits for forever.
    import _signal  # type: ignore[import-not-found]  # signal itself imports enum

    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    helper = start_helper()
    from .canon import fingerprint

    expected, spec_path = argv[1], argv[2]
    spec = read_spec(spec_path)
    policy = spec.get("policy")
    if not isinstance(policy, dict) or fingerprint(policy) != expected or spec.get("fingerprint") != expected:
        die("the policy does not match the fingerprint of this pane (tampered); refusing", EXIT_REFUSED)
    # The helper child checks the store and, under the network proxy, becomes the proxy, while
    # this process checks and narrows itself; nothing runs before the store's answer
    # (store_holds). The proxy starts before it: it serves nobody until bwrap runs, and ends with
    # this process if the answer is no.
    proxied = policy.get("network") == "proxy" and policy.get("backend") != "none"
    python = ""
    if proxied:
        from . import netbridge

        found = netbridge.python_for_jail(policy, sys.executable)
        if found is None:
            die("network proxy needs a Python 3 inside the jail for its bridge (/usr/bin/python3); "
                "install python3, or start with --network none", EXIT_UNAVAILABLE)
        python = found
    # What the policy's identity names (the CLI, its interpreter) is opened now, once: the jail
    # runs these very files (exe_binds), checked against the fingerprinted digests (exe_checked).
    exe = open_executables(policy) if spec.get("sandboxed", True) and policy.get("mode") != "compatibility" else []
    ask_helper(helper, spec, policy, proxied, [[path, key] for path, _, _, key in exe])

    verify(spec, policy, spec_path)

    env = {k: str(v) for k, v in spec["env"].items()}
    if os.environ.get("TERM"):
        env["TERM"] = os.environ["TERM"]  # the pane's terminal, as tmux set it
    env[INSIDE_JAIL] = "1"
    if not spec.get("sandboxed", True):
        store_holds(helper, expected)
        # compatibility-unguarded: the operator opted in to running without bubblewrap.
        exec_closing(spec["argv"], env, keep=())
    if proxied:
        from . import netbridge

        env = netbridge.env(env)
    own_session_keyring()
    if os.getuid() == 0:
        root_process_limit(policy, str(spec["session_id"]))
    seccomp = seccomp_fd(spec["machine"], policy.get("mode") != "compatibility")
    if spec.get("landlock_scope"):
        from .sandbox import landlock

        try:
            landlock.scope_self()
        except OSError as exc:
            die(f"cannot scope the jail away from abstract unix sockets: {exc}", EXIT_UNAVAILABLE)
    own_namespace(policy)
    bwrap, *rest = spec["argv"]
    rest, bind_fds = fd_binds(rest, policy)
    exe_checked(exe, store_holds(helper, expected))
    rest = exe_binds(rest, exe)
    bind_fds += [fd for _, _, fd, _ in exe]
    if proxied:
        code = os.memfd_create("tmuxjail-bridge", 0)
        os.write(code, netbridge.BRIDGE.encode())
        os.lseek(code, 0, os.SEEK_SET)
        rest = netbridge.wire(rest, policy, proxy_ready(helper), python, code)
        bind_fds.append(code)
    keep: tuple[int, ...] = (seccomp, os.open(spec["status_file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
                             *bind_fds)
    if spec.get("trace") is not None:
        TRACE_HEAD[:] = traced(spec)
    exe_unchanged(exe)
    exec_closing([bwrap, "--seccomp", str(keep[0]), "--json-status-fd", str(keep[1]), *rest], env, keep)


# -- the executable: what was hashed is what runs ------------------------------------------------
# The start hashed the CLI (and a script's interpreter) and fingerprinted the digests; bubblewrap
# binds the install root later, by path, and the CLI is exec'd by path inside: a session that can
# write the install (compatibility) could swap the file in between. So the launcher opens each file
# once, checks that descriptor against the policy's digest (the identity cache's digest for the
# fd's own stat identity, the cache's trust: identity.sha256_file; else it hashes the fd itself),
# and has bubblewrap bind that descriptor read-only over the path the jail executes.

def open_executables(policy: dict[str, Any]) -> list[tuple[str, str, int, list[int]]]:
    """(path, the policy's sha256, an fd of the file, its stat key) for the CLI and its interpreter."""
    import stat

    ident = policy["executable"]
    out = []
    for path, digest in [(ident["path"], ident["sha256"]), *[tuple(e) for e in ident.get("extra", ())][:1]]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            die(f"cannot open the CLI's executable {path}: {exc.strerror}; refusing", EXIT_REFUSED)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            die(f"the CLI's executable {path} is not a regular file; refusing", EXIT_REFUSED)
        out.append((path, digest, fd, stat_key(st)))
    return out


def stat_key(st: os.stat_result) -> list[int]:
    """identity.stat_key (the digest cache's key), without its imports."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def exe_checked(exe: list[tuple[str, str, int, list[int]]], cached: list[str]) -> None:
    """Each opened file is the one the policy's digest is of: the cache holds that digest for the
    fd's stat identity, or (a file changed since the start, or not cached) hashing the fd gives it."""
    for i, (path, digest, fd, _key) in enumerate(exe):
        if (cached[i] if i < len(cached) else "") == digest:
            continue
        if sha256_fd(fd) != digest:
            die(f"the CLI's executable {path} changed since this session's policy was computed (its "
                "sha256 is not the approved one); refusing to run it", EXIT_REFUSED)


def sha256_fd(fd: int) -> str:
    from .canon import sha256

    h = sha256()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    offset = 0
    while n := os.preadv(fd, [buf], offset):
        h.update(view[:n])
        offset += n
    return "sha256:" + str(h.hexdigest())


def exe_binds(args: list[str], exe: list[tuple[str, str, int, list[int]]]) -> list[str]:
    """bubblewrap's args with each checked fd bound read-only over its path (after every other
    bind: the install root's bind would cover it otherwise)."""
    at = args.index("--") if "--" in args else len(args)
    binds = [a for path, _, fd, _ in exe for a in ("--ro-bind-fd", str(fd), path)]
    return [*args[:at], *binds, *args[at:]]


def exe_unchanged(exe: list[tuple[str, str, int, list[int]]]) -> None:
    """Last, before bubblewrap: no file was written in place since it was checked (ctime moves)."""
    for path, _, fd, key in exe:
        if stat_key(os.fstat(fd)) != key:
            die(f"the CLI's executable {path} was modified while this jail was being started; refusing "
                "to run it", EXIT_REFUSED)


def traced(spec: dict[str, Any]) -> list[str]:
    """A discovery run: strace, outside the jail, in front of bubblewrap (tmuxjail.discover.trace).
    The trace file must be a new file named `trace` in a directory of its own under the state
    directory's discover/ (where the store lives, which no jail sees): created here with O_EXCL
    and without following a link, so a spec cannot point the tracer's output anywhere else."""
    from .discover.trace import CAP_FILE, STRACE, argv

    path = spec["trace"]
    state = os.path.dirname(str(spec.get("store", "")))
    if not (isinstance(path, str) and state and os.path.isabs(path) and os.path.normpath(path) == path
            and os.path.basename(path) == "trace"
            and os.path.dirname(os.path.dirname(path)) == os.path.join(state, "discover")):
        die("the launch spec's trace file is not a discovery trace of this store (tampered); refusing", EXIT_REFUSED)
    if not os.access(STRACE, os.X_OK):
        die(f"discovery needs strace ({STRACE}): sudo apt-get install -y strace", EXIT_UNAVAILABLE)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError as exc:
        die(f"cannot create the discovery trace {path}: {exc.strerror}", EXIT_UNAVAILABLE)
    try:  # written by `discover` next to the trace, from the config's [discover] trace_cap
        fd = os.open(os.path.join(os.path.dirname(path), CAP_FILE), os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            cap = int(os.read(fd, 32))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        cap = 0
    if cap <= 0:
        die("the discovery's trace cap is missing or not a number (tampered); refusing", EXIT_REFUSED)
    return argv(path, cap, sys.executable)


def proxy_ready(helper: Helper) -> str:
    """The proxy's socket (host path), once it listens; refuses the launch if it could not."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(helper.ready, 4096)
        if not chunk:
            break
        data += chunk
    os.close(helper.ready)
    try:
        os.waitpid(helper.pid, os.WNOHANG)  # a detaching proxy's middle process has exited: reap it
    except ChildProcessError:
        pass
    line = data.decode(errors="replace").strip()
    if not line.startswith("/"):
        die(f"cannot start the session's network proxy: {line.lstrip('!') or 'it exited'}", EXIT_UNAVAILABLE)
    return line


# -- binds from fds ------------------------------------------------------------------------------
# The contract with sandbox.bwrap.wrap(): it writes plain --bind/--ro-bind[-try] SRC DEST; here,
# every such bind whose SRC lies in a tree a jail can write (the policy's workspaces, approved host
# paths and private home: agent_roots(), read from the policy the fingerprint just checked) is
# opened below its outermost root one component at a time without following a link, and handed to
# bubblewrap as --bind-fd/--ro-bind-fd FD DEST: bwrap would otherwise resolve SRC on the host,
# following whatever link a jail planted there. -try keeps its meaning (missing: no bind); a link
# anywhere below the root, or a missing non-try SRC, refuses the launch.

BIND_FD = {"--bind": "--bind-fd", "--bind-try": "--bind-fd", "--ro-bind": "--ro-bind-fd",
           "--ro-bind-try": "--ro-bind-fd"}
ARITY = dict.fromkeys((
    "--die-with-parent", "--unshare-all", "--share-net", "--unshare-user", "--unshare-user-try",
    "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup",
    "--unshare-cgroup-try", "--clearenv", "--new-session", "--as-pid-1", "--disable-userns",
    "--assert-userns-disabled"), 0)
ARITY.update(dict.fromkeys((
    "--args", "--userns", "--userns2", "--pidns", "--chdir", "--unsetenv", "--lock-file", "--sync-fd",
    "--remount-ro", "--exec-label", "--file-label", "--proc", "--dev", "--tmpfs", "--mqueue", "--dir",
    "--seccomp", "--add-seccomp-fd", "--block-fd", "--userns-block-fd", "--info-fd", "--json-status-fd",
    "--cap-add", "--cap-drop", "--perms", "--size", "--uid", "--gid", "--hostname"), 1))
ARITY.update(dict.fromkeys((
    "--setenv", "--dev-bind", "--dev-bind-try", "--bind-fd", "--ro-bind-fd", "--file", "--bind-data",
    "--ro-bind-data", "--symlink", "--chmod", *BIND_FD), 2))


def agent_roots(policy: dict[str, Any]) -> list[str]:
    # A private copy of a state file is written by the jail (through its bind): opened as a root.
    return [*policy["workspace_write"], *policy["workspace_read"], *policy["host_write"],
            *policy["host_read"], *filter(None, [policy.get("private_home")]),
            *(copy for _, copy in policy.get("state_copies", ()))]


def fd_binds(args: list[str], policy: dict[str, Any]) -> tuple[list[str], list[int]]:
    roots = agent_roots(policy)
    out: list[str] = []
    fds: list[int] = []
    i = 0
    while i < len(args) and args[i] != "--":
        op = args[i]
        if op not in ARITY:
            die(f"unexpected sandbox option {op!r} in the launch spec; refusing", EXIT_REFUSED)
        n = ARITY[op]
        if i + n >= len(args):
            die(f"sandbox option {op} lacks its arguments; refusing", EXIT_REFUSED)
        src = args[i + 1] if n else ""
        under = [r for r in roots if inside(src, r)] if op in BIND_FD else []
        if under:
            fd = open_beneath(min(under, key=len), src, optional=op.endswith("-try"))
            if fd is not None:
                fds.append(fd)
                out += [BIND_FD[op], str(fd), args[i + 2]]
        else:
            out += args[i:i + 1 + n]
        i += 1 + n
    return out + args[i:], fds


def open_beneath(root: str, path: str, optional: bool) -> int | None:
    """An O_PATH fd for path, opened from root down without following any link; None when an
    optional path is missing. The root itself is outside every tree a jail can write."""
    import stat

    rel = [c for c in path[len(root):].split("/") if c]
    if any(c in (".", "..") for c in rel) or os.path.normpath(path) != path:
        die(f"{path} is not a canonical path; refusing to bind it", EXIT_UNAVAILABLE)
    flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    where = root
    try:
        fd = os.open(root, flags)
        for name in rel:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise NotADirectoryError
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            finally:
                os.close(fd)
            fd, where = nxt, os.path.join(where, name)
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)
            raise IsADirectoryError  # a link: refused below
    except FileNotFoundError:
        if optional:
            return None
        die(f"{path} is gone since the policy was computed; refusing to start (start a new session)",
            EXIT_UNAVAILABLE)
    except OSError:
        die(f"{where} is a symbolic link or not what was checked, inside a tree the jail can write; "
            f"refusing to bind {path} (remove the link, or start without that workspace)", EXIT_UNAVAILABLE)
    return fd


def login_shell() -> str:
    """identity.login_shell(), without its imports (this runs on every start)."""
    import pwd

    shell = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK) or shell.endswith("nologin"):
        shell = "/bin/sh"
    return shell


def cli_prefix(policy: dict[str, Any]) -> list[str]:
    """How the policy's executable is started: its interpreter first, for scripts."""
    exe = policy["executable"]
    return [*[p for p, _ in exe["extra"]][:1], exe["path"]]


def verify(spec: dict[str, Any], policy: dict[str, Any], spec_path: str) -> None:
    """Everything this launcher executes must follow from the fingerprinted policy: the spec's
    argv, environment and side settings are not fingerprinted, and whoever could rewrite the spec
    would otherwise choose them. Compared before any fd conversion of the binds."""
    def refuse(what: str) -> NoReturn:
        die(f"the launch spec's {what} does not follow from this pane's policy (tampered); refusing",
            EXIT_REFUSED)

    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        refuse("argv")
    sandboxed = policy.get("backend") != "none"
    if spec.get("sandboxed", True) is not sandboxed:
        refuse("sandbox setting")
    cli = argv
    if sandboxed:
        from .sandbox import HostLayout
        from .sandbox.bwrap import FIXED_PATHS, Bwrap

        if argv[0] not in FIXED_PATHS:
            refuse("bubblewrap path")
        try:
            fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                      for k, v in spec["layout"].items()}
            layout = HostLayout(**fields)
            head = Bwrap(argv[0]).wrap(policy, [], layout)
        except (KeyError, TypeError, AttributeError, ValueError):
            refuse("host layout")
        if argv[:len(head)] != head:
            refuse("bubblewrap argv")
        cli = argv[len(head):]
    # An extra pane of the session runs your login shell in the same jail.
    if cli[:len(cli_prefix(policy))] != cli_prefix(policy) and cli != [login_shell(), "-l"]:
        refuse("executable")
    env = spec.get("env")
    if not isinstance(env, dict):
        refuse("environment")
    fixed = dict(policy["env_set"])
    if any(env.get(k) != v for k, v in fixed.items()):
        refuse("environment")
    allowed = None if policy["env_inherit"] else {*policy["env_names"], *fixed}
    if any(k.startswith("TMUX") or (allowed is not None and k not in allowed) for k in env):
        refuse("environment")
    if policy["mode"] != "compatibility" and sandboxed and not spec.get("landlock_scope"):
        from .sandbox import landlock

        if landlock.abi() >= landlock.MIN_ABI:  # start would have asked for it: someone turned it off
            refuse("Landlock setting")
    # (The machine needs no check: a filter for another architecture denies every system call.)
    # An extra pane of a session sends its status to /dev/null: nobody waits on it.
    if sandboxed and spec.get("status_file") not in (spec_path[:-len(".json")] + ".status", os.devnull):
        refuse("status file")


def exec_closing(argv: list[str], env: dict[str, str], keep: tuple[int, ...]) -> NoReturn:
    """exec argv with only stdio and `keep` open: nothing else of ours leaks into the jail."""
    for fd in keep:
        os.set_inheritable(fd, True)
    bounds = [2, *sorted(keep), 65536]
    for lo, hi in itertools.pairwise(bounds):
        os.closerange(lo + 1, hi)
    argv = [*TRACE_HEAD, *argv]
    try:
        os.execve(argv[0], argv, env)
    except OSError as exc:
        die(f"cannot run {argv[0]}: {exc.strerror}", EXIT_UNAVAILABLE)

if __name__ == "__main__":
    main(sys.argv[1:])
