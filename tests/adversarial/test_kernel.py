"""The jail's reach into shared kernel objects and host resources, attacked from inside real jailed
panes: setuid/setgid files minted on the host's disk, the kernel keyrings, tmpfs and process
limits, root-only files under /etc in a root-run jail, nested user namespaces and perf events."""

from __future__ import annotations

import ctypes
import os
import platform
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from test_escapes import ALL, STRICT, Jail

pytestmark = pytest.mark.adversarial
MACHINE = platform.machine()
KEYCTL_NR = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(MACHINE, (248, 250))  # add_key, keyctl


def _limits(env, text: str) -> None:
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(text)


# -- setuid / setgid ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ALL)
def test_setuid_and_setgid_bits_cannot_be_minted(world, mode):
    """A setuid file made in the workspace lives on the host's disk (the jail's own mounts are
    nosuid; the host's are not): run by root, a setuid-root binary for any local user. Every way to
    put the bits on a file is refused; ordinary modes still work."""
    env = world
    jail = Jail(env, mode)
    out = jail.sh("""
        umask 022
        echo x > f; chmod u+s f 2>/dev/null && echo CHMOD_U_S; chmod g+s f 2>/dev/null && echo CHMOD_G_S
        chmod 4755 f 2>/dev/null && echo CHMOD_4755
        mkdir d; chmod g+s d 2>/dev/null && echo CHMOD_DIR_G_S
        python3 - <<'PY'
        import ctypes, os, stat
        libc = ctypes.CDLL(None, use_errno=True)
        def attempt(name, fn):
            try:
                r = fn()
                if r is None or r >= 0:
                    print(name)
            except OSError:
                pass
        attempt("FCHMOD", lambda: os.fchmod(os.open("f", os.O_RDONLY), 0o6755))
        attempt("FCHMODAT", lambda: os.chmod("f", 0o2755))
        attempt("FCHMODAT2", lambda: libc.syscall(452, -100, b"f", 0o4755, 0))
        attempt("OPEN_CREAT", lambda: os.close(os.open("g", os.O_CREAT | os.O_WRONLY, 0o4755)))
        attempt("CREAT", lambda: libc.creat(b"h", 0o4755))
        attempt("MKNOD", lambda: libc.mknod(b"i", stat.S_IFREG | 0o6755, 0))
        attempt("TMPFILE", lambda: os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o2755)))
        os.chmod("f", 0o755)  # ordinary modes still work
        print("PLAIN_OK" if os.stat("f").st_mode & 0o7777 == 0o755 else "PLAIN_FAIL")
        os.close(os.open("j", os.O_CREAT | os.O_WRONLY, 0o644))
        print("CREATE_OK")
        PY
        echo end
    """)
    assert out.split() == ["PLAIN_OK", "CREATE_OK", "end"], out
    for p in jail.ws.rglob("*"):
        st = p.lstat()
        assert not (stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID)), (p, oct(st.st_mode))
    env.unchanged()


# -- keyrings -------------------------------------------------------------------------------

def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _add_key(desc: bytes, payload: bytes, ring: int) -> int:
    serial = _libc().syscall(KEYCTL_NR[0], b"user", desc, payload, len(payload), ring)
    if serial < 0:
        pytest.skip(f"this kernel refuses add_key ({os.strerror(ctypes.get_errno())})")
    # possessor: all; the owning user: view, read, write, search, link (as many real keys allow)
    _libc().syscall(KEYCTL_NR[1], 5, serial, 0x3F3F0000)  # KEYCTL_SETPERM
    return serial


def _keyring_holds(ring: int, desc: bytes) -> bool:
    # KEYCTL_SEARCH (10) from the host process: did the jail add this key to a host keyring?
    return _libc().syscall(KEYCTL_NR[1], 10, ring, b"user", desc, 0) >= 0


