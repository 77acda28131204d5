"""Pure pieces: policy resolution, fingerprints, reason codes, argv building, parsing."""

from __future__ import annotations

import os
import struct
import time

import pytest

from tmuxjail import config, identity, policy, profiles
from tmuxjail.adapters import get as adapter
from tmuxjail.effective import ExecutableIdentity
from tmuxjail.errors import NotApproved, UsageError
from tmuxjail.model import Mode
from tmuxjail.sandbox import HostLayout, seccomp
from tmuxjail.sandbox.bwrap import Bwrap

HOME = "/home/u"


USER_LIMITS = {"nproc": 4096, "nofile": 20000, "sigpending": 1000, "msgqueue": 819200, "memlock": 8 << 20,
               "file_max": 2_000_000, "nr_open": 1 << 20, "threads_max": 100000, "pty_max": 4096,
               "pty_reserve": 1024,
               "user": {"max_inotify_instances": 128, "max_inotify_watches": 8192, "max_user_namespaces": 10}}


def facts(**kw):
    base = dict(
        home=HOME, uid=1000, user="u", login_shell="/bin/bash",
        own_dirs=(f"{HOME}/.config/tmuxjail", f"{HOME}/.local/state/tmuxjail", f"{HOME}/.local/share/tmuxjail"),
        config_dir=f"{HOME}/.config/tmuxjail", private_home=f"{HOME}/.local/share/tmuxjail/homes/codex/default",
        backend="bwrap",
        executable=identity.Resolved(ExecutableIdentity(path="/opt/codex/codex", sha256="sha256:" + "a" * 64),
                                     ["/opt/codex/codex"], ("/opt/codex",)),
        allowed_modes=("compatibility", "isolated", "verified"),
    )
    base.update(kw)
    return policy.Facts(**base)


def resolve(mode="isolated", ws=(f"{HOME}/src/app",), caps=(), provider="codex", **kw):
    req = policy.Request(provider=provider, mode=Mode(mode), workspaces=tuple(ws), capabilities=tuple(caps))
    return policy.resolve(req, profiles.load(provider), adapter(provider), facts(**kw)).to_data()


def test_fingerprint_is_stable_and_canonical():
    a, b = resolve(), resolve()
    assert policy.fingerprint(a) == policy.fingerprint(b)
    assert policy.fingerprint(a).startswith("sha256:") and len(policy.fingerprint(a)) == 71


@pytest.mark.parametrize("change,code", [
    (dict(mode="verified"), "mode"),
    (dict(ws=(f"{HOME}/src/other",)), "workspace"),
    (dict(executable=identity.Resolved(ExecutableIdentity(path="/opt/codex/codex", sha256="sha256:" + "b" * 64),
                                       ["/opt/codex/codex"], ("/opt/codex",))), "executable"),
    (dict(private_home=f"{HOME}/.local/share/tmuxjail/homes/codex/work"), "home"),
    (dict(backend="seatbelt"), "backend"),
    (dict(limits={"nproc": 64}), "limits"),
    (dict(user_limits={**USER_LIMITS, "nproc": 400}), "limits"),  # the user's own limit changed
])
def test_every_change_moves_the_fingerprint_and_names_its_reason(change, code):
    old = resolve()
    new = resolve(**change)
    assert policy.fingerprint(old) != policy.fingerprint(new)
    assert code in policy.diff(old, new)


def test_profile_change_is_reason_profile():
    old = resolve()
    new = dict(old, profile_hash="sha256:other")
    assert policy.diff(old, new) == ["profile"]


def test_strict_env_is_an_allowlist_without_injection_or_tmux():
    pol = resolve()
    assert not pol["env_inherit"]
    names = set(pol["env_names"])
    assert "OPENAI_API_KEY" in names and "TERM" in names
    # (No shipped profile declares an injection or TMUX* name, so the filter is pinned by
    # test_declared_injection_and_tmux_names_never_pass, with a profile that does.)
    env = dict(pol["env_set"])
    assert env["CODEX_HOME"] == f"{HOME}/.codex" and env["HOME"] == HOME
    assert ":" + HOME not in env["PATH"]


