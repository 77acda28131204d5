"""More escape attempts from inside real jailed panes: host processes (ptrace, process_vm_readv,
/proc/PID/*), kernel tunables (/proc/sys, /sys), /proc/PID/exe overwrites, io_uring, terminal
injection after the CLI exits and after a resume, tmux escape-sequence options, odd paths, a
second live session's private home, and symlinked bind targets refused through the CLI. Each
asserts that the attack failed and that nothing outside changed."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Env, furnish, have_jail, wait_until
from test_escapes import ALL, STRICT, Jail, running, unique_naps

pytestmark = pytest.mark.adversarial
SYS_IOCTL = {"x86_64": 16, "aarch64": 29}.get(platform.machine(), 16)




def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- processes -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ALL)
def test_host_process_cannot_be_traced_read_or_signalled(world, mode):
    env = world
    victim = subprocess.Popen(["sleep", "600"], env=env.environ(SECRET_IN_ENV="host-secret"))
    try:
        region = next(ln.split()[0] for ln in Path(f"/proc/{victim.pid}/maps").read_text().splitlines()
                      if ln.split()[1].startswith("r"))
        addr = int(region.split("-")[0], 16)
        jail = Jail(env, mode)
        out = jail.sh(f"""
            python3 - <<'PY'
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            pid = {victim.pid}
            if os.path.exists(f"/proc/{{pid}}"):
                print("SEE_HOST_PID")
            if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
                print("PTRACE_ATTACH")
            if libc.ptrace(0x4206, pid, 0, 0) == 0:  # PTRACE_SEIZE
                print("PTRACE_SEIZE")
            class iovec(ctypes.Structure):
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
            buf = ctypes.create_string_buffer(64)
            local, remote = iovec(ctypes.addressof(buf), 64), iovec({addr}, 64)
            if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
                print("VM_READV")
            if libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
                print("VM_WRITEV")
            for f in ("cmdline", "environ", "mem", "maps", "root/etc/hostname"):
                try:
                    with open(f"/proc/{{pid}}/{{f}}", "rb") as fh:
                        fh.read(1)
                    print("READ_" + f.upper())
                except OSError:
                    pass
            try:
                os.kill(pid, 0)
                print("SIGNAL")
            except OSError:
                pass
            # The jail's own init (bwrap, pid 1) carries the same filter, no capabilities and
            # no-new-privs: tracing it (allowed, same jail) gains nothing.
            st = open("/proc/1/status").read()
            if "Seccomp:\\t2" not in st or "NoNewPrivs:\\t1" not in st or "CapEff:\\t0000000000000000" not in st:
                print("INIT_WEAKER")
            # Positive: the CLI may still look at and trace its own children.
            import subprocess, signal
            kid = subprocess.Popen(["sleep", "30"])
            while not open(f"/proc/{{kid.pid}}/cmdline").read().startswith("sleep"):
                pass
            ok = libc.ptrace(16, kid.pid, 0, 0) == 0 and open(f"/proc/{{kid.pid}}/cmdline").read().startswith("sleep")
            print("OWN_CHILD_OK" if ok else "OWN_CHILD_FAIL")
            kid.kill()
            PY
            echo end
        """)
        assert out.split() == ["OWN_CHILD_OK", "end"], out
        status = Path(f"/proc/{victim.pid}/status").read_text()
        assert victim.poll() is None and "TracerPid:\t0" in status and "(stopped)" not in status
        env.unchanged()
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("mode", ALL)
def test_proc_exe_links_cannot_overwrite_binaries(world, mode):
    """CVE-2019-5736 class: a process's /proc/PID/exe leads to the binary on the host's mount,
    which may be writable there (root owns /usr/bin/bwrap). Every exe the jail can name is busy,
    and in strict modes also on a read-only mount: "text file busy" alone says nothing about the
    mount (the kernel checks it first), and stops protecting once the process exits."""
    env = world
    bwrap_before = hashlib.sha256(Path("/usr/bin/bwrap").read_bytes()).hexdigest()
    jail = Jail(env, mode)
    out = jail.sh(f"""
        python3 - <<'PY'
        import os
        for p in filter(str.isdigit, os.listdir("/proc")):
            for flags in (os.O_WRONLY, os.O_RDWR | os.O_APPEND):
                try:
                    fd = os.open(f"/proc/{{p}}/exe", flags)
                    os.close(fd)
                    print("EXE_WRITABLE", p, os.readlink(f"/proc/{{p}}/exe"))
                except OSError:
                    pass
            # bwrap itself (pid 1) was exec'd from the host's mount before the jail existed: it is
            # busy for as long as the jail lives (checked above). Everything exec'd inside must sit
            # on a read-only mount; in compatibility the host is writable by design.
            if p == "1" or {mode!r} == "compatibility":
                continue
            try:
                rw = not os.statvfs(f"/proc/{{p}}/exe").f_flag & os.ST_RDONLY
            except OSError:
                continue
            if rw:
                print("EXE_ON_WRITABLE_MOUNT", p, os.readlink(f"/proc/{{p}}/exe"))
        PY
        echo end
    """)
    assert out.split() == ["end"], out
    assert hashlib.sha256(Path("/usr/bin/bwrap").read_bytes()).hexdigest() == bwrap_before
    env.unchanged()


# -- kernel ----------------------------------------------------------------------------------

def _writable_module_param() -> Path | None:
    for p in sorted(Path("/sys/module").glob("*/parameters/*")):
        try:
            if p.stat().st_mode & 0o200 and p.read_text().strip() in ("N", "Y", "0", "1"):
                return p
        except OSError:
            continue
    return None


@pytest.mark.parametrize("mode", ALL)
def test_kernel_tunables_are_read_only(world, mode):
    """A jail run by root has uid 0 on the host: without a read-only /proc/sys it could set host
    sysctls (kernel.core_pattern = a program run as host root on the next crash)."""
    env = world
    sysctl = Path("/proc/sys/kernel/printk_ratelimit")
    before = sysctl.read_text()
    param = _writable_module_param()
    param_before = param.read_text() if param else None
    jail = Jail(env, mode)
    try:
        out = jail.sh(f"""
            v=$(cat {sysctl}); (echo $((v + 1)) > {sysctl}) 2>/dev/null && echo SYSCTL_WRITTEN
            (cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern) 2>/dev/null && echo CORE_PATTERN
            mount -o remount,rw /proc/sys 2>/dev/null && echo REMOUNT_PROC_SYS
            {f'(cat {param} > {param}) 2>/dev/null && echo SYS_WRITTEN' if param else ''}
            for f in /sys/kernel/uevent_helper /sys/power/state; do [ -e $f ] && (: >> $f) 2>/dev/null && echo SYS_$f; done
            cat /proc/sys/kernel/ostype >/dev/null && echo READ_OK
            python3 -c "
            import os
            for p in ('/proc/sys', '/sys'):
                if os.path.isdir(p) and not os.statvfs(p).f_flag & os.ST_RDONLY:
                    print('WRITABLE_MOUNT_' + p)
            "
            echo end
        """)
        assert out.split() == ["READ_OK", "end"], out  # also as a user: the mounts are read-only
        assert sysctl.read_text() == before
        if param:
            assert param.read_text() == param_before
        env.unchanged()
    finally:
        if sysctl.read_text() != before:
            sysctl.write_text(before)


@pytest.mark.parametrize("mode", ALL)
def test_io_uring_refused(world, mode):
    """io_uring is a large kernel attack surface and runs socket and file operations outside the
    syscall filter's view; the seccomp filter refuses its three syscalls (programs fall back)."""
    env = world
    jail = Jail(env, mode)
    out = jail.sh("""
        python3 - <<'PY'
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)
        for name, nr, args in (("SETUP", 425, (8, params)), ("ENTER", 426, (-1, 1, 0, 0, None, 0)),
                               ("REGISTER", 427, (-1, 0, None, 0))):
            r = libc.syscall(nr, *args)
            print(name if r >= 0 else f"{name.lower()}-errno{ctypes.get_errno()}")
        PY
        echo end
    """)
    assert out.split() == ["setup-errno1", "enter-errno1", "register-errno1", "end"], out
    env.unchanged()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 and x32 system call ABIs are x86_64's")
