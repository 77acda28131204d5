"""The per-session egress proxy (issue 15, DESIGN §9). Stdlib only.

The launcher forks it just before exec'ing bubblewrap (netlisten.begin(), then run()): it runs outside the jail, as the
user, in the host's network namespace, and dies with the pane (PR_SET_PDEATHSIG). It listens on a
unix socket in the session's directory under tmuxjail's state (hidden from every jail); the
launcher binds that one socket into this jail only. Inside, the bridge (netbridge) forwards the
CLI's loopback proxy port to it.

It speaks HTTP CONNECT, and plain HTTP in absolute form (`GET http://host/path`, issue 28.5) under
the same checks, and parses what the jail sends strictly and within bounds (one request head of
at most MAX_HEAD bytes within HEAD_TIMEOUT; nothing is followed or retried; one plain-HTTP
request per connection). The
decision is on names and on the addresses actually connected to: a literal address or localhost
is refused, the name must match the session's allowlist, the proxy resolves it itself, every
resolved address must pass netcheck.refused_address (with the host's own addresses read at that
moment), and the socket connects to exactly the address that was checked. The tunnel's bytes are
never read. Each decision is one JSON line in the session's log, beside per-destination counters
(netrecord); `show --network` reads them (netlog)."""

from __future__ import annotations

import ipaddress
import itertools
import os
import queue
import socket
import threading
import time
from typing import NoReturn

from .. import hostos
from . import check as netcheck
from . import listen as netlisten
from .record import LOG_NAME as LOG_NAME
from .record import Recorder

MAX_HEAD = 8192
HEAD_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
MAX_CONNECTIONS = 256
# Refusals (403s and bad requests) answered at full speed; beyond, each waits its turn, holding its
# slot: a jail that floods its proxy gets its answers slower instead of the proxy's CPU, so the
# tunnels it was allowed keep their throughput (bench/network.py, "flood"). When every slot is
# held, the accept loop pauses after each refusal: the flood waits in the kernel's backlog.
REFUSALS_PER_S = 250.0
REFUSAL_BURST = 500.0
FULL_PAUSE = 0.005
BUF = 1 << 18
PR_SET_PDEATHSIG = 1


class Refused(Exception):
    def __init__(self, rule: str, address: str = ""):
        super().__init__(rule)
        self.rule, self.address = rule, address


IFCONFIG = "/sbin/ifconfig"  # macOS: no /proc


def own_addresses() -> frozenset:
    """Every address of this host, now (IPv4 from the kernel's local routing table, IPv6 from
    if_inet6; on macOS from ifconfig). OSError when they cannot be read: the caller refuses
    everything then."""
    if not os.path.exists("/proc/net/if_inet6") and os.path.exists(IFCONFIG):
        import subprocess  # macOS only: the proxy on Linux never loads it

        try:
            out = subprocess.run([IFCONFIG, "-a"], capture_output=True, text=True, timeout=5, check=True).stdout
        except subprocess.SubprocessError as exc:
            raise OSError(f"{IFCONFIG}: {exc}") from None
        return ifconfig_addresses(out)
    return proc_addresses()


def ifconfig_addresses(text: str) -> frozenset:
    """The `inet` and `inet6` addresses in `ifconfig -a`'s output (a scope suffix dropped)."""
    out: set = set()
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ("inet", "inet6"):
            out.add(ipaddress.ip_address(words[1].split("%", 1)[0]))
    if not out:
        raise ValueError("ifconfig listed no address")
    return frozenset(out)


def proc_addresses() -> frozenset:
    out: set = set()
    with open("/proc/net/if_inet6") as f:
        for line in f:
            out.add(ipaddress.IPv6Address(int(line.split()[0], 16)))
    last = None
    with open("/proc/net/fib_trie") as f:
        for line in f:
            s = line.strip()
            if s.startswith("|-- "):
                last = s[4:]
            elif s.startswith("/32 host LOCAL") and last:
                out.add(ipaddress.IPv4Address(last))
    return frozenset(out)


