#!/usr/bin/env python3
"""Mutation runner: remove each guard in guards/registry.toml from a scratch copy of tmuxjail, one
at a time, and run the tests the entry names. A guard whose removal leaves them green is MISSED
and fails the run, so is a snippet that is not found exactly once (a refactor must not silently
void a mutation), a test id that does not exist, or a named test that fails without a mutation.

    .venv/bin/python scripts/mutate.py            # every guard (as root: the root entries)
    .venv/bin/python scripts/mutate.py --fast     # the CI subset (fast = true)
    .venv/bin/python scripts/mutate.py --only ID [--only ID...] [--json] [--check]

How the mutated package is run, cheaply and exactly as the tests run the real one: one scratch
venv per run (no pip; a .pth puts the running venv's site-packages, i.e. pydantic, pytest... after
its own), and in its site-packages a copy of the package laid out as pyproject's package-dir
installs it. Per mutation only the mutated file is rewritten (bytecode caches dropped). The tests
run `sys.executable -P -m tmuxjail`, and the in-pane launcher puts its own package's parent
directory on sys.path, so every process of a test, inside and outside the jail, runs the copy.

Run it with the interpreter of a venv that has '.[test]' installed. Stdlib only."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "guards" / "registry.toml"
TIMEOUT = 900  # seconds per mutation; a hang counts as red (the test did not pass)
KEYS = {"id", "why", "file", "find", "replace", "edits", "tests", "root_tests", "user_tests", "only_as",
        "differs", "fast", "guard"}
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class RegistryError(Exception):
    pass


# -- the registry ----------------------------------------------------------------------------

def load(path: Path = REGISTRY) -> list[dict]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RegistryError(f"{path}: {exc}") from None
    guards = data.get("guard", [])
    seen: set[str] = set()
    for g in guards:
        gid = g.get("id", "?")
        bad = set(g) - KEYS
        if bad:
            raise RegistryError(f"{gid}: unknown key(s) {sorted(bad)}")
        if not ID_RE.match(gid) or gid in seen:
            raise RegistryError(f"{gid}: ids are unique, lower-case, [a-z0-9-]")
        seen.add(gid)
        for key in ("why", "tests"):
            if not g.get(key):
                raise RegistryError(f"{gid}: {key} is required")
        if g.get("only_as") not in (None, "root", "user"):
            raise RegistryError(f"{gid}: only_as is 'root' or 'user'")
        g["edits"] = edits(g)
    return guards


def edits(g: dict) -> list[dict]:
    out = list(g.get("edits", []))
    if "file" in g or "find" in g:
        out.insert(0, {"file": g.get("file"), "find": g.get("find"), "replace": g.get("replace", "")})
    if not out:
        raise RegistryError(f"{g['id']}: no mutation (file + find [+ replace], or edits)")
    for e in out:
        if not e.get("file") or not e.get("find") or set(e) - {"file", "find", "replace"}:
            raise RegistryError(f"{g['id']}: each edit needs file and find (and optionally replace)")
        e.setdefault("replace", "")
        if e["find"] == e["replace"]:
            raise RegistryError(f"{g['id']}: the replacement equals the snippet")
    return out


def tests_for(g: dict, uid: int) -> list[str]:
    own = g.get("root_tests") if uid == 0 else g.get("user_tests")
    return list(own) if own else list(g["tests"])


def applies(g: dict, uid: int) -> bool:
    return g.get("only_as") is None or (g["only_as"] == "root") == (uid == 0)


def mutate(text: str, e: dict, where: str) -> str:
    n = text.count(e["find"])
    if n != 1:
        raise RegistryError(f"{where}: the snippet to mutate occurs {n} times in {e['file']}, not once:\n"
                            f"    {e['find']!r}")
    return text.replace(e["find"], e["replace"])


def check(guards: list[dict], src: Path = ROOT) -> list[str]:
    """Every snippet found exactly once (also with the other edits of its entry applied)."""
    problems = []
    for g in guards:
        texts: dict[str, str] = {}
        for e in g["edits"]:
            f = src / e["file"]
            if not f.is_file():
                problems.append(f"{g['id']}: {e['file']} does not exist")
                continue
            try:
                texts[e["file"]] = mutate(texts.get(e["file"]) or f.read_text(), e, g["id"])
            except RegistryError as exc:
                problems.append(str(exc))
    return problems


# -- the scratch install ---------------------------------------------------------------------

def package_map(src: Path) -> dict[str, str]:
    """source dir -> dir inside site-packages, as pyproject's package-dir installs them."""
    cfg = tomllib.loads((src / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {d: pkg.replace(".", "/") for pkg, d in cfg["package-dir"].items()}


def installed_path(rel: str, mapping: dict[str, str]) -> str:
    best = max((d for d in mapping if rel == d or rel.startswith(d + "/")), key=len, default=None)
    if best is None:
        raise RegistryError(f"{rel} is not inside an installed package")
    return mapping[best] + rel[len(best):]


class Scratch:
    def __init__(self, src: Path, keep: bool = False):
        self.src, self.keep = src, keep
        self.dir = Path(tempfile.mkdtemp(prefix="tj-mutate-"))
        os.chmod(self.dir, 0o755)
        venv.EnvBuilder(with_pip=False, symlinks=True).create(self.dir / "venv")
        self.python = str(self.dir / "venv" / "bin" / "python")
        self.site = Path(subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        capture_output=True, text=True, check=True).stdout.strip())
        base = sysconfig.get_paths()["purelib"]
        (self.site / "zz-tmuxjail-mutate-base.pth").write_text(base + "\n")
        self.mapping = package_map(src)
        self._console_scripts(src)
        for d, target in sorted(self.mapping.items(), key=lambda kv: kv[1].count("/")):
            shutil.copytree(src / d, self.site / target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        self.pristine: dict[Path, str] = {}

    @classmethod
    def attach(cls, directory: Path, src: Path) -> Scratch:
        """The scratch install another process made (scripts/mutation.py's test command runs in
        one per mutant): its paths only; closing it is left to its maker."""
        self = cls.__new__(cls)
        self.src, self.keep, self.dir = src, True, directory
        self.python = str(directory / "venv" / "bin" / "python")
        self.site = Path(sysconfig.get_paths(vars={"base": str(directory / "venv"),
                                                   "platbase": str(directory / "venv")})["purelib"])
        self.mapping = package_map(src)
        self.pristine = {}
        return self

    def _console_scripts(self, src: Path) -> None:
        """bin/tmuxjail & co., as pip writes them: tmux key bindings run the console script."""
        scripts = tomllib.loads((src / "pyproject.toml").read_text()).get("project", {}).get("scripts", {})
        for name, target in scripts.items():
            mod, _, func = target.partition(":")
            path = Path(self.python).parent / name
            path.write_text(f"#!{self.python}\nimport sys\nfrom {mod} import {func}\nsys.exit({func}())\n")
            path.chmod(0o755)

    def apply(self, g: dict) -> None:
        for e in g["edits"]:
            dst = self.site / installed_path(e["file"], self.mapping)
            if dst not in self.pristine:
                self.pristine[dst] = dst.read_text()
            dst.write_text(mutate(dst.read_text(), e, g["id"]))
        self._drop_bytecode()

    def restore(self) -> None:
        for dst, text in self.pristine.items():
            dst.write_text(text)
        self.pristine.clear()
        self._drop_bytecode()

    def _drop_bytecode(self) -> None:
        for cache in self.site.glob("tmuxjail/**/__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)

    def pytest(self, tests: list[str], *extra: str, timeout: float = TIMEOUT) -> tuple[int, str, float]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "PYTHON", "VIRTUAL_ENV"))}
        basetemp = self.dir / "pt"
        argv = [self.python, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                f"--basetemp={basetemp}", *extra, *tests]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=self.src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            rc = -1
        self.reap()
        return rc, out, time.monotonic() - t0

    def reap(self) -> None:
        """Kill what a mutant left running outside the test's session (a mutated lifetime guard
        can leave a jail, its strace or its proxy behind, re-parented to init): every process
        whose command line names this scratch directory."""
        mark = str(self.dir).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if mark in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


