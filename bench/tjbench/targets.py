"""Issue 18's targets 1-7, each PASS/MISS from the rows a run measured (issue 18.8), and the one
target that is a property, not a timing: a warm start imports no pydantic and no structlog (18.2).

A target names the rows it reads by section and a piece of their names, so the parts that
measure keep their own rows; a target whose row or baseline is not in the run prints "-" and
why, never a PASS."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .results import Results, Row, fmt
from .world import READY, SMALL_SIZE, make_standin

if TYPE_CHECKING:
    from .parts import Bench

WARM_FORBIDDEN = ("pydantic", "structlog")


@dataclass(frozen=True)
class Target:
    item: str  # the numbering
    what: str
    section: str
    row: str  # a piece of the row's name; "" = every row of the section, one line each
    baseline: str | None  # a piece of the baseline's name; None = the row's max against `limit`
    limit: float
    per_row: str = ""  # "before"/"after": one line per row, labelled by its name before/after the first ": "
    added: bool = False  # the row's median minus the baseline's, against `limit` (in the row's unit)


TARGETS = (
    Target("18.1", "warm start → ready vs the bare-bwrap pane", "start", "→ ready", "bare bwrap", 8.0),
    Target("18.1", "warm start → ready vs srt", "start", "→ ready", "srt", 0.25),
    Target("18.2", "pydantic/structlog modules a warm start imports", "warm path", "pydantic", None, 0),
    Target("18.3", "launcher → exec bwrap vs python -I -S -c pass", "launcher", "launcher", "-c pass", 2.0),
    Target("18.4", "cold start vs warm start, 400 MB executable", "identity", "cold start, 400 MB",
           "warm start, 400 MB", 1.5),
    Target("18.5", "first screen, isolated jail vs bare tmux pane", "firstscreen", "", "bare tmux pane", 1.15,
           "before"),
    Target("30.7", "first screen, isolated jail vs bare tmux pane", "firstscreen", "", "bare tmux pane", 1.25,
           "before"),
    Target("18.6", "a failing start answers (max over runs)", "failure", "", None, 1.0, "after"),
    Target("18.7", "list --json at 500 sessions vs the libtmux floor", "list", "500 session", "libtmux", 1.5),
    Target("32", "start --worktree vs git worktree add + start", "worktree", "start --worktree", "git worktree add",
           1.3, "after"),
    Target("32", "land of 100 commits vs git merge", "worktree", "tmuxjail land", "git merge", 2.0),
    Target("31", "MCP tools/call through stub and broker vs the server directly over stdio", "mcp", "tools/call",
           "directly over stdio", 1.5),
    Target("31", "MCP tools/call: time stub and broker add", "mcp", "tools/call", "directly over stdio", 0.005,
           added=True),
    Target("31", "start with one MCP server attached vs none", "mcp", "--mcp t → ready", "without --mcp (warm", 1.15),
)


def _rows(results: Results, t: Target) -> list[Row]:
    return [r for r in results.rows if r.section == t.section and t.row in r.name and "(info)" not in r.name]


def _line(t: Target, r: Row | None, why: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"item": t.item, "target": t.what, "row": r.name if r else None, "limit": t.limit,
                           "absolute": t.baseline is None, "added": t.added, "unit": r.unit if r else "", "measured": None,
                           "baseline": None, "baseline_name": None, "ratio": None, "verdict": None, "why": why}
    if r is None or why:
        return out
    if t.per_row:
        before, _, after = r.name.partition(": ")
        out["target"] = f"{t.what}: {before if t.per_row == 'before' else after}"
    if r.data.get("n", 0) == 0:
        out["why"] = r.note or "no runs"
        return out
    if t.baseline is None:
        failed = [b for b in r.baselines if "check" in b and b["verdict"] != "PASS"]
        out.update(measured=r.data["max"], median=r.data["median"],
                   verdict="PASS" if r.data["max"] <= t.limit and not failed else "MISS")
        if failed:
            out["why"] = "; ".join(f"{b['name']}: {b['check']}" for b in failed)
        elif r.unit == "count" and r.note:
            out["why"] = r.note
        return out
    out["measured"] = r.data["median"]
    b = next((b for b in r.baselines if t.baseline in b["name"]), None)
    if b is None:
        out["why"] = f"no baseline matching {t.baseline!r} in this run"
    elif "skipped" in b:
        out.update(baseline_name=b["name"], why=b["skipped"])
    else:
        bm = b["data"].get("median")
        if t.added:
            added = None if bm is None else out["measured"] - bm
            out.update(measured=added, baseline=bm, baseline_name=b["name"],
                       verdict=None if added is None else ("PASS" if added <= t.limit else "MISS"))
            return out
        ratio = out["measured"] / bm if bm else None
        out.update(baseline=bm, baseline_name=b["name"], ratio=ratio,
                   verdict=None if ratio is None else ("PASS" if ratio <= t.limit else "MISS"))
    return out


def evaluate(results: Results) -> list[dict[str, Any]]:
    """One line per target and matching row, in the issue's order."""
    lines = []
    for t in TARGETS:
        rows = _rows(results, t)
        if not rows:
            lines.append(_line(t, None, f"not measured (no {t.section!r} row in this run)"))
        for r in rows if t.per_row else rows[:1]:
            lines.append(_line(t, r))
    return lines


