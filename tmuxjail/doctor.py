"""`tmuxjail doctor`: what works here, what does not, and the exact command that fixes it.
On macOS (hostos.darwin()) the Linux-only checks (bubblewrap, namespaces, seccomp, Landlock,
cgroups, the proxy's pidfds) give way to Seatbelt's: sandbox-exec, the profile of a dry run, and
the keychain note."""

from __future__ import annotations

import os
import platform
import pwd
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from . import budget, config, host, hostos, paths
from .effective import Limits
from .errors import TmuxjailError
from .pane import narrow
from .profiles import executables
from .sandbox import bwrap, landlock, pids, sbpl, seccomp
from .sandbox.seatbelt import KEYCHAIN_CAPABILITY
from .store import FIX, Store
from .tmux import MIN_VERSION, Tmux, parse_version


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _userns_fix() -> str:
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return ("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0  "
                "(or install an AppArmor profile for /usr/bin/bwrap)")
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return "sudo sysctl -w kernel.unprivileged_userns_clone=1"
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return "sudo sysctl -w user.max_user_namespaces=15000"
    return "check that your kernel and container allow user namespaces"


def _cgroup_v2_memory() -> str | None:
    """The cgroup v2 directory of this process when it is ours to write and offers the memory
    controller (a delegated cgroup), else None."""
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        if line.startswith("0::"):
            d = "/sys/fs/cgroup" + line[3:].rstrip("/")
            if "memory" in (_read(d + "/cgroup.controllers") or "").split() and os.access(d, os.W_OK):
                return d
    return None


def namespace_limits() -> tuple[bool, str]:
    """Can the launcher give a jail its own user and mount namespace here, with the share of
    /proc/sys/user/* and a devpts of its own (pane/narrow.py enter_own_namespace)? Tried in a child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                now = Path("/proc/sys/user/max_inotify_instances").read_text().strip()
                narrow.enter_own_namespace([("max_inotify_instances", int(now))], 1)
                msg = "ok"
            except (OSError, ValueError) as exc:
                msg = f"{getattr(exc, 'filename', None) or 'setup'}: {getattr(exc, 'strerror', None) or exc}"
            os.write(w, msg.encode())
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 4096).decode(errors="replace")
    os.close(r)
    os.waitpid(pid, 0)
    if answer == "ok":
        return True, ("the launcher gives each jail a user and mount namespace of its own, with its share "
                      "of /proc/sys/user/* and a devpts with max=")
    return False, f"cannot give a jail its own user and mount namespace ({answer or 'no answer'})"


def limit_checks() -> list[tuple[str, str]]:
    """What bounds a jail's resources here (docs/resources.md): tmpfs sizes, and the jail's share
    of each of this user's per-user kernel limits, computed as a start computes it."""
    mib = 1 << 20
    try:
        cfg = config.load(paths.get().config_file)
        caps = Limits(**cfg.limits)
        have = host.user_limits()
        lim = budget.jail_limits(caps, have, cfg.limits, cfg.source)
    except TmuxjailError as exc:  # the config check says what is wrong with it
        return [("jail share", f"cannot compute: {exc.message}")]
    out = [("tmpfs sizes", f"/tmp, /var/tmp, /dev/shm {lim.tmp_bytes // mib} MiB each, /run {lim.run_bytes // mib} MiB, "
                           f"verified home {lim.home_bytes // mib} MiB; every other mount a jail gets is "
                           "read-only ([limits] in the config)")]

    def of(value: int, user: int) -> str:
        return f"{'unlimited' if value < 0 else value} of your {'unlimited' if user < 0 else user}"

    counts = [f"processes {of(lim.nproc, have['nproc'])}",
              f"open files {lim.nofile} per process (x {lim.nproc} within {lim.share} of fs.file-max "
              f"{have['file_max']})",
              f"ptys {lim.ptys} of the {have['pty_max'] - have['pty_reserve']} a jail's devpts may use",
              *(f"{k} {of(getattr(lim, k), have[k])}" for k in budget.RLIMITS),
              *(f"{name} {value} of your {have['user'][name]}" for name, value in lim.user)]
    out.append(("jail share", f"each jail takes at most {lim.share} of each per-user limit (limits.share): "
                + "; ".join(counts)))
    out.append(("not shared out", f"epoll watches ({_read('/proc/sys/fs/epoll/max_user_watches') or '?'} per user, "
                "fs.epoll.max_user_watches) and pipe buffer pages: no namespace lowers them, so a jail can "
                "use all of them (docs/resources.md)"))
    if os.getuid() == 0:
        found = pids.hierarchy()
        out.append(("process limit", f"{lim.nproc} per root-run jail, in a pids cgroup under {found[0]}/{pids.GROUP} "
                                     "(the kernel does not hold root to RLIMIT_NPROC everywhere)" if found else
                    "none for root-run jails: no pids cgroup controller here, and the kernel ignores "
                    f'RLIMIT_NPROC for uid 0; starts refuse unless accept_missing_guards = ["{pids.GUARD}"]'))
    else:
        out.append(("process limit", f"RLIMIT_NPROC {lim.nproc} per jail, counted in the jail's own user namespace"))
    cg = _cgroup_v2_memory()
    out.append(("memory limit", "none (recorded as memory=none in each policy): "
                + (f"a delegated cgroup v2 exists ({cg}) but tmuxjail does not use it yet" if cg else
                   "no delegated cgroup v2 with the memory controller here (a systemd user session "
                   "with Delegate=yes provides one)")))
    return out


