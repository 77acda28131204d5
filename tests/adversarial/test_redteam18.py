"""Red-team of issue 18's speed work (the launcher's helper child, the proxy before verify(), the
bridge on _socket), attacked from inside real jailed panes and from the seams: what a jail could
write that tmuxjail later runs or reads outside it, and what a launch leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import furnish, wait_until
from test_escapes import ALL, Jail

pytestmark = pytest.mark.adversarial


def _interpreter_files() -> tuple[list[str], list[str]]:
    """What the launcher's interpreter (this one, run as the pane runs it) reads before any of
    tmuxjail's code and this user could change on the host: the directories where a planted
    python3.X._pth, libpython...so._pth, pybuilddir.txt or python3X.zip redirects its imports
    (the real executable's, the shared library's, prefix/lib, the prefix), and libpython itself."""
    probe = ("import os, sys; print(sys.base_prefix); print(os.path.realpath(sys.executable));"
             "print(open('/proc/self/maps').read())")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    prefix, exe = out[0], out[1]
    libs = sorted({"/" + line.partition("/")[2] for line in out[2:] if "/libpython" in line})
    dirs = {prefix, os.path.join(prefix, "lib"), os.path.dirname(exe), *map(os.path.dirname, libs)}
    dirs = {d for d in dirs if os.path.isdir(d) and not d.startswith(("/usr/", "/bin", "/lib")) and d != "/usr"}
    return sorted(d for d in dirs if os.access(d, os.W_OK)), [p for p in libs if os.access(p, os.W_OK)]


def test_compatibility_cannot_redirect_the_interpreter_of_the_launcher(jail_env):
    """The launcher runs outside every jail with `python -I -S`, but the interpreter reads files
    beside its real executable and its shared library before it honours either: a
    `python3.11._pth` there replaces sys.path outright (seen: the planted json.py ran), and
    `pybuilddir.txt`, `python311.zip` in prefix/lib and a rewritten libpython do as much. Only
    the executable and the stdlib were read-only: a compatibility jail could add any of those to
    an interpreter its user owns (pyenv, uv, conda; root's pyenv here) and run its code as the
    user, outside every jail, at the next start."""
    dirs, libs = _interpreter_files()
    if not dirs and not libs:
        pytest.skip("this interpreter's install is not this user's to write (the system's python)")
    env = furnish(jail_env)
    jail = Jail(env, "compatibility")
    # Nothing here changes what the host's interpreter does, even when the guard is gone (other
    # processes run it meanwhile): a probe file of another name made and removed, and an open
    # of libpython for writing without a write.
    probe = f".tmuxjail-probe-{os.getpid()}"
    checks = "".join(f"""
        touch '{d}/{probe}' 2>/dev/null && rm -f '{d}/{probe}' && echo WROTE_IN '{d}'""" for d in dirs)
    checks += "".join(f"""
        python3 -c "import os; os.close(os.open('{lib}', os.O_WRONLY | os.O_APPEND))" 2>/dev/null && echo WRITABLE '{lib}'""" for lib in libs)
    out = jail.sh(checks + "\necho end\n", timeout=30)
    assert out.split() == ["end"], (dirs, libs, out)
    assert not any(Path(d, probe).exists() for d in dirs)
    env.unchanged()


CENSUS = r"""
python3 -I -S - <<'PY'
import os
me = os.getpid()
odd = []
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == me:
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode(errors="replace")
        comm = open("/proc/%s/comm" % p).read().strip()
        fds = {fd: os.readlink("/proc/%s/fd/%s" % (p, fd)) for fd in os.listdir("/proc/%s/fd" % p)}
    except OSError as e:
        odd.append("%s unreadable %s" % (p, type(e).__name__))
        continue
    if cmd.startswith("sh .attack"):
        continue  # this probe's own shell: its script, its output file, a heredoc pipe
    for fd, what in sorted(fds.items()):
        ok = what.startswith("/dev/pts/") or what in ("/dev/tty", "/dev/null")
        ok = ok or (what.startswith(os.getcwd() + "/.attack") and fd in ("1", "10"))  # this probe's, as the shell sets it up
        ok = ok or (comm == "bwrap" and what == "anon_inode:[eventfd]")
        if not ok:
            odd.append("%s %s fd %s -> %s" % (p, comm, fd, what))
print("ODD " + repr(odd))
PY
echo end
"""


@pytest.mark.parametrize("mode", ALL)
def test_nothing_of_the_launch_is_open_in_the_jail(world, mode):
    """Every descriptor every process in a jailed pane holds: the pane's terminal, /dev/null,
    bwrap's own eventfd. Nothing of the launcher, its helper child (the store answer, the proxy's
    ready line, the go pipe, bubblewrap's info and block pipes), the proxy (its listeners on the
    jail's loopback stay outside), the bind fds, or the seccomp or status fd reaches the jail: a
    jail holding the write end of a helper's pipe could answer for the store."""
    jail = Jail(world, mode)
    out = jail.sh(CENSUS, timeout=60)
    assert out.split("\n")[-2:] == ["end", ""] and "ODD []" in out, out
    world.unchanged()


def _proxied_spec(env, tmp_path) -> dict:
    """A real spec of an isolated start (its network: the session's proxy), stored in the store,
    its CLI the login shell told to print RAN (test_launcher's _spec)."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
    try:
        from test_launcher import _spec
    finally:
        sys.path.pop(0)
    _, spec = _spec(env, tmp_path)
    assert spec["policy"]["network"] == "proxy", spec["policy"]["network"]
    return spec


def _ours(marker: str) -> list[int]:
    """Our live processes whose command line holds marker (the launcher and its helper child,
    which runs the launcher's code without an exec)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if marker in p.joinpath("cmdline").read_bytes().decode(errors="replace") \
                    and p.joinpath("stat").read_text().rsplit(") ", 1)[1][0] != "Z":
                out.append(int(p.name))
        except OSError:
            continue
    return out


def _stop_row(env, spec):
    import sqlite3

    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET status='stopped' WHERE id=?", (spec["session_id"],))
    db.commit()
    db.close()


REFUSED = {
    # verify() refuses: the proxy child already listens by then (issue 18.3 starts it first)
    "executable": (lambda env, s: s.update(argv=["/usr/bin/env", *s["argv"]]), "tampered"),
    # the helper's own store answer is no
    "stopped": (_stop_row, "store does not hold"),
    "fingerprint": (lambda env, s: s.update(fingerprint="sha256:" + "0" * 64), "tampered"),
}


@pytest.mark.parametrize("how", ["control", *REFUSED])
def test_a_refused_proxied_launch_leaves_nothing_running_or_listening(jail_env, tmp_path, how):
    """The launcher's helper child listens for the proxy before verify() and before the store's
    answer is read. A launch refused at any of those steps leaves no process of it running, no
    proxy socket in the session's directory and nothing listening on one; the control (the same
    spec, untouched) runs, and leaves nothing either once its CLI exits."""
    env = jail_env
    spec = _proxied_spec(env, tmp_path)
    fp = spec["fingerprint"]
    want = ""
    if how != "control":
        change, want = REFUSED[how]
        change(env, spec)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    net = env.state_dir / "net" / spec["session_id"]
    before = {p.name for p in net.glob("proxy-*")}  # the stored session's own pane's proxy
    from tmuxjail.pane.command import launcher as pane_command

    proc = subprocess.run(pane_command(sys.executable, fp, str(path)), env=env.environ(), cwd=env.ws,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if how == "control":
        assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stderr
    else:
        assert proc.returncode == 3 and want in proc.stderr and "RAN" not in proc.stdout, proc.stderr
        assert "Traceback" not in proc.stderr
    assert wait_until(lambda: not _ours(str(path)), timeout=10), _ours(str(path))
    left = {p.name for p in net.glob("proxy-*")} - before
    assert not left, left
    listening = [line for line in Path("/proc/net/unix").read_text().splitlines()
                 if str(net) in line and not any(line.endswith("/" + b) for b in before)]
    assert not listening, listening


THREADS = """
python3 - <<'PY' &
import os, threading, time
go = threading.Event()
def forker():
    go.wait()  # all three run before any forks: a full group would refuse the next thread
    kids = []
    for _ in range(100):  # never more: the machine is shared
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(25)
            os._exit(0)
        kids.append(pid)
    with open("%(marker)s.%%d" %% threading.get_ident(), "w") as f:  # whole, or not there
        f.write(str(len(kids)))
    os.replace(f.name, "%(marker)s")
    time.sleep(25)
for _ in range(3):
    threading.Thread(target=forker, daemon=True).start()
go.set()
time.sleep(25)
PY
echo started
"""


def _pids_group(pid: int, tid: int) -> str | None:
    for line in Path(f"/proc/{pid}/task/{tid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") or (controllers == "" and line.startswith("0::")):
            return path
    return None


@pytest.mark.parametrize("mode", ["compatibility", "isolated"])
def test_every_task_of_a_root_jail_is_in_its_pids_group(world, mode):
    """Root's jail is held by a pids cgroup, joined on cgroup v1 by writing 0 to `tasks`, which
    moves the calling thread only (issue 18.3). Every thread of every process of the jail (bwrap,
    the CLI, the bridge, processes forked from a second thread of a jailed process) is in that
    one group, and threads forking together stop at its limit; only the proxy, which runs outside
    the jail (the launcher's helper child, forked before the join), is not."""
    from conftest import descendants

    from tmuxjail.sandbox import pids

    if os.getuid() != 0 or pids.hierarchy() is None:
        pytest.skip("root-run jails only (a user's jail is held by RLIMIT_NPROC: test_kernel)")
    env = world
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("[limits]\nnproc = 64\n")
    jail = Jail(env, mode)
    marker = jail.ws / ".forked"
    pane = int(env.tmux("display-message", "-p", "-t", "=j:", "#{pane_pid}").strip())
    assert "started" in jail.sh(THREADS % dict(marker=f"{jail.ws}/.forked"))
    assert wait_until(lambda: marker.exists() and marker.read_text(), timeout=60), sorted(os.listdir(jail.ws))
    time.sleep(0.5)  # the other two threads hit the limit too
    groups: dict[str, list[str]] = {}
    for pid in [pane, *descendants(pane)]:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"tmuxjail.pane.launch" in cmd and pid != pane:
                continue  # the proxy: outside the jail
            for tid in os.listdir(f"/proc/{pid}/task"):
                groups.setdefault(str(_pids_group(pid, int(tid))), []).append(f"{pid}/{tid}:{cmd[:40]!r}")
        except OSError:
            continue
    assert len(groups) == 1 and next(iter(groups)).startswith(f"/{pids.GROUP}/"), groups
    assert sum(len(v) for v in groups.values()) <= 64, groups
    env.run("stop", "j", check=True)


@pytest.mark.parametrize("mode", ALL)
def test_a_jail_cannot_reach_the_stores_wal_or_shared_memory_index(world, mode):
    """The store runs in WAL mode (sessions and events with synchronous=NORMAL since issue 18.1):
    its -wal holds the latest session rows and its -shm is the index every reader, the launcher's
    helper among them, maps to find them. A jail that could write either could hand the next
    launch a fingerprint, or a status other than stopped; neither is reachable from any jail
    (compatibility included: tmuxjail's state is masked), and the store answers as before."""
    import hashlib
    import sqlite3

    env = world
    wal, shm = Path(f"{env.store}-wal"), Path(f"{env.store}-shm")
    jail = Jail(env, mode)
    seen = {p: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in (wal, shm)}
    out = jail.sh(f"""
        for f in '{wal}' '{shm}'; do
            [ -e "$f" ] && echo SEES_$(basename "$f" | tr -c 'a-z\\n' _)
            printf 'forged' 2>/dev/null >> "$f"
        done
        echo end
    """)
    assert out.split() == ["end"], out
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in (wal, shm)} == seen
    row = sqlite3.connect(f"file:{env.store}?mode=ro", uri=True).execute(
        "SELECT status FROM sessions WHERE name='j'").fetchone()
    assert row is not None and row[0] != "stopped", row
    env.unchanged()


def test_compatibility_cannot_plant_a_module_where_the_launcher_imports_first(jail_env, tmp_path):
    """The launcher runs `python -I -S` with the directory that holds the tmuxjail package put
    first on sys.path (pane/command.py STUB): there it finds __future__, _sqlite3, _ctypes, _socket...
    before the stdlib. Inside a venv that directory is the venv's, read-only in compatibility; a
    --user or --target install (here: the package run from a directory of its own, as --target
    leaves it) or an editable one keeps it elsewhere, and a compatibility jail could add
    __future__.py there, which the next launch runs outside every jail."""
    import shutil

    import tmuxjail

    target = tmp_path / "target"
    shutil.copytree(Path(tmuxjail.__file__).parent, target / "tmuxjail",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = furnish(jail_env)
    extra = {"PYTHONPATH": str(target)}
    info = env.json("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "j",
                    "--detach", env_extra=extra)
    jail = Jail.__new__(Jail)
    jail.env, jail.mode, jail.name, jail.n, jail.ws, jail.info = env, "compatibility", "j", 0, Path(info["workspace"]), info
    pane = env.tmux("display-message", "-p", "-t", "=j:", "#{pane_start_command}")
    assert str(target) in pane, pane  # the pane's launcher runs this very install
    out = jail.sh(f"""
        touch '{target}/__future__.py' 2>/dev/null && echo PLANTED
        touch '{target}/tmuxjail/planted.py' 2>/dev/null && echo PLANTED_IN_PACKAGE
        echo end
    """)
    assert out.split() == ["end"], out
    assert not (target / "__future__.py").exists()
    env.unchanged()
