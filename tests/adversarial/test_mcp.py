"""The MCP broker (issue 31), attacked from inside real jailed panes, isolated and verified (the
root suite runs these as root, the newcomer tier as an ordinary user).

The operator's server is a real MCP server written with the `mcp` SDK, declared in the config as
[mcp.t] (an allowlist) and [mcp.u] (none); it runs outside the agent's jail, in a jail of its
own with no network. Inside the agent's jail, the SDK's own client (copied into the workspace,
run by the host's /usr python) starts the stub the config names, as a CLI would."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from conftest import wait_until
from mcpkit import SERVER
from test_escapes import Jail

pytestmark = pytest.mark.adversarial
STRICT = ("isolated", "verified")
def jail_python() -> str:
    """An interpreter the jail has (under /usr) that runs the SDK copied from this venv: this one,
    or the system's of the same version (CI's venv runs pyenv's, in root's hidden home)."""
    real = os.path.realpath(sys.executable)
    same = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    return real if real.startswith("/usr/") else same if os.access(same, os.X_OK) else ""


PYTHON = jail_python()
ARG_MARK = "argument-marker-5e1b"



# Run in the jail: the SDK's client starts the stub named by tmuxjail's config for server NAME.
CLIENT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, ".pylib")
    import anyio
    from mcp import Client, MCPError, StdioServerParameters

    name = sys.argv[1]
    entry = json.load(open("/run/tmuxjail/mcp/config.json"))["mcpServers"][name]

    async def main():
        out = {}
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        async with Client(params) as c:
            out["tools"] = [t.name for t in (await c.list_tools()).tools]
            out["whoami"] = (await c.call_tool("whoami", {})).content[0].text
            out["echo"] = (await c.call_tool("echo", {"text": sys.argv[2]})).content[0].text
            try:
                r = await c.call_tool("secret_tool", {})
                out["hidden"] = r.content[0].text
            except MCPError as e:
                out["hidden"] = [e.code, e.message]
        print(json.dumps(out))

    anyio.run(main)
""")

# Raw JSON-RPC on the broker's socket in the jail: what no SDK sends.
RAW = textwrap.dedent("""
    import json, socket, sys
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sys.argv[1] if len(sys.argv) > 1 else "/run/tmuxjail/mcp/broker.sock")
    buf = b""
    def send(b):
        s.sendall(b + b"\\n")
    def line():
        global buf
        while b"\\n" not in buf:
            got = s.recv(65536)
            if not got:
                return None
            buf += got
        l, buf = buf.split(b"\\n", 1)
        return json.loads(l)
    def answer(i):
        while True:
            m = line()
            if m is None or (m.get("id") == i and "method" not in m):
                return m
    out = {}
    send(json.dumps({"server": sys.argv[2] if len(sys.argv) > 2 else "t"}).encode())
    send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
         "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode())
    first = answer(0)
    out["init"] = None if first is None else ("result" in first, first.get("error"))
    if first is None or "result" not in first:
        print(json.dumps(out)); sys.exit()
    send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    send(b"{not json"); out["garbage"] = line()["error"]["code"]
    send(b"[1, 2]"); out["array"] = line()["error"]["code"]
    send(b"x" * (3 << 20)); out["huge"] = line()["error"]["code"]
    import threading
    flood = b"".join(json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "ping"}).encode() + b"\\n" for i in range(3000))
    threading.Thread(target=s.sendall, args=(flood,), daemon=True).start()
    codes, seen = {}, set()
    while len(seen) < 3000:  # in any order: the broker's refusals overtake the server's answers
        m = line()
        if m is None:
            break
        if isinstance(m.get("id"), int) and 100 <= m["id"] < 3100 and m["id"] not in seen:
            seen.add(m["id"])
            k = "ok" if "result" in m else str(m["error"]["code"])
            codes[k] = codes.get(k, 0) + 1
    out["flood"] = codes
    import time
    time.sleep(1)  # the broker's bucket refills (a flood empties it for every connection)
    send(json.dumps({"jsonrpc": "2.0", "id": 5000, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "still here"}}}).encode())
    out["after"] = answer(5000)["result"]["content"][0]["text"]
    print(json.dumps(out))
""")