# What stops working while a check fails (doctor prints it with the fix; --json: `breaks`).
BREAKS = {
    "tmux": "every start, resume and key: tmuxjail runs each jail as a tmux pane",
    "bubblewrap": "every start: bubblewrap is the sandbox",
    "user namespaces": "every start: bubblewrap needs an unprivileged user namespace",
    "seccomp filter": "isolated and verified starts (they refuse to run without the filter)",
    "strace": "`tmuxjail discover` only (it traces the jail)",
    "landlock scope": "strict jails can still connect to the host's abstract unix sockets (starts refuse "
                      "unless accept_missing_guards names it)",
    "XDG_RUNTIME_DIR": "CLIs and tools in compatibility jails that keep sockets there (ssh-agent, "
                       "gpg-agent, D-Bus) do not find them",
    "home": "every command that keeps state (all but doctor, profiles, completion)",
    "tmux socket dir": "every start: tmux cannot create its server socket",
    "config": "every start and resume: a config that does not parse refuses them",
    "egress proxy": "isolated and verified starts with network proxy (their default)",
    "store": "every command that reads or records sessions",
    "install": "nothing today; anything you run can change the code every start runs outside the jail",
    "tmux clipboard": "nothing stops working, but a jailed pane can read your latest paste buffer (OSC 52 query)",
    "tmuxjail on the tmux server's PATH": "the keys of tmux.conf.example (prefix J s, r, l, S, p, x) "
                                          "say `returned 127`",
    "home writable": "every start: private homes, specs and the store live below HOME",
    "state directory": "every command that records sessions (the store, launch specs, logs)",
    "data directory": "isolated starts (their private homes live there)",
    "config directory": "every start and resume: the config cannot be read",
    "CLI on the tmux server's PATH": "the start menu (prefix J s) greys this CLI out; `tmuxjail start` from a shell works",
    "sandbox-exec": "every start on macOS: sandbox-exec is the sandbox",
    "seatbelt profile": "every start on macOS in the modes named: sandbox-exec refuses a profile it cannot read",
}

# The dry runs whose Seatbelt profiles doctor parses on macOS: (mode, profile text, parameters)
# per mode, built by the start's own dry run (commands/doctor.py); raises TmuxjailError when no
# dry run can be built here.
SeatbeltDryRuns = Callable[[], list[tuple[str, str, dict[str, str]]]]


def _breaks(check: str) -> str | None:
    if check not in BREAKS and check.endswith(" on the tmux server's PATH") and not check.startswith("tmuxjail"):
        return BREAKS["CLI on the tmux server's PATH"]
    return BREAKS.get(check)


