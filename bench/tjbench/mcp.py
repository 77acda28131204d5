"""Issue 31's targets: the MCP broker's cost to a tool call, and to a start.

A `tools/call` round trip of a trivial tool through the in-jail stub and the session's broker
(tmuxjail.net.stub, tmuxjail.net.broker, in a process of its own as the launcher forks it) against
the same server in the same bubblewrap jail (tmuxjail.sandbox.mcpjail) spoken to directly over
stdio: the jail's cost is on both sides, so the ratio is the stub's and the broker's. The server
is a real MCP server written with the `mcp` SDK; the client is raw JSON-RPC (newline-delimited,
over pipes, after the initialize handshake), the same code on both sides. Both connections are
open at once and their calls alternate, paced under the broker's rate limit.

And `tmuxjail start shell --mode isolated --detach` with one server attached (`--mcp t`, the
config's [mcp.t]) against none, both with their policies from the warm start's cache,
interleaved run by run; and each with its cache entry removed first (info)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .timing import time_until_ready
from .tools import REPO
from .world import READY, World

if TYPE_CHECKING:
    from .parts import Bench

SERVER = textwrap.dedent("""
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("bench")


    @app.tool()
    def echo(text: str) -> str:
        return text


    app.run()
""")
CALLS = 50  # timed tools/call per connection and run (plus WARM untimed): all within the broker's burst
WARM = 3  # untimed calls after the handshake (and one tools/list): the server's first calls import and compile
TIMEOUT = 30.0  # for any one answer
STUB_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")  # where a start finds the stub's (tmuxjail.plan)
# The broker as the launcher runs it (pane/mcp.py forks it and calls serve_forever), here a process of
# its own on a listener this bench made: its threads and the GIL are not the client's.
BROKER = ("import json, sys; from tmuxjail.net import broker; "
          "broker.serve_forever(int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3])")
SHELL_READY = f": > {READY}; exec sleep 3600"  # the shell's command (start shell ... -- -c CMD)


class Client:
    """A raw JSON-RPC client on a child's stdin and stdout, one JSON object per line, as an MCP
    client speaks to a stdio server; the same code for both sides."""

    def __init__(self, what: str, argv: list[str], env: dict[str, str], err: Path):
        self.what, self.err, self.id, self.buf = what, err, 0, b""
        self.started = time.perf_counter()
        with open(err, "ab") as f:
            self.proc = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=f, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.w, self.r = self.proc.stdin.fileno(), self.proc.stdout.fileno()

    def _fail(self, why: str) -> RuntimeError:
        tail = self.err.read_text(errors="replace").strip()[-400:] if self.err.exists() else ""
        return RuntimeError(f"{self.what}: {why}" + (f"; stderr: {tail}" if tail else ""))

    def send(self, msg: dict[str, Any]) -> None:
        os.write(self.w, json.dumps(msg).encode() + b"\n")  # a few hundred bytes: one write

    def answer(self, id: int) -> dict[str, Any]:
        deadline = time.perf_counter() + TIMEOUT
        while True:
            while b"\n" not in self.buf:
                if not select.select([self.r], [], [], max(0.0, deadline - time.perf_counter()))[0]:
                    raise self._fail(f"no answer to request {id} in {TIMEOUT:g} s")
                got = os.read(self.r, 65536)
                if not got:
                    raise self._fail(f"closed its output before answering request {id}")
                self.buf += got
            line, self.buf = self.buf.split(b"\n", 1)
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("id") == id and "method" not in msg:
                return msg

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, **({"params": params} if params else {})})
        got = self.answer(self.id)
        if "result" not in got:
            raise self._fail(f"{method} answered {got.get('error')}")
        result: dict[str, Any] = got["result"]
        return result

    def initialize(self) -> float:
        """The handshake; seconds from the spawn until initialize was answered."""
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "tjbench", "version": "0"}})
        ready = time.perf_counter() - self.started
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = [t.get("name") for t in self.request("tools/list").get("tools", [])]
        if "echo" not in tools:
            raise self._fail(f"tools/list has no echo: {tools}")
        return ready

    def call(self) -> float:
        """One tools/call of echo, timed from the request's write to its answer parsed."""
        t0 = time.perf_counter()
        result = self.request("tools/call", {"name": "echo", "arguments": {"text": "ping"}})
        dt = time.perf_counter() - t0
        if result.get("isError") or result.get("content", [{}])[0].get("text") != "ping":
            raise self._fail(f"tools/call echo answered {result}")
        return dt

    def close(self) -> None:
        """stdin's EOF: the stub half-closes, the broker or the server ends it."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _sdk(python: str) -> tuple[str, str] | None:
    """(sys.prefix, the site-packages its `mcp` is in) of python, or None without the SDK."""
    p = subprocess.run([python, "-I", "-c", "import os, sys, mcp; print(sys.prefix); "
                        "print(os.path.dirname(os.path.dirname(mcp.__file__)))"],
                       capture_output=True, text=True, check=False)
    lines = p.stdout.split()
    return (lines[0], lines[1]) if p.returncode == 0 and len(lines) == 2 else None


def _server(w: World, python: str) -> Path:
    """The server script, outside any workspace, run by the venv's python (its shebang)."""
    script = w.root / "srv" / "server.py"
    script.parent.mkdir()
    script.write_text(f"#!{python}\n" + SERVER)
    script.chmod(0o755)
    return script


