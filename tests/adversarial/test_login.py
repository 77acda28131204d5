"""Log in once (issue 31.5): `tmuxjail login codex` runs the (stand-in) CLI's own login in an
isolated jail of its own; the next run keeps only its credential file, where no jail sees it; an
isolated session in another workspace then starts signed in, and nothing else of the store, nor
the login session's home, is in its view. As root and (newcomer tier) as an ordinary user."""

from __future__ import annotations

import json
import os
import stat

import pytest
from conftest import wait_until

pytestmark = pytest.mark.adversarial


def status(env, name: str) -> str | None:
    return next((r["status"] for r in env.json("list", "--all") if r["name"] == name), None)


def test_login_once_then_a_session_elsewhere_starts_signed_in(jail_env, tmp_path):
    env = jail_env
    started = env.json("login", "codex")
    assert started["state"] == "started" and started["session"] == "login-codex"
    wait_until(lambda: status(env, "login-codex") not in ("running", "starting"), 20, "the login CLI to end")
    kept = env.json("login", "codex")
    assert kept["state"] == "kept" and kept["files"] == [".codex/auth.json"]
    store = env.state_dir / "credentials" / "codex"
    auth = store / ".codex" / "auth.json"
    assert json.loads(auth.read_text()) == {"OPENAI_API_KEY": "sk-standin-login"}
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600 and stat.S_IMODE(store.stat().st_mode) == 0o700
    # The login session is gone: its record, its private home, its workspace.
    assert status(env, "login-codex") is None and not os.path.exists(started["workspace"])
    assert not (env.home / ".local/share/tmuxjail/homes/codex/tmuxjail-login").exists()

    # Something else in the store that no session is given.
    (store / "other").write_text("not for the jail")
    ws2 = tmp_path / "elsewhere"
    ws2.mkdir()
    (env.config_dir / "config.toml").write_text("[providers.codex]\ncredentials = true\n")
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(ws2), "--name", "c", "--detach",
             "--", "--secret", str(store / "other"))
    rep = env.report("codex", ws=ws2)
    assert rep["auth"] == '{"OPENAI_API_KEY":"sk-standin-login"}'
    assert rep["read-secret"] == "denied"
    # Without the config line, a session gets no login.
    (env.config_dir / "config.toml").write_text("")
    ws3 = tmp_path / "third"
    ws3.mkdir()
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(ws3), "--name", "d", "--detach")
    assert env.report("codex", ws=ws3)["auth"] == ""

    assert env.json("logout", "codex")["removed"] and not store.exists()


def test_login_refusals_are_one_line(jail_env):
    env = jail_env
    proc = env.run("login", "cursor")
    assert proc.returncode == 2 and "names no credential file" in proc.stderr and "Traceback" not in proc.stderr
    # A session of yours that happens to have the login session's name is never taken for one.
    env.json("start", "codex", "--mode", "isolated", "--name", "login-codex", "--detach")
    proc = env.run("login", "codex")
    assert proc.returncode == 2 and "did not start" in proc.stderr
    assert next(r for r in env.json("list") if r["name"] == "login-codex")["status"] == "running"
    (env.config_dir).mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("[providers.codex]\ncredentials = 1\n")
    proc = env.run("start", "codex", "--mode", "isolated", "--detach")
    assert proc.returncode == 2 and "credentials: must be true or false" in proc.stderr


def test_a_login_that_left_a_link_keeps_nothing(jail_env):
    """The login jail's home is the jail's to write: a credential file that is a link (to a file
    of yours) is not followed into the store."""
    env = jail_env
    started = env.json("login", "codex")
    wait_until(lambda: status(env, "login-codex") not in ("running", "starting"), 20, "the login CLI to end")
    row = next(r for r in env.json("list", "--all") if r["name"] == "login-codex")
    auth = os.path.join(row["private_home"], ".codex", "auth.json")
    os.unlink(auth)
    (env.outside / "yours").write_text("a file of yours")
    os.symlink(env.outside / "yours", auth)
    proc = env.run("login", "codex")
    assert proc.returncode == 2 and "ended without a login" in proc.stderr
    assert not (env.state_dir / "credentials" / "codex" / ".codex" / "auth.json").exists()
    assert not os.path.exists(started["workspace"])


def test_verified_mode_needs_the_login_approved_and_the_login_jail_never_gets_it(jail_env, tmp_path):
    env = jail_env
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("[providers.codex]\ncredentials = true\n")
    store = env.state_dir / "credentials" / "codex" / ".codex"
    store.mkdir(parents=True)
    (store / "auth.json").write_text('{"OPENAI_API_KEY":"sk-old"}')
    # A new login does not start signed in with the old one (and cannot write it through a bind).
    started = env.json("login", "codex")
    assert "credentials" not in env.json("show", "login-codex")["policy"]
    wait_until(lambda: status(env, "login-codex") not in ("running", "starting"), 20, "the login CLI to end")
    env.json("login", "codex")
    assert json.loads((store / "auth.json").read_text()) == {"OPENAI_API_KEY": "sk-standin-login"}
    assert not os.path.exists(started["workspace"])
    env.run("approve", "codex", "--yes", check=True)
    proc = env.run("start", "codex", "--mode", "verified", "--detach", "--json")
    assert proc.returncode != 0 and "--credentials" in json.loads(proc.stdout)["hint"], proc.stdout
    env.run("approve", "codex", "--yes", "--credentials", check=True)
    env.json("start", "codex", "--mode", "verified", "--name", "v", "--detach")
    assert env.report("codex")["auth"] == '{"OPENAI_API_KEY":"sk-standin-login"}'
