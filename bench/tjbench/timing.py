"""How one thing is timed: until a ready file exists and until exit (with peak RSS), a plain
command's wall time, a process's VmRSS, and what a command imports (-X importtime)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tools import REPO

POLL = 0.002  # seconds between looks at a ready file


@dataclass
class Timed:
    ready: float | None  # seconds from invocation until the ready file existed
    exited: float  # seconds until the invoked command exited
    maxrss_kb: int
    rc: int
    stderr: str


def time_until_ready(argv: list[str], env: dict[str, str], ready: Path, cwd: Path | None = None,
                     timeout: float = 30.0) -> Timed:
    """Run argv; time until `ready` exists and until argv exits; peak RSS of argv's process tree
    (wait4 rusage of this child alone: ru_maxrss in KB)."""
    ready.unlink(missing_ok=True)
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
        t_ready: float | None = None
        t_exit: float | None = None
        ru = None
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            if t_exit is None:
                pid, st, r = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    t_exit, ru = time.perf_counter() - t0, r
                    proc.returncode = os.waitstatus_to_exitcode(st)
                    if proc.returncode != 0:
                        break
            if t_ready is None and os.path.exists(ready):
                t_ready = time.perf_counter() - t0
            if t_ready is not None and t_exit is not None:
                break
            time.sleep(POLL)
        if t_exit is None:  # timed out: do not leave it behind
            proc.kill()
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            t_exit = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode(errors="replace")
    return Timed(t_ready, t_exit, ru.ru_maxrss if ru else 0, proc.returncode, text)


def time_cmd(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       check=False)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv[:4])} … exited {p.returncode}: {p.stderr.strip()[-400:]}")
    return dt, p.stdout


def time_any(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of argv, whatever its exit status."""
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    return time.perf_counter() - t0


def vmrss_kb(pid: int | None) -> tuple[int | None, str]:
    if not pid:
        return None, "?"
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, "?"
    name = re.search(r"^Name:\s*(\S+)", text, re.MULTILINE)
    rss = re.search(r"^VmRSS:\s*(\d+)", text, re.MULTILINE)
    return (int(rss.group(1)) if rss else None), (name.group(1) if name else "?")


def importtime(python: str, argv: list[str], env: dict[str, str], top: int = 5) -> list[dict[str, Any]]:
    """The top-level imports of `python -X importtime ARGV...`, the costliest first."""
    p = subprocess.run([python, "-X", "importtime", *argv], env=env, capture_output=True, text=True, check=False)
    entries: list[dict[str, Any]] = []
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
        if m:
            entries.append({"module": m.group(4), "self_us": int(m.group(1)), "cumulative_us": int(m.group(2)),
                            "depth": len(m.group(3)) // 2})
    toplevel = sorted((e for e in entries if e["depth"] == 0), key=lambda e: -e["cumulative_us"])
    return toplevel[:top]


def find_srt() -> list[str] | None:
    """The peer launcher, only if already installed (never fetched from the network here)."""
    hit = shutil.which("srt")
    if hit:
        return [hit]
    roots = []
    try:
        npm_root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, timeout=20,
                                  check=False).stdout.strip()
        if npm_root:
            roots.append(Path(npm_root))
    except (OSError, subprocess.SubprocessError):
        pass
    roots.append(REPO / "node_modules")
    for root in roots:
        pkg = root / "@anthropic-ai" / "sandbox-runtime"
        if (pkg / "package.json").is_file():
            bin_ = root / ".bin" / "srt"
            if bin_.exists():  # by path: npx would look for it from the pane's cwd, not here
                return [str(bin_)]
    return None