class Broker:
    """A session's broker: a listener, and `serve_forever` on it in a process of its own (its own
    session, so that it and any server it runs end together)."""

    def __init__(self, python: str, table: dict[str, Any], directory: Path):
        directory.mkdir(parents=True)
        self.sock, self.calls = directory / "broker.sock", directory / "calls.jsonl"
        listener = socket.socket(socket.AF_UNIX)
        try:
            listener.bind(str(self.sock))
            listener.listen(16)
            with open(directory / "broker.err", "ab") as err:
                self.proc = subprocess.Popen(
                    [python, "-I", "-c", BROKER, str(listener.fileno()), json.dumps(table), str(self.calls)],
                    pass_fds=(listener.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    start_new_session=True)
        finally:
            listener.close()
        self.serving()

    def serving(self) -> None:
        """Until it answers: a header naming no server is refused before any server starts (the
        launcher forks the broker long before a CLI connects: its start-up is no call's)."""
        got = b""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(TIMEOUT)
            s.connect(str(self.sock))
            s.sendall(b'{"server": "-"}\n')
            while b"\n" not in got and (chunk := s.recv(65536)):
                got += chunk
        if self.proc.poll() is not None or b"no MCP server" not in got:
            raise RuntimeError(f"the broker did not answer (exit {self.proc.poll()}): {got[:200]!r}")

    def stop(self) -> None:
        """Once the servers it ran are gone (each ends after its client), the broker too."""
        deadline = time.perf_counter() + 10
        while _children(self.proc.pid) and time.perf_counter() < deadline:
            time.sleep(0.01)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def round_trip(b: Bench, w: World, script: Path, read: list[str]) -> None:
    """tools/call through stub and broker against the same jailed server directly over stdio."""
    from .parts import log

    sys.path.insert(0, str(REPO))
    from tmuxjail.net import broker, stub
    from tmuxjail.pane.mcp import STRICT_PATH
    from tmuxjail.sandbox import mcpjail

    n, res, tools = b.n, b.results, b.tools
    stub_py = next((p for p in STUB_PYTHONS if os.access(p, os.X_OK)), tools.tj_py)
    home = str(w.home)  # the server's (an empty tmpfs in its jail), as the launcher gives it the jail's
    argv = mcpjail.argv(tools.bwrap, str(script), [], read, "none", home)
    env = {"PATH": STRICT_PATH, "HOME": home, "LANG": "C.UTF-8"}  # what pane/mcp.servers gives, no secret
    table = {"t": {"argv": argv, "env": env, "tools": ["echo"], "cwd": "/"}}
    gap = 1 / (broker.RATE * 0.8)  # between two calls through the broker: never rate limited
    if 3 + WARM + CALLS >= broker.BURST:
        raise RuntimeError(f"{CALLS} calls per connection would spend the broker's burst ({broker.BURST:g})")
    per_call: dict[str, list[float | None]] = {"broker": [], "direct": []}
    connect: dict[str, list[float | None]] = {"broker": [], "direct": []}
    allowed = 0
    for i in range(n + 1):  # run 0 is a warm-up, not counted
        # A fresh broker each run, as each session has its own (it starts a few servers at once,
        # then one per few seconds: a run a second would be refused).
        brk = Broker(tools.tj_py, table, w.root / "brokers" / f"run{i}")
        sides = {
            "broker": ("client -> stub -> broker -> server", [*stub.argv(stub_py, "t"), str(brk.sock)],
                       {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, w.root / "stub.err"),
            "direct": ("client -> server over stdio", argv, env, w.root / "direct.err"),
        }
        order = ("broker", "direct") if i % 2 else ("direct", "broker")
        clients: dict[str, Client] = {}
        try:
            for side in order:
                clients[side] = Client(*sides[side])
                ready = clients[side].initialize()
                if i:
                    connect[side].append(ready)
            for side in order:
                for _ in range(WARM):
                    clients[side].call()
            last = dict.fromkeys(order, 0.0)
            for _ in range(CALLS):
                for side in order:
                    time.sleep(max(0.0, last[side] + gap - time.perf_counter()))
                    last[side] = time.perf_counter()
                    dt = clients[side].call()
                    if i:
                        per_call[side].append(dt)
        finally:
            for c in clients.values():
                c.close()
            brk.stop()
        allowed += sum(1 for e in broker.read_log(str(brk.calls)) if e.get("decision") == "allowed"
                       and e.get("tool") == "echo")
    made = (n + 1) * (WARM + CALLS)
    log(f"mcp: the brokers logged {allowed} allowed calls of echo ({made} made through them)")
    note = (f"{n} runs × {CALLS} calls of a trivial tool (echo) per side, both connections open at once, calls "
            f"alternating, one per {gap * 1000:.1f} ms per connection (broker.RATE {broker.RATE:g}/s, burst "
            f"{broker.BURST:g}); each run a fresh broker and connection, after the initialize handshake, a "
            f"tools/list and {WARM} untimed calls; the server ({script.name}, mcp SDK) in its bwrap jail "
            f"(mcpjail.argv, network none) on both sides; the broker a process of its own (serve_forever, as the "
            f"launcher forks it) with an allowlist (echo) and its call log; the stub run by {stub_py}; medians per "
            f"call; the brokers' call logs hold {allowed} of the {made} calls made through them")
    row = res.add("mcp", "tools/call round trip through stub and broker (server in its bwrap jail)", "s",
                  per_call["broker"], note=note)
    row.compare("the same server in the same jail, directly over stdio", per_call["direct"], target=1.5)
    row.added_target(0.005, "added by stub and broker (median − median)")
    res.add("mcp", "connect: spawn → initialize answered, through stub and broker (info)", "s", connect["broker"],
            note="the stub's interpreter, the broker's spawn of bwrap and the server, the server's start-up").compare(
        "same, the server directly over stdio", connect["direct"])


def _entries(policies: Path) -> set[str]:
    return {p.name for p in policies.glob("*.json")}


def start_attached(b: Bench, w: World, script: Path, read: list[str]) -> None:
    """`tmuxjail start shell --mode isolated --detach --mcp t` against the same start without
    --mcp, both warm (each policy from the cache of resolved policies, tmuxjail.warm), and (info)
    each with its cache entry removed first (a full resolution: a first start, or one after a
    change)."""
    from .parts import _started

    n, res = b.n, b.results
    cfg = w.home / ".config" / "tmuxjail"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text(textwrap.dedent(f"""\
        [mcp.t]
        command = {json.dumps(str(script))}
        read = {json.dumps(read)}
        network = "none"
    """))
    ws = w.workspace("ws")
    policies = Path(w.env["XDG_STATE_HOME"]) / "tmuxjail" / "policies"  # the warm start's cache (tmuxjail.warm)
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    request = {"mcp": ("--mcp", "t"), "none": (), "mcp-cold": ("--mcp", "t"), "none-cold": ()}
    cached: dict[str, set[str]] = {"mcp": set(), "none": set()}  # the cache entry each request made
    count = 0

    def one(side: str) -> tuple[float | None, float]:
        nonlocal count
        count += 1
        if side.endswith("-cold"):
            for name in cached[side[:-5]]:
                (policies / name).unlink(missing_ok=True)
        name = f"{side}{count}"
        t = _started(time_until_ready(w.tj("start", "shell", "--mode", "isolated", "--workspace", str(ws), "--name",
                                           name, "--detach", *request[side], "--", "-c", SHELL_READY), w.env,
                                      ws / READY), f"tmuxjail start shell ({side})")
        w.kill_session(name)
        return t.ready, t.exited

    for side in request:  # warm-up, not counted: the caches, the page cache; which entry is whose
        before = _entries(policies)
        one(side)
        if side in cached:
            cached[side] = _entries(policies) - before
    ready: dict[str, list[float | None]] = {k: [] for k in request}
    exited: dict[str, list[float | None]] = {k: [] for k in request}
    sides = list(request)
    for i in range(n):
        for side in sides[i % 4:] + sides[:i % 4]:  # each side goes first in turn
            r, e = one(side)
            ready[side].append(r)
            exited[side].append(e)
    w.tmux("kill-server", check=False)
    net = w.dry_run(ws, provider="shell")["policy"].get("network", "?")
    how = "; ".join(f"{'--mcp t' if k == 'mcp' else 'without --mcp'}: " +
                    ("its policy cached" if v else "its policy not cached (every start resolves in full)")
                    for k, v in cached.items())
    row = res.add("mcp", "tmuxjail start shell --mode isolated --detach --mcp t → ready (warm)", "s", ready["mcp"],
                  note=f"invocation until the jailed shell wrote its ready file (start shell … -- -c {SHELL_READY!r}); "
                       f"[mcp.t] is the server script, read = its venv and directory, network none; the jail's network "
                       f"{net}; the launcher forks the broker (the server starts on a client's first connection, "
                       f"not here); {how}; the four sides interleaved, each first in turn")
    row.compare("same without --mcp (warm)", ready["none"], target=1.15)
    row.compare("same without --mcp, its cache entry removed first (full resolution; info)", ready["none-cold"])
    cold = res.add("mcp", "tmuxjail start shell --mode isolated --detach --mcp t → ready, its cache entry removed "
                   "first (full resolution; info)", "s", ready["mcp-cold"])
    cold.compare("same without --mcp, its cache entry removed first", ready["none-cold"])
    cold.compare("--mcp t, warm", ready["mcp"])
    info = res.add("mcp", "tmuxjail start shell --mode isolated --detach --mcp t → command exited (warm; info)", "s",
                   exited["mcp"])
    info.compare("same without --mcp (warm)", exited["none"])
    info.compare("--mcp t, its cache entry removed first", exited["mcp-cold"])
    info.compare("without --mcp, its cache entry removed first", exited["none-cold"])


def mcp_broker(b: Bench) -> None:
    """Issue 31: a tools/call through stub and broker against the server directly (<= 1.5x and
    under 5 ms added), and a start with one server attached against none (<= 1.15x)."""
    res, w = b.results, b.world("mcp")
    sdk = _sdk(b.tools.tj_py)
    if sdk is None:
        why = f"skipped: the mcp SDK is not installed for {b.tools.tj_py}"
        res.add("mcp", "tools/call round trip through stub and broker (server in its bwrap jail)", "s", [], note=why)
        res.add("mcp", "tmuxjail start shell --mode isolated --detach --mcp t → ready (warm)", "s", [], note=why)
        return
    script = _server(w, b.tools.tj_py)
    read = sorted({*sdk, str(script.parent)})  # the venv, where its mcp is, the server's directory
    round_trip(b, w, script, read)
    start_attached(b, w, script, read)