class Proxy:
    def __init__(self, allow, resolve, directory: str | None, owner: int | None = None):
        self.allow = tuple(allow)
        self.overrides: dict[str, tuple[str, bool]] = {n: (a, bool(t)) for n, a, t in resolve}
        self.rec = Recorder(directory, owner)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._queue: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()  # connections for idle workers
        self._idle = 0
        self._idle_lock = threading.Lock()
        self._bucket = [REFUSAL_BURST, time.monotonic()]  # refusal tokens, when last filled
        self._bucket_lock = threading.Lock()
        self._own: tuple[float, frozenset | None] = (0.0, None)

    # -- decision --------------------------------------------------------------------------------
    def own(self) -> frozenset:
        at, cached = self._own
        if cached is None or time.monotonic() - at > 1.0:
            try:
                cached = own_addresses()
            except (OSError, ValueError):
                raise Refused("self-unknown") from None
            self._own = (time.monotonic(), cached)
        return cached

    def decide(self, host: str, port: int) -> tuple[list[tuple], str]:
        """(the sockaddrs to try, in order, every one checked; the rule that allowed them), or
        raise Refused."""
        lit = netcheck.literal(host)
        if lit is not None:
            raise Refused("literal-address", str(lit))
        try:
            name = netcheck.check_name(host)
        except ValueError:
            raise Refused("bad-name") from None
        if name in netcheck.REFUSED_HOSTS or name.endswith(".localhost"):
            raise Refused("localhost")
        if not 0 < port < 65536:
            raise Refused("port")
        pattern = netcheck.allowed_by(name, self.allow)  # before any resolution
        if pattern is None:
            raise Refused("allowlist")
        infos: list[tuple[netcheck.Address, bool]]
        if name in self.overrides:
            mapped, test_upstream = self.overrides[name]
            infos = [(ipaddress.ip_address(mapped), test_upstream)]
        elif netcheck.special_use(name):
            raise Refused("special-use")
        else:
            try:
                got = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
            except (OSError, UnicodeError):
                raise Refused("no-address") from None
            infos = [(ipaddress.ip_address(str(sa[0]).split("%", 1)[0]), False) for *_, sa in got]
            if not infos:
                raise Refused("no-address")
        own = self.own()
        for addr, test_upstream in infos:
            # A test upstream (only the operator's config marks one) is exempt for exactly its
            # mapped name and address: tests' upstreams live on loopback, which is refused
            # otherwise; the jail can write neither the config nor the policy that carries it.
            rule = None if test_upstream else netcheck.refused_address(addr, own)
            if rule:
                raise Refused(rule, str(addr))
        addrs = dict.fromkeys(netcheck.unmapped(a) for a, _ in infos)
        return [(str(a), port) if a.version == 4 else (str(a), port, 0, 0) for a in addrs], pattern

    def pace(self) -> None:
        """Wait for this refusal's turn (a token bucket of REFUSALS_PER_S): no wait below it."""
        with self._bucket_lock:
            tokens, at = self._bucket
            now = time.monotonic()
            tokens = min(REFUSAL_BURST, tokens + (now - at) * REFUSALS_PER_S) - 1
            self._bucket[:] = [tokens, now]
        if tokens < 0:
            time.sleep(-tokens / REFUSALS_PER_S)

    # -- serving ---------------------------------------------------------------------------------
    def serve(self, *listeners: socket.socket) -> None:
        """Accept on every listener (the jail's loopback, IPv4 and IPv6; the unix socket), one
        thread each but the first, which is this one."""
        threading.Thread(target=self.rec.flusher, daemon=True).start()
        for listener in listeners[1:]:
            threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        self._accept(listeners[0])

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            if not self.slots.acquire(blocking=False):
                self.rec.event("no-slot", f"{MAX_CONNECTIONS} connections open")
                conn.close()
                time.sleep(FULL_PAUSE)
                continue
            if not self._dispatch(conn):  # no thread to be had (the user's process limit): refused, recorded
                self.rec.event("no-slot", "cannot start a thread")
                conn.close()
                self.slots.release()

    def _dispatch(self, conn: socket.socket) -> bool:
        """Hand a connection (its slot taken) to an idle worker, or to a new one. Workers are kept
        for the next connection: starting a thread per connection was most of what a flood of
        refusals cost the proxy, CPU taken from the tunnels. A worker counts itself idle before it
        gives its slot back, so there are never more workers than slots (MAX_CONNECTIONS)."""
        with self._idle_lock:
            if self._idle:
                self._idle -= 1
                self._queue.put(conn)
                return True
        try:
            threading.Thread(target=self._worker, args=(conn,), daemon=True).start()
        except RuntimeError:
            return False
        return True

    def _worker(self, conn: socket.socket) -> None:
        while True:
            try:
                self.handle(conn)
            except Exception as exc:  # noqa: BLE001 - one connection's failure never stops the proxy
                del exc
            finally:
                conn.close()
                with self._idle_lock:
                    self._idle += 1
                self.slots.release()
            conn = self._queue.get()

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(HEAD_TIMEOUT)
        try:
            head, early = read_head(conn)
            host, port, forward = parse_request(head)
        except BadRequest as exc:
            self.rec.event("malformed", f"{exc.status} {exc.reason}")
            self.pace()
            _reply(conn, exc.status, exc.reason, str(exc))
            return
        except OSError:
            self.rec.event("malformed", "incomplete head")
            return
        shown = host if len(host) <= 253 else host[:253]
        try:
            addrs, rule = self.decide(host, port)
        except Refused as r:
            self.rec.decision(shown, port, r.address, "denied", r.rule)
            self.pace()
            _reply(conn, 403, "Forbidden", netcheck.why_refused(r.rule, shown))
            return
        up, sa, err = None, addrs[0], ""
        for sa in addrs:  # each was checked; nothing else is ever connected to
            up = socket.socket(socket.AF_INET if len(sa) == 2 else socket.AF_INET6, socket.SOCK_STREAM)
            up.settimeout(CONNECT_TIMEOUT)
            try:
                up.connect(sa)
                break
            except OSError as exc:
                up.close()
                up, err = None, exc.strerror or str(exc)
        if up is None:
            self.rec.decision(shown, port, sa[0], "failed", rule)
            _reply(conn, 502, "Bad Gateway", f"{shown}: cannot connect to {sa[0]} ({err})")
            return
        self.rec.decision(shown, port, sa[0], "allowed", rule)
        with up:
            if forward is None:
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up.sendall(forward)
            if early:
                up.sendall(early)
            self.rec.add_bytes(shown, relay(conn, up))


