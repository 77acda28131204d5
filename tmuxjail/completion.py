"""Shell completion scripts, generated from the argparse parser, so they cannot drift from it:
every subcommand, every flag, the choices of each option and positional. Session names come from
`tmuxjail list --json` at completion time. zsh uses the same function through bashcompinit."""

from __future__ import annotations

import argparse
import shlex

from .registry import PROVIDERS

SESSION_ARGS = {"name"}  # positionals that take a session name
DIR_OPTS = {"--workspace"}
FILE_METAVARS = {"FILE", "DIR", "SOCKET_PATH"}


def spec(parser: argparse.ArgumentParser) -> dict:
    """{command: {"flags": [...], "values": {flag: words | ":dir" | ":file" | ""},
    "positional": [words | ":session", ...]}}, plus "" for the top level."""
    def walk(p):
        flags, values, positional = [], {}, []
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                continue
            if a.option_strings:
                flags += a.option_strings
                if a.nargs != 0:
                    kind = (" ".join(a.choices) if a.choices else ":dir" if a.option_strings[-1] in DIR_OPTS
                            else ":file" if a.metavar in FILE_METAVARS else "")
                    for o in a.option_strings:
                        values[o] = kind
            elif a.help != argparse.SUPPRESS:
                if a.choices:
                    positional.append(" ".join(c for c in a.choices if not c.startswith("_")))
                elif a.dest in SESSION_ARGS:
                    positional.append(":session")
                elif a.dest == "provider":
                    positional.append(" ".join(PROVIDERS))
                else:
                    positional.append("")
        return {"flags": flags, "values": values, "positional": positional}

    out = {"": walk(parser)}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out[""]["positional"] = [" ".join(sub.choices)]
    for name, p in sub.choices.items():
        out[name] = walk(p)
    return out


def bash(parser: argparse.ArgumentParser) -> str:
    s = spec(parser)
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


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    text = bash(parser)
    if shell == "zsh":
        return "#compdef tmuxjail\nautoload -U +X bashcompinit && bashcompinit\n" + text
    return text
