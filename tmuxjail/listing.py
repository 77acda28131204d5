"""`tmuxjail list`: one `list-panes -a` call, one store query, and (for running panes) one
`capture-pane` call for all of them, joined into rows. Stdlib only: no pydantic, structlog or
libtmux on this path, so it answers in tens of milliseconds.

Statuses of a session's row: running, exited (with its exit status), killed (with the signal),
gone (no tmux session or pane any more), unreachable (its tmux server exists but does not answer), failed (the sandbox did not start), stopped (with --all), and, with --check,
mismatch (a resume would be refused: the reason codes say why). Every other pane of a session
tmuxjail owns gets a row of its own: a shell inside the same jail (`tmuxjail shell`, or a
new-window/split through the session's default-command) is `running`/`exited` with kind `shell`;
anything else (a hand-made split with an explicit command, a shell restored by tmux-resurrect)
is `unjailed`, shown, never hidden.

Why mismatch needs --check: it recomputes the policy from today's inputs (profiles, config,
the executable's digest), which loads pydantic and hashes executables whose stat changed, about
a quarter of a second per provider. The key-table popup passes --check."""

from __future__ import annotations

import json
import os

from .panes import kind as pane_kind
from .panes import placement

COLUMNS = ("NAME", "PROVIDER", "MODE", "STATUS", "AGENT", "KIND", "PANE", "FINGERPRINT", "WORKSPACE")
COLORS = {"running": "32", "exited": "33", "killed": "31", "gone": "2", "stopped": "2", "failed": "31",
          "mismatch": "1;31", "unjailed": "1;7;31", "working": "36", "waiting": "1;33"}


def rows(ctx, include_stopped: bool = False, check: bool = False, activity: bool = True,
         server: str | None = None) -> list[dict]:
    """Sessions on every tmux server they were started on (one list-panes per server), or only
    those of `server` (a -L name or a socket path)."""
    from .sessions import server_of

    records = ctx.readonly_store().sessions(include_stopped)
    if server is not None:
        records = [r for r in records if server in (r.tmux_socket, server_label(r.tmux_socket, ctx.env))]
    servers: dict[str | None, tuple] = {}
    out: list[dict] = []
    for row in records:
        if row.tmux_socket not in servers:
            tmux = server_of(ctx, row)
            # Another server that exists but does not answer us: its sessions may be running.
            why = tmux.unreachable() if tmux is not ctx.tmux else None
            all_panes = [] if why else tmux.panes()
            by_session: dict[str, list] = {}
            for p in all_panes:
                by_session.setdefault(p.session_name, []).append(p)
            servers[row.tmux_socket] = (tmux, all_panes, by_session, why)
        _, all_panes, by_session, why = servers[row.tmux_socket]
        got = session_rows(ctx, row, all_panes, by_session)
        if why and row.status != "stopped":
            got = got[:1]
            got[0].update(status="unreachable", failure=why)
        out += got
    _audits(ctx, out)
    if check:
        _check(ctx, records, out)
    if activity:
        for socket, (tmux, _, _, _) in servers.items():
            _activity(tmux, [d for d in out if d["tmux_socket"] == socket])
    return out


def server_label(socket: str | None, env) -> str:
    """A -L name when tmux would put that socket there itself, else the socket path."""
    if not socket:
        return "-"
    import os

    from .tmux import default_socket

    name = os.path.basename(socket)
    return name if default_socket(name, env) == socket else socket


def session_rows(ctx, row, all_panes, by_session=None) -> list[dict]:
    """The session's own row first, then one per other pane it has (shells, unjailed panes)."""
    if by_session is None:
        by_session = {}
        for p in all_panes:
            by_session.setdefault(p.session_name, []).append(p)
    out: list[dict] = []
    owned = placement(row) == "session"
    if row.status == "stopped":
        panes = []
    elif owned:
        panes = by_session.get(row.tmux_session, [])
    else:  # a window or split in someone else's session: its own panes only
        panes = [p for p in all_panes if p.tmuxjail_id == row.id]
    kinds = [(p, pane_kind(p.start_command, row.fingerprint)) for p in panes]
    agent = next((p for p, k in kinds if k == "agent"), None)
    main = _base(row, agent, "agent")
    if row.status == "stopped":
        main["status"] = "stopped"
    elif row.status == "failed" and (agent is None or agent.pane_dead == "1"):
        main["status"] = "failed"
        main["failure"] = row.failure
    elif agent is None:
        main["status"] = "gone"
    else:
        _pane_status(main, agent)
    out.append(main)
    for p, k in kinds:
        if p is agent:
            continue
        if k is None and not owned:
            continue
        extra = _base(row, p, k or "unjailed")
        if k is None:
            extra.update(status="unjailed", mode=None, fingerprint=None,
                         command=p.pane_current_command, start_command=p.start_command)
        else:
            _pane_status(extra, p)
        out.append(extra)
    return out


def _network(row) -> str | None:
    """The effective network the session was started with (its recorded policy)."""
    pol = row.policy_data
    return pol.get("network", "host") if pol else None


def _base(row, pane, kind: str) -> dict:
    return {
        "id": row.id, "name": row.name, "provider": row.provider, "mode": row.mode,
        "network": _network(row), "status": None, "kind": kind, "agent": None,
        "fingerprint": row.fingerprint, "workspace": row.workspace, "created_at": row.created_at,
        "tmux_socket": row.tmux_socket, "server": server_label(row.tmux_socket, os.environ),
        "tmux_session": row.tmux_session,
        "tmux_pane": pane.pane_id if pane is not None else None,
        "private_home": row.private_home, "env_name": row.env_name,
        "native_session_id": row.native_id, "placement": placement(row),
        "_foreground": pane.pane_current_command if pane is not None else "",
    }