@pytest.mark.parametrize("mode", ALL)
def test_foreign_syscall_abis_are_refused(world, mode):
    """The filter keys on the ioctl number of the native ABI; the same request through the i386
    ABI (int 0x80, ioctl is 54 there) or an x32 number must be refused too, not let through
    unfiltered. Aimed at /dev/null, so a filter that let it through would inject nothing: the
    kernel's answer (ENOTTY, or ENOSYS without x32) tells the two apart from the filter's EPERM."""
    env = world
    jail = Jail(env, mode)
    out = jail.sh("""
        python3 - <<'PY'
        import ctypes, os, struct
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        fd = os.open("/dev/null", os.O_RDWR)
        page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)  # rwx, private anonymous, below 4 GiB
        buf = page + 2048
        ctypes.memmove(buf, b"x", 1)
        # mov eax, 54 (i386 ioctl); mov ebx, fd; mov ecx, TIOCSTI; mov edx, buf; int 0x80; ret
        code = (b"\\xb8" + struct.pack("<I", 54) + b"\\xbb" + struct.pack("<I", fd) + b"\\xb9"
                + struct.pack("<I", 0x5412) + b"\\xba" + struct.pack("<I", buf) + b"\\xcd\\x80\\xc3")
        ctypes.memmove(page, code, len(code))
        r = ctypes.CFUNCTYPE(ctypes.c_int)(page)()
        print("i386-refused" if r == -1 else f"I386_{-r}")
        r = libc.syscall(0x40000000 | 16, fd, 0x5412, ctypes.c_char_p(b"x"))
        e = ctypes.get_errno()
        print("x32-refused" if r == -1 and e == 1 else f"X32_{r}_{e}")
        PY
        echo end
    """)
    assert out.split() == ["i386-refused", "x32-refused", "end"], out


