"""`tmuxjail show NAME --network`: what a session's egress proxy allowed and denied (issue 27.3).

It reads what the proxy recorded (netrecord): the log's two generations (the newest rows), the
markers that say how many older rows were dropped, and every proxy's counters (per destination,
complete). The files are written outside the jail, but the host names in them came from the jail:
every row and entry is re-checked here, and only printable ASCII is ever shown. For each denied
destination it says what would allow it, or that nothing does."""

from __future__ import annotations

import json
import os

from ..render import size
from . import record as netrecord
from .check import literal
from .listen import session_dir
from .policy import check_pattern, covers

MAX_BYTES = 16 << 20
RECENT = 40  # rows the text shows (--json has them all)
SHOWN = 30  # denied destinations the text shows, most denied first
COUNTS = ("allowed", "denied", "failed", "bytes")


def _clean(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in text)[:300]


def _row(line: bytes) -> dict | None:
    try:
        r = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(r, dict) and set(r) - {"count"} == set(netrecord.FIELDS)
            and all(type(r[k]) is t for k, t in netrecord.FIELDS.items())
            and (type(r.get("count", 0)) is int)):
        return None
    return {k: _clean(v) if isinstance(v, str) else v for k, v in r.items()}


def read(store: str, session_id: str) -> list[dict]:
    """The session's rows, oldest first (the older generation, then the current one); lines that
    are not exactly a row are skipped."""
    path = os.path.join(session_dir(store, session_id), netrecord.LOG_NAME)
    rows = []
    for p in (path + netrecord.OLD_SUFFIX, path):
        rows += [r for line in netrecord.read_file(p, MAX_BYTES).splitlines() if (r := _row(line)) is not None]
    return rows


def counters(directory: str) -> dict:
    """Every proxy's counters of the session, merged: {"totals", "destinations" (host -> counts),
    "other" ("decision:rule" -> count, beyond the table's caps)}."""
    totals = netrecord.totals(directory)
    dests: dict[str, dict] = {}
    other: dict[str, int] = {}
    for path in netrecord.counter_files(directory):
        lines = netrecord.read_file(path, MAX_BYTES).split(b"\n")
        try:
            table = json.loads(lines[1]) if len(lines) > 1 else {}
        except ValueError:
            continue
        if not isinstance(table, dict):
            continue
        for host, e in (table.get("destinations") or {}).items():
            if not isinstance(e, dict):
                continue
            d = dests.setdefault(_clean(str(host)), {**dict.fromkeys(COUNTS, 0), "ports": [], "rule": "", "last": ""})
            for k in COUNTS:
                d[k] += e[k] if type(e.get(k)) is int and e[k] >= 0 else 0
            d["ports"] = sorted({*d["ports"], *(p for p in e.get("ports") or () if type(p) is int)})[:netrecord.MAX_PORTS]
            if str(e.get("last", "")) >= d["last"]:
                d["rule"], d["last"] = _clean(str(e.get("rule", ""))), _clean(str(e.get("last", "")))
        for k, n in (table.get("other") or {}).items():
            if type(n) is int and n >= 0:
                other[_clean(str(k))] = other.get(_clean(str(k)), 0) + n
    return {"totals": totals, "destinations": dests, "other": other}


def fix(rule: str, host: str, session: dict, ceiling: tuple[str, ...] | None, config_file: str = "the config") -> str:
    """What would let this session's CLI reach `host` (denied by `rule`), checked against the
    operator's ceiling for its mode (None: unknown), or why nothing does."""
    mode, provider = session.get("mode") or "isolated", session.get("provider") or "PROVIDER"
    if rule == "allowlist":
        try:
            name = check_pattern(host)
        except Exception:  # noqa: BLE001 - a jail's string: no pattern, no fix
            return "not a name any allowlist can hold"
        if ceiling is not None and not any(covers(c, name) for c in ceiling):
            return (f"the operator's ceiling refuses it: [network.allow_domains] {mode} = "
                    f"{json.dumps(list(ceiling))} in {config_file} does not cover {name}")
        asked = [d for d in (session.get("request") or {}).get("allow_domains") or () if d != name]
        flags = " ".join(f"--allow-domain {d}" for d in [*asked, name])
        ws = " ".join(f"--workspace {w}" for w in (session.get("request") or {}).get("workspaces") or ())
        start = f"tmuxjail start {provider} --mode {mode} --network proxy {ws + ' ' if ws else ''}{flags}"
        if mode == "verified":
            return f"tmuxjail approve {provider} --allow-domain {name}, then a new session: {start}"
        return f"a new session: {start}" if asked or mode == "compatibility" else \
            f"a new session (today's config allows it): {start}"
    if rule == "special-use":
        return f"never looked up; only an operator's [network.resolve] entry for it in {config_file} maps it"
    if rule == "literal-address" or literal(host) is not None:
        return "connect by name: a literal address is never allowed"
    if rule == "no-address":
        return "the name does not resolve from this machine"
    if rule in ("bad-name", "port"):
        return "nothing: not a valid destination"
    return "nothing allows it: the proxy never connects to this machine or to private networks"


