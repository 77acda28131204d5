"""[mcp.NAME] in the operator config (issue 31), and how each CLI is given the session's servers."""

from __future__ import annotations

import json
import os

import pytest

from tmuxjail import mcpconf
from tmuxjail.adapters import get as get_adapter
from tmuxjail.effective import McpServer
from tmuxjail.errors import ConfigError, UsageError
from tmuxjail.net import stub
from tmuxjail.registry import Mode


@pytest.fixture
def exe(tmp_path):
    p = tmp_path / "server"
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    return str(p)


def parse(body: str, home: str = "/home/u") -> dict:
    import tomllib

    return mcpconf.parse(tomllib.loads(body).get("mcp", {}), "cfg", home)


def test_a_server_is_parsed_with_its_defaults(exe):
    s = parse(f'[mcp.gh]\ncommand = "{exe}"\nenv = ["B", "A"]\ntools = ["x"]\n')["gh"]
    assert s == mcpconf.Server("gh", exe, (), ("A", "B"), None, "host", "host", (), ("x",))


@pytest.mark.parametrize("body,words", [
    ('command = "server"', "must be an absolute path"),
    ('command = "/usr/../bin/sh"', "not a plain absolute path"),
    ('command = "/nonexistent/x"', "No such file"),
    ('command = "{plain}"', "not an executable regular file"),
    ('command = "{exe}"\nrun = "cloud"', 'must be "host"'),
    ('command = "{exe}"\nrun = "jail"\nenv = ["T"]', "could read the server's environment"),
    ('command = "{exe}"\nrun = "jail"\nenv_file = "/x"', "could read the server's environment"),
    ('command = "{exe}"\nrun = "jail"\nnetwork = "none"', "the jail's network"),
    ('command = "{exe}"\nrun = "jail"\ntools = ["a"]', "an allowlist would hold nothing"),
    ('command = "{exe}"\nnetwork = "proxy"', 'must be "host" or "none"'),
    ('command = "{exe}"\ncolour = 1', "unknown key 'colour'"),
    ('command = "{exe}"\nenv = ["A B"]', "not accepted"),
    ('command = "{exe}"\nenv = ["TMUX_PANE"]', "tmux's or tmuxjail's own"),
    ('command = "{exe}"\nargs = "stdio"', "list of at most"),
    ('command = "{exe}"\ntools = ["a b"]', "not accepted"),
    ('args = []', "command is missing"),
])
def test_bad_servers_are_one_line_config_errors(exe, tmp_path, body, words):
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(ConfigError) as e:
        parse("[mcp.w]\n" + body.format(exe=exe, plain=plain) + "\n")
    assert words in e.value.message and "\n" not in e.value.message


def test_a_bad_name_is_refused(exe):
    with pytest.raises(ConfigError, match="a server name is"):
        parse(f'[mcp."Bad Name"]\ncommand = "{exe}"\n')


def test_an_env_file_must_be_yours_alone(tmp_path, exe):
    f = tmp_path / "s.env"
    f.write_text("# c\nTOKEN=abc=d\n")
    f.chmod(0o644)
    server = mcpconf.Server("w", exe, env=("HOME_NAME",), env_file=str(f))
    with pytest.raises(UsageError, match="only you can read"):
        mcpconf.secrets(server, {"HOME_NAME": "v"})
    f.chmod(0o600)
    assert mcpconf.secrets(server, {"HOME_NAME": "v"}) == {"TOKEN": "abc=d", "HOME_NAME": "v"}
    link = tmp_path / "link.env"
    link.symlink_to(f)
    with pytest.raises(UsageError):
        mcpconf.secrets(server._replace(env_file=str(link)), {"HOME_NAME": "v"})
    with pytest.raises(UsageError, match="HOME_NAME is not set"):
        mcpconf.secrets(server, {})


class Pol:
    def __init__(self, mode: str, mcp=(), backend="bwrap"):
        self.mode, self.backend, self.mcp, self.mcp_stub = Mode(mode), backend, tuple(mcp), "/usr/bin/python3"


