"""The bench's first-screen detector (bench/tjbench/firstscreen.py, issue 18.5) on synthetic
capture sequences: the first non-empty content that then stays unchanged for HOLD seconds,
reported at the time it was first seen. The bench itself is never run by pytest; this pins the
pure rule both sides of its comparison are measured with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from tjbench.firstscreen import HOLD, Seen, Stable, bare_command, first_stable, matched, visible


def seq(*steps: tuple[float, str], until: float, every: float = 0.02) -> list[tuple[float, str]]:
    """Captures every `every` seconds up to `until`; each step (t, content) holds from t on."""
    out, t = [], 0.0
    while t <= until + 1e-9:
        content = [c for at, c in steps if at <= t + 1e-9][-1]
        out.append((round(t, 6), content))
        t += every
    return out


def test_hold_is_300_ms():
    assert HOLD == 0.3


def test_reports_when_the_stable_content_was_first_seen_not_hold_later():
    assert first_stable(seq((0.0, ""), (0.5, "hello"), until=2.0)) == pytest.approx(0.5)


def test_a_screen_that_changes_within_the_hold_is_not_the_first_screen():
    s = seq((0.0, ""), (0.5, "loading"), (0.7, "loading."), (0.9, "ready"), until=2.0)
    assert first_stable(s) == pytest.approx(0.9)


def test_a_screen_held_exactly_the_hold_counts_and_later_changes_do_not_matter():
    s = seq((0.0, ""), (0.4, "login"), (0.4 + HOLD, "login"), (0.8, "chat"), until=2.0)
    assert first_stable(s) == pytest.approx(0.4)


def test_empty_or_blank_content_is_never_a_first_screen():
    assert first_stable(seq((0.0, ""), until=2.0)) is None
    assert first_stable(seq((0.0, ""), (0.1, "\n\n   \n"), until=2.0)) is None
    assert first_stable(seq((0.0, "\n \n"), (1.0, "x\n"), until=2.0)) == pytest.approx(1.0)


def test_not_confirmed_until_a_sample_hold_later():
    # content appears at 1.9, the last capture is at 2.0: not yet stable for 300 ms
    assert first_stable(seq((0.0, ""), (1.9, "late"), until=2.0)) is None


def test_a_screen_that_never_settles_has_no_first_screen():
    spinner = [(i * 0.1, "|/-\\"[i % 4]) for i in range(30)]
    assert first_stable(seq(*spinner, until=2.9)) is None


def test_same_content_seen_again_after_a_change_restarts_the_clock():
    s = seq((0.0, "a"), (0.2, "b"), (0.3, "a"), until=2.0)
    assert first_stable(s) == pytest.approx(0.3)


def test_drawn_is_the_first_non_empty_content_stable_or_not():
    s = Stable()
    for t, c in seq((0.0, ""), (0.2, " \n"), (0.5, "loading"), (0.6, "ready"), until=1.5):
        s.feed(t, c)
    assert s.drawn == pytest.approx(0.5) and s.at == pytest.approx(0.6)


def test_the_streaming_detector_keeps_its_answer():
    s = Stable()
    assert s.feed(0.0, "x") is None
    assert s.feed(0.31, "x") == 0.0
    assert s.feed(0.5, "changed") == 0.0  # once found, later captures do not move it


def test_sparse_captures_still_need_the_content_to_hold():
    # a slow poller: two captures 0.5 s apart with the same content prove it held
    assert first_stable([(0.0, ""), (1.0, "s"), (1.5, "s")]) == pytest.approx(1.0)
    assert first_stable([(0.0, ""), (1.0, "s"), (1.2, "t"), (1.4, "t")]) is None


def test_bare_command_mirrors_the_jail_with_a_scratch_home(tmp_path):
    jail_home, bare_home = Path("/h/me"), tmp_path / "bare"
    dry = {"sandbox_argv": ["bwrap", "--bind", "/h/me", "/h/me", "--", "/usr/bin/prlimit", "--nproc=4096", "--",
                            "/opt/claude", "--session-id", "bd8eb927-badd-4409-b3a1-e39bb8cfeffb"],
           "policy": {"env_set": [["CLAUDE_CONFIG_DIR", "/h/me/.claude"], ["HOME", "/h/me"],
                                  ["PATH", "/usr/bin:/bin"], ["OTHER", "/h/meX"]]}}
    argv, dirs = bare_command(dry, jail_home, bare_home)
    assert argv[:2] == ["env", "-i"]
    assert f"CLAUDE_CONFIG_DIR={bare_home}/.claude" in argv and f"HOME={bare_home}" in argv
    assert "OTHER=/h/meX" in argv and "PATH=/usr/bin:/bin" in argv  # only the home itself is moved
    assert argv[-6:-2] == ["/usr/bin/prlimit", "--nproc=4096", "--", "/opt/claude"]
    assert argv[-2] == "--session-id" and argv[-1] != "bd8eb927-badd-4409-b3a1-e39bb8cfeffb"
    assert dirs == [bare_home / ".claude"]


def test_the_bare_pane_gets_the_variables_the_jail_passes_through(tmp_path):
    """Both sides run with the same environment: what the policy passes through (env_names, as a
    start takes it from the caller) and what it sets; the caller's other variables, TERM (the
    pane's, set by the part) and the proxy's stay out."""
    jail_home, bare_home = Path("/h/me"), tmp_path / "bare"
    dry = {"sandbox_argv": ["bwrap", "--", "/opt/codex"], "env_names": ["HOME", "LANG", "LC_ALL", "SSL_CERT_FILE", "TERM"],
           "policy": {"env_set": [["HOME", "/h/me"], ["PATH", "/usr/bin:/bin"]]}}
    caller = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "SSL_CERT_FILE": "/etc/ssl/certs/ca.crt", "TERM": "xterm",
              "HOME": "/elsewhere", "SECRET": "x", "HTTPS_PROXY": "http://127.0.0.1:3128"}
    argv, _ = bare_command(dry, jail_home, bare_home, caller)
    env = argv[2:argv.index("/opt/codex")]
    assert sorted(env) == sorted(["LANG=C.UTF-8", "LC_ALL=C.UTF-8", "SSL_CERT_FILE=/etc/ssl/certs/ca.crt",
                                  f"HOME={bare_home}", "PATH=/usr/bin:/bin"])


def test_a_cli_that_exits_keeps_its_screen_tmuxs_dead_pane_line_is_not_a_change():
    drawn = " Unable to connect to Anthropic services\n Check your internet connection.\n\n\n"
    dead = drawn.rstrip("\n") + "\nPane is dead (status 1, Tue Dec  1 22:45:21 2026)\n\n"
    assert visible(dead) == visible(drawn)
    assert first_stable([(0.0, ""), (1.0, visible(drawn)), (1.1, visible(dead)), (1.3, visible(dead))]) == 1.0
    assert visible("Pane is dead inside the CLI's own text") == "Pane is dead inside the CLI's own text"


def _runs(*screens: str | None) -> list[Seen]:
    return [Seen(None if s is None else 0.5, 0.1, s or "", "") for s in screens]


def test_runs_that_all_settle_on_one_screen_are_compared_as_they_are():
    assert matched({"jail": _runs("A\n", "A\n", "A\n"), "bare": _runs("A\n", "A\n", "A\n")}) is None


def test_sides_that_settle_on_different_screens_are_compared_on_the_screen_both_reached_most():
    jail = _runs("Unable\n", "Unable\n", "Unable\n", "Unable\n", "Welcome\n")
    bare = _runs("Welcome\n", "Welcome\n", "Unable\n", "Unable\n", "Unable\n")
    assert matched({"jail": jail, "bare": bare}) == "Unable"


def test_no_screen_both_sides_reached_often_enough_compares_nothing():
    jail = _runs("Unable\n", "Unable\n", "Unable\n", "Welcome\n")
    bare = _runs("Welcome\n", "Welcome\n", "Welcome\n", "Unable\n")
    assert matched({"jail": jail, "bare": bare}) is None
    assert matched({"jail": jail, "bare": bare}, least=1) in ("Unable", "Welcome")
    assert matched({"jail": _runs("A\n", None, None), "bare": _runs(None, None, None)}, least=1) == "none in 30 s"