def test_compatibility_inherits_env_and_protects_config():
    pol = resolve("compatibility")
    assert pol["env_inherit"] and pol["private_home"] is None
    assert f"{HOME}/.config/tmuxjail" in pol["protected"]
    assert f"{HOME}/.local/state/tmuxjail" in pol["hidden"]


@pytest.mark.parametrize("ws,why", [("/", "cannot be /"), (HOME, "contains your home"),
                                    ("/home", "contains your home")])
@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_strict_workspace_cannot_contain_home(ws, why, mode):
    # The message names the check: the own-directory overlap check would raise first otherwise
    # (tmuxjail's dirs live in the home), and the test could not tell the two apart.
    own = ("/var/lib/tj/config", "/var/lib/tj/state", "/var/lib/tj/data")
    with pytest.raises(UsageError, match=why):
        resolve(mode, ws=(ws,), own_dirs=own, config_dir=own[0])
    resolve("compatibility", ws=(HOME,), own_dirs=own, config_dir=own[0])  # compatibility: the host anyway


def test_declared_injection_and_tmux_names_never_pass():
    """Names that load code (LD_PRELOAD, NODE_OPTIONS...) or point back at tmux never reach a
    strict jail, even when a profile declares them: a profile is data, the filter is the guard."""
    prof = profiles.load("codex")
    cli = prof.capabilities["codex.cli"]
    bad = ("LD_PRELOAD", "NODE_OPTIONS", "PYTHONPATH", "TMUX", "TMUX_PANE")
    prof = prof.model_copy(update={"capabilities": {**prof.capabilities,
                                                    "codex.cli": cli.model_copy(update={"env": (*cli.env, *bad)})}})
    for mode in ("isolated", "verified"):
        req = policy.Request(provider="codex", mode=Mode(mode), workspaces=(f"{HOME}/src/app",))
        names = set(policy.resolve(req, prof, adapter("codex"), facts()).env_names)
        assert "OPENAI_API_KEY" in names  # the declared, harmless names do pass
        assert not names & set(bad), names & set(bad)


def test_workspace_cannot_overlap_tmuxjail_dirs():
    with pytest.raises(UsageError, match="overlaps"):
        resolve(ws=(f"{HOME}/.local/share/tmuxjail/homes",))
    for mode in ("compatibility", "isolated", "verified"):
        with pytest.raises(UsageError, match="overlaps"):
            resolve(mode, ws=(f"{HOME}/.local/share/tmuxjail/homes",))


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_strict_workspace_never_contains_tmuxjail_dirs(mode):
    with pytest.raises(UsageError, match="overlaps") as exc:
        resolve(mode, ws=(f"{HOME}/.local",))
    assert "--mode compatibility" in exc.value.hint


def test_compatibility_may_run_from_the_home_and_still_hides_state():
    pol = resolve("compatibility", ws=(HOME,))  # `cd ~ && tmuxjail start shell` (issue 12.8)
    assert f"{HOME}/.local/state/tmuxjail" in pol["hidden"] and f"{HOME}/.config/tmuxjail" in pol["protected"]


def test_mode_not_allowed_is_not_approved():
    with pytest.raises(NotApproved):
        resolve(allowed_modes=("isolated",), mode="verified")


def test_verified_binds_baseline_paths_and_refuses_symlink_escape():
    pol = resolve("verified")
    assert pol["host_write"] == (f"{HOME}/.codex",) or pol["host_write"] == [f"{HOME}/.codex"]
    with pytest.raises(UsageError, match="resolves to"):
        resolve("verified", realpaths={f"{HOME}/.codex": "/etc"})
    with pytest.raises(UsageError, match="outside"):
        resolve("verified", realpaths={f"{HOME}/.codex": HOME})


