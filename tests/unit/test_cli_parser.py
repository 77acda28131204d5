"""The parser a command line gets: only its own subcommand's (a warm start builds one subparser,
not twenty), which must parse, refuse and explain exactly as the whole parser does; help and
anything unusual get the whole parser (completion reads the declarations, not the parser)."""

from __future__ import annotations

import pytest

from tmuxjail.cli.app import SUBCOMMANDS, invoked, parser

LINES = [
    ["start", "codex", "--mode", "isolated", "--detach"],
    ["-L", "sock", "-v", "start", "codex", "--workspace", "/w", "--workspace", "/x", "--name", "a", "--split", "h"],
    ["-Lsock", "start", "shell", "--network", "proxy", "--allow-domain", "example.com", "--json"],
    ["-S", "/tmp/s", "resume", "app", "--accept-changes"], ["list", "--all", "--json"], ["list", "--check"],
    ["prune", "--older-than", "30d", "--dry-run"], ["show", "app", "--network"], ["stop", "app"],
    ["shell", "app", "--detach"], ["audit", "app", "--all"], ["menu", "_start", "codex", "isolated", "-c", "c"],
    ["doctor", "--json"], ["profiles", "show", "codex", "--details"], ["approve", "codex", "--capability", "x", "--yes"],
    ["approve", "codex", "--candidate", "c-1"], ["approvals", "--all"], ["revoke", "codex"],
    ["login", "codex", "--json"], ["logout", "codex"],
    ["certify", "codex", "--mode", "isolated"], ["preflight", "codex", "--mode", "verified", "--json"],
    ["discover", "show", "codex-app-1", "--json"],
    ["attach", "app", "--json"], ["rename", "a", "b"], ["stop", "--all", "--workspace", "/w"],
    ["prune", "--homes", "--dry-run"], ["list", "--workspace", "/w", "--provider", "codex"],
    ["menu", "_stop", "0e0e0e0e-0000-4000-8000-000000000000", "-c", "c"], ["completion", "zsh"],
    ["start", "codex", "--mode", "isolated", "--worktree", "x", "--from", "HEAD~1"], ["start", "pi", "--worktree"],
    ["diff", "app", "--stat", "--json"], ["land", "app", "--into", "main", "--squash", "--trust-files"],
    ["prune", "--worktrees", "--force", "--dry-run"], ["menu", "_start", "codex", "isolated", "worktree", "-t", "%1"],
]


def test_every_subcommand_is_covered():
    assert {line[line.index(next(w for w in line if w in SUBCOMMANDS))] for line in LINES} == SUBCOMMANDS


@pytest.mark.parametrize("argv", LINES, ids=lambda a: " ".join(a))
def test_the_one_subparser_parses_as_the_whole_parser(argv):
    only = invoked(argv)
    assert only is not None and only in argv
    assert parser(only).parse_args(argv) == parser().parse_args(argv)


@pytest.mark.parametrize("argv", [
    ["start", "codex", "--mode", "bogus"], ["start"], ["start", "codex", "--here", "--split", "v"],
    ["list", "--json", "--ndjson"], ["stop", "--workspace"], ["start", "codex", "--no-such-flag"],
])
def test_the_one_subparser_refuses_as_the_whole_parser(argv, capsys):
    errors = []
    for p in (parser(invoked(argv)), parser()):
        with pytest.raises(SystemExit) as exc:
            p.parse_args(argv)
        errors.append((exc.value.code, capsys.readouterr().err))
    assert errors[0] == errors[1] and errors[0][0] == 2


def test_a_subcommands_help_is_the_same(capsys):
    helps = []
    for p in (parser("start"), parser()):
        with pytest.raises(SystemExit):
            p.parse_args(["start", "--help"])
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and "--workspace" in helps[0]


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["-h"], ["start", "--help"], ["start", "codex", "-h"], ["--version"],
    ["-vL", "s", "start", "codex"], ["--verb", "start", "codex"], ["bogus"], ["-L"], ["-L", "s"],
])
def test_help_and_the_unusual_get_the_whole_parser(argv):
    assert invoked(argv) is None


def test_an_option_value_is_not_taken_for_the_command():
    assert invoked(["-L", "start", "list", "--json"]) == "list"
    assert parser("list").parse_args(["-L", "start", "list"]) == parser().parse_args(["-L", "start", "list"])