SERVER = McpServer("gh", "/opt/gh", "sha256:x")


def test_claude_code_obeys_only_tmuxjails_mcp_config_in_strict_modes():
    claude = get_adapter("claude-code")
    assert claude.mcp_args(Pol("compatibility")) == []
    assert claude.mcp_args(Pol("isolated")) == ["--strict-mcp-config"]
    assert claude.mcp_args(Pol("verified", [SERVER])) == ["--strict-mcp-config", f"--mcp-config={stub.CONFIG}"]


def test_codex_gets_each_server_as_the_stub_and_no_secret():
    codex = get_adapter("codex")
    assert codex.mcp_args(Pol("isolated")) == []
    flag, value = codex.mcp_args(Pol("isolated", [SERVER]))
    assert flag == "-c" and value.startswith("mcp_servers={gh={command=\"/usr/bin/python3\",args=[")
    import tomllib

    table = tomllib.loads(value)["mcp_servers"]["gh"]
    assert [table["command"], *table["args"]] == stub.argv("/usr/bin/python3", "gh")


def test_the_clis_mcp_config_names_the_stub_for_each_server():
    from tmuxjail.pane.mcp import config_data

    data = json.loads(config_data({"mcp": [SERVER._asdict()], "mcp_stub": "/usr/bin/python3"}))
    entry = data["mcpServers"]["gh"]
    assert [entry["command"], *entry["args"]] == stub.argv("/usr/bin/python3", "gh") and entry["env"] == {}


JAILED = McpServer("lint", "/opt/lint/bin/lint", "sha256:y", ("--stdio",), read=("/opt/lint",), run="jail")


def test_a_server_in_the_jail_is_run_by_the_cli_itself_and_keeps_old_fingerprints(exe):
    from tmuxjail.pane.mcp import config_data, on_host
    from tmuxjail.sandbox.bwrap import jail_mcp_paths

    assert parse(f'[mcp.l]\ncommand = "{exe}"\nrun = "jail"\nread = ["/opt/l"]\n')["l"].run == "jail"
    pol = {"mcp": [SERVER._asdict(), JAILED._asdict()], "mcp_stub": "/usr/bin/python3"}
    entry = json.loads(config_data(pol))["mcpServers"]["lint"]
    assert [entry["command"], *entry["args"]] == ["/opt/lint/bin/lint", "--stdio"]
    assert [s["name"] for s in on_host(pol)] == ["gh"]  # the broker's table: never the jail's server
    assert jail_mcp_paths(pol) == ["/opt/lint", "/opt/lint/bin/lint"]
    import tomllib

    table = tomllib.loads(get_adapter("codex").mcp_args(Pol("isolated", [SERVER, JAILED]))[1])["mcp_servers"]
    assert table["lint"] == {"command": "/opt/lint/bin/lint", "args": ["--stdio"]}


def test_only_the_clis_that_take_them_accept_servers():
    assert {p: get_adapter(p).takes_mcp for p in ("claude-code", "codex", "cursor", "pi", "shell")} == {
        "claude-code": True, "codex": True, "cursor": False, "pi": False, "shell": True}


def test_the_codex_override_is_read_by_the_pinned_codex(tmp_path):
    """The pinned Codex parses the -c value and lists the server (offline: `codex mcp list`)."""
    import glob
    import subprocess

    found = glob.glob(os.path.expanduser("~/.cache/tmuxjail-certify/*/codex/node_modules/@openai/codex-linux-*/vendor/*/bin/codex"))
    if not found:
        pytest.skip("the pinned Codex is not installed (scripts/install-certify-clis.sh)")
    flag, value = get_adapter("codex").mcp_args(Pol("isolated", [SERVER]))
    home = tmp_path / "codex-home"
    home.mkdir()
    out = subprocess.run([found[0], flag, value, "mcp", "list", "--json"], capture_output=True, text=True,
                         env={"CODEX_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=60)
    assert out.returncode == 0, out.stderr
    servers = {s["name"]: s for s in json.loads(out.stdout)}
    assert servers["gh"]["transport"]["command"] == "/usr/bin/python3"
