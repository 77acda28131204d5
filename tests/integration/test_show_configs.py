"""`tmuxjail show NAME` works for every config the parser accepts (issue 27.4): a session started
under each config fixture the tests use is shown as text and as JSON, without a traceback, and so
is every session once the config is broken afterwards (show reads what was recorded).

CONFIGS holds every config text the tests write (grep for config.toml in tests/), plus one with
every key the parser knows; test_the_fixtures_cover_every_key keeps it that way when a key is
added. Nothing here sends a packet: proxied jails make no connection."""

from __future__ import annotations

import json

import pytest

from tmuxjail import config

pytestmark = pytest.mark.integration

RESOLVE = ('[network.resolve]\n"up.test" = { address = "127.0.0.1", test_upstream = true }\n'
           '"api.github.com" = { address = "127.0.0.1", test_upstream = true }\n"self.test" = "127.0.0.1"\n'
           '"mapped.test" = "::ffff:127.0.0.1"\n"zero.test" = "0.0.0.0"\n')
EVERY_KEY = ('default_mode = "isolated"\nallowed_modes = ["compatibility", "isolated", "verified"]\n'
             "allow_unguarded_compatibility = false\naccept_missing_guards = []\n"
             '[providers.shell]\ncredentials = true\n[limits]\nnproc = 512\ntmp = "64M"\nrun = "16M"\nhome = "1G"\n'
             '[network]\ncompatibility = "host"\nisolated = "proxy"\nverified = "proxy"\n'
             '[network.allow_domains]\nisolated = ["*.example.com", "pypi.org"]\nverified = ["*"]\n' + RESOLVE[:-1]
             + '\n"mirror.example" = "203.0.113.7"\n[worktree]\nroot = "~/worktrees"\nbranch_prefix = "agents/"\n'
             '[mcp.sh]\ncommand = "/bin/sh"\nargs = ["-c", "cat"]\nnetwork = "none"\ntools = ["echo"]\n')
# (config text, the mode a session is started in under it)
CONFIGS = [
    ("", "compatibility"),
    (EVERY_KEY, "isolated"),
    (RESOLVE, "isolated"),
    ('[network]\nisolated = "host"\n' + RESOLVE, "isolated"),
    ('[network]\ncompatibility = "proxy"\n' + RESOLVE, "compatibility"),
    ('[network]\nverified = "proxy"\n' + RESOLVE, "verified"),
    ('[network]\nisolated = "none"\n', "isolated"),
    ('[network]\ncompatibility = "none"\n', "compatibility"),
    ('[network]\nverified = "host"\n', "verified"),
    ('[network]\ncompatibility = "host"\nisolated = "proxy"\nverified = "proxy"\n', "isolated"),
    ('[network]\nisolated = "none"\n[network.allow_domains]\nisolated = ["*.example.com"]\n', "isolated"),
    ('[network.allow_domains]\nisolated = ["pypi.org"]\n', "isolated"),
    ('[network]\nisolated = "host"\n[network.allow_domains]\nisolated = ["*.github.com"]\n', "isolated"),
    ("[limits]\nnproc = 64\n", "isolated"),
    ('[limits]\nnproc = 512\ntmp = "64M"\n', "verified"),
    ("[limits]\r\nnproc = 600\r\n", "isolated"),
    ('default_mode = "compatibility"\n', "compatibility"),
    ('default_mode = "isolated"\n', "isolated"),
    ('default_mode = "isolated"\nallowed_modes = ["isolated", "verified"]\n', "verified"),
    ('allowed_modes = ["isolated"]\n', "isolated"),
    ('allowed_modes = ["verified"]\n', "verified"),
    ('allowed_modes = ["compatibility"]\n', "compatibility"),
    ("allow_unguarded_compatibility = true\n", "compatibility"),
    ('accept_missing_guards = ["abstract-unix-sockets"]\n', "compatibility"),
    ("# a comment\n", "isolated"),
    ('[discover]\ntrace_cap = "512M"\n', "isolated"),
]
BROKEN = ["allowed_modes = [\n", "default_mode = [\n", '[network.resolve]\n"x.test" = "not an address"\n']


def test_the_fixtures_cover_every_key():
    """Every top-level key and every [network] sub-table the parser accepts is in some fixture,
    and every fixture parses."""
    import tomllib

    seen: set[str] = set()
    for text, _ in CONFIGS:
        config.parse(text, "fixture")
        raw = tomllib.loads(text)
        seen |= set(raw) | {f"network.{k}" for k in raw.get("network", {})}
    assert seen >= config.KEYS, config.KEYS - seen
    assert {"network.resolve", "network.allow_domains"} <= seen


def _shown(env, name: str) -> dict:
    proc = env.run("show", name)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (name, proc.stderr)
    assert f"name: {name}" in proc.stdout, proc.stdout
    data = env.json("show", name)
    assert data["name"] == name
    net = env.run("show", name, "--network")
    assert net.returncode == 0 and "Traceback" not in net.stderr, (name, net.stderr)
    json.loads(env.run("show", name, "--network", "--json", check=True).stdout)
    return data


def test_show_and_show_json_for_every_config_fixture(jail_env):
    env = jail_env
    env.run("approve", "shell", "--yes", check=True)
    env.config_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for i, (text, mode) in enumerate(CONFIGS):
        (env.config_dir / "config.toml").write_bytes(text.encode())
        name = f"c{i}"
        proc = env.run("start", "shell", "--mode", mode, "--workspace", str(env.ws), "--name", name,
                       "--detach", "--non-interactive")
        assert proc.returncode == 0, (text, proc.stderr)
        data = _shown(env, name)
        if "[network.resolve]" in text and data["policy"]["network"] == "proxy":
            shown = env.run("show", name, check=True).stdout
            assert "up.test 127.0.0.1 True" in shown, shown
        names.append(name)
        env.tmux("kill-session", "-t", f"={name}", check=False)
    # show reads what was recorded: a config broken since is not its business. One session of each
    # shape (no config, every key, a resolve table under the proxy) stands for all: each broken
    # config over all 26 was 312 more runs of the CLI, four minutes of a loaded CI.
    for text in BROKEN:
        (env.config_dir / "config.toml").write_text(text)
        for name in (names[0], names[1], names[2]):
            _shown(env, name)