def checks(tmux: Tmux, store_path: Path, env: dict, dry_runs: SeatbeltDryRuns | None = None) -> list[dict]:
    """dry_runs: on macOS, what the profile check parses (None: that check is left out)."""
    out: list[dict] = []

    def add(name, ok, detail, fix=None, required=True):
        base = name.split(" (")[0]  # a per-server check: `tmux clipboard (SOCKET)`
        out.append({"check": name, "ok": bool(ok), "required": required, "detail": detail,
                    "fix": None if ok else fix, "breaks": None if ok else _breaks(base)})

    install = "brew install tmux" if hostos.darwin() else "sudo apt-get install -y tmux"
    if tmux.binary:
        v = tmux.version()
        ok = parse_version(v)[:2] >= MIN_VERSION
        add("tmux", ok, v, f"{install}   (3.2a or later is required)")
    else:
        add("tmux", False, "not installed", install)
    if hostos.darwin():
        _darwin_checks(add, dry_runs)
    else:
        _linux_checks(add, env)
    home = paths.home_problem(env)
    add("home", home is None, home or env.get("HOME", "(from the password database)"), paths.HOME_FIX)
    for name, ok, detail, fix in dir_checks(paths.get(), home is None):
        add(name, ok, detail, fix)
    ok, detail, fix = _socket_dir(tmux.socket)
    if hostos.darwin():  # the same check; what a jail sees of it is Seatbelt's
        d = os.path.dirname(tmux.socket)
        real = os.path.realpath(d)
        detail += ((f" (really {real})" if real != d else "")
                   + ("; every profile denies it by each spelling, whether or not it exists yet"
                      if os.path.basename(d) == f"tmux-{os.getuid()}" else
                      "; every profile denies this server's socket by each spelling, not the rest of its directory"))
    add("tmux socket dir", ok, detail, fix)
    add("config", *_config())
    if not hostos.darwin():  # pidfds: Linux's proxy
        ok, detail, needed = _proxy()
        add("egress proxy", ok, detail,
            'give strict modes another network: `isolated = "none"` and `verified = "none"` under '
            "[network] in the config (or start with --network none), or upgrade to Linux 5.3+", required=needed)
    add("store", *_store(store_path))
    inst = host.own_install()
    add("install", not inst,
        "tmuxjail's code is not writable by you" if not inst else
        f"writable by you: {', '.join(inst)}. Compatibility jails get these read-only, but anything "
        "else you run can rewrite the code every start runs outside the jail"
        + (" (as root, compatibility can still write the rest of /usr)" if os.getuid() == 0 else ""),
        "as root, every install is yours to write: prefer a strict mode" if os.getuid() == 0 else
        "install outside your home, owned by root:  sudo python3 -m venv /opt/tmuxjail && "
        "sudo /opt/tmuxjail/bin/pip install . && ln -sf /opt/tmuxjail/bin/tmuxjail ~/.local/bin/tmuxjail",
        required=False)
    for server in servers(tmux, env):
        server_checks(server, env, add, many=server is not tmux)
    return out


def _linux_checks(add, env: dict) -> None:
    """bubblewrap and what it needs of the kernel, and what bounds a jail's resources."""
    b = bwrap.find()
    why = b.available()
    add("bubblewrap", why is None, b.path if why is None else why, "sudo apt-get install -y bubblewrap")
    if why is None:
        ok, err = host.userns_works(b.path)
        add("user namespaces", ok, "bwrap can create an unprivileged user namespace" if ok else err,
            _userns_fix())
    machine = platform.machine()
    add("seccomp filter", seccomp.supported(machine), f"TIOCSTI/TIOCLINUX filter for {machine}",
        "no fix on this machine: strict modes refuse to run")
    strace = os.access("/usr/bin/strace", os.X_OK)  # tmuxjail.discover.trace.STRACE
    add("strace", strace, "/usr/bin/strace (tmuxjail discover traces the jail with it)" if strace else "not installed",
        "sudo apt-get install -y strace   (only `tmuxjail discover` needs it)", required=False)

    ll = landlock.abi()
    add("landlock scope", ll >= landlock.MIN_ABI, f"Landlock ABI {ll} (6+ keeps strict jails off host abstract unix sockets)",
        f'upgrade to Linux 6.12+, or accept the gap in the config: accept_missing_guards = ["{landlock.GUARD}"]')
    tiocsti = _read("/proc/sys/dev/tty/legacy_tiocsti")
    add("legacy TIOCSTI", True, f"dev.tty.legacy_tiocsti={tiocsti}; blocked inside jails by seccomp"
        if tiocsti is not None else "not reported by this kernel", required=False)
    rt = env.get("XDG_RUNTIME_DIR")
    add("XDG_RUNTIME_DIR", bool(rt) and os.path.isdir(rt or ""), rt or "unset",
        'log in through PAM/systemd (it creates /run/user/$(id -u)); without root: '
        'export XDG_RUNTIME_DIR="$HOME/.cache/runtime" && mkdir -m 700 -p "$XDG_RUNTIME_DIR" in your shell profile',
        required=False)
    for name, detail in limit_checks():
        add(name, True, detail, required=False)
    ok, detail = namespace_limits()
    accepted = budget.GUARD in _accepted()
    add("jail namespace limits", ok or accepted, detail + (" (accepted in the config: jails share the user's "
        "inotify, fanotify, namespace and pty counts)" if accepted and not ok else ""),
        "allow unprivileged user namespaces for python3 (e.g. an AppArmor profile granting `userns`), or accept "
        f'the gap: accept_missing_guards = ["{budget.GUARD}"] in the config')


