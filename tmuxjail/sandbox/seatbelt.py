r"""Seatbelt backend (macOS): a Policy -> an SBPL profile + parameters -> the sandbox-exec argv.

Pure. Built and checked offline (see docs/macos.md): nothing here has run on a Mac in CI.

Rules of this file:
- Every path that comes from the policy or the host layout enters the profile as a `-D`
  parameter, referenced with (param "NAME"). The only other trace of such a path is the
  case-insensitive regex of a guarded path (`_ci`), built from a fixed alphabet (letters as
  [aA] classes, digits, `/`, ` `, `_`, `-`, `\.`, `[^/]+`), so no path can break out of a string
  literal or inject a rule.
- Seatbelt semantics we rely on (docs/macos.md): the last matching rule wins; `(deny default)`
  does not cover the STRAGGLERS, so strict profiles deny them explicitly right after it.
- Strict modes are (deny default), the straggler denies, then allow rules only. Exceptions inside
  an allowed tree (tmuxjail's state, the tmux sockets, .git, each writable root's own path) are
  written into the allow rule itself with require-all / require-not, so a path is never matched by
  both an allow and a deny and the answer does not depend on precedence either.
- Compatibility is (allow default) followed by deny rules only, for the same reason.
- A file can be reached under several spellings and Seatbelt matches the spelling it is given:
  /tmp, /var and /etc are symlinks into /private; the data volume is firmlinked under
  /System/Volumes/Data; APFS is case-insensitive by default. Every guarded path is written for
  each alias and firmlink spelling, plus a case-insensitive regex.
- macOS cannot mount over $HOME: in isolated mode the private home is granted at its own path and
  HOME (plus every variable that pointed into the real home) is re-pointed to it.
"""

from __future__ import annotations

import os
from typing import Any

from .. import hostos
from ..registry import Mode
from ..subpath import inside
from . import HostLayout

NAME = "seatbelt"
SANDBOX_EXEC = "/usr/bin/sandbox-exec"
ENV = "/usr/bin/env"
KEYCHAIN_CAPABILITY = "macos-keychain"

# Symlinked top-level directories and their real location.
_ALIASES = (("/tmp", "/private/tmp"), ("/var", "/private/var"), ("/etc", "/private/etc"))
# The data volume and the firmlinks into it (/System/Library/CoreServices/firmlinks.plist).
DATA_VOLUME = "/System/Volumes/Data"
FIRMLINKED = ("/Applications", "/Library", "/Users", "/Volumes", "/cores", "/opt", "/private", "/usr/local")
_DATA_RX = "(/System/Volumes/Data)?"

# Operations `(deny default)` does not cover: left alone they are allowed.
STRAGGLERS = ("process-info*", "nvram*", "iokit-get-properties", "file-map-executable",
              "dynamic-code-generation")

# Read-only system trees in strict modes (DESIGN §1: /usr, /bin, /etc, /opt read-only), plus what
# the macOS loader, frameworks and command line tools read.
SYSTEM_READ_SUBPATHS = (
    "/usr", "/bin", "/sbin", "/opt", "/System",
    "/Library/Apple", "/Library/Frameworks", "/Library/Developer/CommandLineTools",
    "/Library/Preferences/Logging", "/Applications/Xcode.app",
    "/private/etc", "/private/var/db/timezone", "/private/var/db/dyld", "/private/var/select",
    "/private/var/db/DarwinDirectory",  # user and group lookups read it in-process (macOS 15+)
)
SYSTEM_READ_LITERALS = (
    "/", "/etc", "/var", "/tmp", "/private", "/private/var", "/dev",
    "/Library/Preferences/.GlobalPreferences.plist",
    "/Library/Preferences/com.apple.networkd.plist",
    "/private/var/db/xcode_select_link",
    "/private/var/run/resolv.conf",  # /etc/resolv.conf -> /private/var/run/resolv.conf
    "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper", "/dev/autofs_nowait",
)
DEVICE_RW_LITERALS = ("/dev/null", "/dev/tty", "/dev/ptmx", "/dev/stdout", "/dev/stderr")
# Slave ptys, and every terminal device of the user (ttys: ptys; ttyp..ttyw: legacy BSD ptys).
PTY_REGEX = r"^/dev/ttys[0-9]+$"
TERMINAL_REGEX = r"^/dev/tty(s[0-9]+|[p-w][0-9a-f])$"
# The kernel marks a pty opened inside the sandbox with this extension (Apple's system.sb).
PTY_EXTENSION = "com.apple.sandbox.pty"
# Shared temp roots (macOS has no private /tmp): both spellings of /tmp, and the per-user temp
# dir ($TMPDIR, /var/folders/XX/YYY/T) of confstr(_CS_DARWIN_USER_TEMP_DIR). Files only: no unix
# socket there (anything the user runs may listen in them).
TEMP_SUBPATHS = ("/tmp", "/private/tmp")
TEMP_REGEXES = (rf"^{_DATA_RX}(/private)?/var/folders/[^/]+/[^/]+/T(/.*)?$",)
TEMP_WRITE_REGEXES = (rf"^{_DATA_RX}(/private)?/var/folders/[^/]+/[^/]+/T/.+$",)  # inside T only
# The user cache dir of confstr(_CS_DARWIN_USER_CACHE_DIR) (clang module cache, ...).
CACHE_REGEXES = (rf"^{_DATA_RX}(/private)?/var/folders/[^/]+/[^/]+/C(/.*)?$",)
CACHE_WRITE_REGEXES = (rf"^{_DATA_RX}(/private)?/var/folders/[^/]+/[^/]+/C/.+$",)
TEMP_METADATA_REGEXES = (rf"^{_DATA_RX}(/private)?/var/folders(/[^/]+)?(/[^/]+)?$",)
# launchd listener sockets in /tmp (ssh-agent, pasteboard, ...): never in a strict jail.
LAUNCHD_LISTENERS = rf"^{_DATA_RX}(/private)?/tmp/com\.apple\.launchd\.[^/]+(/.*)?$"
DNS_SOCKET = "/private/var/run/mDNSResponder"
# Other sessions' per-session temp dirs in $TMPDIR (the launcher names them with this prefix): out
# of the shared temp grant; a jail gets its own by its own rule.
SESSION_TMP_PREFIX = "tmuxjail-"
SESSION_TMPS = rf"^{_DATA_RX}(/private)?/var/folders/[^/]+/[^/]+/T/{SESSION_TMP_PREFIX}[^/]*(/.*)?$"
# Homebrew's own data (databases, logs, caches of services it runs) under the read-only /opt and
# /usr: other programs' data, never the jail's to read.
SYSTEM_UNREAD = ("/opt/homebrew/var", "/usr/local/var")
# Homebrew's tmux and the libraries it loads, on Apple silicon and on Intel: tmuxjail runs tmux
# outside every jail, and Homebrew trees belong to the user, so compatibility would leave them
# writable. A change there runs outside the jail at the next tmux start.
HOMEBREW_PREFIXES = ("/opt/homebrew", "/usr/local")
TMUX_KEGS = ("tmux", "libevent", "ncurses", "utf8proc")