@pytest.mark.parametrize("mode", ALL)
def test_host_keyrings_cannot_be_read_or_written(world, mode):
    """The host session's and user's keyrings hold Kerberos caches, AFS tokens, ecryptfs keys. A
    key planted in each (readable by its owner, the jail's uid) is neither found, read by its
    serial, nor can the jail add keys the host (or the next jail) would see."""
    env = world
    tag = secrets.token_hex(4).encode()
    # This process (and so the tmux server the Jail starts) joins the planted session keyring.
    ses = _add_key(b"tjtest-ses-" + tag, b"SESSION-SECRET", -3)  # KEY_SPEC_SESSION_KEYRING
    usr = _add_key(b"tjtest-usr-" + tag, b"USER-SECRET", -4)  # KEY_SPEC_USER_KEYRING
    try:
        jail = Jail(env, mode)
        out = jail.sh(f"""
            python3 - <<'PY'
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            ADD, REQ, CTL = {KEYCTL_NR[0]}, {KEYCTL_NR[0] + 1}, {KEYCTL_NR[1]}
            buf = ctypes.create_string_buffer(256)
            for name, serial in (("SES", {ses}), ("USR", {usr})):
                if libc.syscall(CTL, 11, serial, buf, 256) > 0:  # KEYCTL_READ by serial
                    print("READ_" + name, buf.value)
            for name, ring in (("SES", -3), ("USR", -4), ("USES", -5)):
                desc = b"tjtest-" + name.lower().encode() + b"-{tag.decode()}"
                if libc.syscall(REQ, b"user", desc, None, 0) > 0:
                    print("FOUND_" + name)
                if libc.syscall(CTL, 10, ring, b"user", b"tjtest-ses-{tag.decode()}", 0) > 0:
                    print("SEARCH_" + name)
                if libc.syscall(ADD, b"user", b"tjtest-planted-{tag.decode()}", b"x", 1, ring) > 0:
                    print("ADDED_" + name)
            PY
            echo end
        """)
        assert out.split() == ["end"], out
        for ring in (-3, -4, -5):
            assert not _keyring_holds(ring, b"tjtest-planted-" + tag)
        env.unchanged()
    finally:
        for serial in (ses, usr):
            _libc().syscall(KEYCTL_NR[1], 21, serial)  # KEYCTL_INVALIDATE


