"""Rows of measurements with their baselines and targets, and the table they print as."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

Stats = dict[str, Any]  # median, min, max, n, runs


def stats(xs: list[float | None]) -> Stats:
    ys = [x for x in xs if x is not None]
    if not ys:
        return {"median": None, "min": None, "max": None, "n": 0, "runs": []}
    return {"median": statistics.median(ys), "min": min(ys), "max": max(ys), "n": len(ys),
            "runs": [round(x, 6) for x in ys]}


@dataclass
class Row:
    """One measurement and the baselines it is compared with."""

    section: str
    name: str
    unit: str  # "s" (printed in ms), "MB", "MB/s", "count"
    data: Stats
    baselines: list[dict[str, Any]] = field(default_factory=list)  # name, data | skipped, target, note
    note: str = ""

    def compare(self, name: str, xs: list[float | None] | None = None, *, target: float | None = None,
                skipped: str | None = None, note: str = "") -> None:
        b: dict[str, Any] = {"name": name, "note": note}
        if skipped is not None:
            b["skipped"] = skipped
        else:
            b["data"] = stats(xs or [])
            m, bm = self.data.get("median"), b["data"].get("median")
            b["ratio"] = (m / bm) if (m is not None and bm) else None
            if target is not None:
                b["target"] = target
                b["verdict"] = None if b["ratio"] is None else ("PASS" if b["ratio"] <= target else "MISS")
        self.baselines.append(b)

    def check(self, label: str, failed: int, of: int, note: str = "") -> None:
        """A condition every run must meet besides the timing (e.g. the error names its reason)."""
        self.baselines.append({"name": label, "check": f"{of - failed}/{of} runs", "note": note,
                               "verdict": "PASS" if failed == 0 and of else "MISS"})

    def added_target(self, limit: float, label: str) -> None:
        """What the median adds to the last baseline's median, against a limit in the row's unit."""
        b = self.baselines[-1] if self.baselines else {}
        m, bm = self.data.get("median"), b.get("data", {}).get("median")
        added = None if m is None or bm is None else m - bm
        self.baselines.append({"name": label, "added": added, "limit": limit, "note": f"median − median of {b.get('name')}",
                               "verdict": None if added is None else ("PASS" if added <= limit else "MISS")})

    def absolute_target(self, limit: float, label: str) -> None:
        m = self.data.get("max")
        self.baselines.append({"name": label, "absolute": limit, "note": "max over runs",
                               "verdict": None if m is None else ("PASS" if m <= limit else "MISS")})


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    imports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # command -> top imports

    def add(self, section: str, name: str, unit: str, xs: list[float | None], note: str = "") -> Row:
        row = Row(section, name, unit, stats(xs), note=note)
        self.rows.append(row)
        return row

    def misses(self) -> list[str]:
        return [f"{r.name} vs {b['name']}" for r in self.rows for b in r.baselines if b.get("verdict") == "MISS"]

    def as_json(self) -> list[dict[str, Any]]:
        return [{"section": r.section, "name": r.name, "unit": r.unit, "note": r.note, **r.data,
                 "baselines": r.baselines} for r in self.rows]


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:.1f} ms" if v < 10 else f"{v:.2f} s"
    if unit == "MB":
        return f"{v:.1f} MB"
    if unit == "MB/s":
        return f"{v:.0f} MB/s"
    return f"{v:g}"


def _cells(r: Row, width: int) -> list[list[str]]:
    d = r.data
    first = [r.name, fmt(d.get("median"), r.unit), fmt(d.get("min"), r.unit), fmt(d.get("max"), r.unit)]
    if d.get("n", 0) == 0 and r.note:  # why it was not measured: in full under "notes"
        first[1] = r.note if len(r.note) <= 48 else r.note[:47] + "…"
    if not r.baselines:
        return [first + [""] * (width - 4)]
    lines = []
    for i, b in enumerate(r.baselines):
        lead = first if i == 0 else ["", "", "", ""]
        if "skipped" in b:
            lines.append(lead + [b["name"], b["skipped"], "", "", ""])
        elif "check" in b:
            lines.append(lead + [b["name"], b["check"], "", "", b["verdict"]])
        elif "added" in b:
            lines.append(lead + [b["name"], fmt(b["added"], r.unit), "", f"≤ {fmt(b['limit'], r.unit)}",
                                 b["verdict"] or "-"])
        elif "absolute" in b:
            lines.append(lead + ["(absolute)", "", "", f"≤ {b['absolute']:g} {r.unit}", b["verdict"] or "-"])
        else:
            ratio = b.get("ratio")
            lines.append(lead + [b["name"], fmt(b["data"].get("median"), r.unit),
                                 f"{ratio:.2f}×" if ratio is not None else "-",
                                 f"≤ {b['target']:g}×" if "target" in b else "",
                                 b.get("verdict") or ("" if "target" not in b else "-")])
    return lines


def table(results: Results) -> str:
    head = ["measurement", "median", "min", "max", "vs baseline", "baseline median", "ratio", "target", "result"]
    lines: list[list[str]] = []
    section = None
    for r in results.rows:
        if r.section != section:
            section = r.section
            lines.append([f"[{section}]"] + [""] * (len(head) - 1))
        lines += _cells(r, len(head))
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]
    widths[0] = min(widths[0], 70)
    widths[4] = min(widths[4], 62)

    def render(row: list[str]) -> str:
        cells = []
        for i, (c, wd) in enumerate(zip(row, widths, strict=True)):
            if len(c) > wd:
                c = c[: wd - 1] + "…"
            cells.append(c.rjust(wd) if i in (1, 2, 3, 5, 6) else c.ljust(wd))
        return "  ".join(cells).rstrip()

    return "\n".join([render(head), render(["-" * w for w in widths]), *(render(row) for row in lines)])


def notes(results: Results) -> str:
    out = [f"- {r.name}: {r.note}" for r in results.rows if r.note]
    for what, top in results.imports.items():
        out.append(f"- top {len(top)} imports of `{what}` (-X importtime, top-level, cumulative): " +
                   ", ".join(f"{e['module']} {e['cumulative_us'] / 1000:.1f} ms" for e in top))
    return "\n".join(out)
