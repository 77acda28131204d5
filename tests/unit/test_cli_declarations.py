"""The parser built from the commands' declarations is the parser tmuxjail had before they moved
next to their commands (tests/unit/golden/parser.json, taken from the hand-built parser): every
subcommand's option strings, dests, defaults, choices, nargs, metavars and help, and which options
exclude each other. Regenerate after an intended change with TMUXJAIL_UPDATE_GOLDEN=1 and review
the diff."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tmuxjail.cli.app import parser

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