class BadRequest(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason = status, reason


def read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """The request head (without its final CRLFCRLF) and whatever followed it; bounded in size
    and time (the socket's timeout covers each read, the deadline the whole head)."""
    buf = b""
    deadline = time.monotonic() + HEAD_TIMEOUT
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            raise BadRequest(431, "Request Header Fields Too Large", f"request head over {MAX_HEAD} bytes")
        if time.monotonic() > deadline:
            raise BadRequest(408, "Request Timeout", "request head too slow")
        chunk = conn.recv(MAX_HEAD + 4 - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    head, _, early = buf.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD:
        raise BadRequest(431, "Request Header Fields Too Large", f"request head over {MAX_HEAD} bytes")
    return head, early


# Headers for the proxy itself, or for one hop: never forwarded (Host and Connection are set anew).
HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "proxy-authenticate", "connection", "keep-alive",
                         "host", "te", "trailer", "upgrade"})


def parse_request(head: bytes) -> tuple[str, int, bytes | None]:
    """(host, port, None) for `CONNECT host:port HTTP/1.x`; (host, port, the head to send
    upstream) for a plain-HTTP request in absolute form (`GET http://host[:port]/path HTTP/1.x`):
    its request line in origin form, Host set to the checked name, one request per connection
    (Connection: close). Header lines of printable ASCII only; nothing else is accepted."""
    lines = head.split(b"\r\n")
    if any(not all(32 <= c < 127 or c == 9 for c in line) for line in lines):
        raise BadRequest(400, "Bad Request", "request head is not printable ASCII")
    parts = lines[0].decode("ascii").split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(400, "Bad Request", "not an HTTP/1 request line")
    method, target, version = parts
    headers = [line.decode("ascii") for line in lines[1:]]
    for line in headers:
        if ":" not in line or line[:1] in (" ", "\t"):
            raise BadRequest(400, "Bad Request", "malformed header line")
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit() or len(port) > 5 or not host:
            raise BadRequest(400, "Bad Request", "CONNECT target must be host:port")
        return host.lower(), int(port), None
    if not (method.isalpha() and method.isupper() and len(method) <= 16):
        raise BadRequest(405, "Method Not Allowed", f"unknown method {method[:16]!r}")
    if not target[:7].lower() == "http://":
        raise BadRequest(400, "Bad Request", "a proxy request needs an absolute http:// URI "
                                             "(https goes through CONNECT: use an HTTPS_PROXY-aware client)")
    rest = target[7:]
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    authority, path = rest[:cut], rest[cut:].split("#", 1)[0]
    host, port = authority, "80"
    if authority.rpartition(":")[2].isdigit() and not authority.endswith("]"):
        host, _, port = authority.rpartition(":")
    if not host or len(port) > 5:
        raise BadRequest(400, "Bad Request", "the URI's host:port is not valid")
    kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in HOP_HEADERS]
    out = [f"{method} {path if path.startswith('/') else '/' + path} {version}", f"Host: {authority}", *kept,
           "Connection: close"]
    return host.lower(), int(port), ("\r\n".join(out) + "\r\n\r\n").encode("ascii")


