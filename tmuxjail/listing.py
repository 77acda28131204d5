"""`tmuxjail list` as text: the table (fit to the terminal, coloured, control characters shown
as `?`), JSON and NDJSON, from the rows status.rows() builds. Stdlib only."""

from __future__ import annotations

import json
import os
import shutil

from .subpath import inside

COLUMNS = ("NAME", "PROVIDER", "MODE", "STATUS", "AGENT", "KIND", "PANE", "FINGERPRINT", "WORKSPACE")
COLORS = {"running": "32", "exited": "33", "killed": "31", "gone": "2", "stopped": "2", "failed": "31",
          "mismatch": "1;31", "unjailed": "1;7;31", "working": "36", "waiting": "1;33"}


# Keys only some rows have (an exit status, a signal, --check's reasons...): every record of
# `list --json` carries all of them, None where they do not apply, so a consumer reads one shape.
SOMETIMES = ("exit_status", "signal", "failure", "reasons", "pane_status", "checked", "audit", "command",
             "start_command")


def public(rows_: list[dict]) -> list[dict]:
    keys = dict.fromkeys(SOMETIMES)
    for d in rows_:
        keys.update(dict.fromkeys(k for k in d if not k.startswith("_")))
    return [{k: d.get(k) for k in keys} for d in rows_]


AUDIT_COLOR = "1;31"  # a session whose last audit found something, or did not see everything: never green


def _status_text(d: dict) -> str:
    out = _status(d)
    if d.get("audit_complete") is False:
        out += "!audit(?)"
    elif d.get("audit"):
        out += f"!audit({d['audit']})"
    if d.get("denied"):  # the proxy refused something: `show NAME --network` says what, and the fix
        out += f"!denied({d['denied']})"
    if d.get("mcp_refused"):  # the MCP broker refused tool calls: `show NAME --mcp` says which
        out += f"!mcp-refused({d['mcp_refused']})"
    return out


def _status(d: dict) -> str:
    s = d["status"]
    if s == "exited":
        return f"exited({'?' if d.get('exit_status') is None else d['exit_status']})"
    if s == "killed":
        return f"killed({d.get('signal', '?')})"
    if s == "mismatch":
        return f"mismatch({','.join(d.get('reasons', []))})"
    return s


# Least useful first, when narrow: the name tells the provider (codex-app-1a2b); AGENT (waiting
# for you?) and KIND (is this pane the agent, a shell, unjailed?) go last.
DROP_ORDER = ("PANE", "FINGERPRINT", "PROVIDER", "AGENT", "KIND")
MIN_WORKSPACE = 12
WANT_WORKSPACE = 32


def _cells(d: dict, short_fp: bool, home: str, servers: bool = False) -> list[str]:
    fp = d["fingerprint"]
    fp_text = "-" if not fp else (fp[7:15] + "…") if short_fp else (fp[:19] + "…")
    ws = d["workspace"] or "-"
    if home != "/" and inside(ws, home):
        ws = "~" + ws[len(home.rstrip("/")):]
    wt = d.get("worktree")
    if wt:  # the branch and its commits since its base, where the workspace is
        dirty = "" if not wt.get("uncommitted") else f", {wt['uncommitted']} uncommitted"
        ws += f" [{wt['branch']} +{'?' if wt.get('ahead') is None else wt['ahead']}{dirty}]"
    return [d["name"], d["provider"], d["mode"] or "-", _status_text(d), d["agent"] or "-",
            d["kind"], d["tmux_pane"] or "-", fp_text, *([d.get("server") or "-"] if servers else []), ws]


def _shorten(path: str, width: int) -> str:
    """The end of a path, which tells workspaces apart: `…/src/app`."""
    return path if len(path) <= width else "…" + path[-(width - 1):]


