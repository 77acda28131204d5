"""The evidence of one discovery run: a versioned pydantic schema, and its construction from a
parsed trace (pure, given a `host_has` function). Paths and kinds only, never contents."""

from __future__ import annotations

import errno as errno_mod
import functools
import os
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..registry import Mode
from ..subpath import inside_any
from . import trace as trace_mod

SCHEMA = "tmuxjail.discovery.evidence/1"
MAX_PATHS = 5000
MAX_REFS = 8
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys",
          "/dev", "/run")
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
DENIED = {"EACCES", "EPERM", "EROFS"}  # refused by the jail whether or not the host has the path
HIDDEN = {"ENOENT", "ENOTDIR"}  # a would-be denial only if the host has the path


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Identity(_M):
    provider: str
    path: str
    sha256: str
    version: str
    extra: list[list[str]] = []


class Process(_M):
    pid: int
    parent: int | None
    execs: list[str]
    line: int


class PathUse(_M):
    path: str
    area: str  # home, system, scratch, install, tmuxjail, other, unknown
    kinds: list[str]  # what succeeded: read, write, create, delete, rename-from, rename-to, mkdir, exec
    tried: dict[str, str] = {}  # kind -> errno, for what failed
    hidden: bool = False  # a would-be denial: the jail hid or refused a path the host has
    odd: bool = False  # not plain printable UTF-8, truncated, or relative to an unknown directory
    lines: list[int]  # trace lines that saw it (the first few)
    count: int = 1  # accesses to it in the trace (each distinct path is one entry, however often used)


class Collapsed(_M):
    """Paths left out of `paths` or `denials` (where) to keep the evidence under MAX_PATHS: all the
    entries under one directory, named by it and counted (the fullest directories go first)."""

    directory: str
    where: Literal["paths", "denials"]
    paths: int
    kinds: list[str]


class Exit(_M):
    status: int | None = None
    signal: str | None = None
    finished: bool
    timed_out: bool = False


class EnvNames(_M):
    provided: list[str]
    declared: list[str]
    provided_not_declared: list[str]
    declared_not_provided: list[str]


class Destination(_M):
    destination: str
    decision: str  # allowed, denied, connected, failed
    source: Literal["proxy", "trace"]
    lines: list[int] = []


class Network(_M):
    observed_by_proxy: bool
    note: str
    destinations: list[Destination] = []


class TraceInfo(_M):
    mechanism: str
    sha256: str
    lines: int
    rejected: int
    truncated: bool
    cap: int | None = None  # the run reached this size cap (bytes) and was stopped there


class Evidence(_M):
    schema_: str = SCHEMA
    id: str
    mode: Mode
    identity: Identity
    workspaces: list[str]
    home: str
    private_home: str | None
    args: list[str]
    started_at: str
    duration_s: float | None
    exit: Exit
    processes: list[Process]
    paths: list[PathUse]
    denials: list[PathUse]
    workspace_counts: dict[str, int]
    dropped: int
    collapsed: list[Collapsed] = []
    env: EnvNames
    network: Network
    trace: TraceInfo

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def dump(self) -> dict:
        d = self.model_dump(mode="json")
        d["schema"] = d.pop("schema_")
        return d

    @classmethod
    def load(cls, data: dict) -> Evidence:
        data = dict(data)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"unknown evidence schema {data.get('schema')!r}")
        data["schema_"] = data.pop("schema")
        return cls.model_validate(data)


def area(path: str, meta: dict) -> str:
    if path.startswith("?/") or not path.startswith("/"):
        return "unknown"
    if inside_any(path, meta["workspaces"]):
        return "workspace"
    if inside_any(path, meta.get("own_dirs", ())):
        return "tmuxjail"
    if inside_any(path, meta.get("install_roots", ())) or path == meta["identity"]["path"]:
        return "install"
    if inside_any(path, [meta["home"]]):
        return "home"
    if inside_any(path, SCRATCH):
        return "scratch"
    if inside_any(path, SYSTEM):
        return "system"
    return "other"


