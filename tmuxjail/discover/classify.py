"""Evidence -> what a step needs, in capabilities. Pure.

Folded: the workspace, the private home's own files, the system directories, private scratch
space and the install root (the jail gives all of those already). What the jail hid or refused is
matched against the shipped profile (its baseline) and the capability catalogue (the step's
overlay); anything else stays raw, flagged, with the evidence lines that saw it, and is never put
into a candidate as a grant."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..subpath import inside
from .evidence import Evidence, PathUse

FOLDED = ("system", "scratch", "install")


@dataclass
class Classification:
    baseline: list[str]  # the shipped baseline capabilities this run needs (or cannot be observed)
    dropped: list[str]  # shipped baseline capabilities with paths this run never touched
    overlay: dict[str, list[PathUse]]  # catalogue/optional capability -> the evidence that asked for it
    raw: list[PathUse]  # unknown: flagged, not granted
    never: list[PathUse]  # tmuxjail's own files: never granted
    folded: dict[str, int] = field(default_factory=dict)  # area -> number of paths

    @property
    def capabilities(self) -> list[str]:
        return [*self.baseline, *(c for c in self.overlay if c not in self.baseline)]


def grant_matches(path: str, grant_path: str, kind: str, home: str) -> bool:
    g = home.rstrip("/") + grant_path[1:] if grant_path.startswith("~/") else grant_path
    return inside(path, g) if kind == "dir" else path == g.rstrip("/")


def match(path: str, caps, home: str) -> str | None:
    """The first capability (in the given order) one of whose paths covers `path`."""
    for cid, cap in caps:
        if any(grant_matches(path, g.path, g.kind, home) for g in cap.paths):
            return cid
    return None


def classify(ev: Evidence, profile, catalogue: dict) -> Classification:
    """profile: the shipped Profile (capabilities merged); catalogue: the shared capabilities."""
    home = ev.home
    base_caps = [(c, profile.capabilities[c]) for c in profile.baseline]
    other_caps = [(c, profile.capabilities[c]) for c in profile.optional]
    other_caps += [(c, cap) for c, cap in catalogue.items() if c not in profile.capabilities]
    used: set[str] = set()
    overlay: dict[str, list[PathUse]] = {}
    raw: list[PathUse] = []
    never: list[PathUse] = []
    folded: dict[str, int] = {}
    seen = {u.path for u in ev.denials}
    for u in [*ev.denials, *(u for u in ev.paths if u.path not in seen)]:
        if u.area == "tmuxjail":
            never.append(u)
            continue
        if u.odd or u.area == "unknown":
            raw.append(u)
            continue
        if not u.hidden and u.area in (*FOLDED, "home"):
            if u.area == "home" and (cid := match(u.path, base_caps, home)):
                used.add(cid)
            folded["private-home" if u.area == "home" else u.area] = \
                folded.get("private-home" if u.area == "home" else u.area, 0) + 1
            continue
        if u.hidden and (u.area == "system" or (set(u.tried) == {"probe"} and not u.kinds and u.area != "home")):
            # /sys, /proc, /dev, /run the layout hides, or a mere existence check outside the home
            # (/.dockerenv, /home): not something a profile grants; counted, not proposed
            folded["hidden-system" if u.area == "system" else "probed"] = \
                folded.get("hidden-system" if u.area == "system" else "probed", 0) + 1
            continue
        if cid := match(u.path, base_caps, home):
            used.add(cid)
        elif cid := match(u.path, other_caps, home):
            overlay.setdefault(cid, []).append(u)
        elif u.hidden:
            raw.append(u)
        else:
            raw.append(u)  # reached outside every known area: say so
    baseline = [c for c, cap in base_caps if c in used or not cap.paths]
    dropped = [c for c, cap in base_caps if c not in baseline]
    return Classification(baseline=baseline, dropped=dropped, overlay=overlay, raw=raw, never=never,
                          folded=folded)
