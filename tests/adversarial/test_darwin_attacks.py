"""Issue 33: the macOS start path, attacked through its test-only seam (tmuxjail.testing.darwin
with the stand-in sandbox-exec, tests/standins/sandbox_exec.py). Nothing outside the seam switches
it on; under it, the launcher's macOS path refuses a rewritten spec, a swapped executable and a
ready line that is not a loopback port as Linux's does, and its proxy listens on loopback only, on
the one port the profile allows, for as long as the pane's process lives. A Linux launcher never
runs a macOS policy."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import wait_until

import tmuxjail
from tmuxjail.canon import fingerprint
from tmuxjail.pane.command import SEAM_STUB
from tmuxjail.pane.command import launcher as linux_launcher
from tmuxjail.pane.darwin import PROBE

pytestmark = [pytest.mark.adversarial, pytest.mark.macos_seam]

STAND_IN = Path(__file__).resolve().parents[1] / "standins" / "sandbox_exec.py"
ROOT = str(Path(tmuxjail.__file__).resolve().parents[1])  # what pane/command.py puts on sys.path
SWAPPED = '#!/bin/sh\necho SWAPPED >> "$PWD/.ran"\nexec sleep 600\n'


class Seam:
    """tmuxjail under the macOS seam, in env's home, with the stand-in sandbox-exec. The wrapper
    also keeps the argv it was given (the profile text with it) next to decisions.jsonl."""

    def __init__(self, env):
        self.env = env
        self.dir = env.root / "sx"
        self.dir.mkdir(exist_ok=True)
        self.exe = self.dir / "sandbox-exec"
        self.exe.write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" > "{self.dir}/argv.$$"\n'
                            f'exec {sys.executable} {STAND_IN} {self.dir} "$@"\n')
        self.exe.chmod(0o755)
        self.state = env.state_dir  # platformdirs' macOS layout honours the test's XDG_STATE_HOME
        self.store = self.state / "store.db"

    def run(self, *args, check=False) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "tmuxjail.testing.darwin", "--sandbox-exec", str(self.exe),
             *self.env.flags, *args],
            cwd=self.env.ws, env=self.env.environ(PWD=str(self.env.ws)), capture_output=True, text=True,
            timeout=60, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"seam {args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def decisions(self) -> list[dict]:
        path = self.dir / "decisions.jsonl"
        runs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r for r in runs if r["command"] != [PROBE]]  # the launcher's probe of the profile

    def argvs(self) -> list[list[str]]:
        return [p.read_bytes().split(b"\0")[:-1] for p in sorted(self.dir.glob("argv.*"))]

    def launcher(self, fp: str, spec: str) -> list[str]:
        return [sys.executable, "-I", "-S", "-c", SEAM_STUB.format(root=ROOT), "--sandbox-exec", str(self.exe),
                "--fp", fp, spec]

    def session(self, *extra: str) -> dict:
        """A started session (so the store holds its fingerprint) and the spec its launcher read."""
        args = ("start", "codex", "--mode", "isolated", "--workspace", str(self.env.ws), *extra)
        dry = json.loads(self.run(*args, "--dry-run", "--json", check=True).stdout)
        self.run(*args, "--name", "j", "--detach", check=True)
        wait_until(lambda: self.decisions(), 20, "the session's own sandbox-exec run")
        self.env.report(timeout=20)  # the session's CLI ran (and wrote its report): set both aside
        (self.dir / "decisions.jsonl").unlink()
        self.env.clear_report()
        with closing(sqlite3.connect(self.store)) as db:
            sid, fp = db.execute("SELECT id, fingerprint FROM sessions WHERE name='j'").fetchone()
        assert fp == dry["fingerprint"]
        pol = dry["policy"]
        return {"session_id": sid, "fingerprint": fp, "policy": pol, "argv": dry["cli_argv"], "call": None,
                "env": dict(pol["env_set"]), "store": str(self.store), "machine": os.uname().machine,
                "sandboxed": True, "landlock_scope": False, "layout": dry["host_layout"]}


def write_spec(state: Path, spec: dict, name: str) -> str:
    path = state / "spool" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    spec = dict(spec, status_file=spec.get("status_file", str(path)[:-5] + ".status"))
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    return str(path)


def launch(env, argv: list[str]) -> subprocess.Popen:
    # A session of its own: the test ends what it started (the CLI the launcher execs) by its group.
    return subprocess.Popen(argv, env=env.environ(), cwd=env.ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 30) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    return proc.returncode, err


def end(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


# -- 1. nothing outside the seam switches it on ---------------------------------------------------

PLANT = "import os; open({mark!r}, 'a').write(__name__ + '\\n')\n"
SEAMLIKE_VARS = {"TMUXJAIL_SANDBOX_EXEC": "{sx}", "TMUXJAIL_DARWIN": "1", "TMUXJAIL_PLATFORM": "darwin",
                 "TMUXJAIL_BACKEND": "seatbelt", "TMUXJAIL_SEAM": "{sx}", "SANDBOX_EXEC": "{sx}",
                 "PYTHONSTARTUP": "{plant}/sitecustomize.py", "PYTHONINSPECT": "", "PYTHONSAFEPATH": "",
                 "PYTHONUSERBASE": "{plant}/userbase"}


def plant(where: Path, mark: Path) -> None:
    """Everything Python could pick up from a directory on its path: the seam's modules, a package
    shadowing tmuxjail's, sitecustomize/usercustomize, a .pth. Each records that it ran."""
    code = PLANT.format(mark=str(mark))
    for rel in ("sitecustomize.py", "usercustomize.py", "tmuxjail/__init__.py", "tmuxjail/hostos.py",
                "tmuxjail/testing/__init__.py", "tmuxjail/testing/darwin.py", "tmuxjail/pane/__init__.py",
                "tmuxjail/pane/launch.py", "userbase/lib/python3/site-packages/sitecustomize.py"):
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(code)
    v = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = where / "userbase" / "lib" / v / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (site / "tj-seam.pth").write_text(f"import os; open({str(mark)!r}, 'a').write('pth\\n')\n")