def _reply(conn: socket.socket, status: int, reason: str, body: str) -> None:
    data = (body.replace("\r", " ").replace("\n", " ") + "\n").encode("ascii", "replace")
    try:
        conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
                     "Connection: close\r\n\r\n".encode() + data)
    except OSError:
        pass


def _pump(src: socket.socket, dst: socket.socket, done: list | None = None) -> int:
    """src -> dst until EOF, then the half-close passed on; how many bytes went (also appended to
    `done`). Through a pipe with splice (the bytes never enter this process), or where there is no
    splice (macOS) through a buffer."""
    moved = [0]
    try:
        (_splice if hasattr(os, "splice") else _copy)(src, dst, moved)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if done is not None:
            done.append(moved[0])
    return moved[0]


def _splice(src: socket.socket, dst: socket.socket, moved: list[int]) -> None:
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        try:
            import fcntl

            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, BUF)
        except OSError:  # the pipe keeps its default size
            pass
        s, d = src.fileno(), dst.fileno()
        while True:
            n = os.splice(s, w, BUF)
            if n == 0:
                break
            moved[0] += n
            while n:
                n -= os.splice(r, d, n)
    finally:
        os.close(r)
        os.close(w)


def _copy(src: socket.socket, dst: socket.socket, moved: list[int]) -> None:
    buf = memoryview(bytearray(BUF))
    while n := src.recv_into(buf):
        dst.sendall(buf[:n])
        moved[0] += n


def relay(a: socket.socket, b: socket.socket) -> int:
    """Both directions until both ends closed; the bytes relayed."""
    a.settimeout(None)
    b.settimeout(None)
    back: list[int] = []
    t = threading.Thread(target=_pump, args=(b, a, back), daemon=True)
    t.start()
    n = _pump(a, b)
    t.join()
    return n + sum(back)


# -- the session's process -------------------------------------------------------------------------

def listen(directory: str, owner: int | None = None) -> tuple[socket.socket, str]:
    """netlisten.listen(), as a socket.socket."""
    raw, path = netlisten.listen(directory, owner)
    return socket.socket(fileno=raw.detach()), path


session_dir, clear_stale = netlisten.session_dir, netlisten.clear_stale
_exit = netlisten.exit_removing


def _exit_when_readable(fd: int, leave) -> None:
    import select

    select.select([fd], [], [])
    leave()


def _exit_on_sigterm(leave) -> None:
    import signal

    signal.sigwait({signal.SIGTERM})
    leave()


def run(policy: dict, early: netlisten.Early, parent: int, detach: bool = False,
        jail: list | tuple = ()) -> NoReturn:
    """The proxy process of one jailed pane, forked by the launcher (`parent`, which execs bwrap
    next, or strace in front of it), once netlisten.begin() listens and has told the launcher so:
    serves until `parent` exits; it watches a pidfd of it (`early`). detach: this is the
    grandchild of a discovery run (see begin). jail: its listeners on the jail's own loopback
    (netlisten.jail_listeners), where the jail's proxy variables point."""
    import ctypes
    import signal

    raw, path, watch, directory = early
    try:
        # Dies with its parent, which is bwrap by then. PR_SET_PDEATHSIG alone is not enough: the
        # signal comes from the dying parent, and Landlock's signal scope (strict jails) stops it
        # at the domain's edge; a pidfd of the parent needs no signal.
        if not detach:  # (a grandchild's parent is the middle process, gone at once)
            if not hostos.darwin():  # macOS has no prctl (the call would end the proxy): the kqueue alone
                libc = ctypes.CDLL(None, use_errno=True)
                libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:
                _exit(path)
        listener = socket.socket(fileno=raw.detach())
        proxy = Proxy(policy.get("allow_domains", ()), policy.get("resolve", ()), directory, parent)

        def leave(*_):
            proxy.rec.flush(wait=False)  # the last second of counters and aggregated rows
            _exit(path)

        # SIGTERM is blocked in every thread (they inherit the mask) and taken by one of them
        # with sigwait. A handler runs only in the main thread, between bytecodes: a SIGTERM that
        # lands just before it blocks in accept(), or on another thread, would be answered only
        # at the next connection, and the proxy would outlive the pane.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(target=_exit_on_sigterm, args=(leave,), daemon=True).start()
        threading.Thread(target=_exit_when_readable, args=(watch, leave), daemon=True).start()
        inside = [socket.socket(fileno=s.detach()) for s in jail]
        keep = sorted((listener.fileno(), watch, *(s.fileno() for s in inside)))
        for lo, hi in itertools.pairwise([2, *keep, 65536]):
            os.closerange(lo + 1, hi)
        os.chdir("/")
        proxy.serve(*inside, listener)
    finally:
        _exit(path)
