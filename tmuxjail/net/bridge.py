"""The jail's side of the egress proxy (issue 15). Pure and stdlib only: the launcher calls it.

Inside the jail's own network namespace, the command runs under a tiny bridge (BRIDGE, run by a
Python visible inside the jail, with the jail's rights only): it listens on 127.0.0.1:PORT and
[::1]:PORT, forks, and the original process execs the CLI with HTTPS_PROXY & co pointing at that
port (NO_PROXY names the jail's own loopback); the child relays each connection, byte for byte
and unparsed, to the proxy's unix socket bound at SOCKET. When the CLI exits, the child exits too (a pidfd of the CLI), and bubblewrap
tears the PID namespace down besides."""

from __future__ import annotations

import os

from ..sandbox.bwrap import opt_trees

TYPE_CHECKING = False  # typing is not imported: the launcher imports this module
if TYPE_CHECKING:
    from ..sandbox.bwrap import Call

PORT = 3128
SOCKET = "/run/tmuxjail/proxy.sock"  # strict modes: /run is the jail's own tmpfs
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")
# The jail's own loopback (its network namespace's: nothing of the host) is reached directly, not
# through the proxy, which refuses loopback: a dev server or MCP server inside the jail (issue 28.5).
# Names and addresses in the spellings curl, Python, Node and Rust's reqwest each match.
LOOPBACK = "localhost,127.0.0.1,::1,[::1],127.0.0.0/8,.localhost"
PYTHONS = ("/usr/bin/python3",)

BRIDGE = r"""
import os, sys, _socket as S
path, port, argv = sys.argv[1], int(sys.argv[2]), sys.argv[4:]
def die(m):
    sys.stderr.write("tmuxjail: proxy bridge: %s\n" % m); sys.exit(5)
ls = []
for fam, host in ((S.AF_INET, "127.0.0.1"), (S.AF_INET6, "::1")):
    try:
        s = S.socket(fam, S.SOCK_STREAM); s.bind((host, port)); s.listen(128); ls.append(s)
    except OSError as e:
        if fam == S.AF_INET: die("cannot listen on 127.0.0.1:%d: %s" % (port, e.strerror))
me = os.getpid()
if os.fork():
    for s in ls: s.close()
    try: os.execvp(argv[0], argv)
    except OSError as e: die("cannot run %s: %s" % (argv[0], e.strerror))
# The command is exec'd as soon as the ports listen: everything below is the relay's, after the
# fork, off the command's way. Built-in modules only (_socket, _thread, select, fcntl: no import
# of socket.py, threading.py and what they pull in). The relay lives exactly as long as the
# command (the parent, exec'd): a jail's PID namespace would end it anyway, but not where no
# namespace holds it (a bench, a jail without one).
import _thread, select
try: w = os.pidfd_open(me)
except OSError: os._exit(0)
if os.getppid() != me: os._exit(0)
def gone():
    select.select([w], [], []); os._exit(0)
_thread.start_new_thread(gone, ())
os.setsid()
n = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2): os.dup2(n, fd)
B = 1 << 18
def pump(a, b, done=None):
    r, w = os.pipe()
    try:
        try:
            import fcntl; fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, B)
        except OSError: pass
        while True:
            k = os.splice(a.fileno(), w, B)
            if not k: break
            while k: k -= os.splice(r, b.fileno(), k)
    except OSError: pass
    finally:
        os.close(r); os.close(w)
        try: b.shutdown(S.SHUT_WR)
        except OSError: pass
        if done: done.release()
def up():
    u = S.socket(S.AF_UNIX, S.SOCK_STREAM)
    if len(path) < 100:
        u.connect(path); return u
    d = os.open(os.path.dirname(path), os.O_PATH)
    try: u.connect("/proc/self/fd/%d/%s" % (d, os.path.basename(path)))
    finally: os.close(d)
    return u
def conn(c):
    try: u = up()
    except OSError: c.close(); return
    done = _thread.allocate_lock(); done.acquire()
    _thread.start_new_thread(pump, (u, c, done))
    pump(c, u); done.acquire(); c.close(); u.close()
def serve(s):
    while True:
        try: fd, _ = s._accept()
        except OSError: continue
        _thread.start_new_thread(conn, (S.socket(fileno=fd),))
for s in ls[1:]: _thread.start_new_thread(serve, (s,))
serve(ls[0])
"""


def jail_paths(policy: dict, host_path: str) -> tuple[str, str]:
    """Where the proxy's socket and the bridge's code appear inside the jail. Compatibility jails
    see the host's /run, where bwrap could not create a mount point: there they sit in the
    session's own directory, inside the tmpfs that hides tmuxjail's state."""
    where = os.path.dirname(SOCKET) if policy["mode"] != "compatibility" else os.path.dirname(host_path)
    return os.path.join(where, os.path.basename(SOCKET)), os.path.join(where, "bridge.py")


def python_for_jail(policy: dict, own: str) -> str | None:
    """An interpreter the bridge can run inside this jail: the launcher's own when it lives (with
    its standard library) under the read-only system dirs this strict jail sees (/usr and the /opt
    trees it gets), else /usr/bin/python3; None when there is none."""
    visible = ("/usr/", *(t + "/" for t in opt_trees(policy))) if policy["mode"] != "compatibility" else ("/",)
    real = os.path.realpath(own)
    if real.startswith(visible) and os.access(real, os.X_OK):
        return real
    for p in PYTHONS:
        if os.access(p, os.X_OK):
            return p
    return None


def command(python: str, code: str, sock: str, argv: list[str]) -> list[str]:
    """argv run under the bridge."""
    return [python, "-I", "-S", code, sock, str(PORT), "--", *argv]


def is_bridge(words: list[str]) -> bool:
    """A command line command() built: the bridge on its way to the command, or its relay child."""
    return (len(words) > 6 and words[1:3] == ["-I", "-S"] and words[3].endswith("/bridge.py")
            and words[5] == str(PORT) and words[6] == "--")


def env(base: dict, port: int = PORT) -> dict:
    """The proxy variables every client reads, and NO_PROXY for the jail's loopback only (the
    host's or the caller's values never pass). port: the bridge's, or on macOS the session
    proxy's own loopback port (no bridge: Seatbelt lets the jail reach that one port only)."""
    out = dict(base)
    out.update(dict.fromkeys(PROXY_VARS, f"http://127.0.0.1:{port}"))
    out.update(dict.fromkeys(NO_PROXY_VARS, LOOPBACK))
    return out


def wire(call: Call, policy: dict, sock_host: str, python: str, code_fd: int) -> None:
    """bubblewrap's call with the socket and the bridge's code (read from code_fd) bound in, and
    the command run under the bridge: after the process limit's prefix (prlimit ... --), so the
    bridge counts too. The binds go before the read-only remounts (their mount points are made in
    there), or after the binds that follow them (the executables') where there are any."""
    sock, code = jail_paths(policy, sock_host)
    (call.late or call.setup).extend([("--ro-bind", sock_host, sock), ("--ro-bind-data", str(code_fd), code)])
    call.command = command(python, code, sock, call.command)