def _layout(rows_: list[dict], width: int | None, home: str) -> tuple[list[str], list[list[str]]]:
    """Columns and cells that fit `width` (None: as wide as they are): first the fingerprint and
    the home directory get shorter, then PANE, FINGERPRINT and PROVIDER go, then the workspace's
    start, and AGENT and KIND only below ~70 columns."""
    # A SERVER column once sessions run on more than one tmux server.
    servers = len({d.get("server") for d in rows_}) > 1
    cols = list(COLUMNS) if not servers else [*COLUMNS[:-1], "SERVER", COLUMNS[-1]]
    body = [_cells(d, False, "", servers) for d in rows_]

    def total() -> int:
        return sum(max(len(x) for x in col) for col in zip(cols, *body, strict=True)) + 2 * (len(cols) - 1)

    if width is None or total() <= width:
        return cols, body
    body = [_cells(d, True, home, servers) for d in rows_]
    ws_full = max(len(r[-1]) for r in [cols, *body])
    def drop(name: str) -> None:
        i = cols.index(name)
        cols.pop(i)
        for r in body:
            r.pop(i)

    for name in DROP_ORDER[:3]:  # a column goes before the workspace gets shorter than WANT_WORKSPACE
        if total() - ws_full + min(ws_full, WANT_WORKSPACE) <= width:
            break
        drop(name)
    for name in DROP_ORDER[3:]:  # AGENT and KIND only when not even MIN_WORKSPACE is left
        if total() - ws_full + min(ws_full, MIN_WORKSPACE) <= width:
            break
        drop(name)
    # Still too wide: long names and reason lists end in `…` (JSON and --check keep them whole).
    for name, floor in (("STATUS", 10), ("NAME", 12), ("MODE", 8)):
        i = cols.index(name)
        over = total() - max(len(r[-1]) for r in [cols, *body]) + MIN_WORKSPACE - width
        w = max(len(r[i]) for r in [cols, *body])
        if over > 0 and w > floor:
            keep = max(floor, w - over)
            for r in body:
                r[i] = r[i] if len(r[i]) <= keep else r[i][:keep - 1] + "…"
    room = max(MIN_WORKSPACE, width - (total() - max(len(r[-1]) for r in [cols, *body])))
    for r in body:
        r[-1] = _shorten(r[-1], room)
    return cols, body


def printable(v) -> str:
    """A cell as text with every control character shown as `?`: names and paths may come from a
    jail (a directory it created), and an escape sequence would reach the user's terminal."""
    return "".join(c if c.isprintable() else "?" for c in str(v))


def table(rows_: list[dict], color: bool = False, width: int | None = None, home: str = "") -> str:
    cols, body = _layout(rows_, width, home)
    body = [[printable(v) for v in r] for r in body]
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *body, strict=True)]
    coloured = {cols.index(c) for c in ("STATUS", "AGENT") if c in cols}
    lines = []
    for i, row in enumerate([list(cols), *body]):
        cells = []
        for j, (v, w) in enumerate(zip(row, widths, strict=True)):
            text = str(v).ljust(w) if j < len(row) - 1 else str(v)
            if color and i == 0:
                text = f"\x1b[1m{text}\x1b[0m"
            elif color and j in coloured:
                key = str(v).split("!")[0].split("(")[0]
                code = AUDIT_COLOR if "!audit(" in str(v) else COLORS.get(key)
                if code:
                    text = f"\x1b[{code}m{v!s}\x1b[0m" + " " * (w - len(str(v)) if j < len(row) - 1 else 0)
            cells.append(text)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def width(stream, env) -> int | None:
    """The width to fit: $COLUMNS when set, else the terminal's; None (no limit) into a pipe."""
    if env.get("COLUMNS", "").isdigit():
        return max(40, int(env["COLUMNS"]))
    if stream.isatty():
        return max(40, shutil.get_terminal_size().columns)
    return None


def use_color(mode: str, stream) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return stream.isatty() and os.environ.get("TERM", "") != "dumb"


def render(rows_: list[dict], fmt: str, color: bool, width: int | None = None, home: str = "") -> str:
    data = public(rows_)
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True)
    if fmt == "ndjson":
        return "\n".join(json.dumps(d, sort_keys=True) for d in data)
    return table(rows_, color, width, home) if rows_ else "no sessions"