# An explicit list: never a `kern.` prefix, which includes kern.procargs2 (the argv and
# environment of every process of the user).
SYSCTL_READ_NAMES = (
    "hw.activecpu", "hw.byteorder", "hw.cachelinesize", "hw.cacheconfig", "hw.cpufamily",
    "hw.cpufrequency", "hw.cpusubtype", "hw.cputype", "hw.l1dcachesize", "hw.l1icachesize",
    "hw.l2cachesize", "hw.l3cachesize", "hw.logicalcpu", "hw.logicalcpu_max", "hw.machine",
    "hw.memsize", "hw.model", "hw.ncpu", "hw.nperflevels", "hw.pagesize", "hw.physicalcpu",
    "hw.physicalcpu_max", "hw.tbfrequency", "hw.vectorunit",
    "kern.argmax", "kern.hostname", "kern.maxfiles", "kern.maxfilesperproc", "kern.maxproc",
    "kern.ngroups", "kern.osproductversion", "kern.osrelease", "kern.ostype", "kern.osrevision",
    "kern.osvariant_status", "kern.osversion", "kern.secure_kernel", "kern.usrstack64",
    "kern.version", "kern.boottime", "kern.tcsm_available", "kern.tcsm_enable",
    "machdep.cpu.brand_string", "machdep.ptrauth_enabled", "security.mac.lockdown_mode_state",
    "sysctl.proc_cputype", "sysctl.proc_translated", "vm.loadavg", "vm.pagesize",
)
SYSCTL_READ_PREFIXES = ("hw.optional.", "hw.perflevel", "machdep.cpu.", "kern.proc.pid.", "net.routetable.")
MACH_SERVICES = (
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.opendirectoryd.membership",
    "com.apple.system.DirectoryService.libinfo_v1",
    "com.apple.system.logger",
    "com.apple.system.notification_center",
    "com.apple.logd",
    "com.apple.diagnosticd",
    "com.apple.cfprefsd.daemon",
    "com.apple.cfprefsd.agent",
    "com.apple.bsd.dirhelper",
    "com.apple.FSEvents",
    "com.apple.PowerManagement.control",
)
# Services that start programs outside the sandbox (open, Terminal, Apple Events): never in a
# strict jail (deny default), denied explicitly in compatibility.
LAUNCH_SERVICES = (
    "com.apple.coreservices.launchservicesd",
    "com.apple.CoreServices.coreservicesd",
    "com.apple.coreservices.appleevents",
    "com.apple.lsd.open",
    "com.apple.lsd.modifydb",
)
# TLS trust evaluation: under the proxy too (the proxy tunnels, the jail checks certificates).
TLS_MACH_SERVICES = ("com.apple.trustd", "com.apple.trustd.agent", "com.apple.ocspd", "com.apple.SecurityServer")
NETWORK_MACH_SERVICES = (
    "com.apple.SystemConfiguration.configd",
    "com.apple.SystemConfiguration.DNSConfiguration",
    "com.apple.dnssd.service",
    "com.apple.networkd",
    *TLS_MACH_SERVICES,
)
# Name resolution, denied where only the proxy resolves (compatibility under proxy or none).
DNS_MACH_SERVICES = ("com.apple.dnssd.service", "com.apple.SystemConfiguration.DNSConfiguration")
# What a dry run shows for the session proxy's loopback port (a real start: the port it listens on).
DRY_RUN_PROXY_PORT = 3128
KEYCHAIN_MACH_SERVICES = (
    "com.apple.SecurityServer",
    "com.apple.securityd.xpc",
    "com.apple.security.agent",
    "com.apple.security.authhost",
    "com.apple.secd",
    "com.apple.trustd",
    "com.apple.trustd.agent",
)


