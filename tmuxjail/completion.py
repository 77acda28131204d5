"""Shell completion scripts, generated from the commands' declarations (commands/table.py), so they
cannot drift from the parser built from the same: every subcommand, every flag, the choices of
each option and positional. Session names come from `tmuxjail list --json` at completion time.
zsh uses the same function through bashcompinit."""

from __future__ import annotations

import argparse
import shlex

from .registry import PROVIDERS

SESSION_ARGS = {"name"}  # positionals that take a session name
DIR_OPTS = {"--workspace"}
FILE_METAVARS = {"FILE", "DIR", "SOCKET_PATH"}
HELP = ("-h", "--help")  # argparse's own, first on every parser


def walk(args) -> dict:
    """{"flags": [...], "values": {flag: words | ":dir" | ":file" | ""}, "positional": [...]} of
    declared arguments (commands/table.Arg: names, kw, flags, dest, takes_value)."""
    flags, values, positional = list(HELP), {}, []
    for a in args:
        choices, metavar = a.kw.get("choices"), a.kw.get("metavar")
        if a.flags:
            flags += a.flags
            if a.takes_value:
                kind = (" ".join(choices) if choices else ":dir" if a.flags[-1] in DIR_OPTS
                        else ":file" if metavar in FILE_METAVARS else "")
                for o in a.flags:
                    values[o] = kind
        elif a.kw.get("help") != argparse.SUPPRESS:
            if choices:
                positional.append(" ".join(c for c in choices if not c.startswith("_")))
            elif a.dest in SESSION_ARGS:
                positional.append(":session")
            elif a.dest == "provider":
                positional.append(" ".join(PROVIDERS))
            else:
                positional.append("")
    return {"flags": flags, "values": values, "positional": positional}


def spec(table) -> dict:
    """{command: walk(its arguments)}, plus "" for the top level, of a command table (the module
    commands/table.py: COMMON, TOP, VERBS)."""
    out = {"": walk([*table.COMMON, *table.TOP])}
    out[""]["positional"] = [" ".join(v.name for v in table.VERBS)]
    for verb in table.VERBS:
        out[verb.name] = walk([*table.COMMON, *verb.arguments()])
    return out


def bash(table) -> str:
    s = spec(table)
    takes_value = sorted({f for c in s.values() for f in c["values"]})
    lines = [
        "_tmuxjail_sessions() {",
        "  tmuxjail list --json 2>/dev/null | sed -n 's/^ *\"name\": \"\\(.*\\)\",$/\\1/p'",
        "}",
        "_tmuxjail() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '  local cmd="" npos=0 i w skip=0 words="" values=""',
        '  for ((i=1; i<COMP_CWORD; i++)); do',
        '    w="${COMP_WORDS[i]}"',
        '    if [ "$skip" = 1 ]; then skip=0; continue; fi',
        "    case \"$w\" in",
        f"      {'|'.join(takes_value)}) skip=1;;",
        "      -*) ;;",
        '      *) if [ -z "$cmd" ]; then cmd="$w"; else npos=$((npos+1)); fi;;',
        "    esac",
        "  done",
        "  case \"$cmd\" in",
    ]
    for name, c in s.items():
        label = shlex.quote(name) if name else '""'
        lines.append(f"    {label})")
        lines.append(f"      words={shlex.quote(' '.join(c['flags']))}")
        lines.append('      case "$prev" in')
        for flag, kind in sorted(c["values"].items()):
            lines.append(f"        {flag}) values={shlex.quote(kind or ':none')};;")
        lines.append("      esac")
        pos = c["positional"] if name else c["positional"][:1]
        if pos:
            lines.append('      case "$npos" in')
            for i, p in enumerate(pos):
                lines.append(f"        {i}) [ -z \"$values\" ] && [ \"${{cur#-}}\" = \"$cur\" ] && values={shlex.quote(p or ':none')};;")
            lines.append("      esac;;")
        else:
            lines[-1] += ";;"
    lines += [
        "  esac",
        '  case "$values" in',
        '    :dir) COMPREPLY=($(compgen -d -- "$cur")); return;;',
        '    :file) COMPREPLY=($(compgen -f -- "$cur")); return;;',
        '    :session) COMPREPLY=($(compgen -W "$(_tmuxjail_sessions)" -- "$cur")); return;;',
        "    :none) COMPREPLY=(); return;;",
        '    "") COMPREPLY=($(compgen -W "$words" -- "$cur")); return;;',
        '    *) COMPREPLY=($(compgen -W "$values" -- "$cur")); return;;',
        "  esac",
        "}",
        "complete -F _tmuxjail tmuxjail",
    ]
    return "\n".join(lines)


def script(shell: str, table) -> str:
    text = bash(table)
    if shell == "zsh":
        return "#compdef tmuxjail\nautoload -U +X bashcompinit && bashcompinit\n" + text
    return text
