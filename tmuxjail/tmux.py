"""The one module that talks to tmux, with libtmux's command runner and argv words for every
command, and libtmux's `Server` (per socket) for the API's objects. It selects the server as tmux does (-L / -S, else the server
we are in, else the default) and only ever sets options on tmuxjail's own sessions, windows and
panes. Three properties hold here, each pinned by a test:

- No shell ever parses a pane command: tmux gets argv words and execs them itself. tmux splits
  its own argv at a word that ends in `;`, so such a data word is passed as `\\;` (`tmux_word`).
- A tmux server tmuxjail starts inherits no credential: libtmux runs tmux with this process's
  environment and takes no `env=`, so every command runs through `ClientCmd`, libtmux's runner
  with the client variables as `env=` (os.environ, which other threads read, stays as it is).
- A new jailed pane has `remain-on-exit` and its `@tmuxjail_*` options from the same tmux command
  that creates it (a command list), so a command that exits at once leaves a dead pane.

tmuxjail's own commands (start, list, stop...) run `ClientCmd` and import no libtmux: its
`__init__` imports every object class, which a start would pay for nothing (the figure is at
`ClientCmd`). The libtmux objects the API hands out come from `server_class`, which imports it.
Paths that never reach tmux (`--version`, `list` with no server) run no tmux command at all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections import namedtuple
from collections.abc import Callable, Mapping

from . import hostos
from .errors import TmuxjailError, UsageError

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

    import libtmux
    import libtmux.common

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
MIN_VERSION = (3, 2)
CLIENT_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ",
    "TMUX_TMPDIR", "TMPDIR", "DISPLAY", "WAYLAND_DISPLAY",  # TMPDIR: macOS gives each user their own
})
PANE_FIELDS = (
    "session_name", "window_id", "pane_id", "pane_pid", "pane_dead", "pane_dead_status",
    "pane_current_command", "@tmuxjail_id", "@tmuxjail_fp", "pane_start_command", "pane_dead_signal",
)


def _marks() -> tuple[str, str]:
    """A field and a record separator for one format. Printable ASCII: in a non-UTF-8 locale
    (LC_ALL=C) tmux prints control characters such as \x1f as `_`. Random per call: a pane
    controls its command name and screen, and must not be able to forge a separator."""
    t = os.urandom(8).hex()
    return f"~F{t}~", f"~R{t}~"


def tmux_word(word: str) -> str:
    """A data word as tmux must get it in its argv: tmux ends a command at any word that ends in
    `;` (and the next word starts another command), and reads a trailing `\\;` as a literal `;`."""
    return word[:-1] + "\\;" if word.endswith(";") else word


class ClientCmd:
    """One tmux client run, as libtmux's command runner (`libtmux.common.tmux_cmd`, what
    `Server.cmd` runs) runs it: same Popen, decoding and lines (stdout without its trailing empty
    lines, stderr without empty lines, has-session's error as its output), plus `env=`. libtmux
    runs tmux with this process's environment and takes no `env=`; a server that tmuxjail starts
    inherits its client's environment, so every command gets the narrowed one here, and
    os.environ, which other threads read meanwhile, is never touched.

    It is also the start path's stand-in for libtmux: `import libtmux` (its `__init__` imports
    every object class) would add 77 ms of imports (`-X importtime`) and 70 ms of CPU to a warm
    start (235 against 165 ms; medians of 15 interleaved runs in fresh interpreters, load 5,
    bench/libtmux_cost.py --lean), so tmuxjail's own commands do not import libtmux; the objects
    the API hands out (`server_class`) do, and run through this too."""

    def __init__(self, argv: list[str], env: Mapping[str, str], wait: bool = True) -> None:
        self.cmd = [str(a) for a in argv]
        self.process = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        encoding="utf-8", errors="backslashreplace", env=env)
        if wait:
            self.wait()

    def wait(self) -> ClientCmd:
        """The run's outcome (wait=False: started only, as the early pane's new-session is)."""
        stdout, stderr = self.process.communicate()
        self.returncode = self.process.returncode
        lines = stdout.split("\n")
        while lines and lines[-1] == "":
            lines.pop()
        self.stderr = [line for line in stderr.split("\n") if line]
        self.stdout = [self.stderr[0]] if "has-session" in self.cmd and self.stderr and not lines else lines
        return self


_SERVER_CLASS: type[libtmux.Server] | None = None


def server_class() -> type[libtmux.Server]:
    """libtmux's Server whose every command (its own, and those of the Session, Window and Pane
    objects it hands out) runs tmux with the client environment only. Imports libtmux."""
    global _SERVER_CLASS
    if _SERVER_CLASS is None:
        import libtmux
        import libtmux.common
        import libtmux.exc

        class JailCmd(ClientCmd, libtmux.common.tmux_cmd):
            """ClientCmd, typed as the tmux_cmd that Server.cmd returns."""

        class JailServer(libtmux.Server):
            def __init__(self, *args: Any, client_env: Mapping[str, str], **kwargs: Any) -> None:
                self.client_env = client_env
                super().__init__(*args, **kwargs)

            def cmd(self, cmd: str, *args: Any, target: str | int | None = None) -> libtmux.common.tmux_cmd:
                # The argv libtmux's Server.cmd builds, run with env=. -u: the bytes as they are
                # under any locale; under LC_ALL=C tmux prints `_` for each non-ASCII or control
                # character (a pane's directory would read as another path, and libtmux's own
                # field separator is not ASCII). libtmux puts -t after the command name: so do
                # we, with -u before it.
                where = ("-t", str(target)) if target is not None else ()
                colors = {256: ["-2"], 88: ["-8"]}.get(self.colors, []) if self.colors else []
                if self.colors and not colors:
                    raise libtmux.exc.UnknownColorOption
                server = [*colors, *([f"-f{self.config_file}"] if self.config_file else []),
                          *([f"-S{self.socket_path}"] if self.socket_path else []),
                          *([f"-L{self.socket_name}"] if self.socket_name else [])]
                tmux_bin = self.tmux_bin or shutil.which("tmux")
                try:
                    if not tmux_bin:
                        raise FileNotFoundError
                    return JailCmd([tmux_bin, *server, "-u", cmd, *where, *args], self.client_env)
                except FileNotFoundError:
                    raise libtmux.exc.TmuxCommandNotFound from None

        _SERVER_CLASS = JailServer
    return _SERVER_CLASS


W = tmux_word


# The opt-in "waiting" alert (docs/keys-and-list.md): the jail's window gets tmux's
# monitor-silence from the server's @tmuxjail-waiting-alert (seconds; unset or 0: off), read by
# tmux itself in the same command (-F), so a start pays no extra tmux call. An agent's busy
# footer animates while it works; once it waits for you its window goes quiet: tmux flags it
# (`~`), and the alert-silence hook shows WAITING_MESSAGE on the client last used.
WAITING_MESSAGE = "display-message -d 0 'tmuxjail: #{session_name}:#{window_index} waits for you'"


def waiting_alert(*target: str, scope: str = "-w") -> list[str]:
    """The window's monitor-silence, and an alert-silence hook: a message on the client last used
    (tmux's own bell and `~` reach only clients of that session). scope: where the hook goes,
    the session tmuxjail owns ("" ; its window keeps only the pane-died hook) or the window."""
    return ["set-option", "-w", "-F", *target, "monitor-silence",
            "#{?@tmuxjail-waiting-alert,#{@tmuxjail-waiting-alert},0}",
            ";", "set-hook", *([scope] if scope else []), *target, "alert-silence", WAITING_MESSAGE]


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


class DuplicateSession(TmuxjailError):
    """new-session refused: the server already has a session of that name."""


Pane = namedtuple("Pane", "session_name window_id pane_id pane_pid pane_dead pane_dead_status "
                         "pane_current_command tmuxjail_id tmuxjail_fp start_command dead_signal screen_hit",
                  defaults=("",))
# tmux refuses a command (all its words) of more than about 16 KB: captures() sends batches under this.
BATCH_BYTES = 12_000


class Tmux:
    def __init__(self, socket_name: str | None = None, socket_path: str | None = None,
                 env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self.binary = shutil.which("tmux")
        # A server that tmuxjail starts inherits this environment as its global one, visible to
        # `show-environment -g` and every later pane: give it no credentials.
        self.env = {k: v for k, v in env.items() if k in CLIENT_ENV or k.startswith(("LC_", "XDG_"))}
        self.inside = env.get("TMUX", "")
        self._server: libtmux.Server | None = None
        self._reported = False  # self.socket is what the running server printed (new_session)
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
        """The socket path as the running server reports it (after it exists): as new_session
        printed it, else asked."""
        if self._reported:
            return self.socket
        proc = self.run("display-message", "-p", "#{socket_path}", check=False)
        path = proc.stdout.strip()
        if proc.returncode == 0 and path.startswith("/"):
            self.socket = path
        return self.socket

    def require(self) -> str:
        if not self.binary:
            raise TmuxjailError("tmux is not installed",
                                hint="brew install tmux" if hostos.darwin() else "sudo apt-get install -y tmux")
        return self.binary

    @property
    def server(self) -> libtmux.Server:
        """This socket's libtmux Server (made on first use)."""
        if self._server is None:
            cls = server_class()
            if self.base[0] == "-S":
                self._server = cls(socket_path=self.base[1], tmux_bin=self.require(), client_env=self.env)
            else:
                self._server = cls(socket_name=self.base[1], tmux_bin=self.require(), client_env=self.env)
        return self._server

    def _exec(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """One tmux invocation of these words, as they are, as libtmux's runner runs it."""
        return self._outcome(args, self._start(args, wait=True), check)

    def _start(self, args: list[str], wait: bool) -> ClientCmd:
        try:
            # The same -u as JailServer.cmd, and the same narrowed environment.
            return ClientCmd([self.require(), *self.base, "-u", *args], self.env, wait=wait)
        except OSError as exc:
            raise TmuxjailError(f"tmux {args[0]}: {exc or type(exc).__name__}") from None

    @staticmethod
    def _outcome(args: list[str], out: ClientCmd, check: bool) -> subprocess.CompletedProcess:
        proc = subprocess.CompletedProcess(
            args, out.returncode, "".join(f"{line}\n" for line in out.stdout),
            "".join(f"{line}\n" for line in out.stderr))
        if check and proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise TmuxjailError(f"tmux {args[0]}: {msg[-1] if msg else 'failed'}")
        return proc

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A tmux command, or several separated by `;` words; any other word is data."""
        return self._exec([a if a == ";" else tmux_word(a) for a in args], check=check)

    def run_detached(self, *args: str) -> None:
        """A tmux command that blocks its client until the user is done (display-popup), without
        waiting for it: a child process in a session of its own, with no terminal, runs it."""
        self.require()
        if os.fork() != 0:
            return
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            self.run(*args, check=False)
        finally:
            os._exit(0)

    def version(self) -> str:
        return self._exec(["-V"], check=False).stdout.strip()

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
        for _ in range(3):
            if not self.binary or not os.path.exists(self.socket):
                return None
            proc = self.run("list-sessions", "-F", "x", check=False)
            err = (proc.stderr or "").strip()
            if proc.returncode == 0 or not err or "no server running" in err or "Connection refused" in err:
                return None
            if "server exited unexpectedly" not in err:
                break
            time.sleep(0.1)  # a server exiting (its last session just ended): look again
        return err.splitlines()[-1]

    def alive(self) -> bool:
        return bool(self.binary) and os.path.exists(self.socket) and \
            self.run("list-sessions", "-F", "x", check=False).returncode == 0

    def has_session(self, name: str) -> bool:
        return self.run("has-session", "-t", f"={name}", check=False).returncode == 0

    def new_session(self, name: str, argv: list[str], cwd: str, options: dict[str, str],
                    session_options: dict[str, str] | None = None, hooks: dict[str, str] | None = None,
                    window: str | None = None) -> str:
        """Start a detached session whose only pane runs argv; return the pane id. The options
        are set in the same tmux invocation, before the server's event loop can reap a command
        that exits at once, so a dead jail stays visible instead of taking its window with it.
        session_options (e.g. default-command) are set on the session only, in the same call."""
        args = self._new_session_args(name, argv, cwd, options, session_options, hooks, window)
        return self._session_made(name, self._exec(args, check=False))

    def new_session_started(self, name: str, argv: list[str], cwd: str, options: dict[str, str],
                            session_options: dict[str, str], hooks: dict[str, str]) -> Callable[[], str]:
        """new_session, with its client started and not waited on (the early pane,
        sessions/early.py): the server makes the session and forks the pane while the caller goes
        on. Calling what it returns waits, and gives the pane id or raises as new_session does."""
        args = self._new_session_args(name, argv, cwd, options, session_options, hooks, None)
        out = self._start(args, wait=False)
        done: list[subprocess.CompletedProcess] = []

        def pane() -> str:
            if not done:
                done.append(self._outcome(args, out.wait(), check=False))
            return self._session_made(name, done[0])

        return pane

    def _new_session_args(self, name: str, argv: list[str], cwd: str, options: dict[str, str],
                          session_options: dict[str, str] | None, hooks: dict[str, str] | None,
                          window: str | None) -> list[str]:
        target = f"={name}:"
        # -n: the window is named after the CLI (tmux's automatic name would be the pane's current
        # command: python3, bwrap, strace), and so is each new window of the session.
        window = window or options.get("@tmuxjail_provider")
        # -P -F: the pane id, and where the server really put its socket (refresh_socket).
        args = ["new-session", "-d", "-s", name, "-c", W(start_dir(cwd)), *(["-n", W(window)] if window else []),
                "-P", "-F", "#{pane_id} #{socket_path}", *map(W, argv)]
        if window:
            args += [";", "set-hook", "-t", target, "after-new-window", W(f"rename-window {window}-shell")]
        # silence-action any: the agent's window is the session's only one, its current one, and
        # under tmux's default (other) it would never alert.
        args += [";", *waiting_alert("-t", target, scope=""), ";", "set-option", "-t", target, "silence-action", "any"]
        for key, value in (session_options or {}).items():
            args += [";", "set-option", "-t", target, key, W(value)]
        # Pane hooks (pane-died) live on windows, not sessions: these go on the session's first
        # window, the agent's. tmux parses `command` when it is set.
        for hook, command in (hooks or {}).items():
            args += [";", "set-hook", "-w", "-t", target, hook, W(command)]
        args += [";", "set-option", "-w", "-t", target, "remain-on-exit", "on"]
        return args + self._option_args(target, options)

    def _session_made(self, name: str, proc: subprocess.CompletedProcess) -> str:
        """new-session's outcome: the pane id (and the server's real socket), or why not."""
        if proc.returncode != 0 and proc.stderr.startswith(f"duplicate session: {name}\n"):
            raise DuplicateSession(f"tmux new-session: duplicate session: {name}")
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise TmuxjailError(f"tmux new-session: {msg[-1] if msg else 'failed'}")
        self.first_line(proc, "new-session")
        pane, _, socket = proc.stdout.strip().partition(" ")
        if socket.startswith("/"):
            self.socket, self._reported = socket, True
        return pane

    def new_pane(self, how: str, target: str, argv: list[str], cwd: str, options: dict[str, str],
                 detach: bool = False, split: str = "v", window: str | None = None) -> str:
        """A jailed pane in someone else's session: a new window after `target`'s window (how =
        "window") or a split of the pane `target` (how = "split", split "h" or "v"). Its options
        are set on the pane only, so the other panes of that window and session stay ordinary."""
        if how == "window":
            args = ["new-window", "-a", "-t", W(target), *(["-n", W(window)] if window else [])]
        else:
            args = ["split-window", "-h" if split == "h" else "-v", "-t", W(target)]
        args += ["-c", W(start_dir(cwd)), "-P", "-F", "#{pane_id}", *map(W, argv)]
        # Not -d: the new pane becomes the command list's current pane, so the options below
        # land on it in this same tmux command, before tmux can reap a command that exits at
        # once; then the previous window or pane is selected again if asked.
        args += [";", "set-option", "-p", "remain-on-exit", "on",
                 ";", "set-option", "-p", "allow-passthrough", "off"]
        for key, value in options.items():
            args += [";", "set-option", "-p", key, W(value)]
        if how == "window" and options:  # an agent's own window (not a shell's; a split's is the user's)
            args += [";", *waiting_alert()]
        if detach:
            args += [";", "last-window" if how == "window" else "last-pane"]
        return self.first_line(self._exec(args), args[0])

    def switch_client(self, client: str | None, target: str) -> None:
        self.run("switch-client", *(["-c", client] if client else []), "-t", target)

    def captures(self, panes: list[str]) -> dict[str, str]:
        """The visible screen of each pane, in as few tmux calls as its size limit allows (a
        marker line before each screen)."""
        # The marker's pane id comes from #{pane_id}: display-message runs its text through
        # strftime, and `%12` would come out as a padded `%12`.
        mark = "tmuxjail-capture" + _marks()[0]
        out: dict[str, str] = {}
        batch: list[str] = []
        size = 0
        for i, p in enumerate(panes):
            words = ["display-message", "-p", "-t", p, mark + "#{pane_id}", ";", "capture-pane", "-p", "-t", p, ";"]
            batch += words
            size += sum(len(w.encode()) + 1 for w in words)
            if size < BATCH_BYTES and i < len(panes) - 1:
                continue
            # A last marker: libtmux drops the output's trailing empty lines, which would be the
            # last screen's own bottom lines.
            batch += ["display-message", "-p", mark + "end"]
            current = None
            for line in self.run(*batch, check=False).stdout.splitlines():
                if line.startswith(mark):
                    current = line[len(mark):]
                    out[current] = ""
                elif current is not None:
                    out[current] += line + "\n"
            out.pop("end", None)
            batch, size = [], 0
        return out

    @staticmethod
    def _option_args(target: str, options: dict[str, str]) -> list[str]:
        args = [";", "set-option", "-q", "-w", "-t", target, "allow-passthrough", "off"]
        for key, value in options.items():
            if target.startswith("="):  # a session tmuxjail owns: the session carries them too
                args += [";", "set-option", "-t", target, key, W(value)]
            args += [";", "set-option", "-p", "-t", target, key, W(value)]
        return args

    def respawn(self, pane: str, argv: list[str], cwd: str, options: dict[str, str]) -> None:
        args = ["respawn-pane", "-k", "-t", W(pane), "-c", W(start_dir(cwd)), *map(W, argv)]
        args += self._option_args(pane, options)
        self._exec(args)

    def panes(self, search: str | None = None) -> list[Pane]:
        """Every pane of the server, in one list-panes. search: an extended regular expression
        (tmux's #{C/ri:...}): each pane's screen_hit is the first line of its visible screen that
        matches it, case-insensitively, from 1; "0" when none does."""
        if not self.binary or not os.path.exists(self.socket):
            return []
        fields: tuple[str, ...] = PANE_FIELDS
        if search is not None:
            if any(c in search for c in "#{},"):  # format syntax: the pattern would not reach tmux whole
                raise ValueError(f"a search pattern with format syntax: {search!r}")
            fields = (*fields, f"C/ri:{search}")
        sep, end = _marks()
        fmt = sep.join(f"#{{{f}}}" for f in fields) + end
        proc = self.run("list-panes", "-a", "-F", fmt, check=False)
        if proc.returncode != 0:
            return []
        out = []
        for record in proc.stdout.split(end + "\n"):
            parts = record.split(sep)
            if len(parts) == len(fields):
                out.append(Pane(*parts))
        return out

    def objects(self, session: str | None, pane: str | None) -> tuple[libtmux.Session | None, libtmux.Pane | None]:
        """libtmux's Session (by exact name) and Pane (by id) on this server, None for either
        that does not exist (any more)."""
        if not self.binary or not os.path.exists(self.socket):
            return None, None
        import libtmux.exc
        from libtmux.pane import Pane as LibtmuxPane

        found_pane = None
        if pane:
            try:
                found_pane = LibtmuxPane.from_pane_id(server=self.server, pane_id=pane)
            except libtmux.exc.LibTmuxException:
                pass
        found_session = None
        if session:
            found_session = self.server.sessions.get(session_name=session, default=None)
        return found_session, found_pane

    def pane_option(self, pane: str, option: str) -> str:
        proc = self.run("display-message", "-p", "-t", pane, f"#{{{option}}}", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def capture(self, pane: str) -> str:
        # -S: a dead pane scrolls its last output into the history before "Pane is dead".
        return self.run("capture-pane", "-p", "-J", "-S", "-200", "-t", pane, check=False).stdout

    def kill_session(self, name: str) -> None:
        """Each client on it goes back to the session it came from (its last session), else is
        detached cleanly: never into whichever unrelated session was most recently active, where
        `detach-on-destroy off` took it (28.13: stop, the `x` key, the end of discover)."""
        listed = self.run("list-clients", "-t", f"={name}", "-F", "#{client_name}\t#{client_last_session}",
                          check=False).stdout
        for line in listed.splitlines():
            client, _, last = line.partition("\t")
            if last and last != name and self.has_session(last):
                self.run("switch-client", "-c", client, "-t", f"={last}", check=False)
            else:
                self.run("detach-client", "-t", client, check=False)
        self.run("kill-session", "-t", f"={name}", check=False)

    def attach_argv(self, name: str) -> list[str]:
        """argv to bring the user to the session: switch-client when we are inside this server,
        attach otherwise."""
        if self.inside and self.inside.split(",")[0] == self.socket:
            return [self.require(), *self.base, "switch-client", "-t", f"={name}"]
        return [self.require(), *self.base, "attach-session", "-t", f"={name}"]


def hand_over(argv: list[str]) -> int:
    """Run an argv from `attach_argv`. switch-client goes through libtmux and returns its exit
    status. attach-session replaces this process with an interactive tmux client (libtmux cannot
    hand a terminal over), with this process's environment, as the user's own `tmux attach`."""
    if argv[3:4] == ["switch-client"] and argv[1] in ("-L", "-S"):
        tmux = Tmux(socket_name=argv[2]) if argv[1] == "-L" else Tmux(socket_path=argv[2])
        return tmux.run(*argv[3:], check=False).returncode
    os.execv(argv[0], argv)