# ---------------------------------------------------------------------------------------------
# paths (pure string work: no realpath, no stat)

def _norm(path: str) -> str:
    path = path.rstrip("/")
    return path or "/"


def _alias_spellings(path: str) -> tuple[str, ...]:
    for short, real in _ALIASES:
        if inside(path, short) and path != "/":
            return (path, real + path[len(short):])
        if inside(path, real):
            return (path, short + path[len(real):])
    return (path,)


def spellings(path: str) -> tuple[str, ...]:
    """Every spelling of `path` that reaches the same file, case aside: the /tmp, /var, /etc
    aliases and the /System/Volumes/Data firmlink spelling. The given spelling comes first."""
    path = _norm(path)
    if inside(path, DATA_VOLUME) and path != DATA_VOLUME:
        inner = path[len(DATA_VOLUME):]
        if any(inside(inner, r) for r in FIRMLINKED):
            return tuple(dict.fromkeys((path, *spellings(inner))))
    out = list(_alias_spellings(path))
    for s in list(out):
        if any(inside(s, r) for r in FIRMLINKED):
            out.append(DATA_VOLUME + s)
    return tuple(dict.fromkeys(out))


def ancestors(path: str) -> list[str]:
    """Proper ancestors of an absolute path, excluding /, outermost first."""
    parts = _norm(path).split("/")[1:]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def _q(text: str) -> str:
    """A fixed string of ours as an SBPL string literal. Never used for a policy path."""
    assert all(c.isprintable() and c not in '"\\' for c in text), text
    return f'"{text}"'


def _rx(pattern: str) -> str:
    assert '"' not in pattern and "\n" not in pattern, pattern
    return f'#"{pattern}"'


def _ci(path: str, kind: str) -> str:
    """A regex matching `path` in any letter case (kind "dir": and everything under it). A path
    component with a character outside the fixed alphabet becomes `[^/]+` whole: that only widens
    a guard, and keeps the regex free of ambiguous wildcards (no backtracking blowup)."""
    parts = []
    for comp in path.split("/"):
        if not all(c.isascii() and (c.isalnum() or c in " _-.") for c in comp):
            parts.append("[^/]+")
            continue
        parts.append("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else "\\." if c == "." else c
                             for c in comp))
    return "^" + "/".join(parts) + ("(/.*)?$" if kind == "dir" else "$")


# ---------------------------------------------------------------------------------------------
# parameters