def _darwin_checks(add, dry_runs: SeatbeltDryRuns | None) -> None:
    """Seatbelt's: the sandbox-exec a start runs, the profile a start would hand it, and where
    the CLIs' logins live."""
    add("sandbox-exec", *sandbox_exec_check(hostos.sandbox_exec()))
    if dry_runs is not None:
        ok, detail, required = seatbelt_check(dry_runs)
        add("seatbelt profile", ok, detail, "report it as a tmuxjail bug, with this line and "
            "`tmuxjail start codex --dry-run --backend seatbelt`'s profile", required=required)
    add("keychain", True, "Claude Code and Cursor keep their login in the macOS keychain: compatibility "
        "jails reach it as you do; isolated and verified ones only with the "
        f"{KEYCHAIN_CAPABILITY} capability (it hands over the login keychain file; docs/macos.md), "
        "so without it log in again inside the jail", required=False)


def sandbox_exec_check(path: str) -> tuple[bool, str, str]:
    """Is the sandbox-exec a start runs (hostos.sandbox_exec) an executable file?"""
    ok = os.path.isfile(path) and os.access(path, os.X_OK)
    return (ok, path if ok else f"{path} is not an executable file",
            f"{path} ships with macOS: restore it (a macOS update or reinstall puts it back); tmuxjail "
            "runs that path only, never one from PATH")


def seatbelt_check(dry_runs: SeatbeltDryRuns) -> tuple[bool, str, bool]:
    """(ok, detail, required): does the Seatbelt profile of each dry run parse, and is every
    (param ...) it names among its parameters? Not required when no dry run can be built here
    (the config check, or the CLI's absence, says why)."""
    try:
        built = dry_runs()
    except TmuxjailError as exc:
        return False, f"no dry run to check: {exc.message}", False
    except OSError as exc:  # e.g. a working directory that is gone
        return False, f"no dry run to check: {exc}", False
    bad = [f"{mode}: {why}" for mode, text, params in built if (why := sbpl.problem(text, params))]
    if bad:
        return False, "; ".join(bad), True
    return True, f"the {', '.join(m for m, _, _ in built)} profiles of a dry run parse, their parameters given", True


def servers(tmux: Tmux, env: dict) -> list[Tmux]:
    """The server this command names (the default one unless -L/-S) and every other tmux server
    of this user that runs now: keys, clipboard and PATH are per server."""
    out = [tmux]
    uid = os.getuid()
    try:
        found = host.running_servers(uid)
    except OSError:  # no /proc to find them by (macOS): the server this command names only
        found = []
    for sock in found:
        try:
            if os.stat(sock).st_uid != uid or os.path.realpath(sock) == os.path.realpath(tmux.socket):
                continue
        except OSError:
            continue
        out.append(Tmux.at(sock, env))
    return out


