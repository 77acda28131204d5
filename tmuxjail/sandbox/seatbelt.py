"""Seatbelt backend (macOS): a Policy -> an SBPL profile + parameters -> the sandbox-exec argv.

Pure. Built and checked offline (see docs/macos.md): nothing here has run on a Mac in CI.

Rules of this file:
- Every path that comes from the policy or the host layout enters the profile ONLY as a `-D`
  parameter, referenced with (param "NAME"). The profile text is built from fixed strings and
  parameter names alone, so no path can break out of a string literal or inject a rule.
- Strict modes are (deny default) followed by allow rules only. Exceptions inside an allowed tree
  (tmuxjail's state, the tmux sockets, .git/hooks) are written into the allow rule itself with
  require-all / require-not, so the result does not depend on SBPL rule precedence (which the
  anchors could not settle, see reference/sandbox-anchors.md §3).
- Compatibility is (allow default) followed by deny rules only, for the same reason.
- Seatbelt matches the real (resolved) path: /tmp, /var and /etc are symlinks into /private, so
  every path under them is given in both spellings.
- macOS cannot mount over $HOME: in isolated mode the private home is granted at its own path and
  HOME (plus every variable that pointed into the real home) is re-pointed to it.
"""

from __future__ import annotations

import os

from . import HostLayout

NAME = "seatbelt"
SANDBOX_EXEC = "/usr/bin/sandbox-exec"
ENV = "/usr/bin/env"
KEYCHAIN_CAPABILITY = "macos-keychain"

# Symlinked top-level directories and their real location.
_ALIASES = (("/tmp", "/private/tmp"), ("/var", "/private/var"), ("/etc", "/private/etc"))

# Read-only system trees in strict modes (DESIGN §1: /usr, /bin, /etc, /opt read-only), plus what
# the macOS loader, frameworks and command line tools read.
SYSTEM_READ_SUBPATHS = (
    "/usr", "/bin", "/sbin", "/opt", "/System",
    "/Library/Apple", "/Library/Frameworks", "/Library/Developer/CommandLineTools",
    "/Library/Preferences/Logging", "/Applications/Xcode.app",
    "/private/etc", "/private/var/db/timezone", "/private/var/db/dyld", "/private/var/select",
)
SYSTEM_READ_LITERALS = (
    "/", "/etc", "/var", "/tmp", "/private", "/private/var", "/dev",
    "/Library/Preferences/.GlobalPreferences.plist",
    "/Library/Preferences/com.apple.networkd.plist",
    "/private/var/db/xcode_select_link",
    "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper", "/dev/autofs_nowait",
)
DEVICE_RW_LITERALS = ("/dev/null", "/dev/tty", "/dev/ptmx", "/dev/stdout", "/dev/stderr")
TTY_REGEX = r"^/dev/ttys[0-9]+$"
# Shared temp roots (macOS has no private /tmp): both spellings of /tmp, and the per-user temp
# dir ($TMPDIR, /var/folders/XX/YYY/T) of confstr(_CS_DARWIN_USER_TEMP_DIR).
TEMP_SUBPATHS = ("/tmp", "/private/tmp")
TEMP_REGEXES = (
    r"^/private/var/folders/[^/]+/[^/]+/T(/.*)?$",
    r"^/var/folders/[^/]+/[^/]+/T(/.*)?$",
)
TEMP_WRITE_REGEXES = (  # inside T, not T itself
    r"^/private/var/folders/[^/]+/[^/]+/T/.+$",
    r"^/var/folders/[^/]+/[^/]+/T/.+$",
)
TEMP_METADATA_REGEXES = (
    r"^/private/var/folders$",
    r"^/private/var/folders/[^/]+$",
    r"^/private/var/folders/[^/]+/[^/]+$",
)
# launchd listener sockets in /tmp (ssh-agent, pasteboard, ...): never in a strict jail.
LAUNCHD_LISTENERS = r"^(/private)?/tmp/com\.apple\.launchd\.[^/]+(/.*)?$"
DNS_SOCKET = "/private/var/run/mDNSResponder"

