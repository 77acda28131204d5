"""`tmuxjail doctor`: what works here, what does not, and the exact command that fixes it."""

from __future__ import annotations

import os
import platform
import pwd
import shutil
import sqlite3
import sys
from pathlib import Path

from . import config, host, netbridge, paths
from .errors import TmuxjailError
from .model import Limits
from .profiles import executables
from .sandbox import bwrap, landlock, pids, seccomp
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


def limit_checks() -> list[tuple[str, str]]:
    """What bounds a jail's resources here (defaults and [limits] in the README)."""

    lim = Limits()
    mib = 1 << 20
    out = [("tmpfs sizes", f"/tmp, /var/tmp, /dev/shm {lim.tmp_bytes // mib} MiB each, /run {lim.run_bytes // mib} MiB, "
                           f"verified home {lim.home_bytes // mib} MiB by default ([limits] in the config)")]
    if os.getuid() == 0:

        found = pids.hierarchy()
        out.append(("process limit", f"{lim.nproc} per root-run jail, in a pids cgroup under {found[0]}/{pids.GROUP} "
                                     "(the kernel ignores RLIMIT_NPROC for uid 0)" if found else
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


def checks(tmux: Tmux, store_path: Path, env: dict) -> list[dict]:

    out: list[dict] = []

    def add(name, ok, detail, fix=None, required=True):
        out.append({"check": name, "ok": bool(ok), "required": required, "detail": detail,
                    "fix": None if ok else fix})

    if tmux.binary:
        v = tmux.version()
        ok = parse_version(v)[:2] >= MIN_VERSION
        add("tmux", ok, v, "sudo apt-get install -y tmux   (3.2a or later is required)")
    else:
        add("tmux", False, "not installed", "sudo apt-get install -y tmux")
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
        'export XDG_RUNTIME_DIR=/run/user/$(id -u)   (log in through PAM/systemd, or create it 0700)',
        required=False)
    for name, detail in limit_checks():
        add(name, True, detail, required=False)

    home = paths.home_problem(env)
    add("home", home is None, home or env.get("HOME", "(from the password database)"), paths.HOME_FIX)
    for name, ok, detail, fix in dir_checks(paths.get(), home is None):
        add(name, ok, detail, fix)
    add("tmux socket dir", *_socket_dir(tmux.socket))
    add("config", *_config())
    ok, detail, needed = _proxy()
    add("egress proxy", ok, detail,
        "sudo apt-get install -y python3   (the in-jail bridge runs it), or give strict modes another network: "
        '`isolated = "none"` under [network] in the config', required=needed)
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
    add("tmux server", True, tmux.socket, required=False)
    if tmux.binary and tmux.alive():
        # Server-wide (no per-pane form in tmux 3.3): with `on`, an OSC 52 query from any pane,
        # a jail's too, reads back the latest paste buffer, even one copied in an unjailed pane.
        clip = tmux.run("show-options", "-s", "-v", "set-clipboard", check=False).stdout.strip()
        add("tmux clipboard", clip != "on", f"set-clipboard {clip or 'unknown'} on {tmux.socket}"
            + (": any pane, jails included, can read your paste buffer (OSC 52 query)" if clip == "on" else ""),
            "tmux set -s set-clipboard external   (and the same in ~/.tmux.conf)", required=False)
    for name, ok, detail, fix in cli_checks(tmux, env):
        add(name, ok, detail, fix, required=False)
    on_path, detail = _on_server_path(tmux, env)
    add("tmuxjail on the tmux server's PATH", on_path, detail,
        'the keys of tmux.conf.example run `tmuxjail`: put its directory (e.g. ~/.local/bin) on PATH '
        'in your shell profile and restart tmux, or: tmux set-environment -g PATH "$HOME/.local/bin:$PATH"',
        required=False)
    return out


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


def _config() -> tuple[bool, str, str]:

    path = paths.get().config_file
    try:
        cfg = config.load(path)
    except Exception as exc:  # noqa: BLE001 - ConfigError, or anything else that stops start
        return False, getattr(exc, "message", str(exc)), f"fix or move {path}, then rerun `tmuxjail doctor`"
    return True, f"{path}" + (" (not present: defaults)" if cfg.source == "(defaults)" else " parses"), ""


def _proxy() -> tuple[bool, str, bool]:
    """Can a `proxy` jail start here (the default of strict modes)? Its bridge needs a Python
    inside the jail, and the proxy needs pidfds to die with the jail. Required when the config
    gives some mode `proxy`."""
    try:
        needed = "proxy" in config.load(paths.get().config_file).network.values()
    except Exception:  # noqa: BLE001 - the config check reports it
        needed = True
    python = netbridge.python_for_jail({"mode": "isolated"}, sys.executable)
    if python is None:
        return False, "no Python 3 a strict jail can run (/usr/bin/python3) for the proxy's bridge", needed
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (OSError, AttributeError):
        return False, "this kernel has no pidfd_open (Linux 5.3+): the proxy could outlive its jail", needed
    return True, f"per-session CONNECT proxy; the in-jail bridge runs {python}", needed


def _store(path: Path) -> tuple[bool, str, str]:


    if not path.exists():
        return True, f"{path} (created at the first start)", ""
    try:
        st = Store(path, readonly=True)
        result = st.db.execute("PRAGMA quick_check").fetchone()[0]
        st.db.execute("SELECT count(*) FROM sessions").fetchone()
        st.close()
    except TmuxjailError as exc:
        return False, exc.message, FIX
    except sqlite3.DatabaseError as exc:
        return False, f"{path}: {exc}", FIX
    if result != "ok":
        return False, f"{path}: {result}", FIX
    return True, f"{path} (schema ok)", ""


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
    """The keys run `tmuxjail` through the tmux server's global PATH (the caller's, for a server
    tmuxjail will start)."""

    path, source = server_path(tmux, env)
    found = shutil.which("tmuxjail", path=path)
    return bool(found), f"{found} on {source}" if found else f"not on {source}"
