"""The state of sessions (`list`, `show`, `describe`): one `list-panes -a` call, one store query, and (for running panes) one
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
import signal

from .activity import SCREEN_SEARCH, guess, needs_screen
from .audit import counts
from .context import server_of
from .errors import TmuxjailError
from .net.calls import read_counts
from .net.listen import session_dir
from .net.record import totals
from .pane.command import kind
from .pane.mcp import LOG_NAME as MCP_LOG
from .pane.mcp import session_dir as mcp_dir
from .subpath import inside
from .tmux import default_socket

# -- recognising our panes (pure, cheap: `list` runs this for every pane; kind: pane/command.py) ----

def placement(row) -> str:
    """"session" when tmuxjail created (and owns) the tmux session, else "window" or "split"."""
    return _placement(row.request)


_DECODED: dict[str, object] = {}  # JSON text -> what a row needs of it: rows share requests and policies


def _placement(request: str) -> str:
    got = _DECODED.get(request)
    if got is None:
        if len(_DECODED) > 4096:  # a long-lived caller (the API) lists again and again
            _DECODED.clear()
        try:
            got = json.loads(request).get("placement", "session")
        except (TypeError, ValueError, AttributeError):
            got = "session"
        _DECODED[request] = got
    return str(got)


def is_jail_pane(pane, row) -> bool:
    return kind(pane.start_command, row.fingerprint) == "agent"


# -- rows --------------------------------------------------------------------------------------

class Server:
    """One tmux server's panes, read once for every session on it. (A plain class: dataclasses
    costs `list` ~15 ms of imports.)"""

    def __init__(self, ctx, tmux, activity: bool = False):
        self.tmux = tmux
        # Another server that exists but does not answer us: its sessions may be running.
        self.why = tmux.unreachable() if tmux is not ctx.tmux else None
        self.panes = [] if self.why else tmux.panes(SCREEN_SEARCH if activity else None)
        self.by_session: dict[str, list] = {}
        for p in self.panes:
            self.by_session.setdefault(p.session_name, []).append(p)


def rows(ctx, include_stopped: bool = False, check=None, activity: bool = True,
         server: str | None = None) -> list[dict]:
    """Sessions on every tmux server they were started on (one list-panes per server), or only
    those of `server` (a -L name or a socket path). check: plan.listed (a Recheck per row) for `list --check`
    (it loads the policy code, which `list` alone never does)."""
    records = ctx.readonly_store().sessions(include_stopped)
    if server is not None:
        records = [r for r in records if server in (r.tmux_socket, server_label(r.tmux_socket, ctx.env))]
    servers: dict[str | None, Server] = {}
    labels: dict[str | None, str] = {}
    out: list[dict] = []
    for row in records:
        if row.tmux_socket not in servers:
            servers[row.tmux_socket] = Server(ctx, server_of(ctx, row), activity)
        s = servers[row.tmux_socket]
        got = session_rows(ctx, row, s.panes, s.by_session, labels)
        if s.why and row.status != "stopped":
            got = got[:1]
            got[0].update(status="unreachable", failure=s.why)
        out += got
    _audits(ctx, out)
    _denied(ctx, out)
    _mcp_calls(ctx, out)
    if check is not None:
        _check(ctx, records, out, check)
    if activity:
        for socket, s in servers.items():
            _activity(s.tmux, [d for d in out if d["tmux_socket"] == socket])
    return out


def under(workspace: str | None, top: str) -> bool:
    """workspace is top or a directory under it (both canonical paths)."""
    return bool(workspace) and inside(str(workspace), top)


def server_label(socket: str | None, env) -> str:
    """A -L name when tmux would put that socket there itself, else the socket path."""
    if not socket:
        return "-"
    name = os.path.basename(socket)
    return name if default_socket(name, env) == socket else socket


def session_rows(ctx, row, all_panes, by_session=None, labels=None) -> list[dict]:
    """The session's own row first, then one per other pane it has (shells, unjailed panes).
    labels: server labels by socket, filled as they are computed (one per server, not per row)."""
    if labels is None:
        labels = {}
    if row.tmux_socket not in labels:
        labels[row.tmux_socket] = server_label(row.tmux_socket, os.environ)
    if by_session is None:
        by_session = {}
        for p in all_panes:
            by_session.setdefault(p.session_name, []).append(p)
    out: list[dict] = []
    where = placement(row)
    owned = where == "session"
    if row.status == "stopped":
        panes = []
    elif owned:
        panes = by_session.get(row.tmux_session, [])
    else:  # a window or split in someone else's session: its own panes only
        panes = [p for p in all_panes if p.tmuxjail_id == row.id]
    kinds = [(p, kind(p.start_command, row.fingerprint)) for p in panes]
    agent = next((p for p, k in kinds if k == "agent"), None)
    main = _base(row, agent, "agent", where, labels[row.tmux_socket])
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
        extra = _base(row, p, k or "unjailed", where, labels[row.tmux_socket])
        if k is None:
            extra.update(status="unjailed", mode=None, fingerprint=None,
                         command=p.pane_current_command, start_command=p.start_command)
        else:
            _pane_status(extra, p)
        out.append(extra)
    return out


def _network(row) -> str | None:
    """The effective network the session was started with (its recorded policy)."""
    if not row.policy:
        return None
    key = "network\0" + row.policy
    if key not in _DECODED:
        pol = json.loads(row.policy)
        _DECODED[key] = pol.get("network", "host") if pol else None
    got = _DECODED[key]
    return None if got is None else str(got)


def _worktree(row) -> dict | None:
    """A --worktree session's branch and its commits since its base (worktree.ahead: no git run)."""
    if '"worktree"' not in row.request:
        return None
    wt = json.loads(row.request).get("worktree")
    if not isinstance(wt, dict):
        return None
    from .worktree import ahead, uncommitted

    try:  # what the agent's side holds never fails a list: it reads as "cannot tell"
        count = ahead(wt)
        changed = uncommitted(wt) if os.path.isdir(str(wt.get("path"))) else None
    except (TmuxjailError, OSError, ValueError, KeyError, TypeError):
        count, changed = None, None
    return {"id": wt.get("id"), "name": wt.get("name"), "branch": wt.get("branch"), "path": wt.get("path"),
            "repository": wt.get("repo"), "base": wt.get("base"), "ahead": count,
            "uncommitted": None if changed is None else len(changed)}