SYSCTL_READ_PREFIXES = ("hw.", "kern.", "machdep.cpu.", "sysctl.proc_", "vm.loadavg", "net.routetable.")
MACH_SERVICES = (
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.opendirectoryd.membership",
    "com.apple.system.logger",
    "com.apple.system.notification_center",
    "com.apple.logd",
    "com.apple.diagnosticd",
    "com.apple.cfprefsd.daemon",
    "com.apple.cfprefsd.agent",
    "com.apple.bsd.dirhelper",
    "com.apple.FSEvents",
    "com.apple.PowerManagement.control",
    "com.apple.CoreServices.coreservicesd",
    "com.apple.coreservices.launchservicesd",
)
NETWORK_MACH_SERVICES = (
    "com.apple.SystemConfiguration.configd",
    "com.apple.SystemConfiguration.DNSConfiguration",
    "com.apple.dnssd.service",
    "com.apple.networkd",
    "com.apple.trustd.agent",
    "com.apple.ocspd",
    "com.apple.SecurityServer",
)
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


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def spellings(path: str) -> tuple[str, ...]:
    """The path, and its other spelling when it lies under /tmp, /var or /etc."""
    path = _norm(path)
    for short, real in _ALIASES:
        if _under(path, short) and path != "/":
            return (path, real + path[len(short):])
        if _under(path, real):
            return (path, short + path[len(real):])
    return (path,)


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


def _allow(ops: str, filters: list[str], comment: str = "") -> list[str]:
    if not filters:
        return []
    head = [f"; {comment}"] if comment else []
    return head + [f"(allow {ops}", *(f"  {f}" for f in filters), ")"]


def _deny(ops: str, filters: list[str], comment: str = "") -> list[str]:
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

def profile(policy: dict, host: HostLayout) -> tuple[str, dict[str, str]]:
    """Pure: (SBPL text, parameters) for `policy` on a host laid out as `host`."""
    params = _Params()
    if policy["mode"] == "compatibility":
        lines = _compatibility(policy, host, params)
    else:
        lines = _strict(policy, host, params)
    text = "\n".join(["(version 1)", *lines]) + "\n"
    return text, dict(params.values)


def _compatibility(policy: dict, host: HostLayout, params: _Params) -> list[str]:
    # Today's behaviour: everything is allowed, then only denies follow (no allow after a deny,
    # so rule precedence never matters). Taken away: tmuxjail's state and private homes (hidden),
    # its config (read-only), and the tmux sockets (hidden, and no connect()).
    out = ["; compatibility: the host as is, minus tmuxjail's own state and the tmux sockets",
           "(allow default)"]
    hidden = [n for p in policy["hidden"] for n in params.names("HIDDEN", p)]
    protected = [n for p in policy["protected"] for n in params.names("PROTECTED", p)]
    out += _deny("file-read* file-write*", [f for n in hidden for f in _node(n)],
                 "tmuxjail's state, data and every private home: hidden")
    out += _deny("file-write*", [f for n in protected for f in _node(n)],
                 "tmuxjail's config: read-only")
    anc = _ancestor_names(params, [*policy["hidden"], *policy["protected"], *host.tmux_dirs,
                                   *host.tmux_files])
    out += _deny("file-write-unlink", [_lit(n) for n in anc],
                 "no renaming a parent away to move the hidden or read-only trees or a tmux socket "
                 "(rename bypass)")
    out += _tmux_denies(host, params, hidden)
    return out


def _ancestor_names(params: _Params, paths) -> list[str]:
    seen: list[str] = []
    for path in paths:
        for a in ancestors(path):
            for n in params.names("PARENT", a):
                if n not in seen:
                    seen.append(n)
    return seen


def _tmux_names(host: HostLayout, params: _Params) -> tuple[list[str], list[str]]:
    dirs = [n for d in host.tmux_dirs for n in params.names("TMUX_DIR", d)]
    files = [n for f in host.tmux_files for n in params.names("TMUX_SOCKET", f)]
    return dirs, files


