"""A jail cannot starve the host (issue 27, 1-2), attacked from inside real jailed panes: it fills
every filesystem it can write until ENOSPC, and takes as much as it can of each per-user kernel
count (processes, inotify instances and watches, ptys, open files, queued signals). While it
holds them, the same user, outside the jail, can still fork a shell, watch a file, open a pty,
open files and queue a signal. Every fork bomb here is bounded three ways: the jail's own limit,
a loop count, and a deadline."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import subprocess
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_escapes import ALL, STRICT, Jail

pytestmark = pytest.mark.adversarial
MiB = 1 << 20
SHARE = 0.05  # small, so that a jail reaches each limit quickly


def _config(env, text: str) -> None:
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(text)


def _proc_int(path: str) -> int:
    return int(Path(path).read_text().split()[0])


def _limits(env) -> dict:
    return env.json("show", "j")["policy"]["limits"]


class Held:
    """A script run in the jailed shell that takes a resource, writes what it took to held.json,
    and keeps it until the test, having looked from outside, releases it (or 60 s pass)."""

    def __init__(self, jail: Jail, script: str):
        self.jail, self.ws = jail, jail.ws
        (self.ws / "take.py").write_text(textwrap.dedent(script) + textwrap.dedent("""
            import json, os, time
            with open("held.tmp", "w") as f:
                json.dump(HELD, f)
            os.rename("held.tmp", "held.json")
            end = time.monotonic() + 60
            while not os.path.exists("release") and time.monotonic() < end:
                time.sleep(0.05)
        """))
        jail.env.tmux("send-keys", "-t", "=j:", "timeout -s KILL 90 python3 take.py 2>take.err; touch done", "Enter")

    def __enter__(self) -> dict:
        deadline = time.monotonic() + 60
        while not (self.ws / "held.json").exists():
            if time.monotonic() > deadline or (self.ws / "done").exists():
                err = (self.ws / "take.err").read_text() if (self.ws / "take.err").exists() else ""
                raise AssertionError(f"the jail took nothing: {err}"
                                     f"{self.jail.env.tmux('capture-pane', '-p', '-t', '=j:')}")
            time.sleep(0.05)
        return json.loads((self.ws / "held.json").read_text())

    def __exit__(self, *exc) -> None:
        (self.ws / "release").touch()
        deadline = time.monotonic() + 60
        while not (self.ws / "done").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def _tasks_of_mine() -> int:
    n = 0
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and p.stat().st_uid == os.getuid():
                n += len(os.listdir(p / "task"))
        except OSError:
            continue
    return n


@contextmanager
def _process_limit(extra: int):
    """RLIMIT_NPROC of this test's processes (and so of the tmux server and the jail it starts):
    what this user runs now plus `extra`, so that a jail taking more than its share would leave
    the user unable to fork. Root is not held to it outside a jail: 400 there."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    want = 400 if os.getuid() == 0 else _tasks_of_mine() + extra
    if hard != resource.RLIM_INFINITY and want > hard:
        pytest.skip(f"RLIMIT_NPROC hard limit {hard} is below what this user already runs plus {extra}")
    resource.setrlimit(resource.RLIMIT_NPROC, (want, hard))
    try:
        yield want
    finally:
        resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))


# -- filesystems ----------------------------------------------------------------------------

def _host_tmpfs() -> set[str]:
    """The devices (major:minor) of the host's own tmpfs mounts: a compatibility jail sees them
    as the host does."""
    out = set()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, right = line.split(" - ")
        if right.split()[0] == "tmpfs":
            out.add(left.split()[2])
    return out


FILL = r'''
import errno, json, os
MiB = 1 << 20
mounts, made = [], []
for line in open("/proc/self/mountinfo").read().splitlines():
    left, right = line.split(" - ")
    fields = left.split()
    path = fields[4].replace("\\040", " ")
    mounts.append((path, right.split()[0], "rw" in fields[5].split(",")))
    if right.split()[0] == "tmpfs" and fields[3] == "/" and fields[2] not in HOST_TMPFS:
        made.append((path, "rw" in fields[5].split(",")))
# Every tmpfs made for the jail (not a bind of a host directory) that it can write, filled until ENOSPC.
filled = {}
for path, rw in made:
    if not rw:
        continue
    st = os.statvfs(path)
    n = 0
    try:
        with open(os.path.join(path, ".fill"), "wb") as f:
            while n < 64 * MiB:  # never more, whatever the size says
                n += f.write(b"x" * MiB)
                f.flush()
    except OSError as exc:
        n = n if exc.errno == errno.ENOSPC else -exc.errno
    try:
        n = os.stat(os.path.join(path, ".fill")).st_blocks * 512
        os.unlink(os.path.join(path, ".fill"))
    except OSError:
        pass
    filled[path] = [n, st.f_blocks * st.f_frsize]
# bwrap's root and every directory on it (those bwrap made for mount points) take no file.
root_dev = os.stat("/").st_dev
written = []
todo = ["/"]
seen = 0
while todo and seen < 2000:
    d = todo.pop()
    seen += 1
    try:
        if os.stat(d).st_dev != root_dev:
            continue
        fd = os.open(os.path.join(d, ".planted"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(os.path.join(d, ".planted"))
        written.append(d)
    except OSError:
        pass
    try:
        todo += [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
print(json.dumps({"mounts": mounts, "filled": filled, "root_writable": written}))
'''


