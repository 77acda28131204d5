#!/usr/bin/env python3
"""Mutation score of the security modules: cosmic-ray over the files in mutation/modules.toml,
each against the tests listed with it. Prints the score per module and every survivor.

    .venv/bin/python scripts/mutation.py                       # every module, every mutant
    .venv/bin/python scripts/mutation.py --module netcheck     # one module (repeatable)
    .venv/bin/python scripts/mutation.py --sample 12           # CI: 12 mutants, chosen below
    .venv/bin/python scripts/mutation.py --list                # count the mutants, run nothing

guards/registry.toml pins the guards that must never regress (scripts/mutate.py); this finds
the ones nobody registered. cosmic-ray (not mutmut) because it mutates the file on disk and runs
an arbitrary command: the tests run the INSTALLED package in subprocesses (the CLI, the in-pane
launcher inside bubblewrap), which an in-process mutant would never reach. The file it mutates is
the copy in scripts/mutate.py's scratch install, so the worktree is never touched.

A mutant is killed when its tests go red (or hang past the timeout), survives when they stay
green, and is not counted when mutation/equivalent.toml lists it (same module, operator and
source line) with the reason it cannot change behaviour. The run fails (exit 1) when the score of
the non-equivalent mutants is below the floor in modules.toml, or a module marked strict keeps a
survivor (in a sample too). --sample N (without --work) runs N mutants: the modules in an order
shuffled with --seed (by default the day's date: each day CI tries others, and a day's run can
be repeated), dealt one mutant each round robin, each module's drawn at random with the same seed;
only the modules drawn are set up.

Run it with the interpreter of a venv that has '.[test]' and cosmic-ray installed."""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import random
import re
import shlex
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutate  # the scratch install, shared with the registry's runner

ROOT = mutate.ROOT
PLAN = ROOT / "mutation" / "modules.toml"
EQUIVALENT = ROOT / "mutation" / "equivalent.toml"


def load_plan(path: Path = PLAN) -> tuple[dict, dict[str, dict]]:
    data = tomllib.loads(path.read_text())
    return data["settings"], data["module"]


def load_equivalent(path: Path = EQUIVALENT) -> list[dict]:
    if not path.is_file():
        return []
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    for e in entries:
        if set(e) - {"module", "operator", "line", "why", "function"} or not all(e.get(k) for k in ("module", "operator", "line", "why")):
            raise SystemExit(f"mutation: {path}: each entry has module, operator, line and why: {e}")
    return entries


def is_equivalent(entries: list[dict], module: str, operator: str, line: str, function: str | None) -> str | None:
    for e in entries:
        if e["module"] == module and e["operator"] == operator and e["line"].strip() == line.strip() \
                and e.get("function", function) == function:
            return str(e["why"])
    return None


HANG_MARGIN = 20.0  # seconds: the test command times a hang out itself this much before cosmic-ray does
ANNOTATION = "in an annotation, which `from __future__ import annotations` leaves unevaluated"
LEFT = "not run yet (set aside by --again)"
BROKEN = "mutation: the test command ran no test, so this mutant was not tested"


def annotations(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) of every annotation of a module that never evaluates them; [] otherwise."""
    tree = ast.parse(path.read_text())
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
               for n in tree.body):
        return []
    out = []
    for node in ast.walk(tree):
        ann = (node.returns if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
               else node.annotation if isinstance(node, ast.arg | ast.AnnAssign) else None)
        if ann is not None:
            out.append(((ann.lineno, ann.col_offset), (ann.end_lineno or ann.lineno, ann.end_col_offset or 0)))
    return out


def skip_annotations(db: Path, target: Path) -> None:
    """Mutants inside annotations are equivalent by construction: marked, never run."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult
    spans = annotations(target)
    with use_db(str(db), WorkDB.Mode.open) as wdb:
        for item in list(wdb.pending_work_items):
            pos = tuple(item.mutations[0].start_pos)
            if any(a <= pos < b for a, b in spans):
                wdb.set_result(item.job_id, WorkResult(output=ANNOTATION, worker_outcome=WorkerOutcome.SKIPPED))