def _tmux_denies(host: HostLayout, params: _Params, hidden: list[str]) -> list[str]:
    dirs, files = _tmux_names(host, params)
    out = _deny("file-read* file-write*", [f for n in dirs for f in _node(n)] + [_lit(n) for n in files],
                "the tmux socket directories and sockets: hidden")
    sockets = ([f"(remote unix-socket (subpath {_p(n)}))" for n in (*dirs, *hidden)]
               + [f"(remote unix-socket (path-literal {_p(n)}))" for n in files])
    out += _deny("network-outbound", sockets,
                 "no connect() to a tmux server (new-window would run outside the jail) or into tmuxjail's state")
    out += _deny("network-bind", [s.replace("(remote ", "(local ", 1) for s in sockets],
                 "and no socket of our own in their place")
    return out


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
            if not any(_under(value, r) or _under(r, value) for r in roots):
                continue
            name = self.params.name(role, value)
            if socket:
                f = (f"(subpath {_p(name)})" if kind == "dir" else f"(path-literal {_p(name)})")
                out.append(f"({socket} unix-socket {f})")
            else:
                out += _node(name) if kind == "dir" else [_lit(name)]
        if any(_under(r, t) or _under(t, r) for r in roots for t in TEMP_SUBPATHS):
            rx = f"(regex {_rx(LAUNCHD_LISTENERS)})"
            if socket:
                rx = f"({socket} unix-socket (path-regex {_rx(LAUNCHD_LISTENERS)}))"
            out.append(rx)
        return list(dict.fromkeys(out))