def sdk_closure() -> list[metadata.Distribution]:
    """The `mcp` distribution and everything it needs (no extras)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = ["mcp"]
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in dist.requires or () if "extra ==" not in r]
    return list(seen.values())


def copy_sdk(dest: Path) -> None:
    for dist in sdk_closure():
        for f in dist.files or ():
            if str(f).startswith("..") or str(f).endswith(".pyc"):
                continue
            src = Path(str(dist.locate_file(f)))
            if src.is_file():
                (dest / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest / f)


@pytest.fixture
def mcp_world(jail_env):
    pytest.importorskip("mcp")
    if not PYTHON:
        pytest.skip(f"the jail runs the SDK with a /usr python of this version; there is none ({sys.executable})")
    env = jail_env
    srv = env.outside / "srv"
    srv.mkdir()
    server = srv / "server.py"
    server.write_text(f"#!{os.path.abspath(sys.executable)}\n" + SERVER)
    server.chmod(0o755)
    env.secret = "mcp-secret-" + secrets.token_hex(8)
    env.vars["SECRET"] = env.secret
    env.server = server
    env.config_dir.mkdir(parents=True, exist_ok=True)
    write_config(env)
    copy_sdk(env.ws / ".pylib")
    (env.ws / "client.py").write_text(CLIENT)
    (env.ws / "raw.py").write_text(RAW)
    env.run("approve", "shell", "--yes", "--mcp", "t", "--mcp", "u", check=True)
    return env


def write_config(env, tools: str = '["echo", "whoami"]', jail: bool = False) -> None:
    import mcp

    # The venv, and where its `mcp` is (a venv whose .pth names another's site-packages: mutate.py).
    site = os.path.dirname(os.path.dirname(mcp.__file__))
    read = json.dumps(sorted({sys.prefix, site, sys.base_prefix, str(env.server.parent)}))
    (env.config_dir / "config.toml").write_text(textwrap.dedent(f"""
        [mcp.t]
        command = "{env.server}"
        env = ["SECRET"]
        read = {read}
        network = "none"
        tools = {tools}

        [mcp.u]
        command = "{env.server}"
        read = {read}
        network = "none"
    """) + (f'\n[mcp.jl]\ncommand = "{env.server}"\nrun = "jail"\nread = {read}\n' if jail else ""))


def run_in(jail: Jail, cmd: str, timeout: float = 60) -> dict:
    out = jail.sh(f"{PYTHON} -I {cmd} 2>.err; cat .err >&2", timeout=timeout)
    assert out.strip(), f"nothing printed by {cmd}: {(jail.ws / '.err').read_text()[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", STRICT)
def test_allowed_tool_works_hidden_tool_is_absent_and_refused_and_the_secret_stays_out(mcp_world, mode):
    env = mcp_world
    jail = Jail(env, mode, extra=("--mcp", "t"))
    got = run_in(jail, f"client.py t {ARG_MARK}")
    assert got["tools"] == ["echo", "whoami"]
    assert got["whoami"] == hashlib.sha256(env.secret.encode()).hexdigest()  # the server had it
    assert got["echo"] == ARG_MARK
    assert got["hidden"][0] == -32602 and "not allowed" in got["hidden"][1]
    # Nowhere in the jail: no process's environment or command line, no file it can read.
    # (The secret is joined in the jail, into a file the search skips: no script or command line
    # of the search holds it whole.)
    head, tail = env.secret[:12], env.secret[12:]
    leaked = jail.sh(f"""
        printf '%s%s\\n' '{head}' '{tail}' > .pat
        for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do grep -l -a -F -f .pat "$f" 2>/dev/null; done
        grep -r -l -a -F -f .pat --exclude=.pat /run /tmp "$HOME" /etc 2>/dev/null
        env | grep -F -f .pat
        echo END
    """)
    assert leaked.strip() == "END", leaked
    rep = env.json("show", "j", "--mcp")
    assert [s["name"] for s in rep["servers"]] == ["t"] and rep["servers"][0]["tools"] == ["echo", "whoami"]
    assert {(c["tool"], c["decision"]): c["count"] for c in rep["counts"]} == {
        ("whoami", "allowed"): 1, ("echo", "allowed"): 1, ("secret_tool", "refused"): 1}
    log = next(env.state_dir.glob("mcp/*/calls.jsonl")).read_text()
    assert ARG_MARK not in log and env.secret not in log
    row = next(r for r in env.json("list") if r["name"] == "j")
    assert (row["mcp_calls"], row["mcp_refused"]) == (3, 1)
    assert "!mcp-refused(1)" in env.run("list", check=True).stdout


@pytest.mark.parametrize("mode", STRICT)
def test_bad_json_rpc_gets_errors_and_the_broker_and_server_serve_on(mcp_world, mode):
    env = mcp_world
    jail = Jail(env, mode, extra=("--mcp", "t"))
    got = run_in(jail, "raw.py", timeout=120)
    assert got["init"] == [True, None]
    assert (got["garbage"], got["array"], got["huge"]) == (-32700, -32600, -32600)
    assert set(got["flood"]) <= {"ok", "-32000"} and got["flood"].get("-32000", 0) > 0, got["flood"]
    assert got["after"] == "still here"


@pytest.mark.parametrize("mode", STRICT)
def test_no_other_broker_and_no_server_it_was_not_given(mcp_world, mode):
    env = mcp_world
    other = Jail(env, mode, name="k", extra=("--mcp", "u"))
    jail = Jail(env, mode, extra=("--mcp", "t"))
    # Its own broker has no server u (the other session's) ...
    got = run_in(jail, "raw.py /run/tmuxjail/mcp/broker.sock u")
    assert got["init"] is None or got["init"][0] is False
    # ... and the other session's broker socket is not there, by its host path or any other.
    k_sockets = [str(p) for p in env.state_dir.glob("mcp/*/broker-*.sock")]
    assert len(k_sockets) == 2
    out = jail.sh("\n".join(f"{PYTHON} -I -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1]); "
                            f"print(\"REACHED\")' {p} 2>/dev/null" for p in k_sockets)
                  + "\nls /run/tmuxjail/mcp\nfind /run /tmp /var/tmp /dev/shm \"$HOME\" -type s 2>/dev/null\n")
    assert "REACHED" not in out
    assert sorted(out.split()) == ["broker.sock", "config.json"], out  # (a bound socket is no -type s)
    assert other.info["name"] == "k"


def broker_pids(env, session_id: str) -> list[int]:
    """The broker of a session: a fork of its launcher, the only process left that keeps the
    launcher's command line (the launcher itself became bwrap)."""
    spec_word = session_id.encode()
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if b"tmuxjail.pane.launch" in cmd and spec_word in cmd:
            out.append(int(p.name))
    return out


