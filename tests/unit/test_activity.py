"""Working / waiting guesses from a pane's visible screen (pure)."""

from tmuxjail.activity import guess
from tmuxjail.status import kind


def test_agents_working_when_their_busy_footer_shows():
    assert guess("claude-code", "> fix it\n\n✻ Pondering… (12s · ↑ 1.2k tokens · esc to interrupt)\n", "claude") == "working"
    assert guess("codex", "• Working (3s • esc to interrupt)\n", "codex") == "working"
    assert guess("cursor", "⬡ Generating...  ctrl+c to stop\n", "cursor-agent") == "working"
    assert guess("pi", "Working... (esc to abort)\n", "node") == "working"


def test_agents_waiting_otherwise():
    assert guess("claude-code", "> \n? for shortcuts\n", "claude") == "waiting"
    assert guess("codex", "▌ Ask Codex to do anything\n⏎ send   ⌃J newline\n", "codex") == "waiting"
    assert guess("codex", "", "codex") == "waiting"
    # only the bottom of the screen counts: an old footer scrolled up is not a running turn
    assert guess("codex", "esc to interrupt\n" + "\n".join(f"line {i}" for i in range(30)), "codex") == "waiting"


def test_shells_by_foreground_process():
    assert guess("shell", "$ ", "bash") == "waiting"
    assert guess("shell", "$ make", "make") == "working"
    assert guess("codex", "", "zsh", kind="shell") == "waiting"


def test_pane_kind_needs_the_fingerprint_in_the_start_command():
    fp = "sha256:" + "a" * 64
    launcher = f"python -E -S -c 'from tmuxjail.launch import main' --fp {fp} /spool/x.json"
    assert kind(launcher, fp) == "agent"
    assert kind(f"exec python -I -m tmuxjail _pane --id X --fp {fp}", fp) == "shell"
    assert kind(launcher, "sha256:" + "b" * 64) is None  # another jail's launcher
    assert kind("bash", fp) is None and kind("", fp) is None and kind(launcher, None) is None


def test_the_status_snippet_searches_what_list_searches():
    """tmux.conf.example's ` waiting` mark uses tmux's own search with SCREEN_SEARCH (issue 28)."""
    from pathlib import Path

    from tmuxjail.activity import SCREEN_SEARCH

    conf = Path(__file__).resolve().parents[2] / "tmux.conf.example"
    if not conf.exists():
        import pytest

        pytest.skip("not run from a source tree")
    assert f"#{{C/ri:{SCREEN_SEARCH}}}" in conf.read_text()