def test_nothing_outside_the_seam_switches_a_linux_start_to_darwin(world):
    """A real Linux start and an extra pane of it, with every seam-like variable and PYTHON*
    variable set in the tmux server's environment (which the pane's processes inherit), a planted
    hostos/testing.darwin/sitecustomize/.pth in the workspace, and the seam's own option as an
    argument and in the config: the pane runs the Linux launcher and bubblewrap, never the
    stand-in, and nothing planted runs."""
    env = world
    seam = Seam(env)
    mark = env.outside / "planted-ran"
    plant(env.ws, mark)
    hostile = {k: v.format(sx=seam.exe, plant=env.ws) for k, v in SEAMLIKE_VARS.items()}
    hostile["PYTHONPATH"] = str(env.ws)
    # The tmux server first, with the hostile environment: every pane it starts inherits it.
    subprocess.run(["tmux", *env.flags, "new-session", "-d", "-s", "pre", "sleep 600"],
                   env=env.environ(**hostile), check=True, cwd=env.ws)
    # The seam's option is not tmuxjail's, wherever it is put.
    for args in (("--sandbox-exec", str(seam.exe), "start", "shell"), ("start", "--sandbox-exec", str(seam.exe), "shell"),
                 ("_pane", "--sandbox-exec", str(seam.exe), "--id", "x", "--fp", "sha256:0")):
        proc = env.run(*args)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(f'sandbox_exec = "{seam.exe}"\nplatform = "darwin"\n')
    proc = env.run("start", "shell", "--mode", "isolated", "--name", "x", "--detach")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr  # an unknown key is refused
    (env.config_dir / "config.toml").unlink()
    # -P as the console script runs it: the workspace is the cwd, never on the CLI's sys.path.
    # (Variables that load code into any Python, PYTHONPATH, PYTHONUSERBASE, are the caller's own
    # choice for the CLI itself; the pane's processes, which inherit the server's, ignore them.)
    env.run("start", "shell", "--mode", "isolated", "--name", "j", "--detach", check=True,
            env_extra={k: v for k, v in hostile.items() if k not in ("PYTHONPATH", "PYTHONUSERBASE")})
    env.tmux("kill-session", "-t", "pre")
    proc = env.run("shell", "j", "--detach")  # an extra pane: `_pane` through the session's default-command
    assert not mark.exists(), mark.read_text()
    assert proc.returncode == 0, proc.stderr
    panes = env.tmux("list-panes", "-s", "-t", "j", "-F", "#{pane_pid} #{pane_start_command}").splitlines()
    assert len(panes) == 2, panes
    for line in panes:
        pid, command = line.split(" ", 1)
        assert "testing.darwin" not in command and str(seam.exe) not in command, command
        # The pane's own process became bubblewrap (the launcher exec'd it), never the stand-in.
        wait_until(lambda p=pid: Path(f"/proc/{p}/comm").read_text().strip() == "bwrap", 20,
                   f"pane process {pid} to be bubblewrap")
    assert linux_launcher(sys.executable, "sha256:0", "/x")[4].endswith("from tmuxjail.pane.launch import main; main(sys.argv[1:])")
    assert seam.decisions() == [] and not list(seam.dir.glob("argv.*")), "the stand-in sandbox-exec ran"
    assert not mark.exists(), mark.read_text()


