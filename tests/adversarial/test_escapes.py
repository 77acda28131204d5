"""Escape attempts, each run from inside a real jailed pane (a jailed shell), as whoever runs the
suite (CI runs it as root and as an ordinary user). Every attack asserts that it failed and that
nothing outside changed; next to them, the legitimate paths still work."""

from __future__ import annotations

import os
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = pytest.mark.adversarial
STRICT = ("isolated", "verified")
ALL = ("compatibility", *STRICT)


class Jail:
    def __init__(self, env, mode, name="j", workspace=None, extra=()):
        self.env, self.mode, self.name = env, mode, name
        self.info = env.json("start", "shell", "--mode", mode, "--workspace", str(workspace or env.ws), "--name", name,
                             "--detach", *extra)
        self.ws = Path(self.info["workspace"])  # canonical: what the jail's cwd is
        self.n = 0

    def sh(self, script: str, timeout: float = 15) -> str:
        """Run a script in the jailed shell (as an agent would) and return its output. The typed
        command names the script relative to the shell's cwd (the workspace), so workspace paths
        with spaces, quotes or unicode never pass through the keyboard."""
        self.n += 1
        name = f".attack{self.n}"
        (self.ws / f"{name}.sh").write_text(textwrap.dedent(script))
        out = self.ws / f"{name}.out"
        target = getattr(self, "target", f"={self.name}:")
        self.env.tmux("send-keys", "-t", target, f"sh {name}.sh > {name}.tmp 2>/dev/null; mv {name}.tmp {name}.out",
                      "Enter")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if out.exists():
                return out.read_text()
            time.sleep(0.05)
        raise AssertionError(f"attack {self.n} did not finish: {self.env.tmux('capture-pane', '-p', '-t', target)}")


def unique_naps(n: int) -> list[str]:
    """Sleep durations no other process on the host uses (other users run these tests too): a
    daemon started with one is found by its command line alone."""
    base = f"{300 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9:09d}"
    return [f"{base}{i}" for i in range(n)]


def running(naps) -> list[int]:
    """Pids of our own processes running `sleep NAP` for one of naps."""
    want = {f"sleep\0{n}\0".encode() for n in naps}
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if p.stat().st_uid == os.getuid() and p.joinpath("cmdline").read_bytes() in want:
                out.append(int(p.name))
        except OSError:
            continue
    return out






@pytest.mark.parametrize("mode", ALL)
def test_tmux_unreachable_by_any_route(world, mode):
    env = world
    jail = Jail(env, mode)
    sock = env.tmux("display-message", "-p", "#{socket_path}").strip()
    out = jail.sh(f"""
        tmux new-window 'touch {env.sentinel}.tmux' 2>/dev/null && echo NEWWIN
        tmux -L {env.socket} new-window 'touch {env.sentinel}.tmux' 2>/dev/null && echo DASH_L
        tmux -S {sock} new-window 'touch {env.sentinel}.tmux' 2>/dev/null && echo DASH_S
        for d in /tmp /run/user/$(id -u) ${{TMUX_TMPDIR:-/tmp}}; do find $d -type s 2>/dev/null; done | grep -q -e "^/tmp/tmux-$(id -u)/" -e "{env.socket}" && echo SCAN
        python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('CONNECT')" 2>/dev/null
        find /proc/[0-9]*/root/tmp/tmux-* -type s 2>/dev/null | grep -q . && echo PROCROOT
        echo end
    """, timeout=180)  # in compatibility it walks the host's /tmp twice: 48 s on a busy CI machine
    assert out.split() == ["end"], out
    assert not Path(f"{env.sentinel}.tmux").exists()
    env.unchanged()