def test_git_metadata_guarded_in_strict_modes():
    ws = f"{HOME}/src/app"
    found = (f"{ws}/.git", f"{ws}/vendor/lib/.git", f"{ws}/.git/modules/lib", "/elsewhere/.git")
    for mode in ("isolated", "verified"):
        pol = resolve(mode, git_paths=found)
        assert pol["protected"] == [f"{ws}/.git", f"{ws}/.git/modules/lib", f"{ws}/vendor/lib/.git"]
    for mode in ("isolated", "verified"):  # the one capability isolated mode takes
        assert resolve(mode, git_paths=found, caps=("git-metadata-write",))["protected"] == []
    assert f"{ws}/.git" not in resolve("compatibility", git_paths=found)["protected"]
    assert resolve(git_paths=found) != resolve(git_paths=found[:1])  # the set is fingerprinted


def test_bwrap_binds_git_guards_onto_themselves_and_pins_the_dirs_above():
    ws = f"{HOME}/src/app"
    pol = resolve(git_paths=(f"{ws}/.git", f"{ws}/.git/worktrees/w", f"{ws}/a/b/.git", f"{ws}/wt/.git"))
    argv = Bwrap().wrap(pol, ["codex"], LAYOUT)
    pairs = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1) if argv[i + 1].startswith(ws)]
    assert pairs.index(("--bind", ws)) < pairs.index(("--bind", f"{ws}/a")) < pairs.index(("--bind", f"{ws}/a/b"))
    for g in (f"{ws}/.git", f"{ws}/.git/worktrees/w", f"{ws}/a/b/.git", f"{ws}/wt/.git"):
        assert ("--ro-bind", g) in pairs and ("--ro-bind-try", g) not in pairs
        assert pairs.index(("--ro-bind", g)) > pairs.index(("--bind", f"{ws}/a/b"))
    # Nothing inside a guard is bound writable again (.git/worktrees stays read-only).
    assert ("--bind", f"{ws}/.git/worktrees") not in pairs and ("--bind", f"{ws}/.git") not in pairs
    assert ("--bind", f"{ws}/wt") in pairs


def test_capabilities_only_in_verified_and_known():
    with pytest.raises(UsageError):
        resolve(caps=("aws",))
    with pytest.raises(UsageError, match="unknown capability"):
        resolve("verified", caps=("nope",))


LAYOUT = HostLayout(top={"/bin": "usr/bin", "/lib": "usr/lib"}, tmux_dirs=("/tmp/tmux-1000",),
                    tmux_files=(f"{HOME}/src/app/tmux.sock",), etc_secrets=("/etc/shadow",))


def test_bwrap_isolated_argv():
    pol = resolve()
    argv = Bwrap().wrap(pol, ["/opt/codex/codex"], LAYOUT)
    s = " ".join(argv)
    for flag in ("--unshare-user", "--unshare-pid", "--die-with-parent", "--cap-drop ALL", "--tmpfs /tmp",
                 "--proc /proc", f"--bind {pol['private_home']} {HOME}", f"--bind {HOME}/src/app {HOME}/src/app",
                 "--symlink usr/bin /bin", "--ro-bind /dev/null /etc/shadow", f"--chdir {HOME}/src/app"):
        assert flag in s, flag
    # the home mount comes before binds beneath it; the socket mask comes after the workspace bind
    assert s.index(f"{HOME} --bind") < s.index(f"--bind {HOME}/src/app")
    assert s.index(f"--ro-bind /dev/null {HOME}/src/app/tmux.sock") > s.index(f"--bind {HOME}/src/app")
    assert "--bind / /" not in s and "/tmp/tmux-1000" not in s  # not mounted at all
    assert s.index("--ro-bind /proc/sys /proc/sys") > s.index("--proc /proc")  # host sysctls stay read-only
    assert argv[-2:] == ["--", "/opt/codex/codex"]


def test_bwrap_compatibility_argv_hides_state_and_tmux():
    pol = resolve("compatibility")
    s = " ".join(Bwrap().wrap(pol, ["x"], LAYOUT))
    assert "--bind / /" in s and "--unshare-pid" in s
    assert s.index("--ro-bind /proc/sys /proc/sys") > s.index("--proc /proc") > s.index("--ro-bind-try /sys /sys")
    assert f"--tmpfs {HOME}/.local/state/tmuxjail" in s and f"--tmpfs {HOME}/.local/share/tmuxjail" in s
    assert f"--ro-bind-try {HOME}/.config/tmuxjail {HOME}/.config/tmuxjail" in s
    assert "--tmpfs /tmp/tmux-1000" in s and f"--ro-bind /dev/null {HOME}/src/app/tmux.sock" in s