# -- terminal --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ALL)
def test_injected_input_never_runs_after_exit_or_resume(world, mode):
    env = world
    marker = env.outside / "injected"
    naps = unique_naps(2)
    jail = Jail(env, mode)
    pane = jail.info["tmux_pane"]
    out = jail.sh(rf"""
        python3 - <<'PY'
        import ctypes, fcntl, os, termios
        libc = ctypes.CDLL(None, use_errno=True)
        cmd = b"touch {marker}\n"
        tty = os.open("/dev/tty", os.O_RDWR)
        for fd in (0, tty):
            for ch in cmd:
                try:
                    fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
                    print("STI")
                    break
                except OSError:
                    pass
            # CVE-2019-10063: the request with junk in the upper 32 bits still means TIOCSTI
            c = ctypes.c_char(b"x")
            if libc.syscall({SYS_IOCTL}, fd, ctypes.c_ulong((1 << 32) | termios.TIOCSTI), ctypes.byref(c)) == 0:
                print("STI_HIGH_BITS")
        PY
        setsid sh -c 'sleep {naps[0]}' </dev/null >/dev/null 2>&1 &
        ( ( sleep {naps[1]} </dev/null >/dev/null 2>&1 & ) & )
        echo end
    """)
    assert out.split() == ["end"], out
    shell_pid = int(env.tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip())
    env.tmux("send-keys", "-t", pane, "exit", "Enter")
    assert wait_until(lambda: env.tmux("display-message", "-p", "-t", pane, "#{pane_dead}").strip() == "1")
    time.sleep(0.5)
    # The dead pane has no process at all: nothing reads the pane's terminal any more.
    assert not _alive(shell_pid)
    assert wait_until(lambda: not running(naps)), "a process outlived the jail's pane"
    assert not marker.exists()
    env.run("resume", "j", "--detach", check=True)
    assert jail.sh("echo resumed").split() == ["resumed"]
    time.sleep(0.3)
    assert not marker.exists()
    env.unchanged()