class _Params:
    """Assigns a parameter name to every distinct path value; the same value keeps one name."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self._by_value: dict[str, str] = {}
        self._count: dict[str, int] = {}

    def name(self, role: str, value: str) -> str:
        if value in self._by_value:
            return self._by_value[value]
        index = self._count.get(role, 0)
        self._count[role] = index + 1
        key = f"{role}_{index}"
        self.values[key] = value
        self._by_value[value] = key
        return key

    def names(self, role: str, path: str) -> list[str]:
        return [self.name(role, p) for p in spellings(path)]


def _p(name: str) -> str:
    return f'(param "{name}")'


def _sub(name: str) -> str:
    return f"(subpath {_p(name)})"


def _lit(name: str) -> str:
    return f"(literal {_p(name)})"


def _node(name: str) -> list[str]:
    # The path itself and everything under it: literal as well as subpath, so that creating the
    # excluded name for the first time is covered too (Codex's lesson).
    return [_lit(name), _sub(name)]


def _guard(params: _Params, role: str, path: str, kind: str, socket: str = "") -> list[str]:
    """Filters matching `path` (kind "dir": and everything under it) under every spelling and
    letter case; socket "remote"/"local": the same as unix-socket address filters."""
    out: list[str] = []
    for value in spellings(path):
        name = params.name(role, value)
        rx = _rx(_ci(value, kind))
        if socket:
            f = f"(subpath {_p(name)})" if kind == "dir" else f"(path-literal {_p(name)})"
            out += [f"({socket} unix-socket {f})", f"({socket} unix-socket (path-regex {rx}))"]
        else:
            out += (_node(name) if kind == "dir" else [_lit(name)]) + [f"(regex {rx})"]
    return out


def _allow(ops: str, filters: list[str], comment: str = "") -> list[str]:
    filters = list(dict.fromkeys(filters))
    if not filters:
        return []
    head = [f"; {comment}"] if comment else []
    return head + [f"(allow {ops}", *(f"  {f}" for f in filters), ")"]


def _deny(ops: str, filters: list[str], comment: str = "") -> list[str]:
    filters = list(dict.fromkeys(filters))
    if not filters:
        return []
    head = [f"; {comment}"] if comment else []
    return head + [f"(deny {ops}", *(f"  {f}" for f in filters), ")"]


def _except(root: str, excluded: list[str]) -> str:
    """root minus each excluded filter, as one filter (require-all + require-not)."""
    excluded = list(dict.fromkeys(excluded))
    if not excluded:
        return root
    return "(require-all " + root + " " + " ".join(f"(require-not {e})" for e in excluded) + ")"


# ---------------------------------------------------------------------------------------------
# the profile

_PATH_LISTS = ("install_roots", "workspace_read", "workspace_write", "host_read", "host_write",
               "protected", "hidden", "state_guards")


def canonical(policy: dict[str, Any], host: HostLayout) -> dict[str, Any]:
    """The policy with every path replaced by its canonical form (host.realpaths, looked up on
    the host by host.mac_layout); a path the host did not resolve stays as it is."""
    real = host.realpaths

    def c(p: str) -> str:
        if not p:
            return p
        if p in real:
            return _norm(real[p])
        # under a resolved path (.git under its workspace): the same resolution, longest first
        for key in sorted(real, key=len, reverse=True):
            if inside(p, key) and key != "/":
                return _norm(real[key]) + p[len(_norm(key)):]
        return p
    private = policy.get("private_home")
    out = dict(policy, home=c(policy["home"]), private_home=c(private) if private else private)
    for key in _PATH_LISTS:
        out[key] = [c(p) for p in policy.get(key, ())]
    for key in ("protected", "hidden"):
        # A guarded name that is itself a symlink (.git -> elsewhere): guard the link where it
        # is, as well as what it resolves to.
        out[key] = list(dict.fromkeys([*out[key], *(_norm(c(os.path.dirname(p))) + "/" + os.path.basename(p)
                                                   for p in policy.get(key, ()) if p != "/")]))
    return out


def _tmux_dirs(host: HostLayout) -> list[str]:
    return list(dict.fromkeys([*host.tmux_dirs, *host.tmux_dir_candidates]))


def profile(policy: dict[str, Any], host: HostLayout) -> tuple[str, dict[str, str]]:
    """Pure: (SBPL text, parameters) for `policy` on a host laid out as `host`."""
    params = _Params()
    policy = canonical(policy, host)
    if policy["mode"] == Mode.compatibility:
        lines = _compatibility(policy, host, params)
    else:
        lines = _strict(policy, host, params)
    text = "\n".join(["(version 1)", *lines]) + "\n"
    return text, dict(params.values)


def _compatibility(policy: dict[str, Any], host: HostLayout, params: _Params) -> list[str]:
    # Everything is allowed, then only denies follow (no allow after a deny, so rule precedence
    # never matters). Taken away: tmuxjail's state, spool and private homes (hidden), its config
    # when it has a directory of its own (read-only), the tmux sockets, the user's other
    # terminals, and the services that start programs outside the sandbox.
    out = ["; compatibility: the host as is, minus tmuxjail's own state, the tmux sockets, other "
           "terminals and LaunchServices", "(allow default)"]
    # file-link/file-clone: Seatbelt judges a new name by the path it is given; a hard link or
    # clone of a guarded file made elsewhere would be judged by the alias's path.
    out += _deny("file-read* file-write* file-link file-clone",
                 [f for p in policy["hidden"] for f in _guard(params, "HIDDEN", p, "dir")],
                 "tmuxjail's state, spool, data and every private home: hidden")
    out += _deny("file-write* file-link file-clone",
                 [f for p in policy["protected"] for f in _guard(params, "PROTECTED", p, "dir")],
                 "tmuxjail's config and install: read-only")
    brew = [f for p in _homebrew_tmux() for f in _guard(params, "TMUX_INSTALL", p, "dir")]
    out += _deny("file-write* file-link file-clone", brew,
                 "Homebrew's tmux and its libraries (run outside every jail): read-only")
    parents = list(dict.fromkeys(a for p in [*policy["hidden"], *policy["protected"], *_tmux_dirs(host),
                                             *host.tmux_files, *_homebrew_tmux()]
                                 for s in spellings(p) for a in ancestors(s)))
    out += _deny("file-write-unlink", [f for a in parents for f in _guard(params, "PARENT", a, "file")],
                 "no renaming a parent away to move the hidden or read-only trees or a tmux socket "
                 "(rename bypass)")
    out += _tmux_denies(policy, host, params)
    out += _terminals(host, params, deny=True)
    out += ["; programs started through LaunchServices or Apple Events run outside the sandbox",
            "(deny lsopen)", "(deny appleevent-send)"]
    out += _deny("mach-lookup", [f"(global-name {_q(s)})" for s in LAUNCH_SERVICES])
    network = policy.get("network", "host")
    if network != "host":  # none: no IP at all, as strict modes without _network(); proxy: but the proxy
        outbound = "(remote ip)"
        if network == "proxy":
            outbound = f"(require-all (remote ip) (require-not {_proxy_address(host)}))"
        out += [f"; network: {network}", f"(deny network-outbound {outbound})", "(deny network-inbound (local ip))",
                "(deny network-bind (local ip))",
                f"(deny network-outbound (remote unix-socket (path-literal {_q(DNS_SOCKET)})))"]
        out += _deny("mach-lookup", [f"(global-name {_q(s)})" for s in DNS_MACH_SERVICES], "no DNS around the proxy")
    return out


def _homebrew_tmux() -> list[str]:
    return [f"{prefix}/{d}/{keg}" for prefix in HOMEBREW_PREFIXES for d in ("Cellar", "opt") for keg in TMUX_KEGS] + [
        f"{prefix}/bin/tmux" for prefix in HOMEBREW_PREFIXES]


def _proxy_address(host: HostLayout) -> str:
    """The session proxy's loopback address as a `remote ip` filter: that one port, never
    localhost:*. Seatbelt takes the address as a literal "host:port" string (Codex and the sandbox
    runtime write it the same way), so the port is checked to be a port and written in; no port
    means no profile."""
    port = host.proxy_port
    if type(port) is not int or not 0 < port < 65536:
        raise ValueError(f"network proxy needs the session proxy's port, got {port!r}")
    return f'(remote ip "localhost:{port}")'


def _tmux_denies(policy: dict[str, Any], host: HostLayout, params: _Params) -> list[str]:
    dirs = [f for d in _tmux_dirs(host) for f in _guard(params, "TMUX_DIR", d, "dir")]
    files = [f for s in host.tmux_files for f in _guard(params, "TMUX_SOCKET", s, "file")]
    out = _deny("file-read* file-write* file-link file-clone", dirs + files,
                "the tmux socket directories (existing or not) and sockets: hidden")
    targets = ([(d, "TMUX_DIR", "dir") for d in _tmux_dirs(host)]
               + [(s, "TMUX_SOCKET", "file") for s in host.tmux_files]
               + [(h, "HIDDEN", "dir") for h in policy["hidden"]])
    for op, side in (("network-outbound", "remote"), ("network-bind", "local")):
        out += _deny(op, [f for p, role, kind in targets for f in _guard(params, role, p, kind, side)],
                     "no connect() to a tmux server (new-window would run outside the jail) or into "
                     "tmuxjail's state" if side == "remote" else "and no socket of our own in their place")
    return out


def _terminals(host: HostLayout, params: _Params, deny: bool) -> list[str]:
    """Only the pane's own terminal and ptys opened inside the jail: never another pane's tty or
    the tmux client's (keystroke theft, escape sequences to the outer terminal)."""
    own = [_lit(params.name("PANE_TTY", host.tty))] if host.tty else []
    pty = f"(require-all (regex {_rx(PTY_REGEX)}) (extension {_q(PTY_EXTENSION)}))"
    if deny:
        other = _except(f"(regex {_rx(TERMINAL_REGEX)})",
                        [*own, f"(extension {_q(PTY_EXTENSION)})"])
        return _deny("file-read* file-write* file-ioctl", [other], "the user's other terminals")
    return (["(allow pseudo-tty)"]
            + _allow("file-read* file-write* file-ioctl", [*own, pty],
                     "the pane's own terminal and ptys opened inside the jail"))


