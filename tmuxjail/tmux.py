"""The one module that talks to tmux. It runs tmux's own argv (no shell ever sees a command),
selects the server as tmux does (-L / -S, else the server we are in, else the default), and only
ever sets options on tmuxjail's own sessions, windows and panes.

It calls the tmux binary directly rather than through libtmux: `list` must answer in one
`list-panes -a` call and start fast, and libtmux's object layer (and ~100 ms import) buys nothing
here. The tests use libtmux to inspect what this module did."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from collections import namedtuple
from collections.abc import Mapping

from .errors import TmuxjailError, UsageError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
MIN_VERSION = (3, 2)
CLIENT_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ",
    "TMUX_TMPDIR", "DISPLAY", "WAYLAND_DISPLAY",
})
PANE_FIELDS = (
    "session_name", "window_id", "pane_id", "pane_pid", "pane_dead", "pane_dead_status",
    "pane_current_command", "@tmuxjail_id", "@tmuxjail_fp", "pane_start_command", "pane_dead_signal",
)


def _marks() -> tuple[str, str]:
    """A field and a record separator for one format. Printable ASCII: in a non-UTF-8 locale
    (LC_ALL=C) tmux prints control characters such as \x1f as `_`. Random per call: a pane
    controls its command name and screen, and must not be able to forge a separator."""
    t = secrets.token_hex(8)
    return f"~F{t}~", f"~R{t}~"


def default_socket(name: str, env) -> str:
    """Where tmux puts the socket of `-L name`: in $TMUX_TMPDIR/tmux-UID, falling back to
    /tmp/tmux-UID when TMUX_TMPDIR is unset or not a directory (tmux 3.3 does the same)."""
    for tmpdir in (env.get("TMUX_TMPDIR"), "/tmp"):
        if tmpdir and os.path.isabs(tmpdir) and os.path.isdir(tmpdir):
            return os.path.join(os.path.realpath(tmpdir), f"tmux-{os.getuid()}", name)
    return os.path.join("/tmp", f"tmux-{os.getuid()}", name)


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(
            f"invalid session name {name!r}",
            hint="use 1-63 letters, digits, '-' or '_', starting with a letter or digit",
        )
    return name


def start_dir(path: str) -> str:
    """A -c argument: tmux expands formats in it (new-session, new-window, split-window,
    respawn-pane), so a workspace named `#(...)` would run in the tmux server. `##` is a `#`."""
    return path.replace("#", "##")


def parse_version(text: str) -> tuple[int, int, str]:
    m = re.search(r"(\d+)\.(\d+)([a-z]?)", text)
    if not m:
        return (0, 0, "")
    return (int(m.group(1)), int(m.group(2)), m.group(3))


Pane = namedtuple("Pane", "session_name window_id pane_id pane_pid pane_dead pane_dead_status "
                         "pane_current_command tmuxjail_id tmuxjail_fp start_command dead_signal")


class Tmux:
    def __init__(self, socket_name: str | None = None, socket_path: str | None = None,
                 env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self.binary = shutil.which("tmux")
        # A server that tmuxjail starts inherits this environment as its global one, visible to
        # `show-environment -g` and every later pane: give it no credentials.
        self.env = {k: v for k, v in env.items() if k in CLIENT_ENV or k.startswith(("LC_", "XDG_"))}
        self.inside = env.get("TMUX", "")
        if socket_name and socket_path:
            raise UsageError("use either -L or -S, not both")
        if socket_path:
            self.socket = os.path.abspath(socket_path)
            self.base = ["-S", self.socket]
        elif self.inside and not socket_name:
            self.socket = self.inside.split(",")[0]
            self.base = ["-S", self.socket]
        else:
            # -L, never -S, for the default server too: with -L tmux creates its socket
            # directory (a fresh account, after a reboot); with -S it refuses and exits 0.
            self.base = ["-L", socket_name or "default"]
            self.socket = default_socket(socket_name or "default", env)

    @classmethod
    def at(cls, socket: str, env: Mapping[str, str] | None = None) -> Tmux:
        """The server whose socket is at this path: as -L when tmux would put it there itself
        (so tmux may recreate its directory), else as -S."""
        env = os.environ if env is None else env
        name = os.path.basename(socket)
        if default_socket(name, env) == socket:
            return cls(socket_name=name, env=env)
        return cls(socket_path=socket, env=env)

    def refresh_socket(self) -> str:
        """The socket path as the running server reports it (after it exists)."""
        proc = self.run("display-message", "-p", "#{socket_path}", check=False)
        path = proc.stdout.strip()
        if proc.returncode == 0 and path.startswith("/"):
            self.socket = path
        return self.socket

    def require(self) -> str:
        if not self.binary:
            raise TmuxjailError("tmux is not installed", hint="sudo apt-get install -y tmux")
        return self.binary

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # -u: the bytes as they are under any locale; under LC_ALL=C tmux prints `_` for each
        # non-ASCII or control character, and a pane's directory would read as another path.
        proc = subprocess.run(
            [self.require(), "-u", *self.base, *args], env=self.env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise TmuxjailError(f"tmux {args[0]}: {msg[-1] if msg else 'failed'}")
        return proc

    def version(self) -> str:
        out = subprocess.run([self.require(), "-V"], capture_output=True, text=True)
        return out.stdout.strip()

    @staticmethod
    def first_line(proc: subprocess.CompletedProcess, what: str) -> str:
        """The first line tmux printed, or an error that says why there is none (tmux may print an
        error and still exit 0, e.g. for -S in a directory that does not exist)."""
        lines = proc.stdout.strip().splitlines()
        if not lines:
            err = (proc.stderr or "").strip().splitlines()
            raise TmuxjailError(f"tmux {what}: {err[-1] if err else 'printed nothing'}")
        return lines[0]

    def unreachable(self) -> str | None:
        """None when the server runs and answers, or is simply not running (no socket, or a stale
        one); else why this tmux cannot talk to it (permissions, another tmux version)."""
        if not self.binary or not os.path.exists(self.socket):
            return None
        proc = self.run("list-sessions", "-F", "x", check=False)
        err = (proc.stderr or "").strip()
        if proc.returncode == 0 or not err or "no server running" in err or "Connection refused" in err:
            return None
        return err.splitlines()[-1]

    def alive(self) -> bool:
        return bool(self.binary) and os.path.exists(self.socket) and \
            self.run("list-sessions", "-F", "x", check=False).returncode == 0

    def has_session(self, name: str) -> bool:
        return self.run("has-session", "-t", f"={name}", check=False).returncode == 0

    def new_session(self, name: str, argv: list[str], cwd: str, options: dict[str, str],
                    session_options: dict[str, str] | None = None, hooks: dict[str, str] | None = None) -> str:
        """Start a detached session whose only pane runs argv; return the pane id. The options
        are set in the same tmux invocation, before the server's event loop can reap a command
        that exits at once, so a dead jail stays visible instead of taking its window with it.
        session_options (e.g. default-command) are set on the session only, in the same call."""
        target = f"={name}:"
        args = ["new-session", "-d", "-s", name, "-c", start_dir(cwd), "-P", "-F", "#{pane_id}", *argv]
        for key, value in (session_options or {}).items():
            args += [";", "set-option", "-t", target, key, value]
        # Pane hooks (pane-died) live on windows, not sessions: these go on the session's first
        # window, the agent's. tmux parses `command` when it is set.
        for hook, command in (hooks or {}).items():
            args += [";", "set-hook", "-w", "-t", target, hook, command]
        args += [";", "set-option", "-w", "-t", target, "remain-on-exit", "on"]
        args += self._option_args(target, options)
        return self.first_line(self.run(*args), "new-session")

    def new_pane(self, how: str, target: str, argv: list[str], cwd: str, options: dict[str, str],
                 detach: bool = False, split: str = "v") -> str:
        """A jailed pane in someone else's session: a new window after `target`'s window (how =
        "window") or a split of the pane `target` (how = "split", split "h" or "v"). Its options
        are set on the pane only, so the other panes of that window and session stay ordinary."""
        if how == "window":
            args = ["new-window", "-a", "-t", target]
        else:
            args = ["split-window", "-h" if split == "h" else "-v", "-t", target]
        args += [*(["-d"] if detach else []), "-c", start_dir(cwd), "-P", "-F", "#{pane_id}", *argv]
        pane = self.first_line(self.run(*args), args[0])
        # A second call: tmux cannot target the new pane later in the same command list. The
        # launcher takes tens of milliseconds before it can fail, so the pane is still there.
        rest = ["set-option", "-p", "-t", pane, "remain-on-exit", "on",
                ";", "set-option", "-p", "-t", pane, "allow-passthrough", "off"]
        for key, value in options.items():
            rest += [";", "set-option", "-p", "-t", pane, key, value]
        self.run(*rest, check=False)
        return pane

    def switch_client(self, client: str | None, target: str) -> None:
        self.run("switch-client", *(["-c", client] if client else []), "-t", target)

    def captures(self, panes: list[str]) -> dict[str, str]:
        """The visible screen of each pane, in one tmux call (a marker line between them)."""
        if not panes:
            return {}
        mark = "tmuxjail-capture" + _marks()[0]
        args: list[str] = []
        for p in panes:
            args += ["display-message", "-p", "-t", p, mark + p, ";", "capture-pane", "-p", "-t", p, ";"]
        proc = self.run(*args[:-1], check=False)
        out: dict[str, str] = {}
        current = None
        for line in proc.stdout.splitlines():
            if line.startswith(mark):
                current = line[len(mark):]
                out[current] = ""
            elif current is not None:
                out[current] += line + "\n"
        return out

    @staticmethod
    def _option_args(target: str, options: dict[str, str]) -> list[str]:
        args = [";", "set-option", "-q", "-w", "-t", target, "allow-passthrough", "off"]
        for key, value in options.items():
            if target.startswith("="):  # a session tmuxjail owns: the session carries them too
                args += [";", "set-option", "-t", target, key, value]
            args += [";", "set-option", "-p", "-t", target, key, value]
        return args

    def respawn(self, pane: str, argv: list[str], cwd: str, options: dict[str, str]) -> None:
        args = ["respawn-pane", "-k", "-t", pane, "-c", start_dir(cwd), *argv]
        args += self._option_args(pane, options)
        self.run(*args)

    def panes(self) -> list[Pane]:
        if not self.binary or not os.path.exists(self.socket):
            return []
        sep, end = _marks()
        fmt = sep.join(f"#{{{f}}}" for f in PANE_FIELDS) + end
        proc = self.run("list-panes", "-a", "-F", fmt, check=False)
        if proc.returncode != 0:
            return []
        out = []
        for record in proc.stdout.split(end + "\n"):
            parts = record.split(sep)
            if len(parts) == len(PANE_FIELDS):
                out.append(Pane(*parts))
        return out

    def pane_option(self, pane: str, option: str) -> str:
        proc = self.run("display-message", "-p", "-t", pane, f"#{{{option}}}", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def capture(self, pane: str) -> str:
        # -S: a dead pane scrolls its last output into the history before "Pane is dead".
        return self.run("capture-pane", "-p", "-J", "-S", "-200", "-t", pane, check=False).stdout

    def kill_session(self, name: str) -> None:
        # A client attached to it moves to another session instead of detaching (`x` key).
        self.run("set-option", "-t", f"={name}:", "detach-on-destroy", "off", check=False)
        self.run("kill-session", "-t", f"={name}", check=False)

    def attach_argv(self, name: str) -> list[str]:
        """argv to bring the user to the session: switch-client when we are inside this server,
        attach otherwise."""
        if self.inside and self.inside.split(",")[0] == self.socket:
            return [self.require(), *self.base, "switch-client", "-t", f"={name}"]
        return [self.require(), *self.base, "attach-session", "-t", f"={name}"]
