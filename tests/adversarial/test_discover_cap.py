"""A CLI under discovery that floods its own trace (issue 27.3): from inside the real discovery
jail it makes strace write as fast as it can, or touches thousands of distinct paths before the
one that matters. The trace stops at its cap and the run with it, the evidence says so, what came
after a flood of paths is still in the evidence, and approving the candidate shows a red warning
naming what is missing."""

from __future__ import annotations

import gzip
import os
import pty
import select
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

CAP = 2 << 20
MARK = f"tmuxjail-trace-cap {CAP}\n".encode()


@pytest.fixture
def world(jail_env):
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (scripts/needs.sh lists it)")
    return jail_env


def cli(env, body: str) -> None:
    (env.bin / "codex").write_text("#!/bin/sh\n" + body)
    (env.bin / "codex").chmod(0o755)


def discover(env) -> str:
    out = env.json("discover", "codex", "--non-interactive", "--timeout", "120", timeout=300)
    assert out["finished"] is True
    return out["id"]


def on_a_terminal(env, *args, timeout=60) -> str:
    """tmuxjail with a pseudo-terminal as stdin/stdout (colour on), answering no."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "tmuxjail", *env.flags, *args], cwd=env.ws,
                            env=env.environ(PWD=str(env.ws)), stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if select.select([master], [], [], 0.1)[0]:
                out += os.read(master, 4096)
        except OSError:
            break
        if b"[y/N]" in out:
            os.write(master, b"n\n")
            out += b"\n(answered n)\n"
    proc.wait(timeout=10)
    # What it wrote before exiting is still in the terminal: read it to the end (EIO on Linux).
    while select.select([master], [], [], 1)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return out.decode(errors="replace")


def test_a_flood_of_paths_first_does_not_hide_the_probe_after_it(world):
    env = world
    h = env.home
    (h / ".aaa").mkdir()
    for i in range(6000):  # the host has them; the jail hides them: 6000 would-be denials
        (h / ".aaa" / f"f{i}").write_text("")
    (h / ".again").write_text("")
    (h / ".ssh").mkdir()
    (h / ".ssh" / "id_rsa").write_text("PRIVATE KEY never copied\n")
    cli(env, """
        i=0; while [ $i -lt 6000 ]; do test -e "$HOME/.aaa/f$i"; i=$((i+1)); done
        i=0; while [ $i -lt 3000 ]; do test -e "$HOME/.again"; i=$((i+1)); done
        cat "$HOME/.ssh/id_rsa" > /dev/null 2>&1
        exit 0
    """)
    did = discover(env)
    d = env.json("discover", "show", did)
    ev = d["evidence"]
    den = {u["path"]: u for u in ev["denials"]}
    assert den[f"{h}/.ssh/id_rsa"]["tried"].get("read") == "ENOENT", sorted(den)[:5]
    assert den[f"{h}/.again"]["count"] >= 3000  # one entry, however often it was tried
    assert [(c["directory"], c["where"], c["paths"]) for c in ev["collapsed"]] == [(f"{h}/.aaa", "denials", 6000)]
    assert ev["dropped"] == 6000 and not ev["trace"]["truncated"]
    text = env.run("discover", "show", did).stdout
    assert f"6000 denials under {h}/.aaa/" in text and "EVIDENCE INCOMPLETE" in text, text
    d_dir = env.state_dir / "discover" / did
    assert (d_dir / "trace.gz").exists() and not (d_dir / "trace").exists()


def test_the_trace_stops_at_its_cap_and_the_run_with_it(world):
    env = world
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('[discover]\ntrace_cap = "2M"\n')
    naps = f"{700 + os.getpid() % 100}.{time.monotonic_ns() % 10**6:06d}"
    cli(env, f"""
        sleep {naps} &
        i=0; while :; do test -e "/nonexistent-$i"; i=$((i+1)); done
    """)
    did = discover(env)
    d_dir = env.state_dir / "discover" / did
    raw = gzip.decompress((d_dir / "trace.gz").read_bytes())
    assert raw.endswith(MARK) and len(raw) <= CAP + len(MARK), len(raw)
    ev = env.json("discover", "show", did)["evidence"]
    assert ev["trace"]["truncated"] is True and ev["trace"]["cap"] == CAP, ev["trace"]
    assert ev["exit"]["timed_out"] is False  # the cap ended it, not discover's --timeout
    text = env.run("discover", "show", did).stdout
    assert "EVIDENCE INCOMPLETE: the trace reached its cap of 2 MiB" in text, text
    # the run stopped: the flood and its background child are gone, the session is stopped
    mine = [p for p in Path("/proc").iterdir() if p.name.isdigit()]

    def alive() -> list[str]:
        out = []
        for p in mine:
            try:
                if naps.encode() in p.joinpath("cmdline").read_bytes():
                    out.append(p.name)
            except OSError:
                continue
        return out

    deadline = time.monotonic() + 20
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive()
    assert env.json("list", "--all")[0]["status"] == "stopped"
    # approving its candidate: a red warning naming what is missing, before the question
    plain = env.run("approve", "codex", "--candidate", did)
    assert plain.returncode == 2 and "WARNING: this candidate comes from INCOMPLETE evidence" in plain.stdout
    assert "the trace reached its cap of 2 MiB" in plain.stdout
    tty = on_a_terminal(env, "approve", "codex", "--candidate", did)
    assert "\x1b[1;31mWARNING: this candidate comes from INCOMPLETE evidence" in tty, tty
    assert "not approved" in tty


@pytest.mark.parametrize("cap", ["-1", '"-5M"', '"lots"', "0"])
def test_a_bad_trace_cap_is_one_line_at_parse_time(env, cap):
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(f"[discover]\ntrace_cap = {cap}\n")
    proc = env.run("start", "shell", "--mode", "isolated", "--detach", "--name", "j")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "discover.trace_cap: must be a whole number" in proc.stderr.splitlines()[0], proc.stderr
    if env.store.exists():  # nothing was started
        assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