def server_pids(env) -> list[int]:
    word = str(env.server).encode()
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and word in (p / "cmdline").read_bytes():
                out.append(int(p.name))
        except OSError:
            continue
    return out


@pytest.mark.parametrize("mode", STRICT)
def test_the_broker_and_its_servers_end_with_the_jail(mcp_world, mode):
    env = mcp_world
    jail = Jail(env, mode, extra=("--mcp", "t"))
    sid = jail.info["id"]
    wait_until(lambda: broker_pids(env, sid), 10, "the broker")
    # A client that stays connected: its server runs until the jail ends.
    (jail.ws / "hold.py").write_text(
        "import subprocess, json, time\n"
        "e = json.load(open('/run/tmuxjail/mcp/config.json'))['mcpServers']['t']\n"
        "p = subprocess.Popen([e['command'], *e['args']], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "time.sleep(600)\n")
    env.tmux("send-keys", "-t", "=j:", f"{PYTHON} -I hold.py &", "Enter")
    wait_until(lambda: server_pids(env), 15, "the server behind a held connection")
    env.run("stop", "j", check=True)
    try:
        wait_until(lambda: not broker_pids(env, sid) and not server_pids(env), 15, "the broker and server gone")
    finally:  # what a broken guard left is not left to the next test
        for pid in broker_pids(env, sid) + server_pids(env):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def test_a_changed_server_or_allowlist_refuses_resume_with_reason_mcp(mcp_world):
    env = mcp_world
    Jail(env, "isolated", extra=("--mcp", "t"))
    env.run("stop", "j", check=True)
    write_config(env, tools='["echo"]')
    proc = env.run("resume", "j", "--json")
    assert proc.returncode != 0 and "mcp" in json.loads(proc.stdout)["reasons"], proc.stdout
    write_config(env)
    env.server.write_text(env.server.read_text() + "\n# changed\n")
    proc = env.run("resume", "j", "--json")
    assert proc.returncode != 0 and "mcp" in json.loads(proc.stdout)["reasons"], proc.stdout
    assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0] == 1