@pytest.mark.parametrize("mode", ALL)
def test_no_writable_unsized_filesystem(world, mode):
    """Each filesystem the jail can write is filled until ENOSPC: each stops at its documented
    size (docs/resources.md), so host memory taken by jail files is bounded by their sum. bwrap's
    own root and the directories it made for mount points are read-only; so are masks and /dev."""
    env = world
    _config(env, '[limits]\ntmp = "4M"\nrun = "2M"\nhome = "3M"\n')
    jail = Jail(env, mode)
    host_tmpfs = _host_tmpfs() if mode == "compatibility" else set()
    (jail.ws / "fill.py").write_text(f"HOST_TMPFS = {sorted(host_tmpfs)!r}\n" + FILL)
    out = json.loads(jail.sh("timeout -s KILL 60 python3 fill.py", timeout=90))
    sizes = {"/tmp": 4 * MiB, "/var/tmp": 4 * MiB, "/dev/shm": 4 * MiB, "/run": 2 * MiB}
    if mode == "verified":
        sizes[str(env.home)] = 3 * MiB
    if mode == "compatibility":
        sizes = {"/dev/shm": 4 * MiB}  # the rest of the host is the host's, as outside (compatibility)
    assert set(out["filled"]) == set(sizes), out["filled"]
    for path, (wrote, size) in out["filled"].items():
        assert size == sizes[path] and 0 < wrote <= size, (path, wrote, size)
    assert sum(w for w, _ in out["filled"].values()) <= sum(sizes.values())
    if mode != "compatibility":
        assert out["root_writable"] == [], out["root_writable"]
        assert ["/", "tmpfs", False] in out["mounts"]
    env.unchanged()


# -- per-user counts ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ALL)
def test_processes_the_user_keeps_a_budget(world, mode):
    """A fork bomb in the jail stops at its share of the user's process limit; meanwhile the same
    user, outside, forks a shell that forks again."""
    from tmuxjail.sandbox import pids

    if os.getuid() == 0 and pids.hierarchy() is None:
        pytest.skip("root-run, and no pids cgroup controller on this host (docs/resources.md)")
    env = world
    with _process_limit(extra=240) as limit:
        jail = Jail(env, mode)
        share = _limits(env)["nproc"]
        assert share == min(1024, int(limit * 0.25)), (share, limit)
        with Held(jail, """
            import os, time
            kids = []
            for _ in range(600):  # never more, whatever happens: the machine is shared
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(90)
                    os._exit(0)
                kids.append(pid)
            HELD = {"forked": len(kids)}
        """) as held:
            assert 0 < held["forked"] < share, (held, share)
            shell = subprocess.run(["sh", "-c", "sh -c 'echo forked'"], capture_output=True, text=True, timeout=30)
            assert shell.stdout.strip() == "forked", shell
    env.unchanged()


INOTIFY = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 200:
    fd = libc.inotify_init()
    if fd < 0:
        break
    fds.append(fd)
instances = len(fds)
os.makedirs("w", exist_ok=True)
watches = 0
for i in range(WANT):
    p = f"w/{i}"
    open(p, "w").close()
    if libc.inotify_add_watch(fds[0], p.encode(), 2) < 0:
        break
    watches += 1