# -- cosmic-ray sessions ---------------------------------------------------------------------

def cosmic(*args: str) -> None:
    exe = Path(sys.executable).parent / "cosmic-ray"
    subprocess.run([str(exe), "--verbosity", "ERROR", *args], check=True, stdout=subprocess.DEVNULL)


def write_config(path: Path, target: Path, test_command: str, settings: dict) -> None:
    allowed = "|".join(f"(?:{op})" for op in settings["operators"])
    cfg = "\n".join([
        "[cosmic-ray]",
        f"module-path = {json.dumps(str(target))}",
        f"timeout = {float(settings['timeout'])}",
        "excluded-modules = []",
        f"test-command = {json.dumps(test_command)}",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "[cosmic-ray.filters.operators-filter]",
        # cosmic-ray's filter excludes what matches: everything that is not one of ours.
        f"exclude-operators = [{json.dumps(f'(?!(?:{allowed})$)')}]",
        "",
    ])
    path.write_text(cfg)


def session(scratch: mutate.Scratch, src: Path, name: str, mod: dict, settings: dict, work: Path) -> Path:
    """The module's cosmic-ray config (written on every run: the test list may have changed) and
    its session database (made once: a run with the same --work resumes it)."""
    target = scratch.site / mutate.installed_path(mod["file"], scratch.mapping)
    test_command = shlex.join([sys.executable, str(Path(__file__).resolve()), "_pytest", "--scratch",
                               str(scratch.dir), "--src", str(src), "--target", str(target),
                               "--timeout", str(float(settings["timeout"]) - HANG_MARGIN), "--", *mod["tests"]])
    cfg, db = work / f"{name}.toml", work / f"{name}.sqlite"
    write_config(cfg, target, test_command, settings)
    if not db.is_file():
        cosmic("init", str(cfg), str(db))
        subprocess.run([str(Path(sys.executable).parent / "cr-filter-operators"), str(db), str(cfg)], check=True)
        skip_annotations(db, target)
    with sqlite3.connect(db) as con:  # a session copied from another run mutates this run's copy
        con.execute("UPDATE mutation_specs SET module_path = ?", (str(target),))
    return db


def retry_broken(db: Path) -> int:
    """Mutants whose test command ran no test (BROKEN) are pending again."""
    with sqlite3.connect(db) as con:
        return con.execute("DELETE FROM work_results WHERE instr(output, ?) > 0", (BROKEN,)).rowcount


def set_aside_unrun(db: Path, back: bool) -> None:
    """--again runs the survivors only: the mutants never run are set aside (reported as left),
    and a later run without --again takes them back."""
    with sqlite3.connect(db) as con:
        if back:
            con.execute("DELETE FROM work_results WHERE output = ?", (LEFT,))
            return
        con.execute("INSERT INTO work_results (worker_outcome, output, job_id) SELECT 'SKIPPED', ?, job_id "
                    "FROM work_items WHERE job_id NOT IN (SELECT job_id FROM work_results)", (LEFT,))


def forget_survivors(db: Path, target: Path, name: str, equivalent: list[dict]) -> int:
    """--again: the survivors become pending, to be run against the tests as they are now (but
    not those inside annotations, nor those listed as equivalent: they survive whatever the tests)."""
    spans = annotations(target)
    lines = target.read_text().splitlines()
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT r.job_id, m.start_pos_row, m.start_pos_col, m.operator_name, m.definition_name "
                           "FROM work_results r JOIN mutation_specs m ON m.job_id = r.job_id "
                           "WHERE r.test_outcome = 'SURVIVED'").fetchall()
        again = [(job,) for job, row, col, op, fn in rows
                 if not any(a <= (row, col) < b for a, b in spans)
                 and not is_equivalent(equivalent, name, op, lines[row - 1], fn)]
        con.executemany("DELETE FROM work_results WHERE job_id = ?", again)
    return len(again)


def pending(db: Path) -> list[str]:
    from cosmic_ray.work_db import WorkDB, use_db
    with use_db(str(db), WorkDB.Mode.open) as wdb:
        return [item.job_id for item in wdb.pending_work_items]


