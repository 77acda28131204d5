"""Issue 26.7: verified mode binds the CLI's real state directory back writable (~/.codex,
~/.claude, ~/.pi); the files in it that the host's plain, unjailed CLI later obeys as commands
(Codex's notify and mcp_servers, Claude's hooks and mcpServers) must not be writable from inside.
Each attack runs inside a real verified jail, as the CLI itself (a stand-in that attacks), and the
host's files are compared afterwards (docs/provider-state.md)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = pytest.mark.adversarial


def attack(env, provider: str, exe: str, script: str) -> list[str]:
    """Run `script` as the provider's CLI in a verified jail; its output lines."""
    body = textwrap.dedent(script)
    (env.bin / exe).write_text(
        "#!/bin/sh\nout=\"$PWD/.attack.out\"\n{\n" + body + "\necho end\n} > \"$out.tmp\" 2>/dev/null\n"
        "mv \"$out.tmp\" \"$out\"\nexec sleep 600\n")
    (env.bin / exe).chmod(0o755)
    env.run("approve", provider, "--yes", check=True)
    env.run("start", provider, "--mode", "verified", "--workspace", str(env.ws), "--name", "v", "--detach",
            check=True)
    out = env.ws / ".attack.out"
    assert wait_until(out.exists, 30), env.tmux("capture-pane", "-p", "-t", "=v:")
    return out.read_text().split()


def test_codex_notify_never_reaches_the_host_config(world):
    """Route 7 of the issue, as described: append `notify` to the host's ~/.codex/config.toml."""
    env = world
    codex = env.home / ".codex"
    codex.mkdir()
    config = codex / "config.toml"
    config.write_text('model = "o3"\n')
    got = attack(env, "codex", "codex", f"""
        printf 'notify = ["sh", "-c", "touch {env.sentinel}.pwned"]\\n' >> "$HOME/.codex/config.toml" && echo APPEND
        printf 'notify = ["sh"]\\n' > "$HOME/.codex/config.toml" && echo TRUNCATE
        rm -f "$HOME/.codex/config.toml" && echo RM
        mv "$HOME/.codex/config.toml" "$HOME/.codex/old.toml" && echo RENAME
        mv "$HOME/.codex" "$HOME/.codex-old" && echo RENAME_DIR
        printf '{{"hooks": {{}}}}' > "$HOME/.codex/hooks.json" && echo HOOKS
        echo 'BASH_ENV=/tmp/x' >> "$HOME/.codex/.env" && echo DOTENV
        touch "$HOME/.codex/rules/allow.rules" && echo RULES
        mkdir "$HOME/.codex/plugins/evil" && echo PLUGINS
        echo ok > "$HOME/.codex/history.jsonl" && echo STATE_WRITABLE
    """)
    assert got == ["STATE_WRITABLE", "end"], got
    assert config.read_text() == 'model = "o3"\n'
    assert (codex / "hooks.json").read_text() == "{}\n" and (codex / ".env").read_text() == ""
    assert not any((codex / "rules").iterdir()) and not any((codex / "plugins").iterdir())
    assert (codex / "history.jsonl").read_text() == "ok\n"  # the login and history stay shared
    assert not Path(f"{env.sentinel}.pwned").exists()


def test_codex_config_missing_at_start_cannot_be_created(world):
    """No config.toml yet: the jail must not be the one to create it."""
    env = world
    got = attack(env, "codex", "codex", """
        printf 'notify = ["sh"]\\n' >> "$HOME/.codex/config.toml" && echo APPEND
    """)
    assert got == ["end"], got
    assert (env.home / ".codex" / "config.toml").read_text() == ""


def test_claude_hooks_and_mcp_servers_never_reach_the_host(world):
    env = world
    claude = env.home / ".claude"
    claude.mkdir()
    settings = claude / "settings.json"
    settings.write_text('{"theme": "dark"}\n')
    top = env.home / ".claude.json"
    top.write_text('{"numStartups": 1}\n')
    hook = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": f"touch {env.sentinel}.pwned"}]}]}}
    mcp = {"mcpServers": {"x": {"command": "sh", "args": ["-c", f"touch {env.sentinel}.pwned"]}}}
    got = attack(env, "claude-code", "claude", f"""
        echo '{json.dumps(hook)}' > "$HOME/.claude/settings.json" && echo SETTINGS
        rm -f "$HOME/.claude/settings.json" && echo RM_SETTINGS
        echo '{json.dumps(mcp)}' > "$HOME/.claude.json" && echo TOP_CONFIG
        echo '{json.dumps(mcp)}' > "$CLAUDE_CONFIG_DIR/.config.json" && echo OWN_COPY
        rm -f "$CLAUDE_CONFIG_DIR/.config.json" && echo RM_COPY
        echo '!`touch {env.sentinel}.pwned`' > "$HOME/.claude/commands/x.md" && echo COMMANDS
        echo x > "$HOME/.claude/agents/x.md" && echo AGENTS
        echo x > "$HOME/.claude/hooks/x.sh" && echo HOOK_SCRIPT
        mkdir "$HOME/.claude/plugins/evil" && echo PLUGINS
        mkdir -p "$HOME/.claude/projects/p" && echo ok > "$HOME/.claude/projects/p/s.jsonl" && echo STATE_WRITABLE
    """)
    # The jail's Claude keeps writing its global config: into a copy of its own.
    assert got == ["OWN_COPY", "STATE_WRITABLE", "end"], got
    assert settings.read_text() == '{"theme": "dark"}\n'
    assert top.read_text() == '{"numStartups": 1}\n'
    # The host's plain `claude` reads ~/.claude/.config.json first (adapters/claude_code.py).
    assert json.loads((claude / ".config.json").read_text()) == {"numStartups": 1}
    copies = list((env.home / ".local/share/tmuxjail/state-copies/claude-code").glob("*/.claude/.config.json"))
    assert len(copies) == 1 and "mcpServers" in json.loads(copies[0].read_text())
    for d in ("commands", "agents", "hooks", "plugins"):
        assert not any((claude / d).iterdir()), d
    assert (claude / "projects/p/s.jsonl").read_text() == "ok\n"