def server_checks(tmux: Tmux, env: dict, add, many: bool) -> None:
    tag = f" ({tmux.socket})" if many else ""
    add("tmux server" + tag, True, tmux.socket + ("" if tmux.alive() or many else " (not running)"), required=False)
    if tmux.binary and tmux.alive():
        # Server-wide (no per-pane form in tmux 3.3): with `on`, an OSC 52 query from any pane,
        # a jail's too, reads back the latest paste buffer, even one copied in an unjailed pane.
        clip = tmux.run("show-options", "-s", "-v", "set-clipboard", check=False).stdout.strip()
        add("tmux clipboard" + tag, clip != "on", f"set-clipboard {clip or 'unknown'} on {tmux.socket}"
            + (": any pane, jails included, can read your paste buffer (OSC 52 query)" if clip == "on" else ""),
            f"{tmux_line(tmux)} set -s set-clipboard external   (and the same in ~/.tmux.conf)",
            required=False)
    for name, ok, detail, fix in cli_checks(tmux, env):
        add(name + tag, ok, detail, fix, required=False)
    on_path, detail = _on_server_path(tmux, env)
    add("tmuxjail on the tmux server's PATH" + tag, on_path, detail,
        "set -g @tmuxjail-bin ~/.local/bin/tmuxjail in ~/.tmux.conf before sourcing tmux.conf.example "
        f"(and now: {tmux_line(tmux)} set -g @tmuxjail-bin ~/.local/bin/tmuxjail), or put ~/.local/bin "
        "on PATH in your shell profile and restart tmux",
        required=False)


def dir_checks(p: paths.Paths, home_ok: bool) -> list[tuple[str, bool, str, str]]:
    """HOME and the directories start writes (state: the store, specs, logs; data: private homes),
    and the config directory it reads: each must be, or be creatable as, a directory of ours
    (28.7: doctor said all was well while start failed and sent the user here)."""
    wanted = [("state directory", p.state_dir, "XDG_STATE_HOME", os.W_OK),
              ("data directory", p.data_dir, "XDG_DATA_HOME", os.W_OK),
              ("config directory", p.config_dir, "XDG_CONFIG_HOME", os.R_OK)]
    if home_ok:
        wanted.insert(0, ("home writable", p.home, "HOME", os.W_OK))
    out = []
    for name, path, var, need in wanted:
        why, at = _dir_problem(path, need)
        fix = (f"move {at} out of the way, or export {var}=/a/directory/you/own" if why == "not a directory" else
               f"sudo chown {_user()} {at} && chmod u+rwx {at}   (or export {var}=/a/directory/you/own)")
        out.append((name, why is None, str(path) if why is None else f"{path}: {at} is {why}", fix))
    return out


def _dir_problem(path: Path, need: int) -> tuple[str | None, Path]:
    """(why path cannot be used or made, where), looking at it or its nearest existing parent."""
    at = path
    while not os.path.lexists(at) and at != at.parent:
        at = at.parent
    if not os.path.isdir(at):
        return "not a directory", at
    if not os.access(at, (need if at == path else os.W_OK) | os.X_OK):
        return ("not readable" if need == os.R_OK and at == path else "not writable") + " by you", at
    return None, at


def _user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _socket_dir(socket: str) -> tuple[bool, str, str]:
    """Can tmux create (or use) the directory of this server's socket?"""
    d = os.path.dirname(socket)
    fix = f"mkdir -m 700 -p {d}   (or set TMUX_TMPDIR to a directory you own)"
    if os.path.isdir(d):
        st = os.stat(d)
        tmux_made = os.path.basename(d) == f"tmux-{os.getuid()}"  # tmux refuses it unless private
        if tmux_made and (st.st_uid != os.getuid() or st.st_mode & 0o077):
            return False, f"{d} is not a private directory of yours", f"chmod 700 {d} (or remove it and let tmux create it)"
        return True, d, fix
    parent = os.path.dirname(d)
    ok = os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)
    return ok, f"{d} (tmux creates it)" if ok else f"{d}: {parent} is not writable", fix


def _accepted() -> tuple[str, ...]:
    try:
        return config.load(paths.get().config_file).accept_missing_guards
    except TmuxjailError:
        return ()


def _config() -> tuple[bool, str, str]:

    path = paths.get().config_file
    try:
        cfg = config.load(path)
    except Exception as exc:  # noqa: BLE001 - ConfigError, or anything else that stops start
        return False, getattr(exc, "message", str(exc)), f"fix or move {path}, then rerun `tmuxjail doctor`"
    return True, f"{path}" + (" (not present: defaults)" if cfg.source == "(defaults)" else " parses"), ""


