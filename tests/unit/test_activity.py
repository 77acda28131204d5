"""Working / waiting guesses from a pane's visible screen, and which panes are ours (pure)."""

import shlex

from tmuxjail.activity import guess
from tmuxjail.pane.command import extra_pane, is_launcher, kind, launcher


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
    """Our panes are recognised by the command tmux ran, as pane/command.py builds it, and only
    with this session's fingerprint in it."""
    fp = "sha256:" + "a" * 64
    agent = shlex.join(launcher("/usr/bin/python3", fp, "/spool/x.json"))
    legacy = f"python -E -S -c 'from tmuxjail.launch import main' --fp {fp} /spool/x.json"  # before pane/
    for cmd in (agent, legacy):
        assert kind(cmd, fp) == "agent" and is_launcher(cmd)
        assert kind(cmd, "sha256:" + "b" * 64) is None  # another jail's launcher
        assert kind(cmd, None) is None
    assert kind("exec " + shlex.join(extra_pane("/usr/bin/python3", "X", fp)), fp) == "shell"
    assert kind(f"exec python -I -m tmuxjail _pane --id X --fp {fp}", fp) == "shell"
    assert kind(f"exec python -m tmuxjail.pane.launch {fp}", fp) is None  # the fingerprint, not after --fp
    assert kind("bash", fp) is None and kind("", fp) is None
    assert not is_launcher(f"python -m tmuxjail _pane --fp {fp}")


def test_the_status_snippet_searches_what_list_searches():
    """tmux.conf.example's ` waiting` mark uses tmux's own search with SCREEN_SEARCH (issue 28)."""
    from pathlib import Path

    from tmuxjail.activity import SCREEN_SEARCH

    conf = Path(__file__).resolve().parents[2] / "tmux.conf.example"
    if not conf.exists():
        import pytest

        pytest.skip("not run from a source tree")
    assert f"#{{C/ri:{SCREEN_SEARCH}}}" in conf.read_text()


def test_the_status_snippet_knows_the_launcher_as_pane_command_does():
    """tmux.conf.example tells an agent's pane from a `_pane` shell by a glob on the start command:
    it must match every launcher pane/command.py builds or still recognises, and no `_pane`."""
    import fnmatch
    import re
    from pathlib import Path

    from tmuxjail.pane.command import LAUNCHER_MARKS

    conf = Path(__file__).resolve().parents[2] / "tmux.conf.example"
    if not conf.exists():
        import pytest

        pytest.skip("not run from a source tree")
    globs = re.findall(r"#\{m:(\*tmuxjail[^,]*),#\{pane_start_command\}\}", conf.read_text())
    assert len(globs) == 1, globs
    fp = "sha256:" + "a" * 64
    for cmd in (shlex.join(launcher("/usr/bin/python3", fp, "/spool/x.json")),
                *(f"python -I -S -c 'from {m} import main' --fp {fp} /s.json" for m in LAUNCHER_MARKS)):
        assert fnmatch.fnmatchcase(cmd, globs[0]), (cmd, globs[0])
    assert not fnmatch.fnmatchcase(shlex.join(extra_pane("/usr/bin/python3", "X", fp)), globs[0])
