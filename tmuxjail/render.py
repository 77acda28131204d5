"""The one renderer: a command's result as text or JSON, and an error as one line, a hint and an
exit code. The CLI, the menus, the launcher and `_pane` all print through it. It imports only sys,
so the launcher can use it."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported: the launcher prints through this module
if TYPE_CHECKING:
    from collections.abc import Iterable


class Result:
    """What a command handler returns: data (printed with --json), text (printed otherwise,
    None: nothing; an iterable of pieces is written as they come), the exit code, and what to bring in front of the user (a started, resumed or
    shell pane; see cli.bring)."""

    __slots__ = ("bring", "code", "data", "target", "text")

    def __init__(self, data, text: str | Iterable[str] | None = None, code: int = 0, bring: dict | None = None,
                 target: str | None = None):
        self.data, self.text, self.code, self.bring, self.target = data, text, code, bring, target


def as_json(data) -> str:
    # Here, not at the top: the launcher prints its errors through this module and must not load
    # json (tests/integration/test_launcher_lean.py).
    import json

    return json.dumps(data, indent=2, sort_keys=True)


def out(result: Result, json_out: bool) -> int:
    if json_out:
        if result.data is not None:
            print(as_json(result.data))
    elif isinstance(result.text, str):
        print(result.text)
    elif result.text is not None:  # pieces, written as they come (tmuxjail diff's patch)
        for piece in result.text:
            sys.stdout.write(piece)
    return result.code


def error_text(message: str, hint: str | None = None) -> str:
    return f"tmuxjail: {message}" + (f"\n  {hint}" if hint else "")


def fail(message: str, hint: str | None = None) -> None:
    """One line on stderr (and the hint under it)."""
    sys.stderr.write(error_text(message, hint) + "\n")
    sys.stderr.flush()


def error(exc, json_out: bool = False) -> int:
    """A TmuxjailError: JSON on stdout with --json, always the line on stderr; its exit code."""
    if json_out:
        print(as_json({"error": exc.message, "code": exc.code, "hint": exc.hint, **exc.data}))
    fail(exc.message, exc.hint)
    return exc.code


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def confirm(question: str) -> bool:
    if not interactive():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


# What `show` prints for a field the session does not have (never Python's `None`).
UNSET = {"private_home": "none (no private home in this mode)", "tmux_pane": "none (no pane now)",
         "network": "host (recorded before networks were)"}


def value_text(key: str, v) -> str:
    return UNSET.get(key, "-") if v is None else str(v)


def session_text(d: dict, clean=str, audit_line=None) -> str:
    """audit_line(finding, workspaces): one finding in one line (audit.line; render imports only sys)."""
    lines = [f"{k}: {value_text(k, d.get(k))}" for k in ("name", "provider", "mode", "network", "status", "fingerprint",
                                                         "workspace", "private_home", "tmux_session", "tmux_pane",
                                                         "created_at")]
    if d.get("failure"):
        lines.append(f"failure: {d['failure']}")
    if d.get("audit"):
        a = d["audit"]
        lines.append(f"audit: {a['count']} finding(s) at {a['at']} (tmuxjail audit {d['name']})"
                     + ("" if a.get("complete", True) else "; NOT COMPLETE: something may be missing"))
        roots = list((d.get("request") or {}).get("workspaces") or [d.get("workspace") or ""])
        lines += ["  " + (audit_line(f, roots) if audit_line else f"{f['kind']}  {clean(f['path'])}: {clean(f['detail'])}")
                  for f in a["findings"][:20]]
    return "\n".join(lines)


def policy_text(pol: dict) -> str:
    out = []
    for k, v in pol.items():
        if isinstance(v, (list, tuple)) and v and not isinstance(v[0], (list, tuple)):
            out.append(f"  {k}:")
            out += [f"    {x}" for x in v]
        elif isinstance(v, (list, tuple)) and v:
            # pairs (env_set: NAME=value) and longer rows ([network.resolve]: name address test)
            out.append(f"  {k}:")
            out += [f"    {x[0]}={x[1]}" if len(x) == 2 else "    " + " ".join(map(str, x)) for x in v]
        elif isinstance(v, dict):
            out.append(f"  {k}:")
            out += [f"    {a}: {value_text(a, b)}" for a, b in v.items()]
        else:
            out.append(f"  {k}: {value_text(k, v)}")
    return "\n".join(out)


def size(n: float) -> str:
    """Bytes for a person: 512 B, 1.5 KiB, 3.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