def test_bwrap_top_dirs_are_read_only():
    """Where /bin, /lib... are real directories (no merged /usr), they are bound read-only."""
    layout = HostLayout(top={"/bin": "dir", "/lib": "dir", "/lib64": "usr/lib64"})
    for mode in ("isolated", "verified"):
        s = " ".join(Bwrap().wrap(resolve(mode), ["x"], layout))
        assert "--ro-bind /bin /bin" in s and "--ro-bind /lib /lib" in s and "--symlink usr/lib64 /lib64" in s
        assert "--bind /bin" not in s and "--bind /lib " not in s


def test_bwrap_verified_home_is_tmpfs_with_baseline_bound():
    s = " ".join(Bwrap().wrap(resolve("verified"), ["x"], LAYOUT))
    assert f"--tmpfs {HOME}" in s and f"--bind-try {HOME}/.codex {HOME}/.codex" in s


def test_seccomp_program_shape():
    prog = seccomp.program("x86_64")
    ins = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert ins[-1][3] == 0x00050000 | 1 and ins[-2][3] == 0x7FFF0000
    assert {seccomp.TIOCSTI, seccomp.TIOCLINUX, seccomp.SUID_SGID, 298} <= {k for *_, k in ins}
    assert len(seccomp.program("x86_64", strict=False)) < len(prog)
    with pytest.raises(KeyError):
        seccomp.program("mips")


def _run_bpf(prog: bytes, nr: int, arch: int, *args: int) -> int:
    """A classic-BPF interpreter for the instructions the filter uses, over a seccomp_data."""
    args = (*args, *[0] * (6 - len(args)))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    ins = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        pc += 1
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code in (0x15, 0x35, 0x45):
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


def _nr(machine, name):
    return seccomp.SYSCALLS[name][0 if machine == "x86_64" else 1]


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_seccomp_program_semantics(machine):
    arch, x32 = seccomp.ARCHES[machine]
    nr = lambda name: _nr(machine, name)  # noqa: E731
    prog, allow, eperm, enosys = seccomp.program(machine), 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    assert _run_bpf(prog, 0, arch) == allow  # read / io_setup
    assert _run_bpf(prog, 63, arch) == allow  # read (aarch64) / uname (x86_64)
    ioctl = nr("ioctl")
    assert _run_bpf(prog, ioctl, arch, 0, 0x5401) == allow  # TCGETS
    assert _run_bpf(prog, ioctl, arch, 0, 0x540F) == allow  # TIOCGPGRP: job control keeps working
    for req in (seccomp.TIOCSTI, seccomp.TIOCLINUX, (1 << 32) | seccomp.TIOCSTI):  # high bits ignored
        assert _run_bpf(prog, ioctl, arch, 0, req) == eperm
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        assert _run_bpf(prog, nr(name), arch) == eperm
    assert _run_bpf(prog, 424, arch) == allow and _run_bpf(prog, 428, arch) == allow
    # setuid/setgid: the mode at the right argument of each call
    for name, at in (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2), ("creat", 1),
                     ("mknod", 1), ("mknodat", 2)):
        if nr(name) is None:
            continue
        for mode, want in ((0o755, allow), (0o4755, eperm), (0o2755, eperm), (0o1777, allow)):
            args = [0] * 6
            args[at] = mode
            assert _run_bpf(prog, nr(name), arch, *args) == want, (name, oct(mode))
    for name, at in (("open", 1), ("openat", 2)):
        if nr(name) is None:
            continue
        for flags, mode, want in ((0o101, 0o4755, eperm), (0o20200000, 0o2755, eperm), (0o101, 0o644, allow),
                                  (0o0, 0o4755, allow)):  # without O_CREAT the mode is not used
            args = [0] * 6
            args[at], args[at + 1] = flags, mode
            assert _run_bpf(prog, nr(name), arch, *args) == want, (name, oct(flags), oct(mode))
    assert _run_bpf(prog, nr("openat2"), arch) == enosys
    for name in ("add_key", "request_key", "keyctl"):
        assert _run_bpf(prog, nr(name), arch) == enosys
    # strict only: perf, new user namespaces
    loose = seccomp.program(machine, strict=False)
    assert _run_bpf(prog, nr("perf_event_open"), arch) == eperm
    assert _run_bpf(loose, nr("perf_event_open"), arch) == allow
    assert _run_bpf(prog, 0, 0x40000003) == eperm  # a foreign architecture (i386)
    if x32:
        assert _run_bpf(prog, seccomp.X32_BIT | 16, arch, 0, seccomp.TIOCSTI) == eperm


