"""Issue 26.8: what the launcher checked is what runs. Something that can write the CLI's install
(a compatibility session, any process of the user) swaps the executable for another right after
the start has checked it: as soon as the pane's launcher appears, and back once the jail runs.
Many starts race it; the swapped file never runs (the launch is refused instead), and the starts
it leaves alone run the approved file."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = pytest.mark.adversarial

GOOD = '#!/bin/sh\necho good >> "$PWD/.ran"\nexec sleep 600\n'
SWAPPED = '#!/bin/sh\necho SWAPPED >> "$PWD/.ran"\nexec sleep 600\n'
STARTS, SECONDS = 12, 150  # bounded: whichever comes first
LAUNCHER = b"from tmuxjail.pane.launch import main"


def put(path: Path, text: str) -> None:
    """Replace path with a new file holding text, atomically (as an installer swaps it)."""
    tmp = path.with_name(f".{path.name}.swap")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.rename(tmp, path)


def launchers() -> set[int]:
    """Our processes that are a pane's launcher right now (before it execs bubblewrap): a child of
    the tmux server. (Its helper child, and the proxy that helper becomes, keep the command line.)"""
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if p.stat().st_uid == os.getuid() and LAUNCHER in p.joinpath("cmdline").read_bytes():
                    stat = p.joinpath("stat").read_text()
                    ppid = stat[stat.rindex(")") + 2:].split()[1]
                    if Path(f"/proc/{ppid}/comm").read_text().startswith("tmux"):
                        out.add(int(p.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def test_a_swapped_executable_never_runs(world):
    env = world
    exe = env.bin / "codex"
    put(exe, GOOD)
    env.run("approve", "codex", "--yes", check=True)  # the good file's digest is the approved one
    armed, stop = threading.Event(), threading.Event()
    swaps: list[set[int]] = []
    delay = [0.0]

    def attacker():
        # A launcher's helper child keeps its parent's command line (under the network proxy it
        # lives as long as the jail): only launchers not seen before count.
        seen = launchers()
        while not stop.is_set():
            found = launchers() - seen
            seen |= found
            if not found or not armed.is_set():
                time.sleep(0.001)
                continue
            # Two moments: at once (before the launcher could check anything), and once it has
            # had time to open and check the file (the swap then lands before bubblewrap binds it).
            time.sleep(delay[0])
            put(exe, SWAPPED)
            swaps.append(found)
            wait_until(lambda f=found: not f <= launchers(), 20)  # the launcher exec'd bwrap (or refused)
            time.sleep(0.3)  # ... and the jail has exec'd what it was going to run
            put(exe, GOOD)

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    outcomes = []
    deadline = time.monotonic() + SECONDS
    try:
        for i in range(STARTS):
            if time.monotonic() > deadline:
                break
            (armed.set if i % 2 else armed.clear)()  # every other start is attacked
            delay[0] = 0.08 if i % 4 == 3 else 0.0
            time.sleep(0.4)  # the attacker has put the good file back
            proc = env.run("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--name", f"s{i}",
                           "--detach")
            outcomes.append((i % 2, proc.returncode, proc.stderr.strip()[-200:]))
    finally:
        stop.set()
        thread.join()
    ran = env.ws / ".ran"
    started = [o for o in outcomes if o[1] == 0]
    wait_until(lambda: ran.exists() and len(ran.read_text().split()) >= len(started), 30)
    lines = ran.read_text().split() if ran.exists() else []
    assert "SWAPPED" not in lines, (lines, outcomes)
    assert swaps, "the attacker never saw a launcher: the race was not run"
    # The starts left alone ran the approved file; an attacked one ran it too, or was refused.
    assert all(code == 0 for attacked, code, _ in outcomes if not attacked), "\n".join(map(str, outcomes))
    assert lines.count("good") == len(started), (lines, outcomes)
    # (A refusal names the executable; or it is bubblewrap's, which finds the fd's file replaced:
    # it resolves the fd's path before binding it, docs/provider-state.md, and after binding it
    # checks that the mount is the fd's file, "Race condition binding dirfd", when it is not.)
    bwrap_refusals = ("Can't find source path /proc/self/fd/", "Race condition binding dirfd")
    for _attacked, code, err in outcomes:
        assert code == 0 or "executable" in err or any(r in err for r in bwrap_refusals), \
            "\n".join(map(str, outcomes))


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_the_jail_runs_the_checked_file_bound_over_its_path(world, mode):
    """The race above, without the race: inside the jail the CLI's path is the launcher's read-only
    bind of the very fd it checked, on top of the install's bind (which shows whatever the path
    named when bubblewrap bound it, after the check)."""
    env = world
    exe = env.bin / "codex"
    put(exe, f"#!/bin/sh\nawk '$5 == \"{exe}\"' /proc/self/mountinfo > \"$PWD/.exe-mounts\"\nexec sleep 600\n")
    if mode == "verified":
        env.run("approve", "codex", "--yes", check=True)
    proc = env.run("start", "codex", "--mode", mode, "--workspace", str(env.ws), "--name", "m", "--detach")
    assert proc.returncode == 0, proc.stderr
    out = env.ws / ".exe-mounts"
    wait_until(lambda: out.exists() and out.read_text().strip(), 20, "the stand-in's mountinfo lines")
    # The install's bind (here the file itself is the install root) and, on top of it, the bind
    # of the checked fd: the last mount at that path is a child of another mount at that path.
    mounts = [line.split() for line in out.read_text().splitlines()]
    ids = {m[0] for m in mounts}
    top = mounts[-1]
    assert top[4] == str(exe) and "ro" in top[5].split(","), mounts
    assert top[1] in ids, f"the CLI's path is not the checked fd's bind over the install's: {mounts}"