def test_escape_sequence_options_on_jailed_windows(world):
    """allow-passthrough is off on the jailed window even when the server's global is on, also
    after a resume. OSC 52 clipboard writes follow the server's set-clipboard: under the default
    (external) no tmux buffer is made; under `on` the pane can fill one (documented in README)."""
    env = world
    jail = Jail(env, "isolated")
    env.tmux("set-option", "-gw", "allow-passthrough", "on")
    assert env.tmux("show-options", "-wv", "-t", "=j:", "allow-passthrough").strip() == "off"
    osc52 = r"printf '\033]52;c;%s\007' $(printf 'touch /tmp/pwned' | base64) > /dev/tty"
    jail.sh(osc52 + r"; printf '\033Ptmux;\033\033]52;c;eA==\007\033\\' > /dev/tty")
    time.sleep(0.3)
    assert env.tmux("list-buffers", check=False).strip() == ""
    env.tmux("set-option", "-s", "set-clipboard", "on")
    jail.sh(osc52)
    assert wait_until(lambda: env.tmux("list-buffers", check=False).strip() != "", 3)  # what remains, by design
    env.kill()
    env.run("resume", "j", "--detach", check=True)
    env.tmux("set-option", "-gw", "allow-passthrough", "on")
    assert env.tmux("show-options", "-wv", "-t", "=j:", "allow-passthrough").strip() == "off"
    assert not Path("/tmp/pwned").exists()
    env.unchanged()


def _tmux_env(env, pane: str) -> dict:
    """TMUX and TMUX_PANE as a process in `pane` has them (for start --here / --split)."""
    tmux_var = env.tmux("display-message", "-p", "-t", pane, "#{socket_path},#{pid},#{session_id}").strip()
    return {"TMUX": tmux_var.replace(",$", ","), "TMUX_PANE": pane}


def test_every_jailed_pane_has_passthrough_off_and_stays_dead(world):
    """Not only a session's first window: a new window in a jailed session (tmux's own key, via
    the session's default-command), and a jail started with --here or --split in the user's own
    session get allow-passthrough off, whatever the server's global says, and keep a dead pane
    when their shell exits (never a closed pane, never a shell in its place)."""
    env = world
    Jail(env, "isolated")
    env.tmux("set-option", "-gw", "allow-passthrough", "on")
    env.tmux("set-option", "-gw", "remain-on-exit", "off")
    panes = {"new-window": env.tmux("new-window", "-d", "-t", "=j:", "-c", str(env.ws), "-P", "-F", "#{pane_id}").strip()}
    env.tmux("new-session", "-d", "-s", "mine", "-c", str(env.ws))
    mine = env.tmux("display-message", "-p", "-t", "=mine:", "#{pane_id}").strip()
    for how, args in (("here", ["--here"]), ("split", ["--split", "h"])):
        proc = env.run("start", "shell", "--mode", "isolated", *args, "--name", how, "--detach", "--json",
                       env_extra=_tmux_env(env, mine))
        assert proc.returncode == 0, proc.stderr
        panes[how] = json.loads(proc.stdout)["tmux_pane"]
    for how, pane in panes.items():
        pid = int(env.tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip())
        assert wait_until(lambda pid=pid: _jailed(pid), 15), how
        assert env.tmux("display-message", "-p", "-t", pane, "#{allow-passthrough}").strip() in ("0", "off"), how
    for pane in panes.values():
        env.tmux("send-keys", "-t", pane, "exit", "Enter")
    for how, pane in panes.items():
        assert wait_until(lambda pane=pane: env.tmux("display-message", "-p", "-t", pane, "#{pane_dead}", check=False).strip() == "1"), \
            f"{how}: the pane closed instead of staying dead"
    assert env.tmux("display-message", "-p", "-t", mine, "#{allow-passthrough}").strip() in ("1", "on")  # the user's own


def _jailed(pid: int) -> bool:
    from test_escapes import _in_jail

    return _in_jail(pid)


# -- paths -----------------------------------------------------------------------------------

ODD = "my ws 'q' \"dq\" ü $HOME `x`"


@pytest.fixture
def odd_world(tmp_path):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    env = Env(tmp_path / ODD)  # home, workspace, stand-ins and outside all carry the odd name
    yield furnish(env)
    env.kill()