# -- running ---------------------------------------------------------------------------------

def failed_nodes(out: str) -> list[str]:
    return [ln.split(" ", 1)[1].split(" - ")[0] for ln in out.splitlines()
            if ln.startswith(("FAILED ", "ERROR ")) and "::" in ln]


def first_failure(out: str) -> str:
    for line in out.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0]
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="only the entries marked fast = true (CI)")
    ap.add_argument("--only", action="append", default=[], metavar="ID", help="only this guard (repeatable)")
    ap.add_argument("--skip", action="append", default=[], metavar="ID",
                    help="leave this guard out (repeatable; e.g. while one of its tests is broken elsewhere)")
    ap.add_argument("--json", action="store_true", help="one JSON object with every result on stdout")
    ap.add_argument("--check", action="store_true", help="only check the registry (snippets, test ids); run nothing")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the named tests unmutated")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--registry", type=Path, default=REGISTRY)
    args = ap.parse_args(argv)
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    uid = os.getuid()
    t_start = time.monotonic()
    try:
        guards = load(args.registry)
    except RegistryError as exc:
        say(f"mutate: {exc}")
        return 2
    problems = check(guards)
    unknown = [i for i in [*args.only, *args.skip] if i not in {g["id"] for g in guards}]
    problems += [f"--only/--skip {i}: no such guard" for i in unknown]
    if problems:
        say("mutate: the registry does not match the source:\n  " + "\n  ".join(problems))
        return 2
    chosen = [g for g in guards if (not args.only or g["id"] in args.only) and (not args.fast or g.get("fast"))
              and g["id"] not in args.skip]
    skipped = [g for g in chosen if not applies(g, uid)]
    chosen = [g for g in chosen if applies(g, uid)]
    scratch = Scratch(ROOT, keep=args.keep)
    results: list[dict] = []
    flaky: list[str] = []
    try:
        nodes = sorted({t for g in (chosen if not args.check else guards) for t in tests_for(g, uid)})
        rc, out, _ = scratch.pytest(nodes, "--collect-only", timeout=300)
        if rc != 0:
            say("mutate: some named tests do not exist or do not collect:\n" + out[-3000:])
            return 2
        if args.check:
            say(f"mutate: registry ok: {len(guards)} guards, {len(nodes)} test ids")
            return 0
        if not args.no_baseline:
            say(f"baseline: {len(nodes)} named tests, unmutated ...")
            rc, out, secs = scratch.pytest(nodes)
            failed = failed_nodes(out)
            if rc == 1 and failed:  # once more, alone: a test that passes then is flaky, not broken
                say("baseline: failed, trying again alone: " + " ".join(failed))
                rc, out2, _ = scratch.pytest(failed)
                if rc == 0:
                    flaky += failed
                    say("baseline: FLAKY (green alone, red in the full set): " + " ".join(failed))
                else:
                    out = out2
            if rc != 0:
                say(f"mutate: the named tests fail WITHOUT any mutation ({secs:.0f}s); fix them first:\n"
                    + "\n".join(ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR", "E   "))))
                return 1
            say(f"baseline: green in {secs:.0f}s")
        for i, g in enumerate(chosen, 1):
            scratch.apply(g)
            try:
                rc, out, secs = scratch.pytest(tests_for(g, uid), "-x")
            finally:
                scratch.restore()
            status = {1: "caught", 0: "MISSED", -1: "caught"}.get(rc, "ERROR")
            r = {"id": g["id"], "status": status.lower(), "seconds": round(secs, 1),
                 "red": first_failure(out) or ("timeout" if rc == -1 else ""), "tests": tests_for(g, uid)}
            if status == "ERROR":
                r["output"] = out[-2000:]
            results.append(r)
            say(f"[{i}/{len(chosen)}] {status:6} {g['id']}  ({secs:.0f}s){'  ' + r['red'] if r['red'] else ''}")
            if status != "caught":
                say("    " + "\n    ".join(out.strip().splitlines()[-15:]))
    finally:
        scratch.close()
    caught = sum(r["status"] == "caught" for r in results)
    total = time.monotonic() - t_start
    summary = {"user": "root" if uid == 0 else "user", "guards": len(results), "caught": caught,
               "missed": [r["id"] for r in results if r["status"] == "missed"],
               "errors": [r["id"] for r in results if r["status"] == "error"],
               "not_applicable": [g["id"] for g in skipped], "skipped": args.skip, "flaky_baseline": flaky, "seconds": round(total),
               "results": results}
    pct = 100.0 * caught / len(results) if results else 100.0
    say(f"mutate: {caught}/{len(results)} guards caught ({pct:.0f}%) as {summary['user']} in {total:.0f}s"
        + (f"; {len(skipped)} apply only as {'user' if uid == 0 else 'root'}" if skipped else ""))
    if args.json:
        print(json.dumps(summary, indent=1))
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