def _limit(x: dict[str, Any]) -> str:
    if x.get("added"):
        return f"≤ {fmt(x['limit'], x['unit'] or 's')} added"
    if x["absolute"]:
        return f"≤ {x['limit']:g}" + (" s" if x["unit"] == "s" else "")
    return f"≤ {x['limit']:g}×"


def _cells(x: dict[str, Any]) -> list[str]:
    what = x["target"]
    if x.get("added"):
        measured, base, ratio = fmt(x["measured"], x["unit"]), fmt(x["baseline"], x["unit"]), ""
        if x["measured"] is not None:
            measured += " added"
    elif x["absolute"]:
        measured = fmt(x["measured"], x["unit"])
        if x["measured"] is not None:
            measured += " (max)" if x["unit"] == "s" else " modules"
        base = ratio = ""
    else:
        measured, base = fmt(x["measured"], x["unit"]), fmt(x["baseline"], x["unit"])
        ratio = f"{x['ratio']:.2f}×" if x["ratio"] is not None else "-"
    result = x["verdict"] or "-"
    if x["why"]:
        result = f"{result} ({x['why']})" if x["verdict"] else f"- {x['why']}"
    return [x["item"], what, measured, base, ratio, _limit(x), result]


HEAD = ["item", "target", "measured (median)", "baseline (median)", "ratio", "limit", "result"]


def text(lines: list[dict[str, Any]]) -> str:
    rows = [HEAD, *(_cells(x) for x in lines)]
    widths = [min(max(len(r[i]) for r in rows), 90) for i in range(len(HEAD) - 1)]
    out = []
    for r in rows:
        cells = [(c if len(c) <= w else c[: w - 1] + "…").ljust(w) for c, w in zip(r, widths, strict=False)]
        out.append("  ".join([*cells, r[-1]]).rstrip())
    return "\n".join(out)


def markdown(lines: list[dict[str, Any]]) -> str:
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for x in lines:
        c = _cells(x)
        if x["verdict"]:
            c[-1] = c[-1].replace(x["verdict"], f"**{x['verdict']}**", 1)
        out.append("| " + " | ".join(s.replace("|", "\\|") for s in c) + " |")
    return "\n".join(out)


# -- 18.2: what a warm start imports -------------------------------------------------------------

IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \| \s*(\S+)")


def imported(python: str, argv: list[str], env: dict[str, str]) -> tuple[list[str], int, str]:
    """Every module `python -X importtime ARGV` imported, at any depth; its exit code and stderr's
    last line (the import lines aside)."""
    p = subprocess.run([python, "-X", "importtime", *argv], env=env, capture_output=True, text=True, check=False,
                       stdin=subprocess.DEVNULL)
    mods, rest = [], []
    for line in p.stderr.splitlines():
        m = IMPORT_LINE.match(line)
        if m:
            mods.append(m.group(1))
        elif line.strip():
            rest.append(line)
    return mods, p.returncode, (rest or [""])[-1]


def warm_path(b: Bench) -> None:
    """A real warm start (the same provider, mode, workspace, env, config, profile and executable
    as the start before it) under -X importtime: which pydantic and structlog modules it imports."""
    w = b.world("warmpath")
    make_standin(w.bin / "codex", SMALL_SIZE)
    ws = w.workspace("warm")
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    counts: list[float | None] = []
    seen: set[str] = set()
    for i in range(3):  # the first start is the cold one; the next two are warm
        (ws / READY).unlink(missing_ok=True)
        argv = w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws), "--name", f"w{i}", "--detach")
        mods, rc, err = imported(b.tools.tj_py, argv, w.env)
        w.kill_session(f"w{i}")
        if rc != 0:
            raise RuntimeError(f"tmuxjail start exited {rc}: {err}")
        if i:
            bad = sorted({m for m in mods if m.split(".")[0] in WARM_FORBIDDEN})
            counts.append(len(bad))
            seen.update(bad)
    tops = sorted({m.split(".")[0] for m in seen})
    row = b.results.add("warm path", "pydantic/structlog modules a warm `tmuxjail start` imports (-X importtime)",
                        "count", counts,
                        note=f"imported: {', '.join(tops)} ({len(seen)} modules)" if seen else
                        "neither pydantic nor structlog is imported")
    row.absolute_target(0, "target: none")
    w.tmux("kill-server", check=False)