def _proxy() -> tuple[bool, str, bool]:
    """Can a `proxy` jail start here (the default of strict modes)? The proxy needs pidfds to die
    with the jail. Required when the config gives some mode `proxy`."""
    try:
        needed = "proxy" in config.load(paths.get().config_file).network.values()
    except Exception:  # noqa: BLE001 - the config check reports it
        needed = True
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (OSError, AttributeError):
        return False, "this kernel has no pidfd_open (Linux 5.3+): the proxy could outlive its jail", needed
    return True, "per-session CONNECT proxy, listening on each jail's own loopback", needed


def _store(path: Path) -> tuple[bool, str, str]:


    if not path.exists():
        return True, f"{path} (created at the first start)", ""
    try:
        st = Store(path, readonly=True)
        result = st.db.execute("PRAGMA quick_check").fetchone()[0]
        st.db.execute("SELECT count(*) FROM sessions").fetchone()
        size = st.size()
        st.close()
    except TmuxjailError as exc:
        return False, exc.message, FIX
    except sqlite3.DatabaseError as exc:
        return False, f"{path}: {exc}", FIX
    if result != "ok":
        return False, f"{path}: {result}", FIX
    return True, f"{path} (schema ok, intact: quick_check ok, {size / (1 << 20):.1f} MiB; `tmuxjail prune` reclaims space)", ""


def server_path(tmux: Tmux, env: dict) -> tuple[str, str]:
    """(the PATH the tmux server runs key commands with, where it came from): its global PATH, or
    the caller's for a server tmuxjail will start."""
    if tmux.binary and tmux.alive():
        proc = tmux.run("show-environment", "-g", "PATH", check=False)
        if proc.returncode == 0 and proc.stdout.startswith("PATH="):
            return proc.stdout.strip()[5:], f"the PATH of the tmux server {tmux.socket}"
    return env.get("PATH", os.defpath), "this shell's PATH (no tmux server yet)"


def cli_checks(tmux: Tmux, env: dict) -> list[tuple[str, bool, str, str]]:
    """Each agent CLI, looked up where the start menu looks for it: on the tmux server's PATH.
    One this shell finds but the server does not is shown greyed in the menu (28.6)."""
    path, source = server_path(tmux, env)
    out = []
    for provider, display, names in executables():
        if provider == "shell":
            continue
        there = next((f for n in names if (f := shutil.which(n, path=path))), None)
        here = next((f for n in names if (f := shutil.which(n, path=env.get("PATH", os.defpath)))), None)
        if there:
            out.append((f"{display} on the tmux server's PATH", True, f"{there} on {source}", ""))
        elif here:
            d = os.path.dirname(here)
            out.append((f"{display} on the tmux server's PATH", False,
                        f"{here} is on this shell's PATH but not on {source}: the start menu greys it out",
                        f'tmux set-environment -g PATH "{d}:{path}"   (and put {d} on PATH in your shell profile '
                        "before tmux starts)"))
        else:
            out.append((f"{display} on the tmux server's PATH", True,
                        f"not installed ({' or '.join(names)} on neither PATH)", ""))
    return out


def _on_server_path(tmux: Tmux, env: dict) -> tuple[bool, str]:
    """The keys run `tmuxjail` through the server's @tmuxjail-bin when set (tmux.conf.example),
    else through the tmux server's global PATH (the caller's, for a server tmuxjail will start)."""

    if tmux.binary and tmux.alive():
        binary = tmux.run("show-options", "-gqv", "@tmuxjail-bin", check=False).stdout.strip()
        if binary:
            ok = os.path.isabs(binary) and os.access(binary, os.X_OK) and not os.path.isdir(binary)
            return ok, f"@tmuxjail-bin {binary}" + ("" if ok else " is not an executable file")
    path, source = server_path(tmux, env)
    found = shutil.which("tmuxjail", path=path)
    return bool(found), f"{found} on {source}" if found else f"not on {source}"


def tmux_line(tmux: Tmux) -> str:
    """How to name this server on a command line: `tmux`, `tmux -L NAME` or `tmux -S PATH`."""
    return "tmux" if tmux.base == ["-L", "default"] else " ".join(["tmux", *tmux.base])
