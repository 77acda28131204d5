"""The MCP broker (issue 31): a real MCP server written with the `mcp` SDK, in its own bubblewrap
jail (sandbox/mcpjail.py), behind a real Broker on a unix socket, spoken to by the SDK's client
through the in-jail stub (net/stub.py), or over a raw socket for what no SDK sends."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mcpkit import SERVER

from tmuxjail.net import broker, stub
from tmuxjail.sandbox import mcpjail

BWRAP = "/usr/bin/bwrap"
SECRET = "s3cret-token-4f9a1c"
ARG_MARK = "argument-marker-7d2e"
HOME = "/home/mcpserver"



def children(name: str) -> list[int]:
    """This process's children whose command is `name`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and comm == name:
            out.append(int(entry))
    return out


def descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        out.update(kids)
        todo += kids
    return out


def wait_for(pred, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    return pred()


class Running:
    def __init__(self, tmp: Path, servers: dict):
        self.sock = str(tmp / "b.sock")
        self.log_path = str(tmp / "calls.jsonl")
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.sock)
        self.listener.listen(16)
        self.broker = broker.Broker(servers, broker.CallLog(self.log_path))
        self.broker.starts = broker.Bucket(*reversed(broker.STARTS))  # (monkeypatched in a test)
        self.thread = threading.Thread(target=self.broker.serve, args=(self.listener,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes accept(): serve returns
        self.thread.join(5)
        self.listener.close()
        self.broker.log.close()


def jailed_server(tmp: Path, tools: list[str] | None) -> dict:
    import mcp

    script = tmp / "server.py"
    script.write_text(SERVER)
    site = os.path.dirname(os.path.dirname(mcp.__file__))
    # The venv, where its `mcp` is, the interpreter the venv runs (pyenv's, in root's home, in CI).
    read = sorted({sys.prefix, site, sys.base_prefix, str(tmp)})
    return {"argv": mcpjail.argv(BWRAP, sys.executable, [str(script)], read, "none", HOME),
            "env": {"SECRET": SECRET, "HOME": HOME, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            "tools": tools, "cwd": "/"}


@pytest.fixture
def running(tmp_path):
    if not os.access(BWRAP, os.X_OK):
        pytest.skip("bubblewrap is not installed")
    pytest.importorskip("mcp")
    r = Running(tmp_path, {"test": jailed_server(tmp_path, ["echo", "add", "whoami"]),
                           "open": jailed_server(tmp_path, None)})
    yield r
    r.close()
    # Every connection's server is ended and reaped once its client is gone.
    assert wait_for(lambda: not children("bwrap")), "a server outlived its connection"


def stub_params(r: Running, name: str):
    from mcp import StdioServerParameters

    python, *args = stub.argv(sys.executable, name)
    return StdioServerParameters(command=python, args=[*args, r.sock])


class Raw:
    """A client on the broker's socket itself, line by line."""

    def __init__(self, r: Running, name: str | None = "test"):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(r.sock)
        self.buf = b""
        if name is not None:
            self.s.sendall(json.dumps({"server": name}).encode() + b"\n")

    def send(self, obj) -> None:
        self.s.sendall((obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n")

    def line(self) -> dict | None:
        while b"\n" not in self.buf:
            got = self.s.recv(1 << 16)
            if not got:
                return None
            self.buf += got
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def answer(self, id) -> dict:
        while True:
            msg = self.line()
            assert msg is not None, "the broker closed the connection"
            if msg.get("id") == id and "method" not in msg:
                return msg

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "0"}}})
        assert "result" in self.answer(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, id, tool: str, arguments: dict) -> dict:
        self.send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})
        return self.answer(id)

    def tools(self, id) -> list[str]:
        self.send({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
        return [t["name"] for t in self.answer(id)["result"]["tools"]]

    def close(self) -> None:
        self.s.close()


# -- through the stub, with the SDK's client -------------------------------------------------------

@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_allowed_tool_works_hidden_tool_is_absent_and_refused(running, mode):
    import anyio
    from mcp import Client, MCPError

    async def session():
        async with Client(stub_params(running, "test"), mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            added = await client.call_tool("add", {"a": 2, "b": 40})
            echoed = await client.call_tool("echo", {"text": ARG_MARK})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("secret_tool", {})
            return names, added, echoed, refused.value

    names, added, echoed, refused = anyio.run(session)
    assert names == ["echo", "add", "whoami"]
    assert added.structured_content == {"result": 42} and not added.is_error
    assert echoed.content[0].text == ARG_MARK
    assert refused.code == -32602 and "secret_tool is not allowed" in refused.message
    entries = broker.read_log(running.log_path)
    assert [(e["server"], e["tool"], e["decision"]) for e in entries] == [
        ("test", "add", "allowed"), ("test", "echo", "allowed"), ("test", "secret_tool", "refused")]
    assert all(set(e) == {"t", "server", "tool", "decision"} for e in entries)
    text = Path(running.log_path).read_text()
    assert ARG_MARK not in text and "arguments" not in text and "result" not in text
    assert stat.S_IMODE(os.stat(running.log_path).st_mode) == 0o600


def test_without_an_allowlist_every_tool_is_listed_and_callable(running):
    import anyio
    from mcp import Client

    async def session():
        async with Client(stub_params(running, "open")) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool("secret_tool", {})

    names, result = anyio.run(session)
    assert names == ["echo", "add", "secret_tool", "whoami"]
    assert result.content[0].text == "the hidden tool ran"


def test_the_server_gets_its_secret_outside_its_argv_and_is_reaped_after(running):
    import anyio
    from mcp import Client

    seen: dict = {}

    async def session():
        async with Client(stub_params(running, "test")) as client:
            result = await client.call_tool("whoami", {})
            seen["bwrap"] = wait_for(lambda: children("bwrap"))
            for pid in seen["bwrap"]:
                seen["tree"] = {pid, *descendants(pid)}
                seen["cmdlines"] = [Path(f"/proc/{p}/cmdline").read_bytes() for p in seen["tree"]]
            return result

    result = anyio.run(session)
    assert result.content[0].text == hashlib.sha256(SECRET.encode()).hexdigest()
    assert len(seen["bwrap"]) == 1 and len(seen["tree"]) >= 2  # bwrap and the server under it
    assert all(SECRET.encode() not in c for c in seen["cmdlines"])
    assert any(b"server.py" in c for c in seen["cmdlines"])
    # The client is gone: the broker ends the server, reaped (not a zombie), with all under it.
    assert wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in seen["tree"])), \
        f"still there: {[p for p in seen['tree'] if os.path.exists(f'/proc/{p}')]}"


def test_the_stub_reports_an_unreachable_broker(tmp_path):
    got = subprocess.run([*stub.argv(sys.executable, "test"), str(tmp_path / "none.sock")],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert got.returncode == 1 and got.stdout == ""
    assert got.stderr.startswith("tmuxjail mcp stub: cannot reach the session's broker: ")
    assert got.stderr.count("\n") == 1


def test_the_stub_relays_both_ways_and_half_closes(tmp_path):
    """stdin's EOF half-closes: what the far side sends after it still arrives."""
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    got: dict = {}

    def far():
        conn, _ = listener.accept()
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        got["data"] = data
        conn.sendall(b"after eof\n")
        conn.close()

    t = threading.Thread(target=far)
    t.start()
    out = subprocess.run([*stub.argv(sys.executable, "srv"), path], input=b"one\ntwo\n",
                         capture_output=True, timeout=30)
    t.join(5)
    listener.close()
    assert got["data"] == b'{"server": "srv"}\none\ntwo\n'
    assert out.stdout == b"after eof\n" and out.returncode == 0


# -- over a raw socket: what no SDK client sends --------------------------------------------------

def test_malformed_oversized_and_flooding_messages_get_errors_and_the_connection_goes_on(running):
    raw = Raw(running)
    try:
        raw.initialize()
        assert raw.call(1, "echo", {"text": "first"})["result"]["content"][0]["text"] == "first"

        raw.send(b"{not json")
        assert raw.line() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        raw.send(b'[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]')
        assert raw.line()["error"]["code"] == -32600
        raw.send({"id": 6, "method": "ping"})  # no "jsonrpc": "2.0"
        assert raw.line() == {"jsonrpc": "2.0", "id": 6, "error": {"code": -32600, "message": "invalid request"}}
        # Two names: the server's parser might read the other one.
        raw.send(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
                 b'"params": {"name": "echo", "name": "secret_tool", "arguments": {}}}')
        assert raw.line()["error"]["code"] == -32700
        raw.send(b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"x": NaN}}')
        assert raw.line()["error"]["code"] == -32700
        raw.send(b"[" * 200_000)
        assert raw.line()["error"]["code"] == -32700
        raw.send(b"\xff\xfe{}")
        assert raw.line()["error"]["code"] == -32700

        big = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"text": "x" * (3 << 20)}}}).encode()
        raw.send(big)
        assert raw.line() == {"jsonrpc": "2.0", "id": None,
                              "error": {"code": -32600, "message": "message too large"}}

        # A flood: the burst passes, the rest is answered "rate limited", every request answered.
        raw.s.sendall(b"".join(json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "ping"}).encode() + b"\n"
                               for i in range(1000)))
        answers = {}
        while len(answers) < 1000:
            msg = raw.line()
            assert msg is not None
            answers[msg["id"]] = msg
        assert set(answers) == set(range(1000, 2000))
        limited = [m for m in answers.values() if "error" in m]
        assert all(m["error"] == {"code": -32000, "message": "rate limited"} for m in limited)
        assert broker.BURST - 10 <= 1000 - len(limited) < broker.BURST + 100  # a few spent above
        assert len(limited) > 1000 - broker.BURST - 100

        time.sleep(0.2)  # a few tokens back
        assert raw.call(10, "echo", {"text": "still here"})["result"]["content"][0]["text"] == "still here"
        refused = raw.call(11, "secret_tool", {})
        assert refused["error"]["code"] == -32602
        assert raw.tools(12) == ["echo", "add", "whoami"]
    finally:
        raw.close()


