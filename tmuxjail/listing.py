"""`tmuxjail list`: one `list-panes -a` call, one store query, and (for running panes) one
`capture-pane` call for all of them, joined into rows. Stdlib only: no pydantic, structlog or
libtmux on this path, so it answers in tens of milliseconds.

Statuses of a session's row: running, exited (with its exit status), gone (no tmux session or
pane any more), failed (the sandbox did not start), stopped (with --all), and, with --check,
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

from .panes import kind as pane_kind
from .panes import placement

COLUMNS = ("NAME", "PROVIDER", "MODE", "STATUS", "AGENT", "KIND", "PANE", "FINGERPRINT", "WORKSPACE")
COLORS = {"running": "32", "exited": "33", "gone": "2", "stopped": "2", "failed": "31",
          "mismatch": "1;31", "unjailed": "1;7;31", "working": "36", "waiting": "1;33"}


def rows(ctx, include_stopped: bool = False, check: bool = False, activity: bool = True) -> list[dict]:
    records = ctx.readonly_store().sessions(include_stopped)
    all_panes = ctx.tmux.panes()
    by_session: dict[str, list] = {}
    for p in all_panes:
        by_session.setdefault(p.session_name, []).append(p)
    out: list[dict] = []
    for row in records:
        if row.tmux_socket and row.tmux_socket != ctx.tmux.socket and row.status != "stopped":
            continue  # a session of another tmux server
        out += session_rows(ctx, row, all_panes, by_session)
    if check:
        _check(ctx, records, out)
    if activity:
        _activity(ctx, out)
    return out


def session_rows(ctx, row, all_panes, by_session=None) -> list[dict]:
    """The session's own row first, then one per other pane it has (shells, unjailed panes)."""
    if by_session is None:
        by_session = {}
        for p in all_panes:
            by_session.setdefault(p.session_name, []).append(p)
    out: list[dict] = []
    here = row.tmux_socket == ctx.tmux.socket and row.status != "stopped"
    owned = placement(row) == "session"
    if not here:
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


def _base(row, pane, kind: str) -> dict:
    return {
        "id": row.id, "name": row.name, "provider": row.provider, "mode": row.mode,
        "status": None, "kind": kind, "agent": None,
        "fingerprint": row.fingerprint, "workspace": row.workspace, "created_at": row.created_at,
        "tmux_socket": row.tmux_socket, "tmux_session": row.tmux_session,
        "tmux_pane": pane.pane_id if pane is not None else None,
        "private_home": row.private_home, "env_name": row.env_name,
        "native_session_id": row.native_id, "placement": placement(row),
        "_foreground": pane.pane_current_command if pane is not None else "",
    }


def _pane_status(d: dict, pane) -> None:
    if pane.pane_dead == "1":
        d["status"] = "exited"
        d["exit_status"] = int(pane.pane_dead_status or 0)
    else:
        d["status"] = "running"


def _check(ctx, records, out: list[dict]) -> None:
    """Recompute each live session's policy, as resume would, and mark the ones it would refuse."""
    from .errors import TmuxjailError
    from .sessions import recompute

    by_id = {r.id: r for r in records}
    for d in out:
        if d["kind"] != "agent" or d["status"] in ("stopped", "failed"):
            continue
        row = by_id[d["id"]]
        try:
            fp, _, reasons = recompute(ctx, row)
        except TmuxjailError as exc:
            fp, reasons = "", list(exc.data.get("reasons", ["workspace"]))
        d["checked"] = True
        if fp != row.fingerprint:
            d["pane_status"] = d["status"]
            d["status"] = "mismatch"
            d["reasons"] = reasons or ["tampered"]


def _activity(ctx, out: list[dict]) -> None:
    from .activity import guess

    live = [d for d in out if d["status"] == "running" and d["kind"] in ("agent", "shell")]
    screens = ctx.tmux.captures([d["tmux_pane"] for d in live if d["kind"] == "agent"
                                 and d["provider"] != "shell"])
    for d in live:
        d["agent"] = guess(d["provider"], screens.get(d["tmux_pane"], ""), d["_foreground"], d["kind"])


def public(rows_: list[dict]) -> list[dict]:
    return [{k: v for k, v in d.items() if not k.startswith("_")} for d in rows_]


def _status_text(d: dict) -> str:
    s = d["status"]
    if s == "exited":
        return f"exited({d.get('exit_status', '?')})"
    if s == "mismatch":
        return f"mismatch({','.join(d.get('reasons', []))})"
    return s


def table(rows_: list[dict], color: bool = False) -> str:
    body = []
    for d in rows_:
        fp = d["fingerprint"]
        body.append([d["name"], d["provider"], d["mode"] or "-", _status_text(d), d["agent"] or "-",
                     d["kind"], d["tmux_pane"] or "-", (fp[:19] + "…") if fp else "-", d["workspace"]])
    widths = [max(len(str(x)) for x in col) for col in zip(COLUMNS, *body)]
    lines = []
    for i, row in enumerate([list(COLUMNS), *body]):
        cells = []
        for j, (v, w) in enumerate(zip(row, widths)):
            text = str(v).ljust(w) if j < len(row) - 1 else str(v)
            if color and i == 0:
                text = f"\x1b[1m{text}\x1b[0m"
            elif color and j in (3, 4):
                key = str(v).split("(")[0]
                if key in COLORS:
                    text = f"\x1b[{COLORS[key]}m{str(v)}\x1b[0m" + " " * (w - len(str(v)) if j < len(row) - 1 else 0)
            cells.append(text)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def use_color(mode: str, stream) -> bool:
    import os

    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return stream.isatty() and os.environ.get("TERM", "") != "dumb"


def render(rows_: list[dict], fmt: str, color: bool) -> str:
    data = public(rows_)
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True)
    if fmt == "ndjson":
        return "\n".join(json.dumps(d, sort_keys=True) for d in data)
    return table(rows_, color) if rows_ else "no sessions"