def _strict(policy: dict, host: HostLayout, params: _Params) -> list[str]:
    mode = policy["mode"]
    private = policy.get("private_home") if mode == "isolated" else None
    out = [f"; {mode}: deny by default; allow rules only, exceptions written with require-not",
           "(deny default)"]
    out += _base()

    # What no allow rule may reach: tmuxjail's state/config/data (hidden) and the tmux sockets.
    # The private home lives inside the hidden data dir: it is the one grant there, so its own
    # rules leave out the hidden exclusion (sockets and protected paths still apply).
    sockets = _Excl(params)
    for d in host.tmux_dirs:
        sockets.add("TMUX_DIR", d, "dir")
    for f in host.tmux_files:
        sockets.add("TMUX_SOCKET", f, "file")
    never = _Excl(params)
    for h in policy["hidden"]:
        never.add("HIDDEN", h, "dir")
    never.items += sockets.items

    # Read-only inside writable roots: .git/hooks and .git/config. And no rename of a parent,
    # inside a writable root, of anything protected, hidden or a tmux socket: renaming .git away,
    # writing into it and renaming it back, or moving a socket's directory to a reachable name.
    keep = _Excl(params)
    writable = [*policy["workspace_write"], *(policy["host_write"] if mode == "verified" else ()),
                *([private] if private else []), *TEMP_SUBPATHS]
    for prot in policy["protected"]:
        keep.add("PROTECTED", prot, "dir")
    guarded = [*policy["protected"], *policy["hidden"], *host.tmux_dirs, *host.tmux_files]
    for target in guarded:
        for root in writable:
            for t in spellings(target):
                for a in ancestors(t):
                    if _under(a, root) and _norm(a) != _norm(root):
                        keep.add("PARENT", a, "file")

    def read_rule(role: str, path: str, excl: _Excl = never) -> list[str]:
        return [_except(_sub(n), excl.filters([v])) for v, n in zip(spellings(path), params.names(role, path))]

    def write_rule(role: str, path: str, excl: _Excl = never) -> list[str]:
        return [_except(_sub(n), excl.filters([v]) + keep.filters([v]))
                for v, n in zip(spellings(path), params.names(role, path))]

    out += _allow("file-read*", [_except(f"(subpath {_q(p)})", never.filters([p])) for p in SYSTEM_READ_SUBPATHS]
                  + [f"(literal {_q(p)})" for p in SYSTEM_READ_LITERALS],
                  "system paths: read-only")

    installs = [r for r in policy["install_roots"]
                if not any(_under(r, s) for s in SYSTEM_READ_SUBPATHS)]
    host_read = list(policy["host_read"]) if mode == "verified" else []
    host_write = list(policy["host_write"]) if mode == "verified" else []
    granted = [*policy["workspace_write"], *policy["workspace_read"], *host_read, *host_write,
               *installs, *([private] if private else [])]
    anc = _ancestor_names(params, granted)
    out += _allow("file-read-metadata", [_lit(n) for n in anc], "parents of granted paths: stat only")

    out += _allow("file-read*", [f for r in installs for f in read_rule("INSTALL", r)],
                  "the provider's install root: read-only")
    out += _allow("file-read*", [f for r in policy["workspace_read"] for f in read_rule("WORKSPACE_RO", r)],
                  "read-only workspaces")
    out += _allow("file-read*", [f for r in host_read for f in read_rule("HOST_RO", r)],
                  "approved host paths: read-only")

    rw = [("WORKSPACE", r) for r in policy["workspace_write"]] + [("HOST_RW", r) for r in host_write]
    out += _allow("file-read*", [f for role, r in rw for f in read_rule(role, r)],
                  "writable workspaces and approved paths: read")
    out += _allow("file-write*", [f for role, r in rw for f in write_rule(role, r)],
                  "writable workspaces and approved paths: write, except the protected paths")
    if private:
        out += _allow("file-read*", read_rule("PRIVATE_HOME", private, sockets),
                      "the private home (HOME points here): read")
        out += _allow("file-write*", write_rule("PRIVATE_HOME", private, sockets),
                      "the private home: write")

    folders = ["/private/var/folders", "/var/folders"]
    out += _allow("file-read*",
                  [_except(f"(subpath {_q(t)})", never.filters([t])) for t in TEMP_SUBPATHS]
                  + [_except(f"(regex {_rx(rx)})", never.filters(folders)) for rx in TEMP_REGEXES],
                  "shared temp dirs (macOS has no private /tmp), minus the tmux and launchd sockets")
    out += _allow("file-write*",
                  [_except(f"(subpath {_q(t)})", never.filters([t]) + keep.filters([t])) for t in TEMP_SUBPATHS]
                  + [_except(f"(regex {_rx(rx)})", never.filters(folders) + keep.filters(folders))
                     for rx in TEMP_WRITE_REGEXES])
    out += _allow("file-read-metadata", [f"(regex {_rx(rx)})" for rx in TEMP_METADATA_REGEXES])

    # connect() to a unix socket is network-outbound, not a file access: only inside the jail's
    # own writable places, never to the tmux server, launchd listeners or tmuxjail's state.
    targets: list[tuple[str, str, _Excl]] = []
    for role, r in rw:
        targets += [(_sub(n), v, never) for v, n in zip(spellings(r), params.names(role, r))]
    if private:
        targets += [(_sub(n), v, sockets) for v, n in zip(spellings(private), params.names("PRIVATE_HOME", private))]
    targets += [(f"(subpath {_q(t)})", t, never) for t in TEMP_SUBPATHS]
    out.append("(allow system-socket)")
    out += _allow("network-outbound",
                  [_except(f"(remote unix-socket {f})", ex.filters([v], "remote")) for f, v, ex in targets]
                  + [f"(remote unix-socket (path-literal {_q(DNS_SOCKET)}))"],
                  "unix sockets: only the jail's own, and DNS; never tmux, launchd or tmuxjail's")
    out += _allow("network-bind",
                  [_except(f"(local unix-socket {f})", ex.filters([v], "local")) for f, v, ex in targets])

    if policy.get("network", "host") == "host":
        out += _network()
    if KEYCHAIN_CAPABILITY in policy.get("capabilities", ()):
        out += _keychain(policy, params)
    return out


