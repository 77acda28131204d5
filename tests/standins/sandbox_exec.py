"""A stand-in for macOS's /usr/bin/sandbox-exec, for the Darwin seam (tmuxjail.testing.darwin).

    sandbox_exec.py DIR -p PROFILE [-D KEY=VALUE ...] [--] COMMAND [ARGS ...]

It parses the profile with the project's SBPL evaluator (tmuxjail/sandbox/sbpl.py; a profile that does
not parse, or names a parameter it was not given, is refused with exit 65 as sandbox-exec refuses
it), evaluates every request in DIR/table.json (a list of
{"op": ..., "path"/"ip"/"unix"/"mach": ...}), writes what it decided, the parameters and the
command to DIR/decisions.jsonl (one line per run), and then execs the command. It enforces
nothing: on this machine nothing can; what the profile decides is what the tests check. A file
DIR/refuse makes it refuse every profile as unreadable (the tests' way to get one)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tmuxjail.sandbox import sbpl


def main(argv: list[str], home: Path) -> None:
    text, params, i = None, {}, 0
    while i < len(argv):
        a = argv[i]
        if a == "-p" and i + 1 < len(argv):
            text, i = argv[i + 1], i + 2
        elif a == "-D" and i + 1 < len(argv):
            key, eq, value = argv[i + 1].partition("=")
            if not eq:
                sys.exit(f"sandbox-exec: bad -D {argv[i + 1]!r}")
            params[key], i = value, i + 2
        elif a == "--":
            i += 1
            break
        elif a.startswith("-"):
            sys.exit(f"sandbox-exec: this stand-in does not take {a!r}")
        else:
            break
    command = argv[i:]
    if text is None or not command:
        sys.exit("usage: sandbox-exec -p PROFILE [-D KEY=VALUE ...] [--] COMMAND [ARGS ...]")
    try:
        if (home / "refuse").exists():  # a test's stand-in for a profile sandbox-exec cannot read
            raise sbpl.ParseError((home / "refuse").read_text().strip() or "refused by the test")
        profile = sbpl.Profile(text, params)
        table = json.loads((home / "table.json").read_text()) if (home / "table.json").exists() else []
        decisions = [dict(req, decision=profile.decide(sbpl.Request(**req))) for req in table]
    except (sbpl.ParseError, KeyError) as exc:
        print(f"sandbox-exec: profile rejected: {exc!r}", file=sys.stderr)
        sys.exit(65)
    record = {"params": params, "command": command, "decisions": decisions, "pid": os.getpid(),
              "env": {k: v for k, v in os.environ.items() if k.endswith(("PROXY", "proxy")) or k in ("HOME", "TMPDIR")}}
    with open(home / "decisions.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[2:], Path(sys.argv[1]))