def test_tools_list_is_cut_down_whatever_the_request_id(running):
    """The answer is recognised by its shape: an id used twice, or a string id, changes nothing."""
    raw = Raw(running)
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": "a", "method": "tools/list"})
        raw.send({"jsonrpc": "2.0", "id": "a", "method": "tools/list"})
        for _ in range(2):
            assert [t["name"] for t in raw.answer("a")["result"]["tools"]] == ["echo", "add", "whoami"]
        raw.send({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"})  # a fractional id
        assert raw.line()["error"]["code"] == -32600
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": ["echo"]}})
        assert raw.answer(3)["error"]["code"] == -32602
    finally:
        raw.close()


def test_an_unknown_server_or_a_bad_header_is_refused_and_closed(running):
    before = set(children("bwrap"))
    for header in (b'{"server": "nope"}\n', b"not json\n", b'["test"]\n', b"x" * 5000):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(running.sock)
        s.sendall(header)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        msg = json.loads(data)
        assert data.count(b"\n") == 1 and msg["id"] is None and msg["error"]["code"] == -32000
        if header.startswith(b'{"server"'):
            assert msg["error"]["message"] == "no MCP server named 'nope' in this session"
    assert set(children("bwrap")) <= before  # no server was started


# -- without bubblewrap: the relay's edges, with a stand-in process --------------------------------

def _plain(tmp_path, argv: list[str], tools=None) -> Running:
    return Running(tmp_path, {"s": {"argv": argv, "env": {"PATH": "/usr/bin:/bin"}, "tools": tools, "cwd": "/"}})


def test_a_server_that_exits_ends_the_connection(tmp_path):
    r = _plain(tmp_path, [sys.executable, "-c", "print('{\"jsonrpc\": \"2.0\", \"method\": \"bye\"}')"])
    try:
        raw = Raw(r, "s")
        assert raw.line() == {"jsonrpc": "2.0", "method": "bye"}
        assert raw.line() is None
        raw.close()
    finally:
        r.close()


def test_a_server_line_over_the_bound_ends_the_connection(tmp_path, monkeypatch):
    monkeypatch.setattr(broker, "MAX_SERVER_MESSAGE", 1000)
    r = _plain(tmp_path, [sys.executable, "-c", "import time; print('x' * 5000, flush=True); time.sleep(60)"])
    try:
        raw = Raw(r, "s")
        started = time.monotonic()
        assert raw.line() is None
        assert time.monotonic() - started < 10
        raw.close()
        assert wait_for(lambda: not children("python3") and not children("python"))
    finally:
        r.close()


def test_connections_beyond_the_limit_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(broker, "MAX_CONNECTIONS", 1)
    r = _plain(tmp_path, ["/bin/cat"])
    try:
        first = Raw(r, "s")
        first.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert first.line()["id"] == 1  # cat sends it back: the connection is up
        second = Raw(r, None)  # refused at once, so no header: it might meet a closed socket
        msg = second.line()
        assert msg["error"]["message"] == "more than 1 MCP connections" and second.line() is None
        second.close()
        first.close()
        assert wait_for(lambda: not children("cat"))
        third = Raw(r, "s")  # the slot is free again
        third.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert third.line()["id"] == 2
        third.close()
    finally:
        r.close()


def test_a_refused_call_never_reaches_the_server(tmp_path):
    r = _plain(tmp_path, ["/bin/cat"], tools=["echo"])
    try:
        raw = Raw(r, "s")
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "other"}})
        raw.send({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "other"}})  # a notification
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}})
        assert raw.line()["error"]["code"] == -32602
        assert raw.line()["params"]["name"] == "echo"  # cat's echo of the one forwarded
        raw.close()
        assert [e["decision"] for e in broker.read_log(r.log_path)] == ["refused", "refused", "allowed"]
    finally:
        r.close()