def _base(row, pane, kind: str, where: str, server: str) -> dict:
    return {
        "id": row.id, "name": row.name, "provider": row.provider, "mode": row.mode,
        "network": _network(row), "status": None, "kind": kind, "agent": None,
        "fingerprint": row.fingerprint, "workspace": row.workspace, "created_at": row.created_at,
        "tmux_socket": row.tmux_socket, "server": server,
        "tmux_session": row.tmux_session,
        "tmux_pane": pane.pane_id if pane is not None else None,
        "private_home": row.private_home, "env_name": row.env_name,
        "native_session_id": row.native_id, "placement": where, "worktree": _worktree(row),
        "_foreground": pane.pane_current_command if pane is not None else "",
        "_screen_hit": pane.screen_hit if pane is not None else "",
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
    try:
        return signal.Signals(int(num)).name
    except ValueError:
        return f"signal {num}"


def _check(ctx, records, out: list[dict], recheck) -> None:
    """Recompute each live session's policy, as resume would, and mark the ones it would refuse."""
    by_id = {r.id: r for r in records}
    for d in out:
        if d["kind"] != "agent" or d["status"] in ("stopped", "failed"):
            continue
        row = by_id[d["id"]]
        try:
            got = recheck(ctx, row)
            fp, reasons = got.fingerprint, got.reasons
        except TmuxjailError as exc:
            fp, reasons = "", list(exc.data.get("reasons", ["workspace"]))
        d["checked"] = True
        if fp != row.fingerprint:
            d["pane_status"] = d["status"]
            d["status"] = "mismatch"
            d["reasons"] = reasons or ["tampered"]


def _audits(ctx, out: list[dict]) -> None:
    """`audit`: the count of findings of the session's last audit (`tmuxjail audit NAME`);
    `audit_complete`: False when that audit's walk did not see everything."""
    found = counts(ctx.readonly_store())
    for d in out:
        if d["kind"] == "agent" and d["id"] in found:
            d["audit"] = found[d["id"]]["count"]
            d["audit_complete"] = found[d["id"]]["complete"]


def _denied(ctx, out: list[dict]) -> None:
    """`denied`: how many connections the session's egress proxies refused (their counters)."""
    for d in out:
        if d["kind"] == "agent" and d["network"] == "proxy":
            n = totals(session_dir(str(ctx.paths.store), d["id"])).get("denied", 0)
            if n:
                d["denied"] = n


def _mcp_calls(ctx, out: list[dict]) -> None:
    """`mcp_calls` and `mcp_refused`: the calls the session's MCP brokers counted."""
    for d in out:
        if d["kind"] != "agent":
            continue
        if not os.path.isdir(directory := mcp_dir(str(ctx.paths.store), d["id"])):
            continue
        counts = read_counts(os.path.join(directory, MCP_LOG))
        calls = sum(c["count"] for c in counts)
        refused = sum(c["count"] for c in counts if c["decision"] == "refused")
        if calls:
            d["mcp_calls"], d["mcp_refused"] = calls, refused


def _activity(tmux, out: list[dict]) -> None:
    """The agent column: a shell's foreground process, an agent's screen. Only the screens in
    which tmux's search found a line that may be a busy footer are captured."""
    live = [d for d in out if d["status"] == "running" and d["kind"] in ("agent", "shell")]
    screens = tmux.captures([d["tmux_pane"] for d in live
                             if needs_screen(d["provider"], d["kind"], d["_screen_hit"])])
    for d in live:
        d["agent"] = guess(d["provider"], screens.get(d["tmux_pane"], ""), d["_foreground"], d["kind"])


def describe(ctx, row) -> dict:
    """The session as `list` shows it (one source for statuses)."""
    out = session_rows(ctx, row, server_of(ctx, row).panes())[0]
    out.pop("_foreground", None)
    out.pop("_screen_hit", None)
    return out
