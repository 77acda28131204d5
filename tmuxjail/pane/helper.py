"""The launch's helper child: forked first, it checks the store (and the identity cache) while the
launcher checks its spec, and under the network proxy it becomes the proxy."""

from __future__ import annotations

import os

from .. import hostos
from .narrow import pids_group
from .refuse import EXIT_REFUSED, EXIT_UNAVAILABLE, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any

    from ..net.listen import Early


def stored_fingerprint(store: str, session_id: str, files: list[Any] | None = None) -> tuple[str | None, list[str]]:
    """The session's fingerprint (None: no such live session, or no answer), and the digest the
    identity cache holds for each (path, stat key) of files ("" for none)."""
    # sqlite3's own module, which sqlite3.connect and sqlite3.Error are: the package adds only
    # adapters (datetime, collections) this query does not use and the launcher would load.
    import _sqlite3 as sqlite3

    from ..canon import canonical_json

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

    __slots__ = ("ask", "block", "go", "info", "pid", "ready", "store")

    def __init__(self, pid: int, ask: int, store: int, ready: int, go: int, info: int, block: int) -> None:
        self.pid, self.ask, self.store, self.ready, self.go = pid, ask, store, ready, go
        # bubblewrap's --info-fd (it tells the proxy its child's pid) and --block-fd (it runs the
        # command once the proxy listens inside the jail's network namespace): -1 without the proxy.
        self.info, self.block = info, block


def start_helper() -> Helper:
    """Fork the helper child, first thing: it loads SQLite (as costly as the rest of this launch)
    while this process reads and checks its spec, and then does what ask_helper() asks. It checks
    the store (stored_fingerprint: "=" and the stored fingerprint, or "-" for none, on `store`);
    under the network proxy it then listens (netlisten.begin: lean, and says so on `ready`, or why
    it cannot); root only, it then sweeps finished jails' pids cgroups; then it exits or, under
    the proxy, waits until this process has exec'd bwrap, makes its listeners on the jail's own
    loopback once bwrap reports its child (inside_jail: the jail's command waits for them), and
    then loads the proxy's code (sockets, threads,
    json) and serves (netproxy.run): its start-up is off this launch's path and does not compete
    with it for the CPU. It is forked before anything narrows this process (keyring, cgroup,
    Landlock); a launch refused before it asks leaves it nothing to do (EOF)."""
    ask_r, ask_w = os.pipe()
    store_r, store_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()  # go_w: this process's only
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:  # whatever happens, this child never returns into the launcher
            for fd in (ask_w, store_r, ready_r, go_w, info_w, block_r):
                os.close(fd)
            helper(parent, ask_r, store_w, ready_w, go_r, info_r, block_w)
        finally:
            os._exit(0)
    for fd in (ask_r, store_w, ready_w, go_r, info_r, block_w):
        os.close(fd)
    return Helper(pid, ask_w, store_r, ready_r, go_w, info_w, block_r)


def ask_helper(helper: Helper, spec: dict[str, Any], policy: dict[str, Any], proxied: bool,
               files: list[Any] | None = None) -> None:
    """Tell the helper this launch's store and session, the executable files whose cached digest
    it looks up ((path, stat key): Executable.open_all), and the proxy's settings if it has one."""
    from ..canon import canonical_json

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
    if not proxied or hostos.darwin():  # (macOS: no bubblewrap; its proxy listens on loopback TCP)
        os.close(helper.info)
        os.close(helper.block)
        helper.info = helper.block = -1
    if not proxied:
        os.close(helper.ready)
        helper.ready = -1


def helper(parent: int, ask: int, store: int, ready: int, go: int, info: int, block: int) -> None:
    """The helper child's work (start_helper)."""
    import _sqlite3  # now, while the launcher reads its spec; stored_fingerprint uses it

    del _sqlite3
    data = b""
    while chunk := os.read(ask, 65536):
        data += chunk
    if not data:
        return  # the launch was refused before it asked
    from ..canon import loads

    req = loads(data)
    assert isinstance(req, dict)
    early: Early | None = None
    err = -1
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
            from ..net import listen as netlisten

            err = os.dup(2)  # the pane's terminal, for why the proxy stops the jail (inside_jail)
            early = netlisten.begin(req["store"], req["session_id"], parent, ready, req["detach"])
        else:
            for fd in (info, block):
                if fd >= 0:
                    os.close(fd)
        if os.getuid() == 0:
            from ..sandbox import pids

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
        if not hostos.darwin():
            from ..sandbox import libc  # noqa: F401 - loaded now, off the way of inside_jail's setns

        os.read(go, 1)  # EOF: the launcher has exec'd, or is exiting
        os.close(go)
        if hostos.darwin():
            if netlisten.ended(early[2], 0.01):
                return
            jail: list[Any] | None = []
        else:
            # Blocks until bubblewrap reports its child; a launcher that refused and exited closes
            # the pipe first (EOF: nobody to serve). The jail's command waits on this step.
            jail = inside_jail(info, block, err)
        os.close(err)
        if jail is None:
            return
        from ..net import proxy as netproxy

        netproxy.run(req["proxy"], early, parent, req["detach"], jail)
    finally:
        if early is not None:
            netlisten.exit_removing(early[1])  # (imported: early is its)


def inside_jail(info: int, block: int, err: int) -> list[Any] | None:
    """The proxy's listeners on the jail's own loopback (netlisten.jail_listeners), made once
    bubblewrap has said its child's pid; then bubblewrap may run the command (block). If they
    cannot be made, the jail is stopped before its command runs, the pane says why, and None."""
    from ..net import listen as netlisten
    from ..net.inside import PORT

    try:
        pid = netlisten.child_pid(info)
    except OSError:
        return None  # the launch ended before bubblewrap ran its child (refused, or bwrap failed): it said why
    try:
        listeners = netlisten.jail_listeners(pid, PORT)
        os.write(block, b"1")
        os.close(block)
        return listeners
    except OSError as exc:
        why = exc.strerror or str(exc)
        try:
            os.write(err, f"tmuxjail: cannot open the session's proxy inside the jail: {why}; stopping it\n".encode())
        except OSError:
            pass
        import signal

        os.kill(pid, signal.SIGKILL)  # the jail's first process: bubblewrap ends with it
        return None


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
    if not line.startswith(("/", "tcp:")):  # a unix socket; on macOS a loopback port (net/listen.py)
        die(f"cannot start the session's network proxy: {line.lstrip('!') or 'it exited'}", EXIT_UNAVAILABLE)
    return line
