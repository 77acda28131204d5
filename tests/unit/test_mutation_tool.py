"""scripts/mutation.py's verdicts (docs/testing.md, "Mutation testing"): what fails a run, and a
hanging mutant's tests are killed with everything they started."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import mutation

SETTINGS = {"floor": 90.0}
PLAN = {"netcheck": {"strict": True, "file": "tmuxjail/net/check.py"}, "scan": {"file": "tmuxjail/scan.py"}}


def _res(name, killed, survivors):
    return {"module": name, "killed": killed, "equivalent": [], "pending": 0,
            "survived": [{"line": 1, "operator": "core/AddNot", "source": "x"}] * survivors,
            "score": round(100.0 * killed / (killed + survivors), 1)}


def test_a_strict_survivor_fails_the_sample_though_the_score_is_over_the_floor():
    said: list[str] = []
    assert mutation.report([_res("netcheck", 11, 1)], SETTINGS, PLAN, said.append, sample=True) is False
    assert any("netcheck" in s and "must die" in s for s in said)
    assert mutation.report([_res("scan", 11, 1)], SETTINGS, PLAN, [].append, sample=True) is True  # 91.7%
    assert mutation.report([_res("scan", 10, 2)], SETTINGS, PLAN, [].append, sample=True) is False  # 83.3%


HANG = """
import subprocess, sys, time
def test_hang():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # MARK"], start_new_session=True)
    time.sleep(600)
"""


def test_a_hanging_mutant_is_killed_and_leaves_nothing_running(tmp_path):
    """cosmic-ray kills only the test command's process group when its timeout passes; pytest runs
    in a session of its own (and starts tmux servers and jails in others). The test command times
    the hang out first: non-zero (killed), and every process that names the scratch install gone."""
    scratch = mutation.mutate.Scratch(mutation.ROOT)
    try:
        (tmp_path / "test_hang.py").write_text(HANG.replace("MARK", str(tmp_path)))
        target = scratch.site / "tmuxjail" / "netlog.py"
        proc = subprocess.run([sys.executable, str(Path(mutation.__file__)), "_pytest", "--scratch", str(scratch.dir),
                               "--src", str(mutation.ROOT), "--target", str(target), "--timeout", "5", "--",
                               str(tmp_path / "test_hang.py")], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and "hung past 5s" in proc.stdout, proc.stdout + proc.stderr
        deadline = time.monotonic() + 10
        while _running(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _running(str(tmp_path)) == []
    finally:
        scratch.close()


def _running(mark: str) -> list[str]:
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and mark.encode() in (p / "cmdline").read_bytes():
                out.append(p.name)
        except OSError:
            pass
    return out


def test_a_test_command_that_ran_no_test_is_not_a_kill(tmp_path):
    """A scratch install that lost pytest (a /tmp cleaner), or a test list naming a file that is
    gone, exits non-zero like a kill; the run counts it broken, fails, and tries it again next time.
    Seen: a resumed launch session 'killed' 247 mutants in 69 s this way."""
    assert mutation.not_tested(1, "/tmp/x/venv/bin/python: No module named pytest\n")
    assert mutation.not_tested(4, "ERROR: file or directory not found: tests/unit/test_gone.py\n")
    assert mutation.not_tested(4, "ERROR: not found: /w/tests/unit/test_a.py::test_gone\n")
    assert mutation.not_tested(5, "no tests ran in 0.01s\n")
    assert not mutation.not_tested(1, "FAILED tests/unit/test_a.py::test_b\n1 failed, 3 passed in 1.0s\n")
    assert not mutation.not_tested(2, "E   ImportError: cannot import name 'x'\n1 error in 0.3s\n")
    said: list[str] = []
    assert mutation.report([{**_res("scan", 20, 0), "broken": 3}], SETTINGS, PLAN, said.append) is False
    assert any("3 mutants were not tested" in s for s in said)


def test_a_kept_scratch_install_without_pytest_is_not_reused(tmp_path):
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to("/bin/false")
    assert not mutation.usable(tmp_path)
    assert not mutation.usable(tmp_path / "gone")