def test_a_silent_client_or_a_server_that_cannot_start_gets_one_error_line(tmp_path, monkeypatch):
    monkeypatch.setattr(broker, "HEADER_TIMEOUT", 0.3)
    r = Running(tmp_path, {"gone": {"argv": [str(tmp_path / "missing")], "env": {}, "tools": None}})
    try:
        silent = Raw(r, None)
        assert silent.line()["error"]["message"] == "bad header" and silent.line() is None
        gone = Raw(r, "gone")
        assert gone.line()["error"]["message"] == "cannot start MCP server gone" and gone.line() is None
    finally:
        r.close()


def test_a_tools_list_answer_with_escaped_keys_is_cut_down_too(tmp_path):
    answer = r'{"jsonrpc":"2.0","id":1,"result":{"\u0074ools":[{"name":"echo"},{"name":"secret_tool"}]}}'
    r = _plain(tmp_path, [sys.executable, "-c", f"import sys; sys.stdin.readline(); print({answer!r}, flush=True)"],
               tools=["echo"])
    try:
        raw = Raw(r, "s")
        assert raw.tools(1) == ["echo"]
        raw.close()
    finally:
        r.close()


# -- the call log and the jail's argv ---------------------------------------------------------------

def test_call_log_rotates_and_reads_back_oldest_first(tmp_path):
    path = str(tmp_path / "calls.jsonl")
    log = broker.CallLog(path, max_bytes=300)
    for i in range(20):
        log.add("srv", f"tool{i}", "allowed")
    log.close()
    assert os.path.exists(path + ".1") and os.path.getsize(path) <= 300 + 100
    with open(path, "a") as f:
        f.write("not json\n[1]\n")
    entries = broker.read_log(path)
    tools = [e["tool"] for e in entries]
    assert tools == sorted(tools, key=lambda t: int(t[4:])) and tools[-1] == "tool19"
    assert "tool0" not in tools  # rotated away: one old file kept
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert broker.read_log(str(tmp_path / "missing")) == []