class _Use:
    """One distinct path while a trace is read: small, since a flood of distinct names makes many
    (kinds and tried are shared tuples, see _with); a PathUse is made only for the entries the
    evidence keeps."""

    __slots__ = ("area", "count", "hidden", "kinds", "lines", "odd", "path", "tried")

    def __init__(self, area: str) -> None:
        self.area, self.count, self.odd, self.hidden, self.path = area, 0, False, False, ""
        self.kinds: tuple[str, ...] = ()  # what succeeded, sorted
        self.tried: tuple[tuple[str, str], ...] = ()  # (kind, errno) of the first failure of each kind
        self.lines: list[int] = []

    def model(self) -> PathUse:
        return PathUse(path=self.path, area=self.area, kinds=list(self.kinds), tried=dict(self.tried),
                       hidden=self.hidden, odd=self.odd, lines=self.lines, count=self.count)


@functools.lru_cache(maxsize=4096)
def _with(items: tuple, item) -> tuple:
    """items with item added (kinds: kept sorted; tried: in order), one shared tuple per value."""
    return tuple(sorted((*items, item))) if isinstance(item, str) else (*items, item)


class Tree:
    """What the first pass over a trace keeps for the second (pure, bounded by the number of
    processes, never by the trace's length): the parent of each pid (strace may print a child's
    first calls before its parent's fork returns, so this needs the whole trace), the root
    (bubblewrap), what the root executed, and the root's exit."""

    CALLS = frozenset({*trace_mod.FORKS, "execve"})  # all the calls see() looks at

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.root: int | None = None
        self.bwrap: tuple[bytes, bool] | None = None
        self.root_exit: trace_mod.Exit | None = None
        self._root_execd = False

    def see(self, ev: trace_mod.Call | trace_mod.Exit) -> None:
        if isinstance(ev, trace_mod.Exit):
            if ev.pid == self.root and self.root_exit is None:
                self.root_exit = ev
            return
        c = ev
        if self.root is None:
            self.root = c.pid
        if c.name in trace_mod.FORKS and c.ok:
            child = c.child if c.child is not None else (int(c.ret) if c.ret.isdigit() else None)
            if child:
                self.parent.setdefault(child, c.pid)
        if not self._root_execd and c.name == "execve" and c.pid == self.root:
            self.bwrap, self._root_execd = c.string(0), True


class _Since:
    """The line from which each pid is the CLI's. The root is bubblewrap: its setup (mounts, binds,
    the namespace's init) is not the CLI's; a pid becomes the CLI's at its first successful exec of
    something other than bubblewrap, and its children are the CLI's from their birth. Fed the calls
    in order (one pass), after the whole Tree is known."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.since: dict[int, int] = {}

    def _inherited(self, pid: int) -> int | None:
        seen = set()
        p = self.tree.parent.get(pid)
        while p is not None and p not in seen:
            if p in self.since:
                return self.since[p]
            seen.add(p)
            p = self.tree.parent.get(p)
        return None

    def see(self, c: trace_mod.Call) -> bool:
        """Whether call c is the CLI's."""
        if c.pid not in self.since:
            bwrap, root = self.tree.bwrap, self.tree.root
            if self._inherited(c.pid) is not None or (c.name == "execve" and c.ok and c.pid != root and (
                    bwrap is None or c.string(0) != bwrap)):
                self.since[c.pid] = c.line
        return c.pid in self.since and c.line >= self.since[c.pid]


def build(meta: dict, t: trace_mod.Trace, trace_sha256: str, host_has: Callable[[str], bool],
          proxy_log: list[dict] | None, timed_out: bool = False) -> Evidence:
    """The evidence of a parsed trace held in memory (tests; `build_stream` is the same over a
    file)."""
    tree = Tree()
    for c in t.calls:
        tree.see(c)
    for e in t.exits:
        tree.see(e)
    return _build(meta, tree, t, t.calls, trace_sha256, host_has, proxy_log, timed_out)


def build_stream(meta: dict, reopen: Callable[[], Iterable[str]], trace_sha256: Callable[[], str],
                 host_has: Callable[[str], bool], proxy_log: list[dict] | None,
                 timed_out: bool = False) -> Evidence:
    """The evidence of a trace read twice as a stream (reopen() gives its lines from the start
    each time): the first pass keeps the Tree (parsing only the calls it needs), the second the
    counters and the paths, each distinct path once with its counters. Memory grows with the
    processes and the distinct paths, not with the trace's length. trace_sha256 is asked after
    the first pass (which may hash it)."""
    tree = Tree()
    for e in trace_mod.events(reopen(), trace_mod.Trace(), only=Tree.CALLS):
        tree.see(e)
    t = trace_mod.Trace()  # the counters, from the second pass: it parses every line
    calls = (e for e in trace_mod.events(reopen(), t) if isinstance(e, trace_mod.Call))
    return _build(meta, tree, t, calls, trace_sha256(), host_has, proxy_log, timed_out)


