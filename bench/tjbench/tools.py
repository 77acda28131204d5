"""The executables a bench run measures, found when the run starts (not at import)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class BenchError(Exception):
    """The bench cannot run here: one line saying why."""


@dataclass(frozen=True)
class Tools:
    tj: Path  # the tmuxjail console script
    tj_py: str  # its interpreter: "the same interpreter" of the `python -c pass` baseline
    bwrap: str
    tmux: str
    work_py: str | None  # the workload's interpreter, visible inside the jail
    git: str | None

    def tmuxjail(self, socket: str, *args: str) -> list[str]:
        return [str(self.tj), "-L", socket, *args]


def _tmuxjail_exe() -> Path:
    for cand in (Path(sys.executable).parent / "tmuxjail", REPO / ".venv" / "bin" / "tmuxjail"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    hit = shutil.which("tmuxjail")
    if hit:
        return Path(hit)
    raise BenchError("cannot find the tmuxjail console script (run bench/run.py with the venv's python)")


def _interpreter_of(script: Path) -> str:
    with open(script, "rb") as f:
        first = f.readline().decode().strip()
    if first.startswith("#!"):
        parts = first[2:].split()
        if parts and Path(parts[0]).name != "env":
            return parts[0]
    return sys.executable


def find() -> Tools:
    tj = _tmuxjail_exe()
    tools = Tools(tj=tj, tj_py=_interpreter_of(tj), bwrap=shutil.which("bwrap") or "/usr/bin/bwrap",
                  tmux=shutil.which("tmux") or "tmux",
                  work_py="/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else None,
                  git=shutil.which("git"))
    for tool in (tools.tmux, tools.bwrap):
        if not shutil.which(tool):
            raise BenchError(f"{tool} is not installed")
    return tools
