"""The parser built from the commands' declarations is the parser tmuxjail had before they moved
next to their commands (tests/unit/golden/parser.json, taken from the hand-built parser): every
subcommand's option strings, dests, defaults, choices, nargs, metavars and help, and which options
exclude each other. (Two changes were meant: preflight shares start's request arguments, so its
help now says what each one is; `menu --print --json`.) Regenerate after an intended change with TMUXJAIL_UPDATE_GOLDEN=1 and
review the diff. Completion reads the same declarations: what it offers must be what the parser
built from them holds."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tmuxjail import completion
from tmuxjail.cli.app import parser
from tmuxjail.commands import table

GOLDEN = Path(__file__).parent / "golden" / "parser.json"


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is argparse.SUPPRESS or isinstance(value, (str, int, float, bool, type(None))):
        return value
    return getattr(value, "__name__", repr(value))


def _describe(p: argparse.ArgumentParser) -> dict:
    actions, subs = [], {}
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            subs = {name: _describe(sp) for name, sp in a.choices.items()}
            actions.append({"subcommands": list(a.choices), "dest": a.dest, "metavar": a.metavar})
            continue
        actions.append({"class": type(a).__name__, "option_strings": a.option_strings, "dest": a.dest,
                        "default": _plain(a.default), "choices": _plain(a.choices), "nargs": a.nargs,
                        "const": _plain(a.const), "metavar": a.metavar, "required": a.required,
                        "type": _plain(a.type), "help": a.help})
    groups = [[a.dest for a in g._group_actions] for g in p._mutually_exclusive_groups]
    return {"prog": p.prog, "description": p.description, "epilog": p.epilog, "actions": actions,
            "exclusive": groups, "subcommands": subs}


def test_the_declared_parser_is_the_parser_of_before():
    got = _describe(parser())
    if os.environ.get("TMUXJAIL_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    for name in sorted(set(want["subcommands"]) | set(got["subcommands"])):
        assert got["subcommands"].get(name) == want["subcommands"].get(name), name
    assert got == want


def _offered(p: argparse.ArgumentParser) -> dict:
    """What completion offers for one parser, read from argparse itself (as completion did before
    it read the declarations)."""
    flags, values, positional = [], {}, []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            positional.append(" ".join(a.choices))
        elif a.option_strings:
            flags += a.option_strings
            if a.nargs != 0:
                kind = (" ".join(a.choices) if a.choices else ":dir" if a.option_strings[-1] in completion.DIR_OPTS
                        else ":file" if a.metavar in completion.FILE_METAVARS else "")
                values.update(dict.fromkeys(a.option_strings, kind))
        elif a.help != argparse.SUPPRESS:
            positional.append(" ".join(c for c in a.choices if not c.startswith("_")) if a.choices
                              else ":session" if a.dest in completion.SESSION_ARGS
                              else " ".join(table.PROVIDERS) if a.dest == "provider" else "")
    return {"flags": flags, "values": values, "positional": positional}


def test_completion_offers_what_the_parser_holds():
    whole = parser()
    sub = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    want = {"": _offered(whole), **{name: _offered(p) for name, p in sub.choices.items()}}
    got = completion.spec(table)
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], name


def _options(p: argparse.ArgumentParser) -> dict:
    return {a.dest: (a.option_strings, a.default, _plain(a.choices), a.nargs, a.metavar, type(a).__name__)
            for a in p._actions}


# start's arguments about the pane and the terminal, not about the jail it asks for
# (--worktree and --from make a workspace: a preflight checks a start in one that exists.)
PANE_ONLY = {"name", "detach", "here", "split", "client", "non_interactive", "dry_run", "backend", "worktree",
             "from_ref"}


def test_preflight_takes_every_argument_of_the_request_start_takes():
    """preflight checks that a start would run: it must take what a start asks for, the same way
    (same flags, defaults, choices), or a scheduled check would pass a request start refuses."""
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    start, preflight = _options(sub["start"]), _options(sub["preflight"])
    assert set(start) - PANE_ONLY == set(preflight)
    assert {d: start[d] for d in preflight} == preflight
