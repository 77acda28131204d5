"""Issue 31 with what certify/pins.json pins (where scripts/install-certify-clis.sh installed it):
the pinned Codex, started in an isolated jail with --mcp, offline, lists the operator's server as
the stub tmuxjail gave it (`codex mcp list`); the pinned Claude Code, in its own isolated jail,
offline, lists the bridged server as connected (`claude mcp list` runs MCP's handshake through the
stub and the broker to the real server); and the npm `server-everything` runs behind the broker,
reached from inside a jail."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import have_jail, wait_until
from test_certify import installed_bin, offline


def test_codex_lists_the_bridged_server_from_inside_its_jail(env):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    bindir = installed_bin("codex")  # skips when the pin is not installed
    env.vars["PATH"] = f"{bindir}:{env.vars['PATH']}"
    subprocess.run([*offline(bindir), "tmux", *env.tmux_flags, "new-session", "-d", "-s", "home"],
                   env=env.environ(), check=True, timeout=30)
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('[mcp.t]\ncommand = "/bin/cat"\nnetwork = "none"\ntools = ["echo"]\n')
    row = env.json("start", "codex", "--mode", "isolated", "--mcp", "t", "--name", "c", "--detach",
                   "--non-interactive", "--", "mcp", "list", timeout=300)
    pane = row["tmux_pane"]

    def listed() -> str:
        text = env.tmux("capture-pane", "-p", "-J", "-t", pane)
        return text if "enabled" in text else ""

    screen = wait_until(listed, 120, "codex mcp list in the jail")
    line = next(x for x in screen.splitlines() if x.split()[:1] == ["t"])
    assert "/usr/bin/python3" in line and "enabled" in screen, screen
    assert env.json("show", "c", "--mcp")["servers"][0]["command"] == os.path.realpath("/bin/cat")


# Inside the jail, with the host's /usr python: the stub named by tmuxjail's config, spoken to as a
# CLI speaks to an MCP stdio server.
EVERYTHING_CLIENT = r"""
import json, subprocess, sys
e = json.load(open("/run/tmuxjail/mcp/config.json"))["mcpServers"]["everything"]
p = subprocess.Popen([e["command"], *e["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def call(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i and "method" not in m:
            return m
out = {}
call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "j", "version": "0"}})
p.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'); p.stdin.flush()
out["tools"] = [t["name"] for t in call(2, "tools/list", {})["result"]["tools"]]
out["echo"] = call(3, "tools/call", {"name": "echo", "arguments": {"message": "hi"}})["result"]["content"][0]["text"]
env_tool = call(4, "tools/call", {"name": "get-env", "arguments": {}})
out["get-env"] = env_tool.get("error", {}).get("code")
out["resources"] = call(5, "resources/list", {}).get("error", {}).get("code")
print(json.dumps(out))
"""


def _everything_config(env, run: str = "host") -> None:
    """[mcp.everything]: the pinned npm server, run by the host's node: outside the jail with a
    secret, or (run = "jail") in the agent's jail, which has neither secrets nor an allowlist."""
    pkg = installed_bin("server-everything").parent / "@modelcontextprotocol" / "server-everything"
    node = shutil.which("node")
    if node is None or not os.path.realpath(node).startswith("/usr/"):
        pytest.skip("node is not installed under /usr")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(
        f'[mcp.everything]\ncommand = "{os.path.realpath(node)}"\nargs = ["{pkg}/dist/index.js", "stdio"]\n'
        f'read = ["{pkg.parent.parent}"]\n'
        + ('env = ["SECRET"]\nnetwork = "none"\ntools = ["echo"]\n' if run == "host" else 'run = "jail"\n'))
    env.vars["SECRET"] = "everything-secret-" + secrets.token_hex(6)