def test_call_log_does_not_follow_a_link(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "calls.jsonl").symlink_to(target)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        broker.CallLog(str(tmp_path / "calls.jsonl"))


def test_mcpjail_argv():
    argv = mcpjail.argv("/usr/bin/bwrap", "/opt/srv/bin/server", ["stdio"], ["/data/ro", "/usr/share/x"],
                        "none", "/home/u")
    assert argv[:2] == ["/usr/bin/bwrap", "--unshare-all"] and "--share-net" not in argv
    assert argv[-5:] == ["--chdir", "/", "--", "/opt/srv/bin/server", "stdio"]
    for flag in ("--die-with-parent", "--new-session"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    pairs = list(itertools.pairwise(argv))
    assert ("--tmpfs", "/home/u") in pairs and ("--ro-bind-try", "/data/ro") in pairs
    assert "/usr/share/x" not in argv and "/opt/srv/bin/server" not in argv[:-2]  # under system dirs
    host = mcpjail.argv("/usr/bin/bwrap", "/srv/server", [], [], "host", "/home/u")
    assert "--share-net" in host and ("--ro-bind", "/srv/server") in list(itertools.pairwise(host))
    inner = mcpjail.argv("/usr/bin/bwrap", "/venv/bin/python", [], ["/venv", "/venv/lib"], "none", "/h")
    assert inner.count("--ro-bind-try") == 9 and "/venv/lib" not in inner  # inside /venv: bound already


def test_with_an_allowlist_resources_prompts_and_completions_are_refused_and_logged(running):
    """Red team F1: the allowlist keeps out what resources and prompts would read; a server
    without one serves them."""
    raw = Raw(running)
    try:
        raw.initialize()
        for i, (method, params) in enumerate([("resources/list", {}), ("resources/read", {"uri": "res://secret"}),
                                              ("prompts/list", {}), ("prompts/get", {"name": "secret_prompt"}),
                                              ("completion/complete", {}), ("resources/templates/list", {})]):
            raw.send({"jsonrpc": "2.0", "id": 10 + i, "method": method, "params": params})
            got = raw.answer(10 + i)
            assert got["error"]["code"] == -32601 and "not allowed" in got["error"]["message"], got
        assert raw.call(20, "echo", {"text": "ok"})["result"]["content"][0]["text"] == "ok"
    finally:
        raw.close()
    def counted() -> set:  # (saved when the connection's end reaches the broker)
        return {(c["tool"], c["decision"]) for c in broker.read_counts(running.log_path)}

    assert wait_for(lambda: {("resources/read", "refused"), ("prompts/get", "refused")} <= counted()), counted()
    raw = Raw(running, "open")
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "res://secret"}})
        assert raw.answer(1)["result"]["contents"][0]["text"] == "the hidden resource"
    finally:
        raw.close()


