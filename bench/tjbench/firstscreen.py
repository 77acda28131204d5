"""Issue 18.5: time to first screen of the real CLIs (the pins of certify/pins.json, installed by
scripts/install-certify-clis.sh) in an isolated jail against the same CLI in a bare tmux pane.

"First screen" is detected the same way on both sides: capture-pane polled from the moment the
command is invoked; the first screen is the first non-empty content that then stays unchanged for
HOLD seconds, reported at the time it was first seen (not HOLD later). Offline, a CLI may stop at
a login or "cannot connect" screen: that is its first screen, on both sides."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .tools import REPO
from .world import World

if TYPE_CHECKING:
    from .parts import Bench

HOLD = 0.3  # seconds the content must stay unchanged
POLL = 0.02  # seconds between captures
TIMEOUT = 30.0  # no stable screen by then: the run counts as missing
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class Stable:
    """Fed (time, content) samples in time order; `at` is the time the first stable screen was
    first seen, once a later sample shows it unchanged for HOLD seconds; `drawn` is the time of
    the first non-empty content, stable or not (info: where the start path ends)."""

    def __init__(self, hold: float = HOLD):
        self.hold = hold
        self.since: float | None = None  # when the current content was first seen
        self.content: str | None = None
        self.at: float | None = None
        self.drawn: float | None = None

    def feed(self, t: float, content: str) -> float | None:
        if self.drawn is None and content.strip():
            self.drawn = t
        if self.at is None:
            if content != self.content:
                self.since, self.content = t, content
            elif self.since is not None and content.strip() and t - self.since >= self.hold:
                self.at = self.since
        return self.at


def first_stable(samples: Iterable[tuple[float, str]], hold: float = HOLD) -> float | None:
    """The first screen of a sequence of captures (pure; see Stable)."""
    s = Stable(hold)
    for t, content in samples:
        if s.feed(t, content) is not None:
            return s.at
    return None


# -- the pinned CLIs, where install-certify-clis put them --------------------------------------

PINS = Path(__file__).resolve().parents[2] / "certify" / "pins.json"


def cache_dir(environ: dict[str, str] | os._Environ[str]) -> Path:
    """As tests/certify finds it: the pins' hash under the certify cache."""
    base = environ.get("TMUXJAIL_CERTIFY_CACHE") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tmuxjail-certify")
    return Path(base, hashlib.sha256(PINS.read_bytes()).hexdigest()[:12])


def installed(environ: dict[str, str] | os._Environ[str]) -> dict[str, tuple[Path | None, str]]:
    """provider -> (the directory holding its executable, "npm@version"), or (None, why not)."""
    out: dict[str, tuple[Path | None, str]] = {}
    for provider, pin in json.loads(PINS.read_text())["packages"].items():
        pdir = cache_dir(environ) / provider
        exe = pdir / "node_modules" / ".bin" / pin["bin"]
        spec = f"{pin['npm']}@{pin['version']}"
        if (pdir / "SKIP").exists():
            out[provider] = (None, f"{spec} not installed: {(pdir / 'SKIP').read_text().strip()[:120]}")
        elif not exe.exists():
            out[provider] = (None, f"{spec} not installed in {pdir} (scripts/install-certify-clis.sh)")
        else:
            out[provider] = (exe.parent, spec)
    return out


# -- one timed first screen ---------------------------------------------------------------------


DEAD = re.compile(r"^Pane is dead \(.*\)$", re.MULTILINE)


def visible(captured: str) -> str:
    """What the CLI drew: tmux's remain-on-exit line ("Pane is dead (status 1, <date>)") is not
    part of it (a CLI that exits after drawing, like Claude offline, keeps its screen), nor are
    the blank lines below the last drawn one."""
    return DEAD.sub("", captured).rstrip()