def _build(meta: dict, tree: Tree, t: trace_mod.Trace, calls: Iterable[trace_mod.Call], trace_sha256: str,
           host_has: Callable[[str], bool], proxy_log: list[dict] | None, timed_out: bool) -> Evidence:
    parent, cli = tree.parent, _Since(tree)
    cwd: dict[int, bytes] = {}
    ws0 = meta["workspaces"][0].encode()
    execs: dict[int, list[str]] = {}
    first_line: dict[int, int] = {}
    uses: dict[str, _Use] = {}
    ws_counts: dict[str, int] = {}
    connects: dict[str, dict] = {}
    for c in calls:
        if not cli.see(c):
            continue
        first_line.setdefault(c.pid, c.line)
        if c.pid not in cwd:
            cwd[c.pid] = cwd.get(parent.get(c.pid, -1), ws0)
        if c.name in trace_mod.FORKS and c.ok:
            child = c.child if c.child is not None else (int(c.ret) if c.ret.isdigit() else None)
            if child:
                cwd.setdefault(child, cwd[c.pid])
        if c.name == "connect":
            dest = trace_mod.connect_dest(c)
            if dest:
                d = connects.setdefault(dest, {"ok": False, "lines": []})
                d["ok"] = d["ok"] or c.ok or c.errno == "EINPROGRESS"
                if len(d["lines"]) < MAX_REFS:
                    d["lines"].append(c.line)
            continue
        for a in trace_mod.accesses(c, cwd[c.pid]):
            where = area(a.path, meta)
            if where == "workspace":
                if a.ok and a.kind != "probe":
                    ws_counts[a.kind] = ws_counts.get(a.kind, 0) + 1
                continue
            u = uses.get(a.path)
            if u is None:
                u = uses[a.path] = _Use(where)
            u.count += 1
            if a.ok:
                if a.kind != "probe" and a.kind not in u.kinds:
                    u.kinds = _with(u.kinds, a.kind)
            elif all(k != a.kind for k, _ in u.tried):
                u.tried = _with(u.tried, (a.kind, a.errno or "?"))
            u.odd = u.odd or a.odd
            if len(u.lines) < MAX_REFS:
                u.lines.append(a.line)
            if a.kind == "exec" and a.ok:
                execs.setdefault(c.pid, []).append(a.path)
        if c.name in ("chdir", "fchdir") and c.ok:
            if c.name == "chdir" and (s := c.string(0)):
                base = cwd[c.pid]
                cwd[c.pid] = trace_mod.resolve(base, s[0], s[1])[0].encode()
            elif c.name == "fchdir" and (dirfd := c.decor(0)):
                cwd[c.pid] = dirfd

    held_p, held_d = _held(uses, host_has)
    del uses
    kept_p, folded_p, cut_p = fit(held_p, "paths")
    kept_d, folded_d, cut_d = fit(held_d, "denials")
    paths, denials = [u.model() for u in kept_p], [u.model() for u in kept_d]  # models only for what is kept
    collapsed = folded_p + folded_d
    dropped = sum(c.paths for c in collapsed) + cut_p + cut_d

    ex = tree.root_exit
    status = ex.status if ex else None
    ident = meta["identity"]
    provided, declared = sorted(meta.get("env_provided", ())), sorted(meta.get("env_declared", ()))
    net = _network(connects, proxy_log)
    return Evidence(
        id=meta["id"], mode=meta["mode"],
        identity=Identity(provider=meta["provider"], path=ident["path"], sha256=ident["sha256"],
                          version=ident.get("version", "unknown"), extra=[list(x) for x in ident.get("extra", ())]),
        workspaces=list(meta["workspaces"]), home=meta["home"], private_home=meta.get("private_home"),
        args=list(meta.get("args", ())), started_at=meta["started_at"],
        duration_s=round(t.last_ts - t.first_ts, 3) if t.first_ts is not None and t.last_ts is not None else None,
        exit=Exit(status=status, signal=ex.signal if ex else None, finished=ex is not None, timed_out=timed_out),
        processes=[Process(pid=p, parent=parent.get(p), execs=execs.get(p, []), line=first_line[p])
                   for p in sorted(first_line, key=first_line.__getitem__)],
        paths=paths, denials=denials, workspace_counts=ws_counts, dropped=dropped, collapsed=collapsed,
        env=EnvNames(provided=provided, declared=declared,
                     provided_not_declared=sorted(set(provided) - set(declared)),
                     declared_not_provided=sorted(set(declared) - set(provided))),
        network=net,
        trace=TraceInfo(mechanism="strace -f (ptrace, outside the jail)", sha256=trace_sha256, lines=t.lines,
                        rejected=t.rejected, truncated=t.truncated, cap=t.cap),
    )