def report(session: dict, store: str, ceiling: tuple[str, ...] | None = None, config_file: str = "the config") -> dict:
    pol = session.get("policy") or {}
    rows = read(store, session["id"])
    count = counters(session_dir(store, session["id"]))
    rotated = max((r.get("count", 0) for r in rows if r["decision"] == "rotated"), default=0)
    unwritten = sum(r.get("count", 0) for r in rows if r["decision"] == "dropped")
    by_dest = []
    for host, d in sorted(count["destinations"].items(), key=lambda kv: (-kv[1]["allowed"], -kv[1]["denied"], kv[0])):
        entry = {"host": host, **d}
        if d["denied"]:
            entry["fix"] = fix(d["rule"], host, session, ceiling, config_file)
        by_dest.append(entry)
    return {"name": session["name"], "network": pol.get("network", "host"),
            "allow_domains": pol.get("allow_domains", []),
            "destinations": [r for r in rows if r["decision"] in netrecord.DECISIONS],
            "rows": rows, "dropped": {"rotated": rotated, "unwritten": unwritten},
            "totals": count["totals"], "by_destination": by_dest, "other": count["other"]}


def text(rep: dict) -> str:
    lines = [f"network: {rep['network']}"]
    if rep["network"] == "proxy":
        lines.append("allowed domains: " + (" ".join(rep["allow_domains"]) or "(none)"))
    rows, t = rep["rows"], rep["totals"]
    if not rows and not t:
        lines.append("no destinations yet" if rep["network"] == "proxy" else "no proxy: nothing is logged")
        return "\n".join(lines)
    dropped = rep["dropped"]
    if dropped["rotated"] or dropped["unwritten"]:
        lines.append(f"log: {dropped['rotated'] + dropped['unwritten']} older rows dropped "
                     f"({dropped['rotated']} by rotation, {dropped['unwritten']} unwritable); the log keeps the "
                     "newest rows, and the counts below cover every connection")
    if t:
        lines.append(f"totals: {t.get('allowed', 0)} allowed, {t.get('denied', 0)} denied, {t.get('failed', 0)} failed, "
                     f"{t.get('malformed', 0)} malformed requests, {t.get('no-slot', 0)} refused for want of a slot, "
                     f"{size(t.get('bytes', 0))} relayed")
    dests = rep["by_destination"]
    if dests:
        lines.append("by destination:")
    denied = sorted((d for d in dests if d["denied"] and not d["allowed"]), key=lambda d: (-d["denied"], d["host"]))
    for d in [x for x in dests if x["allowed"] or x["failed"]] + denied[:SHOWN]:
        ports = ",".join(map(str, d["ports"]))
        lines.append(f"  {d['host']}:{ports}  {d['allowed']} allowed, {d['denied']} denied, {d['failed']} failed, "
                     f"{size(d['bytes'])}  ({d['rule']})")
        if d.get("fix"):
            lines.append(f"      to allow it: {d['fix']}")
    if len(denied) > SHOWN:
        lines.append(f"  ... and {len(denied) - SHOWN} more denied destinations (--json lists them)")
    for k, n in sorted(rep["other"].items()):
        lines.append(f"  (beyond the table) {k.replace(':', ' by rule ', 1)}: {n}")
    if rows:
        lines.append(f"recent (the last {min(RECENT, len(rows))} of {len(rows)} rows kept):")
    for r in rows[-RECENT:]:
        n = f" x{r['count']}" if "count" in r else ""
        lines.append(f"  {r['time']}  {r['decision']:<7}  {r['host'] or '-'}:{r['port']}  "
                     f"{r['address'] or '-'}  ({r['rule'] or '-'}){n}")
    return "\n".join(lines)