def test_limits_have_defaults_are_overridable_and_recorded():
    from tmuxjail.effective import Limits

    pol = resolve()
    assert pol["limits"] == Limits().to_data() and pol["limits"]["memory"] == "none"
    c = config.parse('[limits]\ntmp = "16M"\nrun = 2097152\nhome = "1G"\nnproc = 64\n', "c.toml")
    assert c.limits == {"tmp_bytes": 16 << 20, "run_bytes": 2 << 20, "home_bytes": 1 << 30, "nproc": 64}
    assert resolve(limits=c.limits)["limits"]["tmp_bytes"] == 16 << 20
    argv = " ".join(Bwrap().wrap(resolve(limits=c.limits), ["x"], LAYOUT))
    assert f"--size {16 << 20} --tmpfs /tmp" in argv and "--size 2097152 --tmpfs /run" in argv
    assert "/usr/bin/prlimit --nofile=65536 --nproc=64 -- x" in argv and "--disable-userns" in argv
    for bad in ('[limits]\ntmp = "16X"', "[limits]\nnproc = 8", '[limits]\nnproc = "64"', "[limits]\nswap = 1",
                "limits = 3", "[limits]\ntmp = true"):
        with pytest.raises(UsageError) as e:
            config.parse(bad, "c.toml")
        assert e.value.message.startswith("c.toml: limits") and "\n" not in e.value.message


def test_config_parse_and_narrowing():
    c = config.parse('allowed_modes = ["isolated", "verified"]\ndefault_mode = "isolated"\n', "c.toml",
                     env_allowed="verified,compatibility")
    assert c.allowed_modes == ("verified",)
    for bad in ('allowed_modes = ["root"]', "nope = 1", "allowed_modes = [", 'providers.codex.executable = "rel"'):
        with pytest.raises(UsageError) as e:
            config.parse(bad, "c.toml")
        assert "c.toml" in e.value.message or "TMUXJAIL" in e.value.message
        assert "\n" not in e.value.message


def test_profile_errors_name_file_and_key():
    shared = profiles.shared_capabilities()
    with pytest.raises(UsageError, match=r"x.toml: profile_version"):
        profiles.parse_profile("x.toml", b'provider="x"\nprofile_version=""\ndisplay_name="X"\nexecutables=["x"]\n', shared)
    with pytest.raises(UsageError, match=r"x.toml: baseline: unknown capability"):
        profiles.parse_profile("x.toml", b'provider="x"\nprofile_version="1"\ndisplay_name="X"\nexecutables=["x"]\nbaseline=["zz"]\n', shared)
    with pytest.raises(UsageError, match="not valid TOML"):
        profiles.parse_profile("x.toml", b"provider = [", shared)


def test_all_shipped_profiles_load():
    assert set(profiles.available()) >= {"codex", "claude-code", "cursor", "pi", "shell"}
    for name in profiles.available():
        p = profiles.load(name)
        assert p.baseline and p.hash.startswith("sha256:")