class _Excl:
    """Paths no allow rule may reach. A rule only carries the exclusions that can overlap its
    root (a string neither under the root nor above it never matches a path the root matches);
    a parameter is defined only once some rule uses it."""

    def __init__(self, params: _Params) -> None:
        self.params = params
        self.items: list[tuple[str, str, str]] = []  # (value, role, "dir" | "file")

    def add(self, role: str, path: str, kind: str) -> None:
        for value in spellings(path):
            self.items.append((value, role, kind))

    def filters(self, roots: list[str], socket: str = "") -> list[str]:
        out: list[str] = []
        for value, role, kind in self.items:
            if not any(inside(value, r) or inside(r, value) for r in roots):
                continue
            name = self.params.name(role, value)
            rx = _rx(_ci(value, kind))
            if socket:
                f = (f"(subpath {_p(name)})" if kind == "dir" else f"(path-literal {_p(name)})")
                out += [f"({socket} unix-socket {f})", f"({socket} unix-socket (path-regex {rx}))"]
            else:
                out += (_node(name) if kind == "dir" else [_lit(name)]) + [f"(regex {rx})"]
        if any(inside(r, t) or inside(t, r) for r in roots for t in TEMP_SUBPATHS):
            rx = f"(regex {_rx(LAUNCHD_LISTENERS)})"
            if socket:
                rx = f"({socket} unix-socket (path-regex {_rx(LAUNCHD_LISTENERS)}))"
            out.append(rx)
        return list(dict.fromkeys(out))