def test_servers_per_name_and_starts_are_bounded(running, monkeypatch):
    """Red team F4: each connection is a server process on the host, outside the jail's limits."""
    held = [Raw(running) for _ in range(broker.MAX_PER_SERVER)]
    try:
        for r in held:
            r.initialize()
        extra = Raw(running)
        extra.s.settimeout(5)  # (a broken bound would serve it: no answer comes)
        line = extra.line()
        assert line is not None and "runs 2 times" in line["error"]["message"]
        extra.close()
    finally:
        for r in held:
            r.close()
    monkeypatch.setattr(running.broker, "starts", broker.Bucket(0.0, 0.0))
    late = Raw(running, "open")
    late.s.settimeout(5)
    assert "too often" in late.line()["error"]["message"]
    late.close()


def test_counters_survive_rotation(tmp_path):
    """Red team F3: a flood of refusals rotates the lines away, never the counts."""
    path = str(tmp_path / "calls.jsonl")
    log = broker.CallLog(path, max_bytes=500)
    log.add("t", "whoami", "allowed")
    for _ in range(200):
        log.add("t", "x" * 200, "refused")
    log.close()
    assert not any(e["tool"] == "whoami" for e in broker.read_log(path))  # rotated away ...
    counts = {(c["tool"][:6], c["decision"]): c["count"] for c in broker.read_counts(path)}
    assert counts == {("whoami", "allowed"): 1, ("xxxxxx", "refused"): 200}  # ... still counted


def test_servers_stderr_is_bounded_per_broker_and_escaped(tmp_path, capfd, monkeypatch):
    """Red team F2: a server that repeats what the jail sends on stderr, over many connections,
    writes at most STDERR_KEPT bytes for the whole broker, control characters escaped."""
    script = tmp_path / "noisy.py"
    script.write_text("import sys\nsys.stderr.write('\\x1b[2J' + 'n' * 5000)\nsys.stderr.flush()\n")
    monkeypatch.setattr(broker, "_STDERR_LEFT", [3000])
    monkeypatch.setattr(broker, "STARTS", (100.0, 100.0))
    r = Running(tmp_path, {"noisy": {"argv": [sys.executable, str(script)], "env": {}, "tools": None}})
    try:
        for _ in range(5):
            raw = Raw(r, "noisy")
            raw.line()
            raw.close()
        time.sleep(1)
    finally:
        r.close()
    err = capfd.readouterr().err
    assert err.count("n") <= 3000 + 50 and "\x1b" not in err and "\\x1b" in err