class Captures:
    """capture-pane through one tmux control-mode client (`tmux -C`, attached to the keeper
    session), not a tmux client process per capture: forking and exec'ing one every POLL took
    ~4 ms of CPU each, a fifth of a CPU, taken from whichever side was starting, and the longer
    start path (the jail's) lost more of it. The screen read is the same: capture-pane's text."""

    def __init__(self, tmux: list[str], env: dict[str, str], session: str = "keeper"):
        self.proc = subprocess.Popen([*tmux, "-C", "attach-session", "-t", f"={session}"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        # The attach itself answers with a block of its own: read up to the token's, and from then
        # on each command's block is the next one.
        token = f"ready-{uuid.uuid4().hex}"
        self.send(f"display-message -p {token}")
        while self.reply() != (True, token + "\n"):
            pass

    def send(self, command: str) -> None:
        self.stdin.write(command.encode() + b"\n")
        self.stdin.flush()

    def ask(self, command: str) -> tuple[bool, str]:
        """(ok, output) of one command."""
        self.send(command)
        return self.reply()

    def reply(self) -> tuple[bool, str]:
        """The next block answering a command of this client (flags 1: the attach's own block and
        those of commands tmux runs for hooks are 0); notifications between blocks are skipped."""
        while True:
            line = self._line()
            if not line.startswith(b"%begin "):
                continue
            number, flags = line.split()[2:4]
            out: list[bytes] = []
            while not ((line := self._line()).startswith((b"%end ", b"%error ")) and line.split()[2] == number):
                out.append(line)
            if flags == b"1":
                return line.startswith(b"%end "), b"".join(out).decode(errors="replace")

    def _line(self) -> bytes:
        line = self.stdout.readline()
        if not line:
            raise RuntimeError("the tmux control client ended")
        return line

    def capture(self, target: str) -> str:
        """The pane's text; "" before the pane exists."""
        ok, text = self.ask(f"capture-pane -p -t '{target}'")
        return visible(text) if ok else ""

    def close(self) -> None:
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Seen:
    at: float | None  # seconds from invocation to the first screen
    drawn: float | None  # ... to the first non-empty content
    screen: str
    err: str  # argv's stderr if it failed


def time_first_screen(argv: list[str], env: dict[str, str], captures: Captures, target: str,
                      timeout: float = TIMEOUT) -> Seen:
    """Invoke argv (it creates the pane `target`) and poll the pane until its first screen."""
    s = Stable()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    screen = ""
    while (now := time.perf_counter()) - t0 < timeout:
        text = captures.capture(target)
        if s.feed(now - t0, text) is not None:
            screen = text
            break
        if proc.poll() not in (None, 0):
            break
        time.sleep(POLL)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return Seen(s.at, s.drawn, screen, (err or "").strip() if proc.returncode else "")


def bare_command(dry: dict[str, Any], jail_home: Path, bare_home: Path,
                 caller: dict[str, str] | None = None) -> tuple[list[str], list[Path]]:
    """The command the jail would run (the words after bwrap's `--`) with the environment the
    launcher gives it, as `env -i … CMD` for a bare pane: the variables the policy passes through
    (`env_names`, valued from the caller's environment as a start takes them: LANG, LC_ALL,
    SSL_CERT_FILE, ...; TERM is the pane's, set by the caller) and the ones it sets, the jail's
    HOME replaced by a scratch one, a fresh id where the adapter put one (Claude's --session-id);
    and the directories under that HOME the environment names (the adapter makes them before a
    jailed start). Only the proxy's variables, which the launcher adds for the jail's proxy, stay
    out: the bare pane has the host's network."""
    argv: list[str] = dry["sandbox_argv"]
    cmd = [str(uuid.uuid4()) if UUID.match(w) else w for w in argv[argv.index("--") + 1:]]
    fixed = dict(dry["policy"]["env_set"])
    passed = {k: (caller or {})[k] for k in dry.get("env_names", ())
              if k in (caller or {}) and k not in fixed and k != "TERM"}
    env, dirs = [f"{k}={v}" for k, v in sorted(passed.items())], []
    for k, v in fixed.items():
        if v == str(jail_home) or v.startswith(f"{jail_home}/"):
            v = str(bare_home) + v[len(str(jail_home)):]
            if k != "HOME":
                dirs.append(Path(v))
        env.append(f"{k}={v}")
    return ["env", "-i", *env, *cmd], dirs


# -- the part -----------------------------------------------------------------------------------


def _first_line(screen: str) -> str:
    return next((ln.strip() for ln in screen.splitlines() if ln.strip()), "")[:60]


class Sides:
    """One CLI's two sides in one world: a jailed start and the bare pane, each timed to its
    first screen and torn down (untimed) after."""

    def __init__(self, w: World, tmux: list[str], captures: Captures, term: str, provider: str, bindir: Path):
        self.w, self.tmux, self.captures, self.term, self.provider = w, tmux, captures, term, provider
        self.env = w.env_with_bin(bindir)
        self.ws_jail, self.ws_bare = w.workspace(f"jail-{provider}"), w.workspace(f"bare-{provider}")
        self.bare_home = w.root / f"bare-home-{provider}"
        self.bare_home.mkdir()
        self.dry = w.dry_run(self.ws_jail, self.env, provider=provider)
        self.network = self.dry["policy"].get("network", "?")
        self.jail_home = Path(dict(self.dry["policy"]["env_set"])["HOME"])
        self.count = 0

    def jail(self) -> Seen:
        self.count += 1
        # stop keeps a stopped record, and a name is never reused (one world holds every CLI's runs)
        name = f"{self.provider}-j{self.count}"
        seen = time_first_screen(
            self.w.tj("start", self.provider, "--mode", "isolated", "--workspace", str(self.ws_jail),
                      "--name", name, "--detach"), self.env, self.captures, f"={name}:")
        subprocess.run(self.w.tj("stop", name), env=self.env, capture_output=True, check=False)
        self.w.kill_session(name)
        if seen.err:
            raise RuntimeError(f"tmuxjail start {self.provider} failed: {seen.err[-300:]}")
        return seen

    def bare(self) -> Seen:
        self.count += 1
        name = f"{self.provider}-b{self.count}"
        cmd, dirs = bare_command(self.dry, self.jail_home, self.bare_home, self.env)
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        seen = time_first_screen(
            [*self.tmux, "new-session", "-d", "-s", name, "-c", str(self.ws_bare), cmd[0], cmd[1],
             f"TERM={self.term}", *cmd[2:], ";", "set-option", "-w", "-t", f"={name}:", "remain-on-exit", "on"],
            self.env, self.captures, f"={name}:")
        self.w.kill_session(name)
        if seen.err:
            raise RuntimeError(f"tmux new-session ({self.provider}) failed: {seen.err[-300:]}")
        return seen


def screen_of(seen: Seen) -> str:
    return _first_line(seen.screen) if seen.at is not None else f"none in {TIMEOUT:g} s"


def matched(seen: dict[str, list[Seen]], least: int = 3) -> str | None:
    """The first screen (by its first line) both sides settled on most often, when not every run
    settled on one and the same: a CLI whose first screen races its own network error (Claude Code
    offline: its welcome, or "Unable to connect" drawn within the hold) would compare one screen on
    one side with another on the other. None when every run agrees, or no screen has `least` runs
    on each side."""
    counts = {k: Counter(screen_of(x) for x in v) for k, v in seen.items()}
    if len(set(counts["jail"]) | set(counts["bare"])) <= 1:
        return None
    line, n = max(((ln, min(counts["jail"][ln], counts["bare"][ln])) for ln in counts["jail"]),
                  key=lambda x: (x[1], x[0]), default=("", 0))
    return line if n >= least else None


def report(res: Any, label: str, provider: str, seen: dict[str, list[Seen]]) -> None:
    """The rows of one CLI: every run against every run; when the sides' first screens differ
    from run to run, the runs that settled on the same screen carry the target and all runs are
    shown beside them (info)."""
    which = "; ".join(f"{k}: " + ", ".join(f"{n}× {line!r}" for line, n in Counter(map(screen_of, v)).most_common())
                      for k, v in seen.items())
    same = matched(seen)
    times = {k: [x.at for x in v] for k, v in seen.items()}
    info = " (info)" if same is not None else ""
    row = res.add("firstscreen", f"{label}: first screen, isolated jail, all runs{info}", "s", times["jail"],
                  note=f"first screens (first line) {which}")
    row.compare("same command and environment in a bare tmux pane", times["bare"], target=None if info else 1.15)
    if same is not None:
        pick = {k: [x.at for x in v if screen_of(x) == same] for k, v in seen.items()}
        row = res.add("firstscreen", f"{label}: first screen, isolated jail, the runs that settled on {same[:40]!r}",
                      "s", pick["jail"], note=f"{len(pick['jail'])} jail and {len(pick['bare'])} bare runs of "
                      f"{len(times['jail'])} each showed it first")
        row.compare("the same screen in a bare tmux pane", pick["bare"], target=1.15)
    res.add("firstscreen", f"{provider}: first non-empty content, stable or not (info)", "s",
            [x.drawn for x in seen["jail"]]).compare("same, bare tmux pane", [x.drawn for x in seen["bare"]])


def firstscreen(b: Bench) -> None:
    """Per installed pin: `tmuxjail start P --mode isolated --detach` against `tmux new-session`
    running the same command words with the same environment (env -i, scratch HOME), alternating
    which side goes first, each until its first screen."""
    from .parts import log

    res = b.results
    clis = installed(os.environ)  # the real environment: the worlds' HOME is a temp dir
    label = "{}: first screen, isolated jail vs bare tmux pane"
    if not any(d for d, _ in clis.values()):
        for provider, (_, why) in clis.items():
            res.add("firstscreen", label.format(provider), "s", [], note=f"skipped: {why}")
        return
    if os.geteuid() != 0:
        for provider in clis:
            res.add("firstscreen", label.format(provider), "s", [],
                    note="skipped: the real CLIs run only in a network namespace with no route out (root)")
        return
    w = b.world("firstscreen")
    tmux = [b.tools.tmux, "-L", w.socket]
    # No side pays for the server, and both run with no route out (scripts/offline): each CLI asks
    # for its provider's hosts, which the proxy or the bare CLI would look up with the host's resolver.
    subprocess.run([str(REPO / "scripts" / "offline"), *tmux, "new-session", "-d", "-s", "keeper", "sleep", "86400"],
                   env=w.env, capture_output=True, check=True, timeout=30)
    term = w.tmux("show-options", "-gv", "default-terminal").stdout.strip() or "screen"
    captures = Captures(tmux, w.env)
    for provider, (bindir, spec) in clis.items():
        if bindir is None:
            res.add("firstscreen", label.format(provider), "s", [], note=f"skipped: {spec}")
            continue
        sides = Sides(w, tmux, captures, term, provider, bindir)
        log(f"firstscreen: {provider} ({spec}), network {sides.network}")
        sides.jail()  # warm-up, not counted: page cache, the private home's first contents
        sides.bare()
        seen: dict[str, list[Seen]] = {"jail": [], "bare": []}
        for i in range(b.n):
            for side in ((sides.jail, sides.bare) if i % 2 == 0 else (sides.bare, sides.jail)):
                seen[side.__name__].append(side())
        report(res, f"{provider} {spec.rsplit('@', 1)[1]} (isolated, network {sides.network})", provider, seen)
    captures.close()
    w.tmux("kill-server", check=False)