@pytest.mark.parametrize("mode", ALL)
def test_odd_characters_in_home_and_workspace(odd_world, mode):
    env = odd_world
    jail = Jail(env, mode)
    assert jail.ws == env.ws
    ws, sentinel = shlex.quote(str(env.ws)), shlex.quote(str(env.sentinel))
    out = jail.sh(f"""
        [ "$(pwd)" = {ws} ] && echo CWD_OK
        echo kept > ./inside && echo WRITE_INSIDE_OK
        echo x > {sentinel} 2>/dev/null && echo WROTE_OUTSIDE
        echo x > "$HOME/.ssh/id_ed25519" 2>/dev/null && echo WROTE_HOME_KEY
        echo home > "$HOME/mark" 2>/dev/null && echo HOME_WRITABLE
        echo end
    """)
    if mode == "compatibility":  # the host, writable: allowed by design; undo for unchanged()
        assert {"CWD_OK", "WRITE_INSIDE_OK", "WROTE_OUTSIDE", "end"} <= set(out.split()), out
        env.sentinel.write_text("untouched")
        (env.home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    else:
        assert out.split() == ["CWD_OK", "WRITE_INSIDE_OK", "HOME_WRITABLE", "end"], out
        assert not (env.home / "mark").exists()  # the jail's home is not the host's
    assert (env.ws / "inside").read_text() == "kept\n"
    env.unchanged()


@pytest.mark.parametrize("mode", ALL)
def test_dotdot_and_symlinked_workspace_are_canonicalised(world, mode):
    env = world
    (env.root / "b").mkdir()
    (env.root / "deep" / "x").mkdir(parents=True)
    (env.root / "b" / "x").mkdir()
    (env.root / "link").symlink_to(env.root / "deep" / "x")
    # a/../b lands on b
    jail = Jail(env, mode, workspace=f"{env.ws}/../b")
    assert jail.ws == env.root / "b"
    out = jail.sh(f"""
        pwd; touch ./in-b && echo B_OK
        touch {env.ws}/not-here 2>/dev/null && echo WROTE_A
        echo end
    """)
    expect = [str(env.root / "b"), "B_OK", *(["WROTE_A"] if mode == "compatibility" else []), "end"]
    assert out.split() == expect, out
    (env.ws / "not-here").unlink(missing_ok=True)
    assert (env.root / "b" / "in-b").exists()
    env.run("stop", "j", check=True)
    # link/../x: the kernel follows link first, so this is deep/x; the policy agrees with it
    proc = env.run("start", "shell", "--mode", mode, "--workspace", f"{env.root}/link/../x", "--name", "k",
                   "--detach", "--dry-run", "--json", check=True)
    assert f'"{env.root}/deep/x"' in proc.stdout and f"{env.root}/b/x" not in proc.stdout


def test_newline_in_workspace_is_refused(world):
    env = world
    bad = env.root / "bad\nname"
    bad.mkdir()
    for mode in ALL:
        proc = env.run("start", "shell", "--mode", mode, "--workspace", str(bad), "--name", "n", "--detach")
        assert proc.returncode == 2, proc.stderr
        assert "newline" in proc.stderr and "Traceback" not in proc.stderr
    assert env.tmux("ls", check=False).strip() == ""
    if env.store.exists():
        assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


@pytest.mark.parametrize("target", ["/etc", "HOME", "HOME/..", "relative-up"])
def test_symlinked_bind_target_outside_is_refused_through_the_cli(world, target):
    """verified mode binds ~/.codex back into the jail: a ~/.codex that leads out of the home (or
    to the home itself) is refused at policy time, before anything runs or is recorded."""
    env = world
    link = env.home / ".codex"
    if target == "relative-up":
        link.symlink_to("../outside")
    else:
        link.symlink_to(target.replace("HOME", str(env.home)))
    proc = env.run("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--name", "v", "--detach")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "resolves to" in lines[0] and "refusing to bind it" in lines[0], lines
    assert env.tmux("ls", check=False).strip() == ""
    if env.store.exists():
        assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
    assert link.is_symlink()  # nothing followed or replaced it


# -- sessions --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ALL)
def test_other_live_sessions_private_home_unreachable(world, mode):
    env = world
    first = Jail(env, "isolated")
    first.sh("echo first-secret > ~/token")
    a_home = Path(first.info["private_home"])
    assert (a_home / "token").read_text() == "first-secret\n"
    ws2 = env.root / "ws2"
    ws2.mkdir()
    second = Jail(env, mode, name="k", workspace=ws2, extra=("--env", "other"))
    out = second.sh(f"""
        cat {a_home}/token 2>/dev/null && echo READ_BY_PATH
        grep -rqs first-secret ~ 2>/dev/null && echo FOUND_IN_OWN_HOME
        for p in /proc/[0-9]*; do cat $p/root{env.home}/token 2>/dev/null && echo READ_BY_PROC; done
        echo x > {a_home}/token 2>/dev/null
        echo x > {a_home}/planted 2>/dev/null
        echo end
    """)
    assert out.split() == ["end"], out
    assert (a_home / "token").read_text() == "first-secret\n" and not (a_home / "planted").exists()
    assert first.sh("cat ~/token").strip() == "first-secret"
    assert sorted(env.tmux("ls", "-F", "#{session_name}").split()) == ["j", "k"]
    assert env.sentinel.read_text() == "untouched"


@pytest.mark.parametrize("mode", ALL)
def test_nested_namespaces_cannot_lift_masks(world, mode):
    """A user namespace made inside the jail has every capability over its own mounts, but the
    jail's mounts arrive locked: they cannot be unmounted, bound without what covers them, or
    remounted writable. Compatibility allows nested namespaces, so the attack must really run
    there (as root only -Um can: mapping uid 0 needs CAP_SETFCAP); strict jails refuse to create
    one at all (bwrap --disable-userns)."""
    env = world
    subprocess.run(["git", "init", "-q", str(env.ws)], check=True)
    uid = os.getuid()
    if mode == "compatibility":  # tmux's socket dir is a tmpfs over the host's; the config is read-only
        mask, ro = f"/tmp/tmux-{uid}", str(env.config_dir)
        revealed = f"ls -A {env.ws}/peek/tmux-{uid} | grep -q ."
        env.config_dir.mkdir(parents=True, exist_ok=True)
    else:  # /etc/shadow is /dev/null over the real one; .git/hooks is read-only
        mask, ro = "/etc/shadow", f"{env.ws}/.git/hooks"
        revealed = f"[ -s {env.ws}/peek/shadow ]"  # the real one has content; /dev/null has none
    peek = env.ws / "peek"
    jail = Jail(env, mode)
    out = jail.sh(f"""
        mkdir -p {peek}
        for ns in -Urm -Ucm -Um; do
          unshare $ns sh -c '
            echo IN_NS
            umount -l {mask} 2>/dev/null && echo UMOUNT
            mount --bind {os.path.dirname(mask)} {peek} 2>/dev/null && {{
              {revealed} 2>/dev/null && echo REVEALED
              umount {peek}; }}
            mount -o remount,bind,rw {ro} 2>/dev/null && echo REMOUNT_RW
            touch {ro}/planted 2>/dev/null && echo WROTE_RO
            true' 2>/dev/null
        done
        echo end
    """)
    assert [w for w in out.split() if w != "IN_NS"] == ["end"], out
    assert ("IN_NS" in out) == (mode == "compatibility"), out
    assert not Path(ro, "planted").exists()
    if mode == "compatibility":
        assert env.tmux("ls", "-F", "#{session_name}").split() == ["j"]
    env.unchanged()


# -- namespaces, mounts, masks ---------------------------------------------------------------

BWRAP_DEV = {"core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty",
             "urandom", "zero", "console", "mqueue"}


@pytest.mark.parametrize("mode", ALL)
def test_namespaces_are_the_jails_own(world, mode):
    """User, PID, IPC, UTS, cgroup and mount namespaces differ from the host's (network is shared
    by design), and /dev is bubblewrap's minimal one, without the host's disks and consoles."""
    env = world
    host = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in ("user", "pid", "ipc", "uts", "cgroup", "mnt")}
    jail = Jail(env, mode)
    out = jail.sh(f"""
        for ns in {' '.join(host)}; do echo "$ns $(readlink /proc/self/ns/$ns)"; done
        echo "dev $(ls -A /dev | tr '\\n' ' ')"
    """)
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    shared = [ns for ns in host if lines.get(ns) == host[ns]]
    assert not shared, f"namespaces shared with the host: {shared}"
    extra = set(lines["dev"].split()) - BWRAP_DEV
    assert not extra, f"host devices inside the jail: {sorted(extra)}"
    env.unchanged()


