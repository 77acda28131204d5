"""Compatibility from the home directory (issue 12.8): `cd ~ && tmuxjail start shell` runs, and
tmuxjail's own state stays hidden and its config read-only from inside that jail. Strict modes
keep refusing a workspace that contains the home, with a hint."""

from __future__ import annotations

import pytest
from conftest import furnish
from test_escapes import Jail

pytestmark = pytest.mark.adversarial


def test_compatibility_from_home_runs_and_keeps_tmuxjail_state_out_of_reach(jail_env):
    env = furnish(jail_env)
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('default_mode = "compatibility"\n')
    # As a newcomer types it: from ~, no --workspace, no --mode.
    info = env.json("start", "shell", "--name", "j", "--detach", cwd=env.home)
    assert info["mode"] == "compatibility" and info["workspace"] == str(env.home)
    jail = Jail.__new__(Jail)
    jail.env, jail.mode, jail.name, jail.info, jail.ws, jail.n = env, "compatibility", "j", info, env.home, 0
    out = jail.sh(f"""
        touch ./made-in-home && echo HOME_WRITABLE
        ls -A {env.state_dir} | grep -q . && echo STATE_VISIBLE
        cat {env.store} >/dev/null 2>&1 && echo STORE_READ
        ls {env.home}/.local/share/tmuxjail/homes 2>/dev/null | grep -q . && echo HOMES_VISIBLE
        echo 'default_mode = "isolated"' >> {env.config_dir}/config.toml 2>/dev/null && echo CONFIG_WRITTEN
        mv {env.config_dir} {env.home}/.config/moved 2>/dev/null && echo CONFIG_MOVED
        cat {env.config_dir}/config.toml >/dev/null && echo CONFIG_READABLE
        echo end
    """)
    assert out.split() == ["HOME_WRITABLE", "CONFIG_READABLE", "end"], out
    assert (env.config_dir / "config.toml").read_text() == 'default_mode = "compatibility"\n'
    env.unchanged()


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_strict_modes_refuse_the_home_as_workspace_with_a_hint(jail_env, mode):
    env = jail_env
    proc = env.run("start", "shell", "--mode", mode, "--detach", cwd=env.home)
    assert proc.returncode == 2 and "contains your home" in proc.stderr, proc.stderr
    assert "--mode compatibility" in proc.stderr and "Traceback" not in proc.stderr