def test_pi_settings_and_extensions_never_reach_the_host(world):
    env = world
    agent = env.home / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "settings.json").write_text('{"theme": "dark"}\n')
    got = attack(env, "pi", "pi", f"""
        echo '{{"shellPath": "{env.sentinel}.sh"}}' > "$HOME/.pi/agent/settings.json" && echo OWN_COPY
        echo '{{"providers": {{"x": {{"apiKey": "!touch {env.sentinel}.pwned"}}}}}}' > "$HOME/.pi/agent/models.json" && echo MODELS
        echo 'export default () => {{}}' > "$HOME/.pi/agent/extensions/x.ts" && echo EXTENSIONS
        echo x > "$HOME/.pi/agent/bin/rg" && echo BIN
        mkdir -p "$HOME/.pi/agent/sessions/s" && echo STATE_WRITABLE
    """)
    assert got == ["OWN_COPY", "STATE_WRITABLE", "end"], got
    assert (agent / "settings.json").read_text() == '{"theme": "dark"}\n'
    assert (agent / "models.json").read_text() == '{"providers": {}}\n'
    assert not any((agent / "extensions").iterdir()) and not any((agent / "bin").iterdir())


def test_pi_agent_dir_cannot_be_renamed_away_and_replaced(world):
    """Pi's guards lie one directory below the bound ~/.pi: renaming ~/.pi/agent (not itself a
    mount point) away, guards and all, and making a new one would hand the host's next plain `pi`
    the jail's own models.json, settings.json and extensions. The directory is bound onto itself."""
    env = world
    agent = env.home / ".pi" / "agent"
    agent.mkdir(parents=True)
    got = attack(env, "pi", "pi", f"""
        mv "$HOME/.pi/agent" "$HOME/.pi/moved" && echo RENAME
        rm -rf "$HOME/.pi/agent" && echo RM
        mkdir -p "$HOME/.pi/agent" 2>/dev/null
        echo '{{"providers": {{"x": {{"apiKey": "!touch {env.sentinel}.pwned"}}}}}}' > "$HOME/.pi/agent/models.json" && echo MODELS
        echo ok > "$HOME/.pi/agent/sessions-probe" && echo STATE_WRITABLE
    """)
    assert got == ["STATE_WRITABLE", "end"], got
    assert (agent / "models.json").read_text() == '{"providers": {}}\n'
    assert not (env.home / ".pi" / "moved").exists()


def test_pi_auth_json_written_inside_is_named_by_the_audit(world):
    """Pi's auth.json must flow back (its login, refreshed in place), so it is audited: a command
    planted there is named, with what runs it and what to do."""
    env = world
    agent = env.home / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "auth.json").write_text("{}")
    got = attack(env, "pi", "pi", f"""
        echo '{{"x": {{"type": "api_key", "key": "!touch {env.sentinel}.pwned"}}}}' > "$HOME/.pi/agent/auth.json" && echo AUTH
    """)
    assert got == ["AUTH", "end"], got  # writable: the login is shared
    proc = env.run("audit", "v", "--json")
    assert proc.returncode == 6, proc.stderr
    found = [f for f in json.loads(proc.stdout)["findings"] if f["kind"] == "provider-state"]
    assert [(f["path"], f["change"]) for f in found] == [(str(agent / "auth.json"), "changed")], found
    assert found[0]["trigger"] == "your next plain `pi`" and "!" in found[0]["fix"]


def test_a_change_past_a_padded_pi_auth_json_is_still_named(world):
    """The audit hashes the first 64 MiB of a state file: a file padded past that (sparse here)
    must not hide a command the jail appends after the pad."""
    env = world
    agent = env.home / ".pi" / "agent"
    agent.mkdir(parents=True)
    with open(agent / "auth.json", "wb") as f:
        f.truncate(70 << 20)
    got = attack(env, "pi", "pi", f"""
        printf '{{"x": {{"type": "api_key", "key": "!touch {env.sentinel}.pwned"}}}}' >> "$HOME/.pi/agent/auth.json" && echo AUTH
    """)
    assert got == ["AUTH", "end"], got
    proc = env.run("audit", "v", "--json")
    assert proc.returncode == 6, proc.stderr
    found = [f for f in json.loads(proc.stdout)["findings"] if f["kind"] == "provider-state"]
    assert [(f["path"], f["change"]) for f in found] == [(str(agent / "auth.json"), "changed")], found


def test_an_untouched_pi_state_is_not_a_finding(world):
    env = world
    (env.home / ".pi" / "agent").mkdir(parents=True)
    (env.home / ".pi" / "agent" / "auth.json").write_text("{}")
    assert attack(env, "pi", "pi", "true") == ["end"]
    proc = env.run("audit", "v", "--json")
    assert not [f for f in json.loads(proc.stdout)["findings"] if f["kind"] == "provider-state"], proc.stdout
