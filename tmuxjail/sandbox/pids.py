"""A pids cgroup for a root-run jail. The kernel never enforces RLIMIT_NPROC for uid 0, and a jail
run by root is uid 0, so the launcher moves itself (and so bwrap and everything in the jail) into
a cgroup of its own whose pids.max is the policy's nproc: cgroup v2 (/sys/fs/cgroup with the pids
controller) or v1 (/sys/fs/cgroup/pids). The jail cannot leave it: strict jails have no /sys,
compatibility has it read-only. Stdlib only; the launcher runs it on every root start."""

from __future__ import annotations

import os
import time

V2, V1 = "/sys/fs/cgroup", "/sys/fs/cgroup/pids"
GROUP = "tmuxjail"
GUARD = "root-process-limit"
STALE_SECONDS = 60  # an empty group older than this is a finished jail's; younger may be joining


def hierarchy() -> tuple[str, bool] | None:
    """(base directory, is v2) of a pids controller root can use here, else None."""
    try:
        with open(V2 + "/cgroup.controllers") as f:
            return (V2, True) if "pids" in f.read().split() else None
    except OSError:
        pass
    return (V1, False) if os.path.isfile(V1 + "/cgroup.procs") else None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def sweep() -> None:
    """Remove finished jails' groups (rmdir refuses one that still holds a process). Apart from
    join(): the launcher has its helper child do it, off its path (pane/helper.py start_helper)."""
    found = hierarchy()
    if found is None:
        return
    top = f"{found[0]}/{GROUP}"
    now = time.time()
    try:
        entries = list(os.scandir(top))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False) and now - entry.stat().st_mtime > STALE_SECONDS:
                os.rmdir(entry.path)
        except OSError:
            pass


def join(limit: int, name: str) -> str:
    """Move this process into GROUP/name with pids.max = limit; the group's path. OSError when the
    host has no usable pids controller."""
    found = hierarchy()
    if found is None:
        raise OSError("no pids cgroup controller on this host")
    base, v2 = found
    top = f"{base}/{GROUP}"
    os.makedirs(top, mode=0o755, exist_ok=True)
    if v2:
        _write(f"{base}/cgroup.subtree_control", "+pids")
        _write(f"{top}/cgroup.subtree_control", "+pids")
    path = f"{top}/{name}"
    os.makedirs(path, mode=0o755, exist_ok=True)
    _write(f"{path}/pids.max", str(limit))
    if not v2 and len(os.listdir("/proc/self/task")) == 1:
        # This thread is the whole process (the launcher starts none). Writing its pid to
        # cgroup.procs would make the kernel take the global threadgroup lock for writing, which
        # waits for an RCU grace period (6-20 ms on every start); "0" to v1's tasks moves the
        # calling thread without that lock (cgroup_procs_write_start), and where it goes, its
        # children, bwrap's and the jail's, are made.
        _write(f"{path}/tasks", "0")
    else:
        _write(f"{path}/cgroup.procs", str(os.getpid()))
    return path
