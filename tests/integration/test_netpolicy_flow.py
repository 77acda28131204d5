"""Network policy end to end on the real jail (issue 15, policy side): a changed network or
allow list refuses resume with the `network` reason; a domain added in verified mode needs its
own approval; the operator's allow list is a ceiling; the host's proxy variables never reach a
proxied jail. Nothing here sends a packet: the jails run under --network proxy or none."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.integration


def start(env, provider="codex", mode="verified", *extra, name="v", env_extra=None):
    return env.run("start", provider, "--mode", mode, "--workspace", str(env.ws), "--name", name,
                   "--detach", "--non-interactive", "--json", *extra, env_extra=env_extra)


def stored(env, name: str, column: str) -> dict:
    db = sqlite3.connect(env.store)
    return json.loads(db.execute(f"SELECT {column} FROM sessions WHERE name=?", (name,)).fetchone()[0])


def store_set(env, name: str, **columns) -> None:
    db = sqlite3.connect(env.store)
    for column, value in columns.items():
        db.execute(f"UPDATE sessions SET {column}=? WHERE name=?",
                   (value if isinstance(value, str) else json.dumps(value, sort_keys=True), name))
    db.commit()


def refused(env, name: str) -> list[str]:
    proc = env.run("resume", name, "--detach", "--json")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    return json.loads(proc.stdout)["reasons"]


def write_config(env, text: str) -> None:
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(text)


def test_verified_added_domain_needs_its_own_approval(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    # A domain the profile declares needs nothing more.
    info = json.loads(start(env, "codex", "verified", "--network", "proxy", "--allow-domain", "api.openai.com").stdout)
    assert info["status"] == "running"
    allowed = env.json("show", "v")["policy"]["allow_domains"]
    assert "api.openai.com" in allowed and "*" not in allowed and "pypi.org" not in allowed
    env.kill()
    # One it does not declare is a capability change: refused (4) until approved, and nothing runs.
    proc = start(env, "codex", "verified", "--network", "proxy", "--allow-domain", "pypi.org", name="w")
    assert proc.returncode == 4, proc.stderr
    assert "capability not approved: Reach pypi.org through the proxy (domain:pypi.org)" in proc.stdout
    assert "tmuxjail approve codex --allow-domain pypi.org" in proc.stderr
    assert env.tmux("ls", check=False) == ""
    plan = env.run("approve", "codex", "--allow-domain", "pypi.org", "--yes", "--details", check=True).stdout
    assert "Reach pypi.org through the proxy" in plan
    info = json.loads(start(env, "codex", "verified", "--network", "proxy", "--allow-domain", "pypi.org",
                            name="w").stdout)
    assert info["status"] == "running"
    assert "pypi.org" in env.json("show", "w")["policy"]["allow_domains"]
    # The approval of pypi.org does not stretch to another domain.
    proc = start(env, "codex", "verified", "--network", "proxy", "--allow-domain", "files.pythonhosted.org", name="x")
    assert proc.returncode == 4 and "domain:files.pythonhosted.org" in proc.stdout


def test_verified_capability_brings_its_domains_under_its_approval(jail_env):
    env = jail_env
    env.run("approve", "codex", "--capability", "github", "--yes", check=True)
    assert start(env, "codex", "verified", "--network", "proxy", "--capability", "github").returncode == 0
    allowed = env.json("show", "v")["policy"]["allow_domains"]
    assert {"github.com", "codeload.github.com", "api.openai.com"} <= set(allowed)


def test_resume_refused_for_a_changed_allow_domain(jail_env):
    env = jail_env
    assert start(env, "shell", "isolated", "--network", "proxy", "--allow-domain", "pypi.org").returncode == 0
    assert env.json("show", "v")["policy"]["allow_domains"] == ["pypi.org"]
    env.kill()
    req = stored(env, "v", "request")
    store_set(env, "v", request=dict(req, allow_domains=["pypi.org", "evil.example"]))
    assert refused(env, "v") == ["network"]
    store_set(env, "v", request=req)
    assert env.json("resume", "v", "--detach")["status"] in ("running", "starting")


def test_resume_refused_for_a_changed_mode_default_or_config_list(jail_env):
    env = jail_env
    assert start(env, "shell", "isolated").returncode == 0  # today's default for isolated
    default = env.json("show", "v")["policy"]["network"]
    env.kill()
    other = "none" if default != "none" else "host"
    write_config(env, f'[network]\nisolated = "{other}"\n')
    assert "network" in refused(env, "v")
    # Started with the config's list; the operator narrows the list: refused too.
    (env.config_dir / "config.toml").unlink()
    assert start(env, "shell", "isolated", "--network", "proxy", name="p").returncode == 0
    env.kill()
    write_config(env, '[network.allow_domains]\nisolated = ["pypi.org"]\n')
    assert refused(env, "p") == ["network"]


def test_resume_refused_for_a_changed_profile_domain_list(jail_env):
    """A session started under a profile whose domain list differed from today's (an upgrade of
    tmuxjail changed the profile) is refused with profile and network."""
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    assert start(env, "codex", "verified", "--network", "proxy").returncode == 0
    env.kill()
    from tmuxjail.policy import fingerprint

    pol = stored(env, "v", "policy")
    old = dict(pol, allow_domains=[d for d in pol["allow_domains"] if d != "chatgpt.com"],
               profile_hash="sha256:" + "0" * 64, profile_version="2")
    store_set(env, "v", policy=old, fingerprint=fingerprint(old))
    assert refused(env, "v") == ["profile", "network"]


def test_the_operator_allow_list_is_a_ceiling(jail_env):
    env = jail_env
    # isolated = "host": the operator lets isolated jails ask for the host's network (proxy is the
    # default and widest otherwise), to show the domain list does not bound that setting.
    write_config(env, '[network]\nisolated = "host"\n[network.allow_domains]\nisolated = ["*.github.com"]\n')
    proc = start(env, "shell", "isolated", "--network", "proxy", "--allow-domain", "pypi.org")
    assert proc.returncode == 4 and "outside the operator's allow list" in proc.stderr
    assert start(env, "shell", "isolated", "--network", "proxy", "--allow-domain", "api.github.com").returncode == 0
    assert env.json("show", "v")["policy"]["allow_domains"] == ["api.github.com"]
    proc = start(env, "shell", "isolated", "--network", "host", name="h")
    assert proc.returncode == 0  # the list applies to the proxy; the network ceiling is another setting


def test_bad_patterns_are_usage_errors(jail_env):
    env = jail_env
    for bad in ("127.0.0.1", "localhost", "*.", "a.*.com"):
        proc = start(env, "shell", "isolated", "--network", "proxy", "--allow-domain", bad)
        assert proc.returncode == 2 and "--allow-domain" in proc.stderr and "Traceback" not in proc.stderr
    proc = start(env, "shell", "isolated", "--network", "none", "--allow-domain", "pypi.org")
    assert proc.returncode == 2 and "--network proxy" in proc.stderr
