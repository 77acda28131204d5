"""The macOS start path on a real Mac, with the real /usr/bin/sandbox-exec: what the seam
(test_darwin_seam.py) cannot prove. Skipped everywhere else; .github/workflows/macos.yml runs it.
A stand-in CLI (tests/standins/standin.sh) reports what it could do from inside the jail. The
HOME lives outside $TMPDIR, as a Mac's does (strict profiles share the user's temp dirs)."""

from __future__ import annotations

import os
import sys

import pytest
from conftest import Env

from tmuxjail.hostos import SANDBOX_EXEC

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform != "darwin" or not os.access(SANDBOX_EXEC, os.X_OK),
                       reason="a real Mac only (sandbox-exec); the seam runs the same path elsewhere"),
]


@pytest.fixture
def mac_env(home_root):
    e = Env(home_root)
    e.vars = {k: v for k, v in e.vars.items() if not k.startswith("XDG_")}  # platformdirs' macOS layout
    yield e
    e.kill()


@pytest.mark.parametrize("mode", ["isolated", "compatibility"])
def test_a_real_start_confines_the_cli_as_its_mode_says(mac_env, mode):
    env = mac_env
    secret = env.home / ".ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("secret\n")
    store = env.home / "Library" / "Application Support" / "tmuxjail" / "store.db"
    info = env.json("start", "codex", "--mode", mode, "--network", "none", "--workspace", str(env.ws),
                    "--name", "app", "--detach", "--", "--outside", str(env.outside / "x"), "--secret", str(secret))
    assert info["status"] == "running" and store.exists()
    r = env.report()
    assert r["write-workspace"] == "ok"
    if mode == "isolated":
        assert r["read-secret"] == "denied" and r["write-outside"] == "denied"
        assert r["home"] != str(env.home)  # the private home
    else:
        assert r["read-secret"] == "ok" and r["write-outside"] == "ok"


def test_a_real_start_cannot_reach_tmuxjails_store_or_the_tmux_server(mac_env):
    env = mac_env
    store = env.home / "Library" / "Application Support" / "tmuxjail" / "store.db"
    env.json("start", "codex", "--mode", "compatibility", "--network", "none", "--workspace", str(env.ws),
             "--name", "app", "--detach", "--", "--secret", str(store))
    assert env.report()["read-secret"] == "denied"