def _strict(policy: dict[str, Any], host: HostLayout, params: _Params) -> list[str]:
    mode = Mode(policy["mode"])  # the policy is JSON data
    private = policy.get("private_home") if mode == Mode.isolated else None
    tmp = _norm(host.realpaths.get(host.session_tmp, host.session_tmp)) if host.session_tmp else None
    out = [f"; {mode}: deny by default (and the operations default does not cover); allow rules "
           "only, exceptions written with require-not",
           "(deny default)",
           f"(deny {' '.join(STRAGGLERS)})"]
    out += _base(host, params)

    # What no allow rule may reach: tmuxjail's state/config/data (hidden) and the tmux sockets.
    # The private home lives inside the hidden data dir: it is the one grant there, so its own
    # rules leave out the hidden exclusion (sockets and protected paths still apply).
    sockets = _Excl(params)
    for d in _tmux_dirs(host):
        sockets.add("TMUX_DIR", d, "dir")
    for f in host.tmux_files:
        sockets.add("TMUX_SOCKET", f, "file")
    never = _Excl(params)
    for h in policy["hidden"]:
        never.add("HIDDEN", h, "dir")
    never.items += sockets.items

    # Read-only inside writable roots: every .git of the workspaces (the policy's `protected`).
    # And no rename, inside a writable root, of a parent of anything protected, hidden or a tmux
    # socket (renaming .git away, writing into it and renaming it back; moving a socket's
    # directory to a reachable name), nor of the writable root itself (the root is renamed away
    # and back the same way).
    keep = _Excl(params)
    writable = [*policy["workspace_write"], *(policy["host_write"] if mode == Mode.verified else ()),
                *([private] if private else []), *([tmp] if tmp else []), *TEMP_SUBPATHS]
    # (And in verified mode the CLI's command files in its state: docs/provider-state.md. Seatbelt
    # cannot lay a private copy over a file: its state_copies stay writable on macOS.)
    guards = (*policy["protected"], *(policy.get("state_guards", ()) if mode == Mode.verified else ()))
    for prot in guards:
        keep.add("PROTECTED", prot, "dir")
    for root in writable:  # a root inside another (the session temp dir in $TMPDIR) stays put too
        if root not in TEMP_SUBPATHS:
            keep.add("ROOT", root, "file")
    guarded = [*guards, *policy["hidden"], *_tmux_dirs(host), *host.tmux_files]
    for target in guarded:
        for root in writable:
            for t in spellings(target):
                for a in ancestors(t):
                    if inside(a, root) and _norm(a) != _norm(root):
                        keep.add("PARENT", a, "file")

    def read_rule(role: str, path: str, excl: _Excl = never) -> list[str]:
        return [_except(_sub(n), excl.filters([v])) for v, n in zip(spellings(path), params.names(role, path), strict=True)]

    def write_rule(role: str, path: str, excl: _Excl = never) -> list[str]:
        return [_except(_sub(n), excl.filters([v]) + keep.filters([v]) + [_lit(n)])
                for v, n in zip(spellings(path), params.names(role, path), strict=True)]

    read = "file-read* file-map-executable"
    out += _system_rules(read, never)

    installs = [r for r in policy["install_roots"]
                if not any(inside(r, s) for s in SYSTEM_READ_SUBPATHS)]
    host_read = list(policy["host_read"]) if mode == Mode.verified else []
    host_write = list(policy["host_write"]) if mode == Mode.verified else []
    granted = [*policy["workspace_write"], *policy["workspace_read"], *host_read, *host_write,
               *installs, *([private] if private else []), *([tmp] if tmp else [])]
    anc = list(dict.fromkeys(n for g in granted for s in spellings(g) for a in ancestors(s)
                             for n in params.names("PARENT", a)))
    out += _allow("file-read-metadata", [_lit(n) for n in anc], "parents of granted paths: stat only")

    out += _allow(read, [f for r in installs for f in read_rule("INSTALL", r)],
                  "the provider's install root: read-only")
    out += _allow(read, [f for r in policy["workspace_read"] for f in read_rule("WORKSPACE_RO", r)],
                  "read-only workspaces")
    out += _allow(read, [f for r in host_read for f in read_rule("HOST_RO", r)],
                  "approved host paths: read-only")

    rw = [("WORKSPACE", r) for r in policy["workspace_write"]] + [("HOST_RW", r) for r in host_write]
    out += _allow(read, [f for role, r in rw for f in read_rule(role, r)],
                  "writable workspaces and approved paths: read")
    out += _allow("file-write*", [f for role, r in rw for f in write_rule(role, r)],
                  "writable workspaces and approved paths: write, except every .git, the parents "
                  "of guarded paths and the root itself")
    own = ([("PRIVATE_HOME", private, sockets)] if private else []) + ([("SESSION_TMP", tmp, never)] if tmp else [])
    for role, path, excl in own:
        out += _allow(read, read_rule(role, path, excl),
                      "the private home (HOME points here)" if role == "PRIVATE_HOME"
                      else "the session's own temp dir (TMPDIR points here)")
        out += _allow("file-write*", write_rule(role, path, excl))

    out += _temp_rules(read, never, keep)
    out += _socket_rules(policy, params, never, own)

    network = policy.get("network", "host")
    if network == "host":
        out += _network()
    elif network == "proxy":
        out += _proxy_network(host)
    if KEYCHAIN_CAPABILITY in policy.get("capabilities", ()):
        out += _keychain(policy, params)
    return out


def _system_rules(read: str, never: _Excl) -> list[str]:
    # /System holds the data volume again under /System/Volumes/Data: the whole of /Users by
    # another name. Only the system part is granted.
    data = [f"(subpath {_q(DATA_VOLUME)})", f"(regex {_rx(_ci(DATA_VOLUME, 'dir'))})"]
    unread = {p: [f for u in SYSTEM_UNREAD if inside(u, p) for f in (f"(subpath {_q(u)})", f"(regex {_rx(_ci(u, 'dir'))})")]
              for p in SYSTEM_READ_SUBPATHS}
    return [*_allow(read, [_except(f"(subpath {_q(p)})", never.filters([p]) + (data if inside(DATA_VOLUME, p) else [])
                                   + unread[p])
                           for p in SYSTEM_READ_SUBPATHS],
                    "system paths: read-only (not the data volume under /System/Volumes/Data, not "
                    "Homebrew's var)"),
            *_allow("file-read*", [f"(literal {_q(p)})" for p in SYSTEM_READ_LITERALS])]


