"""Issue 31 on the pinned Codex (where scripts/install-certify-clis.sh installed it): started in an
isolated jail with --mcp, offline, its own `codex mcp list` lists the operator's server as the
stub tmuxjail gave it, and nothing the private home's config.toml added is hidden from `show`.

(Claude Code's `claude mcp list` reads only the configs it finds itself, never --mcp-config, and
offline it stops at "Unable to connect" before it starts any server: its delivery is checked by
the adapter's tests and docs/mcp.md says so.)"""

from __future__ import annotations

import os
import subprocess

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