def test_launcher_joins_a_fresh_session_keyring(tmp_path):
    """Besides the filter, the launcher gives the jail its own anonymous session keyring: keys the
    host session holds are not possessed inside (the kernel also uses them on a process's behalf,
    e.g. for network filesystems)."""
    probe = tmp_path / "probe.py"
    probe.write_text(f"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
CTL = {KEYCTL_NR[1]}
libc.syscall(CTL, 1, b"tjtest-host-session")  # the host's session keyring, with a key in it
key = libc.syscall({KEYCTL_NR[0]}, b"user", b"tjtest-possessed", b"secret", 6, -3)
before = libc.syscall(CTL, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID
from tmuxjail.pane.narrow import own_session_keyring
own_session_keyring()
after = libc.syscall(CTL, 0, -3, 0)
found = libc.syscall(CTL, 10, -3, b"user", b"tjtest-possessed", 0)  # KEYCTL_SEARCH
print(before > 0, after > 0, before != after, found < 0)
""")
    out = subprocess.run([sys_executable(), str(probe)], capture_output=True, text=True, timeout=30)
    if "True" not in out.stdout:
        pytest.skip(f"no kernel keyrings here: {out.stdout} {out.stderr}")
    assert out.stdout.split() == ["True", "True", "True", "True"], out


def sys_executable() -> str:
    import sys

    return sys.executable


# -- resource limits ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ALL)
def test_every_tmpfs_is_sized(world, mode):
    """/tmp, /var/tmp, /dev/shm, /run (and verified mode's tmpfs home) are bounded by the
    operator's limits; masks by 1 MiB; /dev itself is read-only. A write past the size fails
    with ENOSPC instead of eating host memory."""
    env = world
    _limits(env, '[limits]\ntmp = "16M"\nrun = "2M"\nhome = "4M"\n')
    jail = Jail(env, mode)
    uid = os.getuid()
    out = jail.sh(f"""
        python3 - <<'PY'
        import os
        MiB = 1 << 20
        for p in ("/tmp", "/var/tmp", "/dev/shm", "/run", os.environ["HOME"], "/tmp/tmux-{uid}", "/dev"):
            try:
                st = os.statvfs(p)
            except OSError:
                continue
            if os.path.ismount(p) and os.path.realpath(p) == p:
                print(p, (st.f_blocks * st.f_frsize + MiB - 1) // MiB)
        PY
        {"head -c 17M /dev/zero > /tmp/big 2>/dev/null && echo TMP_FILLED" if mode != "compatibility" else ""}
        head -c 3M /dev/zero > /dev/shm/big 2>/dev/null || echo SHM_BOUNDED_OK
        touch /dev/planted 2>/dev/null && echo DEV_WRITABLE
        echo end
    """)
    sizes = dict(line.split() for line in out.splitlines() if line.startswith("/"))
    assert "TMP_FILLED" not in out and "DEV_WRITABLE" not in out and out.split()[-1] == "end", out
    assert sizes.get("/dev/shm") == "16", out
    if mode == "compatibility":
        assert sizes.get(f"/tmp/tmux-{uid}") == "1", out  # the mask over the tmux sockets
    else:
        assert sizes.get("/tmp") == "16" and sizes.get("/var/tmp") == "16" and sizes.get("/run") == "2", out
        if mode == "verified":
            assert sizes.get(str(env.home)) == "4", out
    env.unchanged()


@pytest.mark.parametrize("mode", ALL)
def test_process_count_is_limited_per_jail(world, mode):
    """RLIMIT_NPROC is set inside the jail's user namespace, where the kernel counts only the
    jail's own processes: a fork bomb stops at the limit, and the user's processes outside (80
    here) neither count against the jail nor are starved by it. The kernel ignores RLIMIT_NPROC
    for uid 0: a root-run jail is held by a pids cgroup of its own instead."""
    from tmuxjail.sandbox import pids

    if os.getuid() == 0 and pids.hierarchy() is None:
        pytest.skip("root-run, and no pids cgroup controller on this host (README: resource limits)")
    env = world
    _limits(env, "[limits]\nnproc = 64\n")
    outside = [subprocess.Popen(["sleep", "60"]) for _ in range(80)]
    try:
        jail = Jail(env, mode)
        out = jail.sh("""
            python3 - <<'PY'
            import os, time
            kids = []
            for _ in range(200):  # never more, whatever happens: the machine is shared
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(30)
                    os._exit(0)
                kids.append(pid)
            print("forked", len(kids))
            for k in kids:
                os.kill(k, 9)
                os.waitpid(k, 0)
            PY
        """)
        forked = int(out.split()[1])
        assert 20 < forked < 64, out
        probe = subprocess.Popen(["true"])  # the user outside is not starved
        assert probe.wait() == 0
        env.unchanged()
    finally:
        for p in outside:
            p.kill()
            p.wait()


# -- root-only files under /etc -------------------------------------------------------------

@pytest.mark.parametrize("mode", STRICT)
def test_root_run_jail_reads_nothing_an_ordinary_user_cannot(world, mode):
    """uid 0 inside a root-run jail owns /etc: without masks it reads SSH host keys, TLS keys,
    keytabs. Every file others cannot read is /dev/null inside, every directory they cannot
    enter is empty."""
    if os.getuid() != 0:
        pytest.skip("only root can plant a root-only file in /etc (as a user the kernel refuses the read)")
    env = world
    tag = secrets.token_hex(4)
    secret_file = Path(f"/etc/tjtest-secret-{tag}")
    secret_dir = Path(f"/etc/tjtest-dir-{tag}")
    try:
        secret_file.write_text("ROOT-ONLY")
        secret_file.chmod(0o600)
        secret_dir.mkdir(mode=0o700)
        (secret_dir / "key").write_text("ROOT-ONLY")
        readable = Path(f"/etc/tjtest-public-{tag}")
        readable.write_text("PUBLIC\n")
        readable.chmod(0o644)
        jail = Jail(env, mode)
        out = jail.sh(f"""
            cat {secret_file} {secret_dir}/key 2>/dev/null
            ls -A {secret_dir} 2>/dev/null
            cat {readable}
            echo end
        """)
        assert out.split() == ["PUBLIC", "end"], out
        env.unchanged()
    finally:
        secret_file.unlink(missing_ok=True)
        shutil.rmtree(secret_dir, ignore_errors=True)
        Path(f"/etc/tjtest-public-{tag}").unlink(missing_ok=True)


# -- nested user namespaces, perf events ----------------------------------------------------

@pytest.mark.parametrize("mode", STRICT)
def test_no_nested_user_namespace_and_no_perf_events(world, mode):
    """Nested user and network namespaces are the precondition of most netfilter privilege
    escalations; perf_event_open is a large kernel surface. Strict jails refuse both."""
    env = world
    jail = Jail(env, mode)
    out = jail.sh(f"""
        unshare -U true 2>/dev/null && echo UNSHARE_U
        unshare -Ur true 2>/dev/null && echo UNSHARE_UR
        unshare -Un true 2>/dev/null && echo UNSHARE_UN
        python3 - <<'PY'
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x10000000) == 0:
            print("UNSHARE_SYSCALL")
        attr = ctypes.create_string_buffer(128)
        ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 128), 8)  # PERF_TYPE_SOFTWARE, size
        ctypes.memmove(ctypes.byref(attr, 40), (ctypes.c_uint64 * 1)(0b1100000), 8)  # exclude kernel, hv
        fd = libc.syscall({298 if MACHINE == "x86_64" else 241}, attr, 0, -1, -1, 0)
        if fd >= 0:
            print("PERF_EVENT")
        PY
        echo end
    """)
    assert out.split() == ["end"], out
    env.unchanged()