def test_adapter_argv():
    # No id known: a new conversation, never the folder's latest (another session's, issue 28.2).
    assert adapter("codex").resume_argv(["codex"], None, []) == ["codex", "--no-daemon"]
    uid = "01a23623-9cab-7733-85ba-8cdc4e0d4bc0"
    assert adapter("codex").resume_argv(["codex"], uid, []) == ["codex", "--no-daemon", "resume", uid]
    assert adapter("codex").start_argv(["codex"], None, ["-m", "x"]) == ["codex", "--no-daemon", "-m", "x"]
    cc = adapter("claude-code")
    sid = cc.new_native_id()
    assert cc.start_argv(["claude"], sid, []) == ["claude", "--session-id", sid]
    assert cc.resume_argv(["claude"], sid, []) == ["claude", "--resume", sid]
    assert adapter("cursor").resume_argv(["a"], "chat1", []) == ["a", "--resume", "chat1"]
    assert adapter("pi").resume_argv(["node", "cli.js"], None, []) == ["node", "cli.js"]
    assert adapter("pi").resume_argv(["pi"], uid, [], "/h", "/w/a:b") == [
        "pi", "--session", f"/h/.pi/agent/sessions/--w-a-b--/tmuxjail-{uid}.jsonl"]
    assert adapter("cursor").resume_argv(["a"], None, []) == ["a"]
    assert adapter("claude-code").resume_argv(["c"], None, []) == ["c"]
    assert cc.env(HOME, "isolated", 0)["IS_SANDBOX"] == "1"
    assert adapter("pi").env(HOME, "isolated", 1000) == {"PI_CODING_AGENT_DIR": f"{HOME}/.pi/agent"}


def test_codex_npm_launcher_resolves_to_native_binary(tmp_path):
    pkg = tmp_path / "lib/node_modules/@openai/codex"
    (pkg / "bin").mkdir(parents=True)
    launcher = pkg / "bin/codex.js"
    launcher.write_text("#!/usr/bin/env node\n")
    native = tmp_path / "lib/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    native.parent.mkdir(parents=True)
    native.write_bytes(b"\x7fELF native")
    native.chmod(0o755)
    (native.parent.parent / "codex-package.json").write_text('{"version": "0.171.0"}')
    link = tmp_path / "bin/codex"
    link.parent.mkdir()
    link.symlink_to(launcher)
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("layout written for x86_64")
    r = identity.resolve(adapter("codex"), link, "/usr/bin:/bin", None)
    assert r.identity.path == str(native) and r.identity.version == "0.171.0"
    assert r.argv == [str(native)]


class MemCache:
    def __init__(self):
        self.d, self.hashed = {}, 0

    def get_digest(self, path, key):
        return self.d.get((path, key))

    def put_digest(self, path, key, digest):
        self.hashed += 1
        self.d[(path, key)] = digest


def test_digest_cache_hits_and_sees_in_place_replacement(tmp_path):
    f = tmp_path / "bin"
    f.write_bytes(b"A" * 4096)
    cache = MemCache()
    d1 = identity.sha256_file(f, cache)
    assert identity.sha256_file(f, cache) == d1 and cache.hashed == 1
    st = f.stat()
    time.sleep(0.01)
    with open(f, "r+b") as fh:  # same size ...
        fh.write(b"B")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... same mtime: only ctime moved
    d2 = identity.sha256_file(f, cache)
    assert d2 != d1 and cache.hashed == 2


# -- a jail's share of the user's per-user limits (budget.py) ---------------------------------

