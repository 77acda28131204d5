"""scripts/mac-jail.py prints what the seatbelt dry run reports: one source of truth for the
command line docs/macos.md's checklist runs on a Mac (the dry run is allowed anywhere)."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mac-jail.py"


@pytest.mark.parametrize("mode, caps", [("compatibility", []), ("isolated", ["git-metadata-write"]), ("verified", [])])
def test_prints_the_dry_runs_sandbox_argv(env, mode, caps):
    (env.ws / ".git").mkdir()
    run = dict(cwd=env.ws, env=env.environ(PWD=str(env.ws)), capture_output=True, text=True,
               stdin=subprocess.DEVNULL, timeout=120)
    script = subprocess.run([sys.executable, str(SCRIPT), mode, str(env.ws), *caps], **run)
    assert script.returncode == 0, script.stderr
    flags = [arg for cap in caps for arg in ("--capability", cap)]
    dry = subprocess.run([sys.executable, "-P", "-m", "tmuxjail", "start", "shell", "--mode", mode, "--workspace",
                          str(env.ws), *flags, "--backend", "seatbelt", "--dry-run", "--json"], **run)
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    printed = shlex.split(script.stdout)
    assert printed[:2] == ["/usr/bin/sandbox-exec", "-p"]
    assert printed == out["sandbox_argv"]
    if out["policy"].get("private_home"):  # made for the shell, as a real start would
        assert Path(out["policy"]["private_home"]).is_dir()


def test_a_refused_request_prints_nothing(env):
    proc = subprocess.run([sys.executable, str(SCRIPT), "isolated", str(env.ws), "no-such-capability"],
                          cwd=env.ws, env=env.environ(PWD=str(env.ws)), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode != 0 and proc.stdout == "" and "no-such-capability" in proc.stderr
    assert "Traceback" not in proc.stderr
