"""The terminal surface of a jail: OSC 52 clipboard queries and the status-line mode indicator."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from test_escapes import ALL, Jail

pytestmark = pytest.mark.adversarial
CONF = Path(__file__).resolve().parents[2] / "tmux.conf.example"
SNIPPET = "#{E:@tmuxjail-status}"

# From inside the jail: an OSC 52 query on the pane's terminal, and whatever comes back.
QUERY = r'''
python3 - <<'PY'
import os, select, termios, time, tty
fd = os.open("/dev/tty", os.O_RDWR)
old = termios.tcgetattr(fd)
tty.setraw(fd)
os.write(fd, b"\033]52;c;?\007")
buf, end = b"", time.time() + 1.5
while time.time() < end:
    if select.select([fd], [], [], 0.1)[0]:
        buf += os.read(fd, 4096)
termios.tcsetattr(fd, termios.TCSADRAIN, old)
print(buf.decode("latin-1").replace("\033", "ESC").replace("\007", "BEL"))
PY
'''


def _clipboard_check(env) -> dict:
    checks = json.loads(env.run("doctor", "--json").stdout)["checks"]
    return next(c for c in checks if c["check"] == "tmux clipboard")


@pytest.mark.parametrize("mode", ALL)
def test_osc52_query_reads_the_paste_buffer_only_when_doctor_warns(jail_env, mode):
    env = jail_env
    if mode == "verified":
        env.run("approve", "shell", "--yes", check=True)
    jail = Jail(env, mode)
    secret = "HOST-PASTE-SECRET"
    env.tmux("set-buffer", secret)
    env.tmux("set-option", "-s", "set-clipboard", "on")
    leaked = base64.b64encode(secret.encode()).decode()
    # tmux has no per-pane form of set-clipboard: with `on`, the query works from any jail, so
    # doctor says so, with the fix.
    assert leaked in jail.sh(QUERY)
    check = _clipboard_check(env)
    assert not check["ok"] and not check["required"] and "OSC 52" in check["detail"]
    assert "set-clipboard external" in check["fix"]
    env.tmux("set-option", "-s", "set-clipboard", "external")  # tmux's default, and the fix
    assert leaked not in jail.sh(QUERY) and "52;" not in jail.sh(QUERY)
    assert _clipboard_check(env)["ok"]


def test_pane_title_cannot_change_the_mode_indicator(jail_env):
    """A pane may set any title, tmux styles included (`#[bold]` in a title is drawn bold in the
    status line). The indicator reads only @tmuxjail_* options and the pane's start command."""
    env = jail_env
    env.tmux("-f", str(CONF), "new-session", "-d", "-s", "home", "-c", str(env.ws))
    comp = Jail(env, "compatibility", name="c")
    hand = env.tmux("split-window", "-t", "=c:", "-P", "-F", "#{pane_id}", "sleep 300").strip()
    ordinary = env.tmux("display-message", "-p", "-t", "=home:", "#{pane_id}").strip()
    jailed = env.tmux("display-message", "-p", "-t", "=c:0.0", "#{pane_id}").strip()
    render = lambda p: env.tmux("display-message", "-p", "-t", p, SNIPPET).rstrip("\n")  # noqa: E731
    before = {p: render(p) for p in (jailed, hand, ordinary)}
    spoof = " #[bold][isolated:codex]#[default]"
    comp.target = jailed
    comp.sh(f"printf '\\033]2;%s\\033\\\\' '{spoof}' > /dev/tty")
    env.tmux("select-pane", "-t", hand, "-T", spoof)
    env.tmux("select-pane", "-t", ordinary, "-T", spoof)
    assert env.tmux("display-message", "-p", "-t", jailed, "#{pane_title}").strip() == spoof.strip()
    assert {p: render(p) for p in (jailed, hand, ordinary)} == before == {
        jailed: " #[bold][compatibility:shell]#[default]", hand: " #[reverse][unjailed]#[default]", ordinary: ""}
    # Only tmuxjail's options and tmux's own fields: nothing a program in a pane can write.
    snippet = env.tmux("show-options", "-gv", "@tmuxjail-status")
    fields = set(re.findall(r"#\{(?:[a-zA-Z]:)?([@\w-]+)(?=[},])", snippet))
    assert fields <= {"@tmuxjail_id", "@tmuxjail_fp", "@tmuxjail_mode", "@tmuxjail_provider", "@tmuxjail_branch",
                      "pane_start_command"}