def _temp_rules(read: str, never: _Excl, keep: _Excl) -> list[str]:
    out: list[str] = []
    folders = ["/private/var/folders", "/var/folders"]
    others = [f"(regex {_rx(SESSION_TMPS)})"]  # other sessions' temp dirs (this one's: its own rule)
    out += _allow(read,
                  [_except(f"(subpath {_q(t)})", never.filters([t])) for t in TEMP_SUBPATHS]
                  + [_except(f"(regex {_rx(rx)})", never.filters(folders) + others) for rx in TEMP_REGEXES]
                  + [_except(f"(regex {_rx(rx)})", never.filters(folders)) for rx in CACHE_REGEXES],
                  "shared temp and the user cache dir (macOS has no private /tmp), minus the tmux "
                  "and launchd sockets")
    out += _allow("file-write*",
                  [_except(f"(subpath {_q(t)})", never.filters([t]) + keep.filters([t]) + [f"(literal {_q(t)})"])
                   for t in TEMP_SUBPATHS]
                  + [_except(f"(regex {_rx(rx)})", never.filters(folders) + keep.filters(folders) + others)
                     for rx in TEMP_WRITE_REGEXES]
                  + [_except(f"(regex {_rx(rx)})", never.filters(folders) + keep.filters(folders))
                     for rx in CACHE_WRITE_REGEXES])
    out += _allow("file-read-metadata", [f"(regex {_rx(rx)})" for rx in TEMP_METADATA_REGEXES])
    return out


def _socket_rules(policy: dict[str, Any], params: _Params, never: _Excl,
                  own: list[tuple[str, str, _Excl]]) -> list[str]:
    out: list[str] = []
    # connect() to a unix socket is network-outbound, not a file access: only inside the
    # workspaces, the private home and the session's temp dir; never in the shared /tmp or
    # $TMPDIR (an ssh-agent, screen, a database), never tmux's, launchd's or tmuxjail's.
    targets: list[tuple[str, str, _Excl]] = []
    for r in policy["workspace_write"]:
        targets += [(_sub(n), v, never) for v, n in zip(spellings(r), params.names("WORKSPACE", r), strict=True)]
    for role, path, excl in own:
        targets += [(_sub(n), v, excl) for v, n in zip(spellings(path), params.names(role, path), strict=True)]
    out.append("(allow system-socket)")
    out += _allow("network-outbound",
                  [_except(f"(remote unix-socket {f})", ex.filters([v], "remote")) for f, v, ex in targets],
                  "unix sockets: only the jail's own places (DNS: network host only)")
    out += _allow("network-bind",
                  [_except(f"(local unix-socket {f})", ex.filters([v], "local")) for f, v, ex in targets])
    return out


def _base(host: HostLayout, params: _Params) -> list[str]:
    out = [
        "; processes: children inherit this profile",
        "(allow process-exec)",
        "(allow process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow process-info* (target same-sandbox))",
        "(allow mach-priv-task-port (target same-sandbox))",
        "; JIT compilers (V8, JavaScriptCore) need it; denied above only so it is never implicit",
        "(allow dynamic-code-generation)",
        '(allow user-preference-read (preference-domain "kCFPreferencesAnyApplication"))',
        "(allow mach-host*)",
        "(allow ipc-posix-sem)",
        "(allow iokit-open (iokit-registry-entry-class \"RootDomainUserClient\"))",
        "(allow ipc-posix-shm-read-data (ipc-posix-name \"apple.shm.notification_center\"))",
        "(allow sysctl-write (sysctl-name \"kern.grade_cputype\"))",
    ]
    out += _allow("sysctl-read", [f"(sysctl-name {_q(n)})" for n in SYSCTL_READ_NAMES]
                  + [f"(sysctl-name-prefix {_q(p)})" for p in SYSCTL_READ_PREFIXES],
                  "named sysctls only (no kern.procargs2, no kern.proc.all)")
    out += _allow("mach-lookup", [f"(global-name {_q(s)})" for s in MACH_SERVICES],
                  "system services every runtime touches (no keychain, no LaunchServices, no Apple Events)")
    out += _allow("file-read* file-write*",
                  [f"(literal {_q(d)})" for d in DEVICE_RW_LITERALS] + ['(subpath "/dev/fd")'],
                  "standard devices")
    out += _allow("file-ioctl", [f"(literal {_q(d)})" for d in ("/dev/tty", "/dev/ptmx", "/dev/dtracehelper")])
    out += _terminals(host, params, deny=False)
    return out