@pytest.mark.parametrize("mode", ALL)
def test_tmuxjail_state_and_other_homes_unreachable(world, mode):
    env = world
    other = env.home / ".local/share/tmuxjail/homes/codex/default"
    other.mkdir(parents=True)
    (other / "token").write_text("other session's login")
    jail = Jail(env, mode)
    out = jail.sh(f"""
        cat {env.store} >/dev/null 2>&1 && echo READ_STORE
        cat {other}/token 2>/dev/null && echo READ_OTHER_HOME
        # Writes may land in a tmpfs or the private home; what matters is the host copy below.
        echo x > {env.store}
        echo x > {other}/token
        mkdir -p {env.config_dir}; echo 'allowed_modes=["compatibility"]' > {env.config_dir}/config.toml
        PATH={Path(os.sys.executable).parent}:$PATH tmuxjail -L {env.socket} start shell --detach >/dev/null 2>&1 && echo NESTED_START
        echo end
    """)
    assert out.split() == ["end"], out
    assert not (env.config_dir / "config.toml").exists()
    assert (other / "token").read_text() == "other session's login"
    env.unchanged()  # includes: the store still opens and holds one session


@pytest.mark.parametrize("network", ["default", "host"])
@pytest.mark.parametrize("mode", STRICT)
def test_host_home_and_planted_sockets_unreachable(world, mode, network):
    """On the host's network (allowed by the config) the jail shares the host's abstract unix
    names: there Landlock's scope alone keeps them out; by default a network namespace does too."""
    env = world
    extra: tuple[str, ...] = ()
    if network == "host":
        env.config_dir.mkdir(parents=True, exist_ok=True)
        (env.config_dir / "config.toml").write_text(f'[network]\n{mode} = "host"\n')
        extra = ("--network", "host")
    planted = Path(f"/tmp/tj-planted-{os.getpid()}-{mode}.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(planted))
    srv.listen(1)
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0tj-abstract-{os.getpid()}-{mode}"
    abstract.bind(name)
    abstract.listen(1)
    try:
        jail = Jail(env, mode, extra=extra)
        assert jail.info["network"] == ("host" if network == "host" else "proxy")
        out = jail.sh(f"""
            cat {env.home}/.ssh/id_* 2>/dev/null && echo READ_SSH
            ls {env.home}/.ssh >/dev/null 2>&1 && echo SEE_SSH
            echo x > {env.sentinel}
            python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{planted}'); print('PLANTED')" 2>/dev/null
            python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0{name[1:]}'); print('ABSTRACT')" 2>/dev/null
            touch ./legit && echo WORKSPACE_OK
            echo end
        """)
        assert out.split() == ["WORKSPACE_OK", "end"], out
        assert (env.ws / "legit").exists()
        env.unchanged()
    finally:
        srv.close()
        abstract.close()
        planted.unlink(missing_ok=True)


@pytest.mark.parametrize("mode", ALL)
def test_processes_privileges_and_daemons(world, mode):
    env = world
    jail = Jail(env, mode)
    host_pid = os.getpid()
    naps = unique_naps(2)
    out = jail.sh(f"""
        ls /proc | grep -qx {host_pid} && echo SEE_HOST_PID
        cat /proc/{host_pid}/environ >/dev/null 2>&1 && echo READ_ENVIRON
        grep -q '^CapEff:.0000000000000000' /proc/self/status || echo CAPS
        grep -q '^NoNewPrivs:.1' /proc/self/status || echo NNP_OFF
        mount -o remount,rw / 2>/dev/null && echo REMOUNT
        umount /proc 2>/dev/null && echo UMOUNT
        mknod ./dev0 c 1 3 2>/dev/null && echo MKNOD
        [ {mode!r} = compatibility ] || {{ ln /etc/passwd ./passwd-link 2>/dev/null && echo HARDLINK; }}
        setsid sh -c 'sleep {naps[0]}' </dev/null >/dev/null 2>&1 &
        nohup sleep {naps[1]} </dev/null >/dev/null 2>&1 &
        echo end
    """)
    assert out.split() == ["end"], out
    assert wait_until(lambda: len(running(naps)) == 2), "the daemons did not start"
    env.run("stop", "j", check=True)
    assert wait_until(lambda: not running(naps)), "a daemon outlived the jail"


@pytest.mark.parametrize("mode", ALL)
def test_tiocsti_injection_refused(world, mode):
    env = world
    jail = Jail(env, mode)
    out = jail.sh(r"""
        python3 - <<'PY'
        import fcntl, os, termios
        for name, req, arg in (("STI", termios.TIOCSTI, b"x"), ("LINUX", 0x541C, bytes([3]))):
            try:
                fcntl.ioctl(0, req, arg)
                print(name)
            except OSError as e:
                print(name.lower() + "-refused" if e.errno == 1 else name.lower() + "-errno" + str(e.errno))
        PY
        echo end
    """)
    # EPERM comes from the seccomp filter: without it, TIOCSTI on our own terminal works (or gives
    # EIO where the kernel disabled it), and TIOCLINUX on a pty, which is not a virtual console,
    # gives ENOTTY or EINVAL. So errno 1 for both is the filter's answer, seen from inside.
    assert out.split() == ["sti-refused", "linux-refused", "end"], out


@pytest.mark.parametrize("mode", STRICT)
def test_symlinks_cannot_reach_host_secrets(world, mode):
    env = world
    (env.ws / "pre-link").symlink_to(env.home / ".ssh" / "id_ed25519")
    jail = Jail(env, mode)
    out = jail.sh(f"""
        cat ./pre-link 2>/dev/null && echo READ_PRE
        echo pwned > ./pre-link 2>/dev/null; true
        ln -s {env.home}/.ssh/id_ed25519 ./new-link; cat ./new-link 2>/dev/null && echo READ_NEW
        echo end
    """)
    assert out.split() == ["end"], out
    env.unchanged()


def test_git_metadata_readonly_status_works(world):
    """Strict modes: the whole .git is read-only (README, "Git metadata"): git reads, nothing
    in .git can be planted or changed, and so git cannot commit either."""
    env = world
    subprocess.run(["git", "init", "-q", str(env.ws)], check=True)
    jail = Jail(env, "isolated")
    out = jail.sh("""
        echo 'touch /tmp/pwned' > .git/hooks/post-checkout 2>/dev/null && echo HOOK_PLANTED
        git config core.hooksPath /tmp 2>/dev/null && echo CONFIG_WRITTEN
        echo hi > f && git status --porcelain | grep -q '?? f' && echo STATUS_OK
        git add f 2>/dev/null && echo ADDED
        echo end
    """)
    assert out.split() == ["STATUS_OK", "end"], out
    assert not (env.ws / ".git/hooks/post-checkout").exists()


@pytest.mark.parametrize("mode", STRICT)
def test_environment_is_an_allowlist(world, mode):
    env = world
    env.run("start", "shell", "--mode", mode, "--workspace", str(env.ws), "--name", "j", "--detach", check=True,
            env_extra={"LD_PRELOAD": "/evil.so", "NODE_OPTIONS": "--require /evil", "AWS_SECRET_ACCESS_KEY": "k",
                       "TMUX": f"/tmp/tmux-{os.getuid()}/{env.socket},1,0", "TMUX_PANE": "%0"})
    jail = Jail.__new__(Jail)
    jail.env, jail.mode, jail.name, jail.ws, jail.n = env, mode, "j", env.ws, 0
    out = jail.sh("env | cut -d= -f1 | sort | tr '\\n' ' '")
    names = set(out.split())
    assert not names & {"LD_PRELOAD", "NODE_OPTIONS", "AWS_SECRET_ACCESS_KEY", "TMUX", "TMUX_PANE"}, names
    # The caller's locale passes (the suite also runs under LC_ALL=C: the newcomer tier).
    names -= {n for n in names if n in ("LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LANGUAGE")}
    # Under network proxy the launcher adds the proxy's variables (its own values, never the caller's).
    from tmuxjail.net.inside import PROXY_VARS

    names -= set(PROXY_VARS) if env.json("show", "j")["network"] == "proxy" else set()
    # NO_PROXY names only the jail's own loopback; INSIDE_TMUXJAIL lets tmuxjail say where it is
    assert names <= {"HOME", "USER", "LOGNAME", "SHELL", "PATH", "TMPDIR", "TERM", "LANG", "PWD", "SHLVL", "_", "OLDPWD",
                     "NO_PROXY", "no_proxy", "INSIDE_TMUXJAIL"}


def test_compatibility_environment_lacks_tmux_variables(world):
    """Compatibility inherits the caller's environment, minus what points back at tmux."""
    env = world
    sock = f"/tmp/tmux-{os.getuid()}/{env.socket}"
    env.run("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "j", "--detach",
            check=True, env_extra={"TMUX": f"{sock},1,0", "TMUX_PANE": "%0", "TMUX_TMPDIR": "/tmp",
                                   "TJ_PLAIN_VARIABLE": "kept"})
    jail = Jail.__new__(Jail)
    jail.env, jail.mode, jail.name, jail.ws, jail.n = env, "compatibility", "j", env.ws, 0
    names = set(jail.sh("env | cut -d= -f1 | sort | tr '\\n' ' '").split())
    assert "TJ_PLAIN_VARIABLE" in names, names  # inherited, as compatibility promises
    assert not {n for n in names if n.startswith("TMUX")}, names


def test_legit_private_home_persists_across_resume(world):
    env = world
    jail = Jail(env, "isolated")
    jail.sh("echo kept > ~/state")
    env.kill()
    env.run("resume", "j", "--detach", check=True)
    assert jail.sh("cat ~/state").strip() == "kept"


@pytest.mark.parametrize("mode", ALL)
def test_split_of_a_jailed_session_is_the_same_jail_and_cannot_split_itself(world, mode):
    """tmux's own split in a session tmuxjail owns runs the session's default-command: the same
    jail (bubblewrap is the pane's process, same HOME view), and from in there tmux stays out of
    reach, so the split cannot make an unjailed split of its own."""
    env = world
    jail = Jail(env, mode)
    view = "echo $HOME; ls -A ~ | sort | tr '\\n' ' '; echo"
    main_view = jail.sh(view)
    split = env.tmux("split-window", "-t", "=j:", "-P", "-F", "#{pane_id}").strip()  # no command: default-command
    pid = int(env.tmux("display-message", "-p", "-t", split, "#{pane_pid}").strip())
    assert wait_until(lambda: _in_jail(pid), 15), Path(f"/proc/{pid}/comm").read_text()
    other = Jail.__new__(Jail)
    other.env, other.mode, other.n, other.name, other.ws = env, mode, 100, "j", jail.ws
    other.target = split
    assert other.sh(view) == main_view
    out = other.sh(f"""
        tmux split-window 'touch {env.sentinel}.split' 2>/dev/null && echo SPLIT
        tmux -L {env.socket} split-window 'touch {env.sentinel}.split' 2>/dev/null && echo SPLIT_L
        echo end
    """)
    assert out.split() == ["end"], out
    assert len(env.tmux("list-panes", "-t", "=j:", "-F", "#{pane_id}").split()) == 2
    assert not Path(f"{env.sentinel}.split").exists()
    env.unchanged()


def _in_jail(pid: int) -> bool:
    """bubblewrap is the pane's own process, and everything under it runs beneath bwrap."""
    from conftest import descendants, process_chain

    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
            return False
    except FileNotFoundError:
        return False
    kids = [k for k in descendants(pid) if Path(f"/proc/{k}/comm").exists()]
    names = {Path(f"/proc/{k}/comm").read_text().strip() for k in kids}
    return bool(names - {"bwrap"}) and all("bwrap" in process_chain(k) for k in kids)


def test_modules_planted_in_the_workspace_never_run_outside_the_jail(world):
    """The launcher and a split's _pane helper start in the workspace, outside the jail: a
    json.py or tmuxjail/ package planted there must never be imported by them."""
    env = world
    marker = env.outside / "planted-ran"
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for mod in ("json", "sqlite3", "os", "struct", "hashlib", "errno", "ctypes", "site", "sitecustomize"):
        (env.ws / f"{mod}.py").write_text(payload)
    (env.ws / "tmuxjail").mkdir()
    (env.ws / "tmuxjail" / "__init__.py").write_text(payload)
    (env.ws / "tmuxjail" / "__main__.py").write_text(payload)
    jail = Jail(env, "isolated")
    assert jail.sh("echo inside").strip() == "inside"
    # tmux's own key path: the session's default-command, started in the workspace (tmux would
    # otherwise start it in the tmux client's directory, i.e. wherever the test runner is).
    split = env.tmux("split-window", "-t", "=j:", "-c", str(jail.ws), "-P", "-F", "#{pane_id}").strip()
    pid = int(env.tmux("display-message", "-p", "-t", split, "#{pane_pid}").strip())
    assert wait_until(lambda: _in_jail(pid) or marker.exists(), 15), "the split did not come up in the jail"
    assert not marker.exists(), marker.read_text()