def _base() -> list[str]:
    out = [
        "; processes: children inherit this profile",
        "(allow process-exec)",
        "(allow process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow process-info* (target same-sandbox))",
        "(allow mach-priv-task-port (target same-sandbox))",
        "(allow user-preference-read)",
        "(allow mach-host*)",
        "(allow ipc-posix-sem)",
        "(allow pseudo-tty)",
        "(allow iokit-open (iokit-registry-entry-class \"RootDomainUserClient\"))",
        "(allow ipc-posix-shm-read-data (ipc-posix-name \"apple.shm.notification_center\"))",
        "(allow sysctl-write (sysctl-name \"kern.grade_cputype\"))",
    ]
    out += _allow("sysctl-read", [f"(sysctl-name-prefix {_q(p)})" for p in SYSCTL_READ_PREFIXES])
    out += _allow("mach-lookup", [f"(global-name {_q(s)})" for s in MACH_SERVICES],
                  "system services every runtime touches (no keychain, no Apple Events)")
    out += _allow("file-read* file-write*",
                  [f"(literal {_q(d)})" for d in DEVICE_RW_LITERALS]
                  + ['(subpath "/dev/fd")', f"(regex {_rx(TTY_REGEX)})"],
                  "terminal and standard devices")
    out += _allow("file-ioctl", [f"(literal {_q(d)})" for d in ("/dev/tty", "/dev/ptmx", "/dev/dtracehelper")]
                  + [f"(regex {_rx(TTY_REGEX)})"])
    return out


def _network() -> list[str]:
    out = ["; network: host (DESIGN §1; later narrowed)",
           "(allow network-outbound (remote ip))",
           "(allow network-inbound (local ip))",
           "(allow network-bind (local ip))"]
    out += _allow("mach-lookup", [f"(global-name {_q(s)})" for s in NETWORK_MACH_SERVICES],
                  "name resolution and TLS trust evaluation")
    return out


def _keychain(policy: dict, params: _Params) -> list[str]:
    home = _norm(policy["home"])
    kc = params.names("KEYCHAIN", home + "/Library/Keychains")
    prefs = params.names("KEYCHAIN_PREFS", home + "/Library/Preferences/com.apple.security.plist")
    meta = [params.name("KEYCHAIN_PARENT", p)
            for p in (home, home + "/Library", home + "/Library/Preferences")]
    out = _allow("file-read* file-write*", [_sub(n) for n in kc] + [_lit(n) for n in prefs],
                 "capability macos-keychain (unverified): the login keychain")
    out += _allow("file-read*", ['(literal "/Library/Preferences/com.apple.security.plist")',
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

def env_overrides(policy: dict) -> dict[str, str]:
    """Variables to change inside the jail. Isolated mode only: macOS cannot mount the private
    home at $HOME, so HOME, and every variable that pointed into the real home, are re-pointed to
    the private home at its own path."""
    private = policy.get("private_home")
    if policy["mode"] != "isolated" or not private:
        return {}
    home, private = _norm(policy["home"]), _norm(private)
    out = {}
    for name, value in policy.get("env_set", ()):
        if value == home or value.startswith(home + "/"):
            out[name] = private + value[len(home):]
    out["HOME"] = private
    return dict(sorted(out.items()))


class Seatbelt:
    name = NAME

    path = SANDBOX_EXEC  # fixed: never from PATH, never configurable

    def available(self) -> str | None:
        if not os.access(SANDBOX_EXEC, os.X_OK):
            return f"Seatbelt is not available here ({SANDBOX_EXEC} missing; macOS only)"
        return None

    @staticmethod
    def profile(policy: dict, host: HostLayout) -> tuple[str, dict[str, str]]:
        return profile(policy, host)

    def wrap(self, policy: dict, argv: list[str], host: HostLayout) -> list[str]:
        text, params = profile(policy, host)
        out = [SANDBOX_EXEC, "-p", text]
        for key, value in params.items():
            out += ["-D", f"{key}={value}"]
        out.append("--")
        env = env_overrides(policy)
        if env:
            if argv and "=" in argv[0]:
                raise ValueError(f"cannot run {argv[0]!r} through {ENV}: its name contains '='")
            out += [ENV, *(f"{k}={v}" for k, v in env.items())]
        return out + list(argv)


def find() -> Seatbelt:
    """sandbox-exec by its fixed path only; never one found through PATH."""
    return Seatbelt()