def test_server_everything_behind_the_broker_from_inside_a_jail(env):
    """The npm `@modelcontextprotocol/server-everything` (pinned), outside the jail in its own, with
    a secret: the jail sees only the allowed `echo`; its `get-env` tool (which would print the
    server's environment, secret included) and its resources are refused, never run."""
    if (why := have_jail()) is not None:
        pytest.skip(why)
    _everything_config(env)
    row = env.json("start", "shell", "--mode", "isolated", "--mcp", "everything", "--name", "j", "--detach")
    ws = Path(row["workspace"])
    (ws / "client.py").write_text(EVERYTHING_CLIENT)
    env.tmux("send-keys", "-t", row["tmux_pane"], "/usr/bin/python3 -I client.py > .out 2>&1; mv .out .done", "Enter")
    wait_until((ws / ".done").exists, 60, "the client in the jail")
    out = (ws / ".done").read_text()
    got = json.loads(out.strip().splitlines()[-1])
    assert got == {"tools": ["echo"], "echo": "Echo: hi", "get-env": -32602, "resources": -32601}, out
    assert env.vars["SECRET"] not in out
    def counted() -> bool:  # (the broker saves its counters when the connection's end reaches it)
        counts = {(c["tool"], c["decision"]) for c in env.json("show", "j", "--mcp")["counts"]}
        return {("echo", "allowed"), ("get-env", "refused"), ("resources/list", "refused")} <= counts

    wait_until(counted, 10, "the calls counted")


# In Claude Code's own jail, through a shell of that jail: the entry tmuxjail's config holds (the
# stub) added where `claude mcp list` reads (it never reads --mcp-config), then listed; the list
# starts each server and speaks MCP's handshake to it, through the stub and the broker.
CLAUDE_LIST = r"""
entry=$(/usr/bin/python3 -I -c 'import json; print(json.dumps(json.load(open("/run/tmuxjail/mcp/config.json"))["mcpServers"]["everything"]))')
"$CLAUDE" mcp add-json -s user everything "$entry" >/dev/null
"$CLAUDE" mcp list
"""


@pytest.mark.parametrize("run", ["host", "jail"])
def test_claude_code_lists_the_bridged_server_as_connected_from_inside_its_jail(env, run):
    """run = "host": through the stub and the broker; run = "jail": the server itself, in the jail."""
    if (why := have_jail()) is not None:
        pytest.skip(why)
    bindir = installed_bin("claude-code")  # skips when the pin is not installed
    _everything_config(env, run)
    env.vars["PATH"] = f"{bindir}:{env.vars['PATH']}"
    subprocess.run([*offline(bindir), "tmux", *env.tmux_flags, "new-session", "-d", "-s", "home"],
                   env=env.environ(), check=True, timeout=30)
    row = env.json("start", "claude-code", "--mode", "isolated", "--mcp", "everything", "--name", "c", "--detach",
                   "--non-interactive", timeout=300)
    claude = env.json("show", "c")["policy"]["executable"]["path"]
    ws = Path(row["workspace"])
    (ws / "list.sh").write_text(f"CLAUDE={claude}\n{CLAUDE_LIST}")
    pane = env.json("shell", "c", "--detach")["shell_pane"]
    env.tmux("send-keys", "-t", pane, "sh list.sh > .out 2>&1; mv .out .done", "Enter")
    wait_until((ws / ".done").exists, 120, "claude mcp list in the jail")
    out = (ws / ".done").read_text()
    line = next((x for x in out.splitlines() if x.startswith("everything:")), out)
    assert ("/usr/bin/python3" if run == "host" else "dist/index.js stdio") in line and "Connected" in line, out
    assert env.vars["SECRET"] not in out



def test_claude_code_starts_the_server_it_is_given_through_mcp_config(env):
    """The session's own delivery: the pinned Claude, run with -p in its jail (offline it cannot
    answer, but it starts its MCP servers first), starts the broker's server from --mcp-config."""
    if (why := have_jail()) is not None:
        pytest.skip(why)
    bindir = installed_bin("claude-code")
    _everything_config(env)
    env.vars["PATH"] = f"{bindir}:{env.vars['PATH']}"
    subprocess.run([*offline(bindir), "tmux", *env.tmux_flags, "new-session", "-d", "-s", "home"],
                   env=env.environ(), check=True, timeout=30)
    env.json("start", "claude-code", "--mode", "isolated", "--mcp", "everything", "--name", "p", "--detach",
             "--non-interactive", "--", "-p", "hello", timeout=300)
    wait_until(lambda: "Starting" in env.run("show", "p", "--mcp").stdout, 60, "the server started for Claude's -p")