# -- 2. the launcher's macOS path refuses a rewritten spec ------------------------------------------

TAMPER = {
    "policy-changed": lambda s: dict(s, policy=dict(s["policy"], network="host")),
    "fingerprint-field": lambda s: dict(s, fingerprint="sha256:" + "0" * 64),
    # Consistent, but not the session's: only the store check can tell.
    "policy-refingerprinted": lambda s: dict(s, policy=(p := dict(s["policy"], network="host")), fingerprint=fingerprint(p)),
    "trace-added": lambda s: dict(s, trace=str(Path(s["store"]).parent / "discover" / "x" / "trace")),
    "call-not-null": lambda s: dict(s, call={"bwrap": "/usr/bin/bwrap", "setup": [], "late": []}),
    "call-empty-dict": lambda s: dict(s, call={}),
    "layout-missing": lambda s: {k: v for k, v in s.items() if k != "layout"},
    "layout-null": lambda s: dict(s, layout=None),
    "layout-list": lambda s: dict(s, layout=[]),
    "layout-unknown-key": lambda s: dict(s, layout=dict(s["layout"], extra_rule="(allow default)")),
    "layout-dir-not-text": lambda s: dict(s, layout=dict(s["layout"], tmux_dirs=[5])),
    "layout-tmp-not-text": lambda s: dict(s, layout=dict(s["layout"], session_tmp=5)),
    "layout-realpath-not-text": lambda s: dict(s, layout=dict(s["layout"], realpaths=dict.fromkeys(s["layout"]["realpaths"], 5))),
    "unsandboxed": lambda s: dict(s, sandboxed=False),
    "other-program": lambda s: dict(s, argv=["/bin/sh", *s["argv"][1:]]),
    "executable-wrapped": lambda s: dict(s, argv=["/usr/bin/env", *s["argv"]]),
    "env-not-allowed": lambda s: dict(s, env=dict(s["env"], UNDECLARED_SECRET="x")),
    "env-tmux": lambda s: dict(s, env=dict(s["env"], TMUX="/tmp/tmux-0/default,1,0")),
    "env-changed": lambda s: dict(s, env=dict(s["env"], HOME="/")),
    "status-file": lambda s: dict(s, status_file=str(Path(s["store"]).parent / "elsewhere.status")),
}


def test_the_macos_launcher_refuses_a_rewritten_spec(jail_env):
    """Each rewrite refused (exit 3, one line, no traceback) before anything is exec'd: the
    stand-in sandbox-exec never runs. The untouched spec runs, through the stand-in."""
    env = jail_env
    seam = Seam(env)
    spec = seam.session("--network", "none")
    for kind, tamper in TAMPER.items():
        tampered = tamper(spec)
        path = write_spec(seam.state, tampered, f"{spec['session_id']}-{kind}")
        code, err = finish(launch(env, seam.launcher(tampered["fingerprint"], path)))
        assert code == 3 and "refusing" in err and "Traceback" not in err, (kind, code, err)
        assert seam.decisions() == [], (kind, err)
        if kind == "policy-refingerprinted":
            assert "store does not hold this fingerprint" in err, err
        assert not (env.ws / ".standin-codex.report").exists(), kind
    proc = launch(env, seam.launcher(spec["fingerprint"], write_spec(seam.state, spec, f"{spec['session_id']}-ok")))
    try:
        wait_until(lambda: seam.decisions(), 20, "the untouched spec's sandbox-exec run")
        assert seam.decisions()[0]["command"][-len(spec["argv"]):] == spec["argv"]
        assert env.report()["argv"] == " ".join(spec["argv"][2:])  # the CLI ran, through the stand-in
    finally:
        end(proc)