def test_refusals_are_one_line_each(mcp_world):
    env = mcp_world

    def refused(*args, env_extra=None) -> str:
        proc = env.run("start", "shell", "--detach", *args, env_extra=env_extra)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr.splitlines()[0]

    assert "needs isolated or verified" in refused("--mode", "compatibility", "--mcp", "t")
    assert "no MCP server 'nope'" in refused("--mode", "isolated", "--mcp", "nope")
    secret = env.vars.pop("SECRET")
    assert "SECRET is not set" in refused("--mode", "isolated", "--mcp", "t")
    env.vars["SECRET"] = secret
    # A server the agent could rewrite (in the workspace) is never run outside the jail.
    inside = env.ws / "srv.py"
    shutil.copy(env.server, inside)
    (env.config_dir / "config.toml").write_text(f'[mcp.w]\ncommand = "{inside}"\n')
    assert "which the jail can write" in refused("--mode", "isolated", "--mcp", "w")
    plain = env.outside / "not-executable"
    plain.write_text("#!/bin/sh\n")
    for body, words in (('command = "srv.py"', "absolute path"), (f'command = "{plain}"', "not an executable"),
                        (f'command = "{env.server}"\nrun = "jail"\nenv = ["SECRET"]', "could read the server's"),
                        (f'command = "{env.server}"\nrun = "jail"\nread = ["{env.home}"]', "holds your home"),
                        (f'command = "{env.server}"\ncolour = 1', "unknown key 'colour'")):
        (env.config_dir / "config.toml").write_text(f"[mcp.w]\n{body}\n")
        assert words in refused("--mode", "isolated", "--mcp", "w")
    assert env.tmux("ls", check=False) == ""


# Run in the jail: start the server the config names for `jl` as a CLI would (its command, its
# read paths and its interpreter are all there, read-only).
IN_JAIL = textwrap.dedent("""
    import json, subprocess
    e = json.load(open("/run/tmuxjail/mcp/config.json"))["mcpServers"]["jl"]
    p = subprocess.Popen([e["command"], *e["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "j", "version": "0"}}}).encode() + b"\\n")
    p.stdin.flush()
    first = json.loads(p.stdout.readline())
    p.kill()
    print(json.dumps({"command": e["command"], "init": "result" in first}))
""")


@pytest.mark.parametrize("mode", STRICT)
def test_a_server_run_in_the_jail_is_the_agents_child_with_no_secret_and_never_the_brokers(mcp_world, mode):
    """run = "jail": the CLI's config names the server itself, bound read-only into the jail with
    its read paths; it runs among the jail's processes with the jail's environment (no secret of
    the host's), every tool listed (no allowlist can hold there); the broker, there for the
    session's host server t, refuses it by name; the agent cannot rewrite it."""
    env = mcp_world
    write_config(env, jail=True)
    env.run("approve", "shell", "--yes", "--mcp", "t", "--mcp", "jl", check=True)
    (env.ws / "in_jail.py").write_text(IN_JAIL)
    jail = Jail(env, mode, extra=("--mcp", "jl", "--mcp", "t"))
    got = run_in(jail, "in_jail.py")
    assert got == {"command": str(env.server), "init": True}, got
    direct = run_in(jail, f"client.py jl {ARG_MARK}")
    assert sorted(direct["tools"]) == ["add", "echo", "secret_tool", "whoami"] and direct["echo"] == ARG_MARK
    assert direct["whoami"] == hashlib.sha256(b"").hexdigest()  # SECRET is tmuxjail's, never the jail's
    refused = run_in(jail, "raw.py /run/tmuxjail/mcp/broker.sock jl")["init"]
    assert refused is None or refused[0] is False, refused
    assert run_in(jail, "raw.py /run/tmuxjail/mcp/broker.sock t")["init"] == [True, None]
    out = jail.sh(f"set +e\n(echo x >> {env.server}) 2>/dev/null && echo W\n"
                  f"touch {env.server.parent}/planted 2>/dev/null && echo N\necho end")
    assert out.split() == ["end"], out
    rep = env.json("show", "j", "--mcp")
    assert {s["name"]: s["run"] for s in rep["servers"]} == {"jl": "jail", "t": "host"}
    assert "jl" not in {c["server"] for c in rep["counts"]}
    assert "in the agent's jail" in env.run("show", "j", "--mcp", check=True).stdout