def _network() -> list[str]:
    out = ["; network: host (DESIGN §1; later narrowed)",
           "(allow network-outbound (remote ip))",
           "(allow network-inbound (local ip))",
           "(allow network-bind (local ip))",
           f"(allow network-outbound (remote unix-socket (path-literal {_q(DNS_SOCKET)})))"]
    out += _allow("mach-lookup", [f"(global-name {_q(s)})" for s in NETWORK_MACH_SERVICES],
                  "name resolution and TLS trust evaluation")
    return out


def _proxy_network(host: HostLayout) -> list[str]:
    # The proxy resolves names: no mDNSResponder, no DNS services; TLS still runs in the jail.
    out = ["; network: proxy: out only to the session's proxy on loopback",
           f"(allow network-outbound {_proxy_address(host)})"]
    out += _allow("mach-lookup", [f"(global-name {_q(s)})" for s in TLS_MACH_SERVICES],
                  "TLS trust evaluation (the proxy tunnels, the jail checks certificates)")
    return out


def _keychain(policy: dict[str, Any], params: _Params) -> list[str]:
    # The login keychain file only (and the temporary copies it is saved through), not the whole
    # ~/Library/Keychains: other keychains and the metadata stay out. Item ACLs are securityd's.
    home = _norm(policy["home"])
    login = home + "/Library/Keychains/login.keychain-db"
    kc = params.names("KEYCHAIN", login)
    saves = params.names("KEYCHAIN_SAVE", login + ".sb-")
    prefs = params.names("KEYCHAIN_PREFS", home + "/Library/Preferences/com.apple.security.plist")
    meta = [n for p in (home, home + "/Library", home + "/Library/Preferences", home + "/Library/Keychains")
            for n in params.names("KEYCHAIN_PARENT", p)]
    out = _allow("file-read* file-write*", [_lit(n) for n in kc] + [f"(prefix {_p(n)})" for n in saves],
                 "capability macos-keychain (unverified): the login keychain file")
    out += _allow("file-read*", [_lit(n) for n in prefs]
                  + ['(literal "/Library/Preferences/com.apple.security.plist")',
                     '(literal "/Library/Keychains/System.keychain")',
                     '(subpath "/private/var/db/mds")'])
    out += _allow("file-read-metadata", [_lit(n) for n in meta]
                  + ['(literal "/Library")', '(literal "/Library/Keychains")'])
    out += _allow("mach-lookup", [f"(global-name {_q(s)})" for s in KEYCHAIN_MACH_SERVICES])
    out += _allow("ipc-posix-shm-read-data ipc-posix-shm-write-create ipc-posix-shm-write-data",
                  ['(ipc-posix-name "com.apple.AppleDatabaseChanged")'])
    return out


# ---------------------------------------------------------------------------------------------
# environment and argv

HOMEBREW_PATH = ("/opt/homebrew/bin", "/opt/homebrew/sbin")


def env_overrides(policy: dict[str, Any], host: HostLayout | None = None) -> dict[str, str]:
    """Variables to change inside the jail.
    - Isolated mode: macOS cannot mount the private home at $HOME, so HOME, and every variable
      that pointed into the real home, are re-pointed to the private home at its own path.
    - Strict modes: TMPDIR is the session's own temp dir when there is one (the only temp place
      where the jail may bind a unix socket), and Homebrew's bin dirs join PATH."""
    host = host or HostLayout()
    out: dict[str, str] = {}
    env = dict(policy.get("env_set", ()))
    private = policy.get("private_home")
    if policy["mode"] == Mode.isolated and private:
        home = _norm(policy["home"])
        private = _norm(host.realpaths.get(private, private))
        for name, value in env.items():
            if value == home or (home != "/" and inside(value, home)):
                out[name] = private + value[len(home):]
        out["HOME"] = private
    if policy["mode"] != Mode.compatibility:
        if host.session_tmp:
            out["TMPDIR"] = _norm(host.realpaths.get(host.session_tmp, host.session_tmp))
        path = env.get("PATH")
        if path is not None:
            parts = path.split(":")
            out["PATH"] = ":".join([*(d for d in HOMEBREW_PATH if d not in parts), *parts])
    return dict(sorted(out.items()))


class Seatbelt:
    name = NAME

    path = SANDBOX_EXEC  # fixed: never from PATH, never configurable (hostos: the tests' seam only)

    def available(self) -> str | None:
        path = hostos.sandbox_exec()
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            return f"Seatbelt is not available here: {path} is missing or not executable (it ships with macOS)"
        return None

    @staticmethod
    def profile(policy: dict[str, Any], host: HostLayout) -> tuple[str, dict[str, str]]:
        return profile(policy, host)

    def wrap(self, policy: dict[str, Any], argv: list[str], host: HostLayout) -> list[str]:
        text, params = profile(policy, host)
        out = [hostos.sandbox_exec(), "-p", text]
        for key, value in params.items():
            out += ["-D", f"{key}={value}"]
        out.append("--")
        env = env_overrides(policy, host)
        if env:
            if argv and "=" in argv[0]:
                raise ValueError(f"cannot run {argv[0]!r} through {ENV}: its name contains '='")
            out += [ENV, *(f"{k}={v}" for k, v in env.items())]
        return out + list(argv)


def find() -> Seatbelt:
    """sandbox-exec by its fixed path only; never one found through PATH."""
    return Seatbelt()