def _pane_status(d: dict, pane) -> None:
    if pane.pane_dead == "1" and pane.dead_signal:
        # Killed by a signal: tmux leaves pane_dead_status empty; it is not an exit(0).
        d["status"] = "killed"
        d["signal"] = _signal_name(pane.dead_signal)
    elif pane.pane_dead == "1":
        d["status"] = "exited"
        d["exit_status"] = int(pane.pane_dead_status) if pane.pane_dead_status.isdigit() else None
    else:
        d["status"] = "running"


def _signal_name(num: str) -> str:
    import signal

    try:
        return signal.Signals(int(num)).name
    except ValueError:
        return f"signal {num}"


def _check(ctx, records, out: list[dict]) -> None:
    """Recompute each live session's policy, as resume would, and mark the ones it would refuse."""
    from .errors import TmuxjailError
    from .sessions import _still_approved, recompute

    by_id = {r.id: r for r in records}
    for d in out:
        if d["kind"] != "agent" or d["status"] in ("stopped", "failed"):
            continue
        row = by_id[d["id"]]
        try:
            fp, pol, reasons = recompute(ctx, row)
            if fp == row.fingerprint and pol.get("mode") == "verified":  # as resume checks it
                _still_approved(ctx, row, pol, ctx.readonly_store())
        except TmuxjailError as exc:
            fp, reasons = "", list(exc.data.get("reasons", ["workspace"]))
        d["checked"] = True
        if fp != row.fingerprint:
            d["pane_status"] = d["status"]
            d["status"] = "mismatch"
            d["reasons"] = reasons or ["tampered"]


def _audits(ctx, out: list[dict]) -> None:
    """`audit`: the count of findings of the session's last audit (`tmuxjail audit NAME`)."""
    from .audit import latest

    found = latest(ctx.readonly_store())
    for d in out:
        if d["kind"] == "agent" and d["id"] in found:
            d["audit"] = found[d["id"]]["count"]


def _activity(tmux, out: list[dict]) -> None:
    from .activity import guess

    live = [d for d in out if d["status"] == "running" and d["kind"] in ("agent", "shell")]
    screens = tmux.captures([d["tmux_pane"] for d in live if d["kind"] == "agent"
                                 and d["provider"] != "shell"])
    for d in live:
        d["agent"] = guess(d["provider"], screens.get(d["tmux_pane"], ""), d["_foreground"], d["kind"])


def public(rows_: list[dict]) -> list[dict]:
    return [{k: v for k, v in d.items() if not k.startswith("_")} for d in rows_]


def _status_text(d: dict) -> str:
    if d.get("audit"):
        return f"{_status(d)}!audit({d['audit']})"
    return _status(d)


def _status(d: dict) -> str:
    s = d["status"]
    if s == "exited":
        return f"exited({'?' if d.get('exit_status') is None else d['exit_status']})"
    if s == "killed":
        return f"killed({d.get('signal', '?')})"
    if s == "mismatch":
        return f"mismatch({','.join(d.get('reasons', []))})"
    return s


DROP_ORDER = ("PANE", "FINGERPRINT", "AGENT", "KIND", "PROVIDER")  # least useful first, when narrow
MIN_WORKSPACE = 12
WANT_WORKSPACE = 32


def _cells(d: dict, short_fp: bool, home: str, servers: bool = False) -> list[str]:
    fp = d["fingerprint"]
    fp_text = "-" if not fp else (fp[7:15] + "…") if short_fp else (fp[:19] + "…")
    ws = d["workspace"] or "-"
    if home and home != "/" and (ws == home or ws.startswith(home.rstrip("/") + "/")):
        ws = "~" + ws[len(home.rstrip("/")):]
    return [d["name"], d["provider"], d["mode"] or "-", _status_text(d), d["agent"] or "-",
            d["kind"], d["tmux_pane"] or "-", fp_text, *([d.get("server") or "-"] if servers else []), ws]


def _shorten(path: str, width: int) -> str:
    """The end of a path, which tells workspaces apart: `…/src/app`."""
    return path if len(path) <= width else "…" + path[-(width - 1):]


def _layout(rows_: list[dict], width: int | None, home: str) -> tuple[list[str], list[list[str]]]:
    """Columns and cells that fit `width` (None: as wide as they are): first the fingerprint and
    the home directory get shorter, then columns go in DROP_ORDER, then the workspace's start."""
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
    for name in DROP_ORDER:  # a column goes before the workspace gets shorter than WANT_WORKSPACE
        if total() - ws_full + min(ws_full, WANT_WORKSPACE) <= width:
            break
        i = cols.index(name)
        cols.pop(i)
        for r in body:
            r.pop(i)
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
                if key in COLORS:
                    text = f"\x1b[{COLORS[key]}m{v!s}\x1b[0m" + " " * (w - len(str(v)) if j < len(row) - 1 else 0)
            cells.append(text)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def width(stream, env) -> int | None:
    """The width to fit: $COLUMNS when set, else the terminal's; None (no limit) into a pipe."""
    import shutil

    if env.get("COLUMNS", "").isdigit():
        return max(40, int(env["COLUMNS"]))
    if stream.isatty():
        return max(40, shutil.get_terminal_size().columns)
    return None


def use_color(mode: str, stream) -> bool:
    import os

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
