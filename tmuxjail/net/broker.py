"""The session's MCP broker (issue 31, DESIGN §10). Stdlib only.

It runs outside the jail, like the proxy, and listens on a unix socket bound into this session's
jail only. Each connection comes from the stub (net/stub.py): one header line names a server of
this session, and the broker starts that server (its argv, usually its own bubblewrap jail from
sandbox/mcpjail.py, and its environment, which holds its secrets and never enters the agent's
jail), then relays newline-delimited JSON-RPC both ways. What the jail sends is parsed strictly
and within bounds (size, rate, one JSON object per line, no duplicate keys) and forwarded as the
bytes that were checked; a `tools/call` outside the server's allowlist is answered here, and a
`tools/list` answer is cut down to it. Each call is one line in the session's call log (server,
tool, decision, time: never arguments or results)."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import threading
import time
from typing import Any

from .calls import MAX_TOOL_NAME, CallLog
from .calls import read_counts as read_counts
from .calls import read_log as read_log

MAX_MESSAGE = 1 << 20
MAX_SERVER_MESSAGE = 16 << 20
RATE = 100.0
BURST = 200.0
MAX_CONNECTIONS = 16
HEADER_TIMEOUT = 10.0
STDERR_KEPT = 1 << 20  # of all its servers' stderr, per broker (the session's broker.err)
MAX_PER_SERVER = 2  # connections (each a server process) at once, per server name
STARTS = (4.0, 0.2)  # server starts: a burst, then per second (a CLI starts each server once)
# With a tools allowlist, nothing else reaches the server but these (issue 31: red team F1):
# resources, prompts and completions would read what the allowlist keeps out.
ALLOWED_METHODS = frozenset({"initialize", "ping", "server/discover", "tools/list", "tools/call", "logging/setLevel"})
MAX_HEADER = 4096
GRACE = 2.0  # for the server to exit on its own (stdin closed), then after SIGTERM
CHUNK = 1 << 16
DRAIN_TIME = 1.0
MAX_DRAIN = 1 << 20


class Refused(Exception):
    """A connection refused before its server starts, with the one line the client gets."""


def error_line(code: int, message: str, id: Any = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).encode() + b"\n"


def _strict_object(pairs: list[tuple[str, Any]]) -> dict:
    # A duplicate key is read differently by different parsers (first or last wins): the name
    # checked here must be the name the server acts on.
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def parse(line: bytes) -> Any:
    """One line as JSON: UTF-8 only, no duplicate keys, no NaN or Infinity. ValueError else."""
    try:
        return json.loads(line.decode("utf-8"), object_pairs_hook=_strict_object, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deep") from None


def _valid_id(id: Any) -> bool:
    return isinstance(id, str) or (isinstance(id, int) and not isinstance(id, bool) and abs(id) < 1 << 53)


class Bucket:
    def __init__(self, rate: float = RATE, burst: float = BURST):
        self.rate, self.burst = rate, burst
        self.tokens, self.at = burst, time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class Relay:
    """One connection: the client's socket and its server's process."""

    def __init__(self, name: str, spec: dict, conn: socket.socket, proc: subprocess.Popen, log: CallLog,
                 bucket: Bucket | None = None):
        self.name, self.conn, self.proc, self.log = name, conn, proc, log
        tools = spec.get("tools")
        self.allowed = None if tools is None else frozenset(tools)
        self.bucket = bucket or Bucket()  # the broker's: a reconnect starts with no fresh burst
        self.send_lock = threading.Lock()
        self.server_done = threading.Event()

    def send(self, data: bytes) -> None:
        with self.send_lock:
            self.conn.sendall(data)

    # -- client -> server ------------------------------------------------------------------------
    def client_to_server(self, data: bytes) -> None:
        """Until the client's EOF. A line too long is answered once and skipped up to its
        newline, never held whole; a last line without its newline is not a message."""
        buf, discarding = b"", False
        while True:
            if discarding:
                nl = data.find(b"\n")
                discarding, data = nl < 0, b"" if nl < 0 else data[nl + 1:]
            if not discarding:
                *lines, buf = (buf + data).split(b"\n")
                for line in lines:
                    if len(line) >= MAX_MESSAGE:
                        self.send(error_line(-32600, "message too large"))
                    else:
                        self.message(line)
                if len(buf) >= MAX_MESSAGE:
                    self.send(error_line(-32600, "message too large"))
                    buf, discarding = b"", True
            data = self.conn.recv(CHUNK)
            if not data:
                return

    def message(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            msg = parse(line)
        except ValueError:
            self.send(error_line(-32700, "parse error"))
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            id = msg.get("id") if isinstance(msg, dict) else None
            self.send(error_line(-32600, "invalid request", id if _valid_id(id) else None))
            return
        method, id = msg.get("method"), msg.get("id")
        is_request = method is not None and "id" in msg
        if method is not None and (not isinstance(method, str) or (is_request and not _valid_id(id))):
            self.send(error_line(-32600, "invalid request", id if _valid_id(id) else None))
            return
        if not self.bucket.take():
            if is_request:
                self.send(error_line(-32000, "rate limited", id))
            return
        if self.allowed is not None and isinstance(method, str) and method not in ALLOWED_METHODS \
                and not method.startswith("notifications/"):
            self.log.add(self.name, method[:MAX_TOOL_NAME], "refused")
            if is_request:
                self.send(error_line(-32601, f"method {method[:MAX_TOOL_NAME]} is not allowed in this session", id))
            return
        if method == "tools/call":
            params = msg.get("params")
            tool = params.get("name") if isinstance(params, dict) else None
            label = tool[:MAX_TOOL_NAME] if isinstance(tool, str) else ""
            if self.allowed is not None and not (isinstance(tool, str) and tool in self.allowed):
                self.log.add(self.name, label, "refused")
                if is_request:
                    self.send(error_line(-32602, f"tool {label} is not allowed in this session", id))
                return
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(line + b"\n")
        stdin.flush()
        if method == "tools/call":  # logged once on its way: off the time the call takes
            self.log.add(self.name, label, "allowed")

    # -- server -> client ------------------------------------------------------------------------
    def server_to_client(self) -> None:
        try:
            stdout = self.proc.stdout
            assert stdout is not None
            while line := stdout.readline(MAX_SERVER_MESSAGE + 1):
                if len(line) > MAX_SERVER_MESSAGE:
                    return
                self.send(self.filtered(line))
        except (OSError, ValueError):
            pass
        finally:
            self.server_done.set()
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def filtered(self, line: bytes) -> bytes:
        """A tools/list answer cut down to the allowlist. Found by its shape (a result with a
        "tools" list), not by the request's id: no id is matched the wrong way (1 against 1.0,
        or one id used twice), and no state grows with unanswered requests."""
        # A key spelled with escapes ("\\u0074ools") holds a backslash-u: such a line is read too.
        if self.allowed is None or (b'"tools"' not in line and b"\\u" not in line):
            return line
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return line
        result = msg.get("result") if isinstance(msg, dict) and "method" not in msg else None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return line
        result["tools"] = [t for t in result["tools"]
                           if isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] in self.allowed]
        return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"

    def stop(self, client_ended: bool) -> None:
        """The server gone and reaped: its stdin closed and a grace to exit if the client ended,
        then SIGTERM, then SIGKILL."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        if client_ended and not self.server_done.is_set():
            try:
                self.proc.wait(GRACE)
                return
            except subprocess.TimeoutExpired:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                return
            try:
                self.proc.send_signal(sig)
                self.proc.wait(GRACE)
            except subprocess.TimeoutExpired:
                continue
            except OSError:
                pass
        self.proc.wait()