def test_a_linux_launcher_never_runs_a_macos_policy(jail_env):
    """A Seatbelt policy handed to the Linux launcher (no seam): refused as not for this host, with
    one line, and never exec'd: not when the store does not hold its fingerprint, and not when it
    does (a store rewritten to hold it)."""
    env = jail_env
    seam = Seam(env)
    spec = seam.session("--network", "none")
    env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "lx", "--detach", check=True)
    with closing(sqlite3.connect(env.store)) as db:
        sid = db.execute("SELECT id FROM sessions WHERE name='lx'").fetchone()[0]
    state = env.state_dir
    linux = dict(spec, session_id=sid, store=str(env.store))
    # Not held: the store check (or the host check first) refuses.
    path = write_spec(state, linux, f"{sid}-not-held")
    code, err = finish(launch(env, linux_launcher(sys.executable, spec["fingerprint"], path)))
    assert code == 3 and "refusing" in err and "Traceback" not in err, (code, err)
    # Held: only the host check stands between this policy and an exec of /usr/bin/sandbox-exec.
    with closing(sqlite3.connect(env.store)) as db, db:
        db.execute("UPDATE sessions SET fingerprint=? WHERE id=?", (spec["fingerprint"], sid))
    path = write_spec(state, linux, f"{sid}-held")
    code, err = finish(launch(env, linux_launcher(sys.executable, spec["fingerprint"], path)))
    assert code == 3 and "macOS" in err and "Traceback" not in err, (code, err)
    assert seam.decisions() == []
    assert not (env.ws / ".standin-codex.report").exists()


def test_a_macos_launcher_never_runs_a_linux_policy(jail_env):
    """The other way round: a bubblewrap policy, whose store row and spec are in order, handed to
    the launcher on macOS (the seam) is refused with one line; nothing runs (on this machine its
    Linux path would run a real bubblewrap jail, on a Mac it would fail part-way)."""
    from tmuxjail.sandbox import landlock

    env = jail_env
    seam = Seam(env)
    args = ("start", "shell", "--mode", "isolated", "--network", "none", "--workspace", str(env.ws))
    dry = env.json(*args, "--dry-run")
    env.run(*args, "--name", "lx", "--detach", check=True)
    with closing(sqlite3.connect(env.store)) as db:
        sid, fp = db.execute("SELECT id, fingerprint FROM sessions WHERE name='lx'").fetchone()
    pol = dry["policy"]
    spec = {"session_id": sid, "fingerprint": fp, "policy": pol, "argv": [*dry["cli_argv"], "-c", "echo ok > ./launched"],
            "call": dry["sandbox_call"], "env": dict(pol["env_set"]), "store": str(env.store),
            "machine": os.uname().machine, "sandboxed": True, "layout": dry["host_layout"],
            "landlock_scope": landlock.abi() >= landlock.MIN_ABI}
    code, err = finish(launch(env, seam.launcher(fp, write_spec(env.state_dir, spec, f"{sid}-on-mac"))))
    assert code == 3 and "this host is macOS" in err and "Traceback" not in err, (code, err)
    assert not (env.ws / "launched").exists() and seam.decisions() == []


# -- 3. the executable swapped between the launcher's check and sandbox-exec's exec ----------------

