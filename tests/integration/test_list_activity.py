"""list's agent column at scale, on a real tmux server: every agent's screen is read, past what one
tmux command can carry and past pane %10, and tmux's own search (SCREEN_SEARCH, in the one
list-panes) finds every line a busy-footer pattern matches, so a screen it passes over is rightly
read as waiting without being captured. The rows are the store's own (tmuxjail.store.Store), each
with a tmux session whose start command is a launcher's, as `list` joins real jails."""

from __future__ import annotations

import re
import shlex
import time

import pytest

from tmuxjail.activity import GENERIC, SCREEN_SEARCH, WORKING
from tmuxjail.store import Store

pytestmark = pytest.mark.integration

FP = "sha256:" + "ab" * 32
# One sample per alternative of each busy-footer pattern, as the CLIs print them (case varies).
FOOTERS = {
    "codex": ["• Working (3s • esc to interrupt)", "WORKING (12", "working on it, Esc to cancel"],
    "claude-code": ["✻ Pondering… (12s · ↑ 1.2k tokens · esc to interrupt)", "(3s • thinking)", "Esc To Interrupt"],
    "cursor": ["⬡ Generating...  ctrl+c to stop", "esc to stop", "ESC TO INTERRUPT", "generating"],
    "pi": ["Working... (esc to abort)", "esc to interrupt", "working..."],
    "generic": ["ctrl+c to interrupt", "esc to interrupt", "Ctrl+C to stop"],
}


def _pane_script(lines: list[str]) -> str:
    return "".join(f"printf '%s\\n' {shlex.quote(x)}; " for x in lines) + "exec sleep 600"


def _sessions(env, screens: dict[str, tuple[str, list[str]]]) -> None:
    """A store row and a tmux session per name: (provider, the lines its pane prints)."""
    env.tmux("new-session", "-d", "-s", "keeper", "sleep 600")
    socket = env.tmux("display-message", "-p", "#{socket_path}").strip()
    store = Store(env.store)
    batch: list[str] = []
    for name, (provider, lines) in screens.items():
        store.insert_session(name=name, provider=provider, mode="isolated", env_name="default",
                             workspace=str(env.ws), fingerprint=FP, policy=None,
                             request='{"placement": "session"}', status="running", tmux_socket=socket,
                             tmux_session=name)
        batch += ["new-session", "-d", "-s", name, "/bin/sh", "-c", _pane_script(lines), "tmuxjail.pane.launch",
                  "--fp", FP, ";"]
        if len(batch) > 300:
            env.tmux(*batch[:-1])
            batch = []
    if batch:
        env.tmux(*batch[:-1])
    store.close()
    last = list(screens)[-1]
    deadline = time.monotonic() + 20
    while "sleep" not in env.tmux("display-message", "-p", "-t", f"={last}:", "#{pane_current_command}"):
        assert time.monotonic() < deadline, "the panes did not settle"
        time.sleep(0.1)
    time.sleep(0.3)


def test_every_agent_screen_is_read_past_one_tmux_command_and_pane_ten(env):
    screens: dict[str, tuple[str, list[str]]] = {}
    want: dict[str, str] = {}
    for k in range(300):
        if k % 3 == 0:  # its busy footer at the bottom of the screen
            screens[f"w{k}"] = ("codex", [*[f"line {i}" for i in range(20)], "• Working (3s • esc to interrupt)"])
            want[f"w{k}"] = "working"
        elif k % 3 == 1:  # the footer scrolled above the bottom 12 lines: captured, then read as waiting
            screens[f"s{k}"] = ("codex", ["esc to interrupt", *[f"line {i}" for i in range(5)]])
            want[f"s{k}"] = "waiting"
        else:  # nothing tmux's search matches: not captured
            screens[f"q{k}"] = ("claude-code", ["> ", "? for shortcuts"])
            want[f"q{k}"] = "waiting"
    screens["c"] = ("claude-code", [*[""] * 20, "✻ Pondering… (12s · ↑ 1.2k tokens)"])
    want["c"] = "working"
    # Last in list's order: the last screen of a tmux command keeps its blank bottom lines too.
    screens["zz"] = ("codex", ["esc to interrupt", "line"])
    want["zz"] = "waiting"
    _sessions(env, screens)
    panes = env.tmux("list-panes", "-a", "-F", "#{pane_id}").split()
    assert len(panes) == 303 and "%150" in panes
    rows = env.json("list")
    got = {r["name"]: r["agent"] for r in rows if r["kind"] == "agent"}
    assert got == want


def test_tmuxs_screen_search_finds_every_busy_footer(env):
    """The superset SCREEN_SEARCH must be: a footer any pattern matches is found by tmux, on a
    real screen, in each case spelling."""
    samples = [x for lines in FOOTERS.values() for x in lines]
    for name, lines in FOOTERS.items():
        pattern = WORKING.get(name, GENERIC)
        assert all(pattern.search(x) for x in lines), name  # each sample is one the pattern matches
    env.tmux("new-session", "-d", "-s", "keeper", "sleep 600")
    for i, x in enumerate(samples):
        env.tmux("new-session", "-d", "-s", f"f{i}", "/bin/sh", "-c", _pane_script(["", x, "tail"]))
    env.tmux("new-session", "-d", "-s", "none", "/bin/sh", "-c", _pane_script(["> idle", "? for shortcuts"]))
    time.sleep(0.5)
    out = env.tmux("list-panes", "-a", "-F", f"#{{session_name}} #{{C/ri:{SCREEN_SEARCH}}}")
    hits = dict(line.split() for line in out.splitlines())
    assert hits.pop("none") == "0" and hits.pop("keeper") == "0"
    assert {k: v for k, v in hits.items() if v != "2"} == {}, [(samples[int(k[1:])], v) for k, v in hits.items()]


def test_screen_search_is_plain_format_text():
    """SCREEN_SEARCH goes inside a tmux format (#{C/ri:...}) as it is: no format syntax in it."""
    assert not re.search(r"[#{},]", SCREEN_SEARCH)