@pytest.mark.parametrize("run", ["jail", "host"])
@pytest.mark.parametrize("read", ["/proc", "/sys/kernel", "/dev/shm/x", "/run/user", "/tmp", "/"])
def test_a_read_path_a_jail_mounts_its_own_of_or_holding_sockets_is_refused(mcp_world, run, read):
    """Red team round seven: read = ["/proc"] with run = "jail" put the host's /proc over the
    jail's own: the agent walked /proc/PID/root into the host's filesystem and wrote there. A read
    bind of /run or /dev/shm let it connect() to the host's sockets. Each is refused in one line,
    for a server in its own jail too."""
    env = mcp_world
    (env.config_dir / "config.toml").write_text(
        f'[mcp.x]\ncommand = "{env.server}"\nread = ["{read}"]\n' + ('run = "jail"\n' if run == "jail" else ""))
    proc = env.run("start", "shell", "--mode", "isolated", "--mcp", "x", "--detach")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "mounts its own of or where sockets live" in proc.stderr or "holds your home" in proc.stderr, proc.stderr
    assert env.tmux("ls", check=False) == ""


def test_verified_mode_needs_the_server_approved_by_its_digest(mcp_world):
    env = mcp_world
    env.run("revoke", "shell", check=True)
    env.run("approve", "shell", "--yes", check=True)  # the profile, without the server
    proc = env.run("start", "shell", "--mode", "verified", "--mcp", "t", "--detach", "--json")
    err = json.loads(proc.stdout)
    assert proc.returncode != 0 and "MCP server t" in err["error"] and "--mcp t" in err["hint"], proc.stdout
    env.run("approve", "shell", "--yes", "--mcp", "t", check=True)
    env.server.write_text(env.server.read_text() + "\n# a new build\n")  # its digest changes
    proc = env.run("start", "shell", "--mode", "verified", "--mcp", "t", "--detach", "--json")
    assert proc.returncode != 0 and "MCP server t" in json.loads(proc.stdout)["error"], proc.stdout
    env.run("approve", "shell", "--yes", "--mcp", "t", check=True)
    Jail(env, "verified", extra=("--mcp", "t"))


def test_a_tool_name_with_terminal_escapes_is_shown_harmless(mcp_world):
    env = mcp_world
    jail = Jail(env, "isolated", extra=("--mcp", "t"))
    (jail.ws / "esc.py").write_text(RAW.split("out = {}")[0] + textwrap.dedent("""
        send(json.dumps({"server": "t"}).encode())
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "x\\u001b]0;pwned\\u0007\\u001b[2J", "arguments": {}}}).encode())
        print(json.dumps(answer(1)))
    """))
    got = run_in(jail, "esc.py")
    assert got["error"]["code"] == -32602
    text = env.run("show", "j", "--mcp", check=True).stdout
    assert "\x1b" not in text and "\x07" not in text and "refused" in text
    assert "'x\\x1b]0;pwned\\x07\\x1b[2J'" in text  # quoted and escaped: never read as a decision


def test_a_secret_a_capability_would_pass_into_the_jail_is_refused(mcp_world, tmp_path):
    """A server's secret is for the server only: one the session's capabilities would also pass
    into the jail (GITHUB_TOKEN with github-cli, say) refuses the start."""
    env = mcp_world
    profile = env.json("profiles", "show", "shell")
    named = next(((cid, c["env"][0]) for cid, c in profile["capabilities"].items() if c.get("env")), None)
    if named is None:
        pytest.skip("the shell profile passes no variable through any capability")
    cid, var = named
    (env.config_dir / "config.toml").write_text(
        f'[mcp.w]\ncommand = "{env.server}"\nenv = ["{var}"]\nread = {json.dumps([sys.prefix])}\n')
    proc = env.run("start", "shell", "--mode", "verified", "--capability", cid, "--mcp", "w", "--detach",
                   env_extra={var: "v"})
    assert proc.returncode == 2 and "would enter the jail too" in proc.stderr, proc.stderr