def _opened(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _swap(exe: Path, how: str, other: Path) -> None:
    """Make exe's path name another file. A file renamed or linked over it changes the checked
    file's link count (its ctime: exe_unchanged sees that); a directory above it moved away and
    another put in its place leaves the checked file as it was: only the path check sees that."""
    if how in ("file-renamed-over", "file-symlink"):
        tmp = exe.with_name(".swap")
        tmp.symlink_to(other) if how == "file-symlink" else shutil.copy(other, tmp)
        os.rename(tmp, exe)
        return
    os.rename(exe.parent, exe.parent.with_name(exe.parent.name + ".moved"))
    if how == "dir-symlink":
        exe.parent.symlink_to(other.parent)
        os.rename(other, other.with_name(exe.name))
    else:
        exe.parent.mkdir()
        shutil.copy(other, exe)


@pytest.mark.parametrize("how", ["file-renamed-over", "file-symlink", "dir-renamed", "dir-symlink"])
def test_a_swapped_executable_is_refused_on_the_macos_path(jail_env, how):
    """Deterministic: the store held locked, so the launcher waits for its store check with the
    CLI's file already open; the path is then made to name another file, and the lock let go.
    The launcher's fd still checks out (it is the approved file), but sandbox-exec runs the path:
    refused, the stand-in never runs."""
    env = jail_env
    seam = Seam(env)
    spec = seam.session("--network", "none")
    exe = Path(spec["policy"]["executable"]["path"])
    other = env.outside / "other" / "swapped"
    other.parent.mkdir()
    other.write_text(SWAPPED)
    other.chmod(0o755)
    lock = sqlite3.connect(seam.store, isolation_level=None, timeout=10)
    lock.execute("PRAGMA locking_mode=EXCLUSIVE")
    lock.execute("BEGIN EXCLUSIVE")
    try:
        proc = launch(env, seam.launcher(spec["fingerprint"], write_spec(seam.state, spec, f"{spec['session_id']}-swap")))
        wait_until(lambda: _opened(proc.pid, exe), 20, "the launcher to open the CLI's file")
        _swap(exe, how, other)
        assert proc.poll() is None  # still waiting for the store
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    code, err = finish(proc)
    if code is None:
        end(proc)
    assert code == 3 and f"executable {exe}" in err and "refusing to run it" in err, (code, err)
    assert "Traceback" not in err
    assert seam.decisions() == [] and not (env.ws / ".ran").exists()


# -- 4. the proxy on macOS -----------------------------------------------------------------------

def _tcp_listeners() -> list[tuple[int, str]]:
    """(port, local address) of every TCP listener here (/proc/net/tcp and tcp6, state 0A)."""
    out = []
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A":
                addr, port = f[1].rsplit(":", 1)
                out.append((int(port, 16), addr))
    return out


@pytest.mark.parametrize("ending", ["kill-pane", "kill-server"])
def test_the_macos_proxy_is_loopback_only_on_the_port_the_profile_allows_and_ends_with_the_pane(jail_env, ending):
    """The proxy's port, as the jail's proxy variables name it: one listener on it, on 127.0.0.1
    (no other address, no IPv6); the profile sandbox-exec was given allows that port and no other;
    and once the pane's process is gone, the listener is too."""
    from tmuxjail.sandbox import sbpl as sexpr  # the SBPL evaluator the stand-in decides with

    env = jail_env
    seam = Seam(env)
    seam.run("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "p", "--detach", check=True)
    wait_until(lambda: seam.decisions(), 20, "the session's sandbox-exec run")
    record = seam.decisions()[0]
    proxy = record["env"]["HTTPS_PROXY"]
    assert proxy.startswith("http://127.0.0.1:"), record["env"]
    port = int(proxy.rsplit(":", 1)[1])
    assert [a for p, a in _tcp_listeners() if p == port] == ["0100007F"]  # 127.0.0.1 only
    argv = [a.decode() for a in seam.argvs()[0]]
    profile = sexpr.Profile(argv[argv.index("-p") + 1],
                            dict(v.split("=", 1) for k, v in pairwise(argv) if k == "-D"))
    assert profile.decide(sexpr.Request(op="network-outbound", ip=f"localhost:{port}")) == "allow"
    for other in (port + 1, port - 1, 443, 53):
        assert profile.decide(sexpr.Request(op="network-outbound", ip=f"localhost:{other}")) == "deny", other
    assert profile.decide(sexpr.Request(op="network-outbound", ip=True)) == "deny"
    if ending == "kill-pane":
        env.tmux("kill-pane", "-t", "p")
    else:
        env.kill()
    wait_until(lambda: port not in {p for p, _ in _tcp_listeners()}, 20, "the proxy's listener to go")


def _processes_naming(text: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and text.encode() in p.joinpath("cmdline").read_bytes():
                out.append(int(p.name))
        except OSError:
            continue
    return out


def test_a_refused_macos_launch_leaves_no_proxy(jail_env):
    """The proxy starts before the launcher's last checks: a launch refused after it (here the
    spec's environment) takes it along (and its listener: a socket lives only in its process)."""
    env = jail_env
    seam = Seam(env)
    spec = seam.session()
    assert spec["policy"]["network"] == "proxy"
    path = write_spec(seam.state, dict(spec, env=dict(spec["env"], UNDECLARED_SECRET="x")), f"{spec['session_id']}-px")
    code, err = finish(launch(env, seam.launcher(spec["fingerprint"], path)))
    assert code == 3 and "environment" in err, (code, err)
    # The helper and the proxy it became keep the launcher's command line, which names the spec.
    wait_until(lambda: not _processes_naming(path), 20, "the refused launch's proxy to exit")
    assert seam.decisions() == []


@pytest.mark.parametrize("line", ["tcp:0.0.0.0:8080", "tcp:127.0.0.2:8080", "tcp:[::1]:8080", "tcp:localhost:8080",
                                  "tcp:127.0.0.1:0", "tcp:127.0.0.1:65536", "tcp:127.0.0.1:", "tcp:127.0.0.1:-1",
                                  "tcp:127.0.0.1:\u00b2", "tcp:127.0.0.1:8080:1", "tcp:127.0.0.1: 80", "127.0.0.1:80"])
def test_a_ready_line_that_is_not_a_loopback_port_is_refused(line, capsys):
    from tmuxjail.pane.darwin import tcp_port

    with pytest.raises(SystemExit) as exc:
        tcp_port(line)
    assert exc.value.code == 5 and "not a loopback port" in capsys.readouterr().err
    assert tcp_port("tcp:127.0.0.1:8080") == 8080