def _held(uses: dict[str, _Use], host_has: Callable[[str], bool]) -> tuple[list[_Use], list[_Use]]:
    """(the paths the evidence lists, the denials), each _Use given its path and `hidden`."""
    held_p: list[_Use] = []
    held_d: list[_Use] = []
    for path, u in sorted(uses.items()):
        errs = [e for _, e in u.tried]
        u.hidden = any(e in DENIED for e in errs) or (
            any(e in HIDDEN for e in errs) and not u.odd and u.area != "unknown" and host_has(path))
        u.path = path
        if u.hidden:
            held_d.append(u)
        if u.kinds or u.odd:  # an odd name is kept even when it failed: a line in the evidence
            held_p.append(u)
    return held_p, held_d


def _network(connects: dict[str, dict], proxy_log: list[dict] | None) -> Network:
    dests = [Destination(destination=k, decision="connected" if v["ok"] else "failed", source="trace",
                         lines=v["lines"]) for k, v in sorted(connects.items())]
    if proxy_log is None:
        return Network(observed_by_proxy=False, note="not observed by a proxy (no per-session proxy log); "
                       "connect() addresses from the trace only", destinations=dests)
    return Network(observed_by_proxy=True, note="from the session's proxy log", destinations=[
        *(Destination(destination=f"{r.get('host')}:{r.get('port')}", decision=str(r.get("decision")),
                      source="proxy") for r in proxy_log), *dests])


def fit(uses: list[_Use], which: Literal["paths", "denials"]) -> tuple[list[_Use], list[Collapsed], int]:
    """At most MAX_PATHS entries, so that a flood of distinct paths cannot push out what comes
    after it: the directories holding the most entries are folded into one named, counted line
    each until the rest fits; only if that is not enough is the tail cut. (kept, folded, cut)."""
    if len(uses) <= MAX_PATHS:
        return uses, [], 0
    groups: dict[str, list[_Use]] = {}
    for u in uses:
        groups.setdefault(os.path.dirname(u.path) or "/", []).append(u)
    n, fold = len(uses), list[str]()
    for d, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if n <= MAX_PATHS or len(members) < 2 or len(fold) >= MAX_REFS * 8:
            break
        fold.append(d)
        n -= len(members)
    gone = set(fold)
    kept = [u for u in uses if (os.path.dirname(u.path) or "/") not in gone]
    folded = [Collapsed(directory=d, where=which, paths=len(groups[d]),
                        kinds=sorted({k for u in groups[d] for k in [*u.kinds, *(k for k, _ in u.tried)]}))
              for d in fold]
    return kept[:MAX_PATHS], folded, max(0, len(kept) - MAX_PATHS)


def truncation(ev: dict) -> list[str]:
    """What the evidence is missing, one line each (empty: nothing): shown before a candidate
    built from it is approved."""
    out = []
    tr = ev.get("trace", {})
    if tr.get("cap"):
        out.append(f"the trace reached its cap of {tr['cap'] >> 20} MiB and the run was stopped there: "
                   "nothing the CLI did after that is in the evidence ([discover] trace_cap in the config)")
    elif tr.get("truncated"):
        out.append("the trace was truncated: the end of the run is not in the evidence")
    coll = ev.get("collapsed", [])
    for c in coll[:10]:
        out.append(f"{c['paths']} {c['where']} under {c['directory']}/ folded into this one line (not listed one by one)")
    if len(coll) > 10:
        out.append(f"... and {len(coll) - 10} more folded directories")
    cut = ev.get("dropped", 0) - sum(c["paths"] for c in coll)
    if cut > 0:
        out.append(f"{cut} more paths dropped past the evidence's limit of {MAX_PATHS}")
    return out


def errno_text(name: str) -> str:
    code = getattr(errno_mod, name, None)

    return os.strerror(code) if isinstance(code, int) else name