@pytest.mark.parametrize("mode", STRICT)
def test_jail_dies_with_its_pane_process(world, mode):
    """Kill the pane's own process (bubblewrap, outside the jail's PID namespace) and the whole
    jail goes with it: nothing inside keeps running unwatched, and neither does the session's
    proxy outside (strict modes are proxied by default)."""
    env = world
    naps = unique_naps(1)
    jail = Jail(env, mode)
    assert jail.info["network"] == "proxy"
    jail.sh(f"setsid sh -c 'sleep {naps[0]}' </dev/null >/dev/null 2>&1 & echo started")
    assert wait_until(lambda: len(running(naps)) == 1)
    pane_pid = int(env.tmux("display-message", "-p", "-t", jail.info["tmux_pane"], "#{pane_pid}").strip())
    assert Path(f"/proc/{pane_pid}/comm").read_text().strip() == "bwrap"
    helpers = _proxy(pane_pid)
    assert len(helpers) == 1, helpers
    os.kill(pane_pid, 9)
    assert wait_until(lambda: not running(naps)), "the jail outlived its pane's process"
    assert wait_until(lambda: not [p for p in helpers if _running(p)]), "the proxy outlived the pane"


def _running(pid: int) -> bool:
    """Alive and not a zombie (a reaped-late child of a dead parent is gone for our purpose)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1] not in "ZX"
    except (OSError, IndexError):
        return False


def _proxy(pane_pid: int) -> list[int]:
    """The session's proxy (the launcher's code, outside the jail)."""
    from conftest import descendants

    out = []
    for pid in descendants(pane_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"tmuxjail.pane.launch" in a for a in argv):
            out.append(pid)
    return out


@pytest.mark.parametrize("mode", STRICT)
def test_system_paths_are_read_only_mounts(world, mode):
    """/usr, /etc, /opt (and /bin, /lib... wherever they are real directories) are read-only
    mounts: checked by mount flags, so it holds as root and as a user alike (a user could not
    write there anyway; root could)."""
    env = world
    jail = Jail(env, mode)
    out = jail.sh("""
        python3 - <<'PY'
        import os
        for p in ("/usr", "/usr/bin", "/usr/lib", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib64"):
            if os.path.exists(p) and not os.statvfs(p).f_flag & os.ST_RDONLY:
                print("WRITABLE_MOUNT", p)
        PY
        echo end
    """)
    assert out.split() == ["end"], out
    env.unchanged()


@pytest.mark.parametrize("mode", STRICT)
def test_cli_install_root_is_read_only(world, mode):
    """A CLI installed outside /usr (here Cursor's stand-in, whose install root is its directory)
    is bound read-only: the agent cannot rewrite the program that runs it."""
    env = world
    planted = env.bin / "planted"
    env.run("approve", "cursor", "--yes", check=True)
    env.json("start", "cursor", "--mode", mode, "--workspace", str(env.ws), "--name", "c", "--detach",
             "--", "--outside", str(planted))
    report = env.report("cursor-agent")
    assert report["write-outside"] == "denied", report
    assert not planted.exists()


@pytest.mark.parametrize("mode", STRICT)
def test_etc_secrets_are_masked(world, mode):
    """/etc/shadow and the other secret files in /etc are /dev/null inside (root in the jail is
    host root on files); the device shows also to a user, who could not read them anyway."""
    from tmuxjail.host import ETC_SECRETS

    env = world
    present = [p for p in ETC_SECRETS if os.path.isfile(p)]
    if not present:
        pytest.skip("no /etc secret file on this host")
    jail = Jail(env, mode)
    out = jail.sh("".join(f"[ -c {p} ] && [ ! -s {p} ] && echo masked\n" for p in present) + "echo end\n")
    assert out.split() == ["masked"] * len(present) + ["end"], out


class DashSEnv(Env):
    """An Env whose tmux server is given by socket path (-S), anywhere: tmuxjail must find and
    hide that socket too."""

    def __init__(self, root: Path, sock: Path):
        super().__init__(root)
        self.sock = str(sock)

    def run(self, *args, check=False, cwd=None, env_extra=None, timeout=60):
        proc = subprocess.run([sys.executable, "-P", "-m", "tmuxjail", "-S", self.sock, *args],
                              cwd=cwd or self.ws, env=self.environ(PWD=str(cwd or self.ws), **(env_extra or {})), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"tmuxjail {args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def tmux(self, *args, check=True) -> str:
        proc = subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, env=self.environ())
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {args}: {proc.stderr}")
        return proc.stdout

    def kill(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


@pytest.mark.parametrize("mode", ALL)
def test_dash_s_socket_inside_the_workspace_is_masked(tmp_path, mode):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    env = DashSEnv(tmp_path, tmp_path / "ws" / ".tmux.sock")
    try:
        furnish(env)
        jail = Jail(env, mode)  # the server's first session: no socket yet when the argv is built
        out = jail.sh(f"""
            [ -S {env.sock} ] && echo IS_SOCKET
            python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{env.sock}'); print('CONNECT')" 2>/dev/null
            tmux -S {env.sock} new-window 'touch {env.sentinel}.tmux' 2>/dev/null && echo NEWWIN
            echo end
        """)
        assert out.split() == ["end"], out
        assert not Path(f"{env.sentinel}.tmux").exists()
        env.unchanged()
    finally:
        env.kill()
        Path(env.sock).unlink(missing_ok=True)  # tmux leaves it; another test's scan would see it


def test_tmux_tmpdir_sockets_are_hidden(tmp_path):
    """Another tmux server of the same user under $TMUX_TMPDIR (not the one tmuxjail drives),
    started after the jail, is out of reach of a compatibility jail, which otherwise sees the
    whole host."""
    if (why := have_jail()) is not None:
        pytest.skip(why)
    env = DashSEnv(tmp_path, tmp_path / "driven.sock")
    tmpdir = tmp_path / "tt"
    tmpdir.mkdir()
    env.vars["TMUX_TMPDIR"] = str(tmpdir)
    victim = ["tmux", "-L", "victim"]
    sock = tmpdir / f"tmux-{os.getuid()}" / "victim"
    try:
        furnish(env)
        jail = Jail(env, "compatibility")
        subprocess.run([*victim, "new-session", "-d", "sleep 600"], env=env.environ(), check=True)
        assert sock.is_socket()
        out = jail.sh(f"""
            find {tmpdir} -type s 2>/dev/null | grep -q . && echo SEEN
            python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('CONNECT')" 2>/dev/null
            echo end
        """)
        assert out.split() == ["end"], out
    finally:
        subprocess.run([*victim, "kill-server"], env=env.environ(), capture_output=True)
        env.kill()
        Path(env.sock).unlink(missing_ok=True)
        sock.unlink(missing_ok=True)


def test_bwrap_planted_on_path_never_runs(world):
    """A bwrap earlier on PATH (a workspace's bin/, a tool's shim) is never the one that runs."""
    env = world
    marker = env.outside / "planted-bwrap-ran"
    fake = env.bin / "bwrap"
    fake.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\nexec /usr/bin/bwrap \"$@\"\n")
    fake.chmod(0o755)
    dry = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--dry-run")
    assert dry["sandbox_argv"][0] in ("/usr/bin/bwrap", "/bin/bwrap"), dry["sandbox_argv"][0]
    jail = Jail(env, "isolated")
    assert jail.sh("echo inside").split() == ["inside"]
    assert not marker.exists()