HELD = {"instances": instances, "watches": watches}
"""


@pytest.mark.parametrize("mode", ALL)
def test_inotify_the_user_keeps_a_budget(world, mode):
    """The jail opens inotify instances and adds watches until the kernel refuses: it stops at
    its share of the user's limits (/proc/sys/user/max_inotify_*, lowered in the jail's own user
    namespace by the launcher); the user, outside, still opens an instance and watches a file."""
    env = world
    _config(env, f"[limits]\nshare = {SHARE}\n")
    instances = max(1, int(_proc_int("/proc/sys/user/max_inotify_instances") * SHARE))
    watches = max(1, int(_proc_int("/proc/sys/user/max_inotify_watches") * SHARE))
    jail = Jail(env, mode)
    assert dict(_limits(env)["user"])["max_inotify_instances"] == instances
    with Held(jail, INOTIFY.replace("WANT", str(watches + 50))) as held:
        assert held == {"instances": instances, "watches": watches}, held
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init()
        assert fd >= 0, os.strerror(ctypes.get_errno())
        try:
            assert libc.inotify_add_watch(fd, str(env.outside).encode(), 2) >= 0
        finally:
            os.close(fd)
    env.unchanged()


@pytest.mark.parametrize("mode", ALL)
def test_ptys_the_user_keeps_a_budget(world, mode):
    """The jail opens ptys until none is left to it: its devpts has max= its share of the ptys a
    non-initial devpts may use (kernel.pty.max - kernel.pty.reserve); the user, outside, still
    opens one."""
    env = world
    _config(env, f"[limits]\nshare = {SHARE}\nnproc = 64\n")  # fewer processes: more files each, for the ptys
    share = int((_proc_int("/proc/sys/kernel/pty/max") - _proc_int("/proc/sys/kernel/pty/reserve")) * SHARE)
    jail = Jail(env, mode)
    assert _limits(env)["ptys"] == share
    with Held(jail, """
        import os
        held, why = [], None
        while len(held) < 1000:
            try:
                held.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
            except OSError as exc:
                why = exc.errno
                break
        HELD = {"ptys": len(held), "errno": why}
    """) as held:
        assert held == {"ptys": share, "errno": errno.ENOSPC}, held
        a, b = os.openpty()
        os.close(a)
        os.close(b)
    env.unchanged()


@pytest.mark.parametrize("mode", ALL)
def test_open_files_are_bounded_with_the_process_limit(world, mode):
    """Each jailed process may hold nofile files, soft and hard (no raising it), and nproc x nofile
    stays within the share of the system's file table (fs.file-max); outside, the user opens files."""
    env = world
    _config(env, f"[limits]\nshare = {SHARE}\n")
    jail = Jail(env, mode)
    lim = _limits(env)
    assert lim["nproc"] * lim["nofile"] <= SHARE * _proc_int("/proc/sys/fs/file-max")
    with Held(jail, """
        import os, resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1))
            raised = True
        except (ValueError, OSError):
            raised = False
        fds = []
        while len(fds) < 100000:
            try:
                fds.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                break
        HELD = {"soft": soft, "hard": hard, "raised": raised, "top": max(fds)}
        for fd in fds[-8:]:  # room for what reports it
            os.close(fd)
    """) as held:
        assert held["soft"] == held["hard"] == lim["nofile"] and not held["raised"], held
        assert held["top"] == lim["nofile"] - 1, held
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(32)]
        for fd in fds:
            os.close(fd)
    env.unchanged()


@pytest.mark.parametrize("mode", STRICT)
def test_queued_signals_the_user_keeps_a_budget(world, mode):
    """The jail queues real-time signals to itself until the kernel refuses: it stops at its
    share of RLIMIT_SIGPENDING; a process of the user outside still queues one."""
    env = world
    _config(env, f"[limits]\nshare = {SHARE}\n")
    soft = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]
    if soft == resource.RLIM_INFINITY:
        pytest.skip("RLIMIT_SIGPENDING is unlimited here: nothing to share")
    jail = Jail(env, mode)
    assert _limits(env)["sigpending"] == int(soft * SHARE)
    with Held(jail, """
        import os, signal, threading
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
        n = 0
        while n < 200000:
            try:  # tgkill: queued or EAGAIN (kill(2) would drop the signal's data silently instead)
                signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
            except OSError:
                break
            n += 1
        HELD = {"queued": n}
    """) as held:
        assert 0 < held["queued"] <= int(soft * SHARE), held
        probe = subprocess.run(["python3", "-c", textwrap.dedent(f"""
            import signal, threading
            signal.pthread_sigmask(signal.SIG_BLOCK, [{int(signal.SIGRTMIN)}])
            signal.pthread_kill(threading.get_ident(), {int(signal.SIGRTMIN)})
            print("queued")
        """)], capture_output=True, text=True, timeout=30)
        assert probe.stdout.strip() == "queued", probe
    env.unchanged()


def test_a_root_run_proxy_counts_toward_the_jails_process_bound(world):
    """Root is held to no RLIMIT_NPROC: the session's proxy (the launcher's helper child, outside
    the jail) joins the jail's pids cgroup, so its threads count toward the same pids.max."""
    from tmuxjail.sandbox import pids

    if os.getuid() != 0 or pids.hierarchy() is None:
        pytest.skip("root-run jails with a pids cgroup controller only (a user's proxy counts toward the user's RLIMIT_NPROC)")
    env = world
    jail = Jail(env, "isolated", extra=("--network", "proxy"))
    jail.sh("true")
    pane = int(env.tmux("display-message", "-p", "-t", "=j:", "#{pane_pid}").strip())

    def pids_line(pid: int) -> str:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        return next((ln for ln in lines if ":pids:" in ln), lines[0]).split(":", 2)[2]

    helpers = [int(c) for c in Path(f"/proc/{pane}/task/{pane}/children").read_text().split()
               if b"tmuxjail.pane.launch" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert helpers, "no proxy process under the pane"
    group = pids_line(pane)
    assert f"/{pids.GROUP}/" in group and all(pids_line(h) == group for h in helpers), (group, helpers)
    env.unchanged()