def test_the_jail_gets_its_share_of_each_user_limit():
    lim = resolve(user_limits=USER_LIMITS)["limits"]
    assert lim["share"] == 0.25
    assert lim["nproc"] == 1024  # the cap, inside 0.25 x 4096
    assert lim["nofile"] == 500_000 // 1024  # nproc x nofile within 0.25 of fs.file-max
    assert (lim["sigpending"], lim["msgqueue"], lim["memlock"]) == (250, 204800, 2 << 20)
    assert lim["ptys"] == 768  # 0.25 of the pool a non-initial devpts may use (max - reserve)
    assert dict(lim["user"]) == {"max_inotify_instances": 32, "max_inotify_watches": 2048,
                                 "max_user_namespaces": 4}  # bwrap's own namespaces need a few
    low = resolve(user_limits={**USER_LIMITS, "nproc": 200, "sigpending": -1})["limits"]
    assert low["nproc"] == 50 and low["sigpending"] == -1  # unlimited stays unlimited
    half = resolve(user_limits=USER_LIMITS, limits=config.parse("[limits]\nshare = 0.5\nnproc = 4000\n", "c").limits)
    assert half["limits"]["nproc"] == 2048 and dict(half["limits"]["user"])["max_inotify_instances"] == 64
    argv = " ".join(Bwrap().wrap(resolve(user_limits=USER_LIMITS), ["x"], LAYOUT))
    assert "/usr/bin/prlimit --nofile=488 --sigpending=250 --msgqueue=204800 --memlock=2097152 --nproc=1024 -- x" in argv
    assert "--dev /dev --dev-bind /dev/pts /dev/pts" in argv  # the launcher's devpts with max=


def test_a_config_asking_more_than_the_user_has_is_a_one_line_error():
    for text in ("[limits]\nnproc = 5000\n", "[limits]\nnofile = 30000\n"):
        with pytest.raises(UsageError) as e:
            resolve(user_limits=USER_LIMITS, limits=config.parse(text, "c.toml").limits)
        assert "is more than your" in e.value.message and "\n" not in e.value.message
    for bad in ("[limits]\nshare = 1", "[limits]\nshare = 0", "[limits]\nshare = -0.5", "[limits]\nshare = 2",
                '[limits]\nshare = "1/4"', "[limits]\nshare = true", "[limits]\nnproc = -1",
                "[limits]\nnofile = -5", "[limits]\ntmp = -1"):
        with pytest.raises(UsageError) as e:
            config.parse(bad, "c.toml")
        assert e.value.message.startswith("c.toml: limits.") and "\n" not in e.value.message, bad


def test_every_setup_mount_is_sealed_read_only():
    """bwrap's root tmpfs (unsized, holding the directories bwrap made for mount points) and every
    mask end read-only, after the last step that makes a mount point."""
    makes = {"--bind", "--ro-bind", "--bind-try", "--ro-bind-try", "--dev-bind", "--tmpfs", "--symlink", "--dir"}
    for mode in ("isolated", "verified", "compatibility"):
        pol = resolve(mode=mode)
        argv = Bwrap().wrap(pol, ["x"], LAYOUT)
        opts = argv[:argv.index("--")]
        last_mount = max(i for i, a in enumerate(opts) if a in makes)
        first_seal = opts.index("--remount-ro", last_mount)
        want = {"/tmp/tmux-1000", *pol["hidden"]} if mode == "compatibility" else {"/"}
        assert want <= {opts[i + 1] for i in range(first_seal, len(opts) - 1) if opts[i] == "--remount-ro"}, opts


def test_a_config_accepting_no_namespace_of_its_own_records_no_such_share():
    """accept_missing_guards = ["jail-namespace-limits"]: the policy says the jail gets no share of
    /proc/sys/user/* nor ptys (so the launcher makes no namespace), and bwrap keeps its devpts."""
    pol = resolve(user_limits=USER_LIMITS, namespace_limits=False)
    assert pol["limits"]["user"] == [] and pol["limits"]["ptys"] == -1 and pol["limits"]["nproc"] == 1024
    assert "--dev-bind" not in Bwrap().wrap(pol, ["x"], LAYOUT)
    assert policy.fingerprint(pol) != policy.fingerprint(resolve(user_limits=USER_LIMITS))


def test_default_mode_must_be_allowed():
    """Issue 28: a default_mode that allowed_modes excludes is an error naming both; unset, the
    default is the first mode the list allows."""
    with pytest.raises(config.ConfigError, match="default_mode 'compatibility' is not in allowed_modes"):
        config.parse('default_mode = "compatibility"\nallowed_modes = ["isolated"]\n', "c.toml")
    assert config.parse('allowed_modes = ["verified", "isolated"]\n', "c.toml").default_mode == "isolated"