class Broker:
    def __init__(self, servers: dict[str, dict], log: CallLog):
        self.servers, self.log = servers, log
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.bucket = Bucket()
        self.starts = Bucket(STARTS[1], STARTS[0])
        self.running: dict[str, int] = {}
        self.lock = threading.Lock()

    def serve(self, listener: socket.socket) -> None:
        threading.Thread(target=self._flusher, daemon=True).start()
        while True:
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                if exc.errno in (errno.EBADF, errno.EINVAL):
                    return  # the listener is closed
                time.sleep(0.01)  # EMFILE and friends: not a busy loop
                continue
            if not self.slots.acquire(blocking=False):
                self._refuse(conn, f"more than {MAX_CONNECTIONS} MCP connections")
                continue
            try:
                threading.Thread(target=self._run, args=(conn,), daemon=True).start()
            except RuntimeError:
                self.slots.release()
                self._refuse(conn, "no thread for this connection")

    def _flusher(self) -> None:
        """The counters of calls made on connections that stay open reach their file too."""
        while True:
            time.sleep(1.0)
            try:
                self.log.flush()
            except OSError:
                pass

    def _run(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        finally:
            self.slots.release()

    @staticmethod
    def _refuse(conn: socket.socket, message: str, drain: bool = False) -> None:
        """One error line, then close. With drain, what the client sent already is read first
        (bounded): closing on unread bytes resets the connection, and the stub, which sends as
        soon as it connects, would see ECONNRESET where an EOF belongs."""
        try:
            conn.settimeout(DRAIN_TIME)
            conn.sendall(error_line(-32000, message))
            conn.shutdown(socket.SHUT_WR)
            deadline, left = time.monotonic() + DRAIN_TIME, MAX_DRAIN
            while drain and left > 0 and time.monotonic() < deadline:
                got = conn.recv(min(left, CHUNK))
                if not got:
                    break
                left -= len(got)
        except OSError:
            pass
        conn.close()

    def _header(self, conn: socket.socket) -> tuple[str, bytes]:
        """(the server's name, what followed the header), or Refused."""
        deadline = time.monotonic() + HEADER_TIMEOUT
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or len(buf) > MAX_HEADER:
                raise Refused("bad header")
            conn.settimeout(left)
            try:
                got = conn.recv(MAX_HEADER + 1 - len(buf))
            except OSError:
                raise Refused("bad header") from None
            if not got:
                raise Refused("bad header")
            buf += got
        head, rest = buf.split(b"\n", 1)
        try:
            header = parse(head) if len(head) <= MAX_HEADER else None
        except ValueError:
            header = None
        name = header.get("server") if isinstance(header, dict) else None
        if not isinstance(name, str):
            raise Refused("bad header")
        if name not in self.servers:
            raise Refused(f"no MCP server named {name!r} in this session")
        with self.lock:  # each connection is a server process on the host, outside the jail's limits
            if self.running.get(name, 0) >= MAX_PER_SERVER:
                raise Refused(f"MCP server {name} runs {MAX_PER_SERVER} times for this session already")
            if not self.starts.take():
                raise Refused("MCP servers started too often; try again in a few seconds")
            self.running[name] = self.running.get(name, 0) + 1
        conn.settimeout(None)
        return name, rest

    def handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                name, rest = self._header(conn)
            except Refused as exc:
                self._refuse(conn, str(exc), True)
                return
            try:
                self._relay(conn, name, rest)
            finally:
                with self.lock:
                    self.running[name] -= 1
                self.log.flush()

    def _relay(self, conn: socket.socket, name: str, rest: bytes) -> None:
        spec = self.servers[name]
        try:
            # From this thread, which lives as long as the connection: bwrap's
            # --die-with-parent fires when the thread that forked it exits.
            proc = subprocess.Popen(spec["argv"], env=spec.get("env", {}), cwd=spec.get("cwd", "/"),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, close_fds=True)
        except (OSError, ValueError):
            self._refuse(conn, f"cannot start MCP server {name}", True)
            return
        threading.Thread(target=_keep_stderr, args=(name, proc), daemon=True).start()
        relay = Relay(name, spec, conn, proc, self.log, self.bucket)
        out = threading.Thread(target=relay.server_to_client, daemon=True)
        out.start()
        client_ended = False
        try:
            relay.client_to_server(rest)
            client_ended = True
        except (OSError, ValueError):
            pass
        finally:
            relay.stop(client_ended)
            out.join(GRACE)
            if not out.is_alive() and proc.stdout:
                proc.stdout.close()


_STDERR_LEFT = [STDERR_KEPT]
_STDERR_LOCK = threading.Lock()


def _keep_stderr(name: str, proc: subprocess.Popen) -> None:
    """What its servers write to stderr goes to the broker's (the session's broker.err), control
    characters escaped, until STDERR_KEPT bytes for the whole broker: the rest is read and
    dropped, so servers that log whatever a jail makes them log never fill the disk (however
    often it reconnects) nor block on a full pipe."""
    assert proc.stderr is not None
    with proc.stderr:
        while chunk := os.read(proc.stderr.fileno(), 65536):
            text = "".join(c if c.isprintable() or c == "\n" else f"\\x{ord(c):02x}"
                           for c in chunk.decode("utf-8", "replace")).encode()
            with _STDERR_LOCK:
                part = text[:_STDERR_LEFT[0]]
                _STDERR_LEFT[0] -= len(part)
            if part:
                try:
                    os.write(2, f"[{name}] ".encode() + part)
                except OSError:
                    pass


def serve_forever(listener_fd: int, servers: dict, log_path: str) -> None:
    listener = socket.socket(fileno=listener_fd)
    Broker(servers, CallLog(log_path)).serve(listener)