def skip_all_but(db: Path, keep: set[str]) -> None:
    """The sample: every other pending mutant is marked skipped, as cosmic-ray's own filters do."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult
    with use_db(str(db), WorkDB.Mode.open) as wdb:
        for item in list(wdb.pending_work_items):
            if item.job_id not in keep:
                wdb.set_result(item.job_id, WorkResult(output="not in the sample", worker_outcome=WorkerOutcome.SKIPPED))


def results(db: Path, name: str, src_file: Path, equivalent: list[dict]) -> dict:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome
    lines = src_file.read_text().splitlines()
    spans = annotations(src_file)
    out: dict = {"module": name, "killed": 0, "survived": [], "equivalent": [], "pending": 0, "skipped": 0, "broken": 0}
    with use_db(str(db), WorkDB.Mode.open) as wdb:
        done = dict(wdb.results)
        for item in wdb.work_items:
            m = item.mutations[0]
            r = done.get(item.job_id)
            if r is None or r.output == LEFT:
                out["pending"] += 1
                continue
            if BROKEN in (r.output or ""):
                out["broken"] += 1
                continue
            line_no = m.start_pos[0]
            text = lines[line_no - 1].strip()
            where = {"line": line_no, "operator": m.operator_name, "occurrence": m.occurrence, "source": text}
            in_annotation = (r.worker_outcome != WorkerOutcome.SKIPPED or r.output == ANNOTATION) \
                and any(a <= tuple(m.start_pos) < b for a, b in spans)
            if r.worker_outcome == WorkerOutcome.SKIPPED and not in_annotation:
                out["skipped"] += 1
                continue
            # A listed mutant that the tests kill anyway counts as killed: the list only excuses survivors.
            survived = r.test_outcome == TestOutcome.SURVIVED
            why = ANNOTATION if in_annotation else \
                is_equivalent(equivalent, name, m.operator_name, text, m.definition_name) if survived else None
            if why:
                out["equivalent"].append({**where, "why": why})
            elif survived:
                out["survived"].append({**where, "diff": "\n".join(ln for ln in (r.diff or "").splitlines()
                                                                   if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))})
            else:
                out["killed"] += 1
    counted = out["killed"] + len(out["survived"])
    out["score"] = round(100.0 * out["killed"] / counted, 1) if counted else 100.0
    return out


# -- the test command cosmic-ray runs per mutant ---------------------------------------------

def run_tests(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="mutation.py _pytest")
    ap.add_argument("--scratch", type=Path, required=True)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=10.0**6)
    ap.add_argument("tests", nargs="+")
    args = ap.parse_args(argv)
    scratch = mutate.Scratch.attach(args.scratch, args.src)
    # The mutated file's bytecode goes: two mutants of equal size written within one second of
    # each other would otherwise share a stale .pyc.
    for pyc in (args.target.parent / "__pycache__").glob(args.target.stem + ".*.pyc"):
        pyc.unlink(missing_ok=True)
    # A hang is timed here, short of cosmic-ray's own timeout: cosmic-ray would kill this process's
    # group only, and pytest (a session of its own) with its tmux servers and jails would run on.
    # Here the hang kills pytest's group and reaps what it left (Scratch.pytest), and counts as killed.
    rc, out, _ = scratch.pytest(args.tests, "-x", timeout=args.timeout)
    sys.stdout.write(out[-4000:] + (f"\nmutation: the tests hung past {args.timeout:.0f}s (killed)\n" if rc == -1 else ""))
    if rc == -1:
        return 1
    if rc != 0 and not_tested(rc, out):
        # cosmic-ray would count this killed; results() counts it broken, and a rerun tries again.
        sys.stdout.write(f"\n{BROKEN} (pytest exit {rc})\n")
    return rc


def not_tested(rc: int, out: str) -> bool:
    """The tests never ran: pytest missing from the scratch install, no test collected, or the
    list naming a file or test that no longer exists (a mutant that breaks an import is a kill)."""
    return rc == 5 or bool(re.search(r"No module named '?pytest|ERROR: (file or directory )?not found", out))


# -- the run ---------------------------------------------------------------------------------

def sample_shares(names: list[str], n: int, seed: str) -> dict[str, int]:
    """How many of the n sampled mutants each module gets: the modules in an order shuffled with
    seed, n dealt round robin (so n <= the module count means one each from n modules)."""
    order = sorted(names)
    random.Random(seed).shuffle(order)
    return {name: n // len(order) + (i < n % len(order)) for i, name in enumerate(order)}


def choose_sample(db: Path, k: int, seed: str) -> set[str]:
    """k of the module's mutants, the same ones for the same seed and source (job ids are random:
    the pool is ordered by where and how each mutant mutates)."""
    from cosmic_ray.work_db import WorkDB, use_db
    with use_db(str(db), WorkDB.Mode.open) as wdb:
        items = [(tuple(i.mutations[0].start_pos), i.mutations[0].operator_name, i.mutations[0].occurrence, i.job_id)
                 for i in wdb.pending_work_items]
    pool = [job for *_, job in sorted(items)]
    random.Random(f"{seed}:{db.stem}").shuffle(pool)
    return set(pool[:k])


def report(res: list[dict], settings: dict, plan: dict[str, dict], say, sample: bool = False) -> bool:
    ok = True
    killed = sum(r["killed"] for r in res)
    survived = sum(len(r["survived"]) for r in res)
    say(f"{'module':12} {'killed':>6} {'surv':>5} {'equiv':>5} {'left':>5} {'score':>6}")
    for r in res:
        say(f"{r['module']:12} {r['killed']:6} {len(r['survived']):5} {len(r['equivalent']):5} "
            f"{r['pending']:5} {r['score']:5.1f}%{'  strict' if plan[r['module']].get('strict') else ''}")
    total = round(100.0 * killed / (killed + survived), 1) if killed + survived else 100.0
    say(f"{'all':12} {killed:6} {survived:5} {sum(len(r['equivalent']) for r in res):5} "
        f"{sum(r['pending'] for r in res):5} {total:5.1f}%  (floor {settings['floor']}%)")
    for r in res:
        for s in r["survived"]:
            say(f"SURVIVED {plan[r['module']]['file']}:{s['line']} {s['operator']}  {s['source']}")
    broken = sum(r.get("broken", 0) for r in res)
    if broken:
        say(f"mutation: {broken} mutants were not tested (the test command ran no test: see their "
            "output in the session); a run with the same --work tries them again")
        ok = False
    if total < float(settings["floor"]):
        say(f"mutation: the score {total}% is below the floor {settings['floor']}%")
        ok = False
    # A sample too: a strict module's survivor is a hole in a check that must have none.
    strict_left = [r["module"] for r in res if plan[r["module"]].get("strict") and r["survived"]]
    if strict_left:
        say("mutation: survivors in modules where every non-equivalent mutant must die: " + ", ".join(strict_left))
        ok = False
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_pytest"]:
        return run_tests(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", default=[], help="only this module (repeatable)")
    ap.add_argument("--sample", type=int, default=0, metavar="N", help="run N mutants spread over the modules")
    ap.add_argument("--seed", default=datetime.date.today().isoformat(), help="the sample's seed (default: today)")
    ap.add_argument("--list", action="store_true", help="count the mutants per module; run nothing")
    ap.add_argument("--report", action="store_true",
                    help="with --work: report what a run (still going, or stopped) has finished; run nothing")
    ap.add_argument("--work", type=Path, help="keep the sessions here (resume: run again with the same --work)")
    ap.add_argument("--again", action="store_true", help="with --work: run the survivors again (new tests)")
    ap.add_argument("--budget", type=float, metavar="SECONDS",
                    help="start no module's mutants after this long (the rest are reported as left)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--src", type=Path, default=ROOT, help="the source tree to mutate a copy of (default: this one)")
    args = ap.parse_args(argv)
    say = lambda *a: print(*a, flush=True)  # noqa: E731
    settings, plan = load_plan()
    equivalent = load_equivalent()
    names = args.module or list(plan)
    unknown = [n for n in names if n not in plan]
    if unknown:
        say(f"mutation: no such module in {PLAN.name}: {', '.join(unknown)}")
        return 2
    work = args.work or Path(mutate.tempfile.mkdtemp(prefix="tj-mutation-"))
    work.mkdir(parents=True, exist_ok=True)
    marker = work / "scratch"
    if marker.is_file() and usable(Path(marker.read_text())):
        scratch = mutate.Scratch.attach(Path(marker.read_text()), args.src)
    else:
        scratch = mutate.Scratch(args.src, keep=True)
        marker.write_text(str(scratch.dir))
    try:
        return run(args, names, scratch, work, settings, plan, equivalent, say)
    finally:
        if not args.work:
            scratch.keep = False
            scratch.close()
            mutate.shutil.rmtree(work, ignore_errors=True)


def usable(directory: Path) -> bool:
    """A kept scratch install still imports pytest and tmuxjail (a /tmp cleaner may have eaten
    part of it): otherwise the run makes a new one."""
    python = directory / "venv" / "bin" / "python"
    return python.is_file() and subprocess.run([str(python), "-P", "-c", "import pytest, tmuxjail"],
                                               capture_output=True).returncode == 0


def run(args, names, scratch, work, settings, plan, equivalent, say) -> int:
    t0 = time.monotonic()
    if args.sample and not args.module:  # a module joins the sample once its full run is triaged
        names = [n for n in names if plan[n].get("sample", True)]
    shares = sample_shares(names, args.sample, args.seed) if args.sample else {}
    if shares:
        names = [n for n in names if shares[n]]
        say(f"mutation: a sample of {args.sample} mutants (seed {args.seed!r}): "
            + ", ".join(f"{n} {shares[n]}" for n in names))
    sessions: dict[str, Path] = {}
    for name in names:
        if args.report and not (work / f"{name}.sqlite").is_file():
            continue
        if args.report:  # (its config stays what the run wrote: that run may still be using it)
            sessions[name] = work / f"{name}.sqlite"
            continue
        sessions[name] = session(scratch, args.src, name, plan[name], settings, work)
        if n := retry_broken(sessions[name]):
            say(f"mutation: {name}: {n} mutants whose tests did not run, to run again")
        set_aside_unrun(sessions[name], back=not args.again)
        if args.again:
            target = scratch.site / mutate.installed_path(plan[name]["file"], scratch.mapping)
            n = forget_survivors(sessions[name], target, name, equivalent)
            say(f"mutation: {name}: {n} survivors to run again")
    if args.list:
        for name, db in sessions.items():
            say(f"{name:12} {len(pending(db)):5} mutants")
        say(f"{'all':12} {sum(len(pending(db)) for db in sessions.values()):5} mutants")
        return 0
    for name, db in sessions.items():
        if shares:
            skip_all_but(db, choose_sample(db, shares[name], args.seed))
    res = []
    for name, db in sessions.items():
        n = 0 if args.report else len(pending(db))
        if n and args.budget and time.monotonic() - t0 > args.budget:
            say(f"mutation: {name}: over the budget of {args.budget:.0f}s, {n} mutants left")
            n = 0
        if n:
            say(f"mutation: {name}: {n} mutants ({plan[name]['file']}) ...")
            t1 = time.monotonic()
            try:
                cosmic("exec", str(work / f"{name}.toml"), str(db))
                say(f"mutation: {name}: done in {time.monotonic() - t1:.0f}s")
            except subprocess.CalledProcessError as exc:  # interrupted: what finished is reported
                say(f"mutation: {name}: cosmic-ray stopped (exit {exc.returncode}) after {time.monotonic() - t1:.0f}s")
        res.append(results(db, name, args.src / plan[name]["file"], equivalent))
    ok = report(res, settings, plan, say, sample=bool(args.sample))
    say(f"mutation: {time.monotonic() - t0:.0f}s" + (f"; sessions in {work}" if args.work else ""))
    if args.json:
        args.json.write_text(json.dumps({"settings": settings, "modules": res}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
