"""Shared fixtures: a private HOME/XDG tree, a private tmux server, stand-in provider CLIs, and a
runner for the real `tmuxjail` command. Nothing here mocks tmux, bubblewrap or SQLite."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

STANDIN = Path(__file__).parent / "standins" / "standin.sh"
STANDIN_NAMES = ("codex", "claude", "cursor-agent", "pi")


def wait_until(pred, timeout: float = 10.0, what: str | None = None):
    """Poll pred every 50 ms until it returns something truthy, and return that. At the deadline,
    pred is asked once more; if still falsy, raise naming `what`, or (no `what`) return the falsy
    value so the caller can `assert wait_until(...), detail`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    got = pred()
    if not got and what is not None:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return got


def have_jail() -> str | None:
    if not shutil.which("tmux"):
        return "tmux is not installed"
    if not os.access("/usr/bin/bwrap", os.X_OK):
        return "bubblewrap is not installed"
    return None


class Env:
    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        self.ws = root / "ws"
        self.bin = root / "bin"
        self.outside = root / "outside"
        for d in (self.home, self.ws, self.bin, self.outside):
            d.mkdir(parents=True, exist_ok=True)
        for name in STANDIN_NAMES:
            dst = self.bin / name
            shutil.copy(STANDIN, dst)
            dst.chmod(0o755)
        self.socket = f"tjtest-{uuid.uuid4().hex[:8]}"
        self.flags = ["-L", self.socket]  # how tmuxjail and tmux address this test's server
        self.vars = {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TERM": "xterm-256color",
            "SHELL": "/bin/sh",
        }

    def use_default_server(self, locale: str = "C") -> None:
        """Address the server as a newcomer does: no -L/-S, tmux's default server, in a
        TMUX_TMPDIR of this test's own with no tmux-UID directory yet (a fresh account or a
        reboot), and a non-UTF-8 locale (cron, ssh without LANG)."""
        tmpdir = self.root / "tmux-tmpdir"
        tmpdir.mkdir(exist_ok=True)
        self.vars["TMUX_TMPDIR"] = str(tmpdir)
        self.vars.pop("LANG", None)
        self.vars["LC_ALL"] = locale  # LC_ALL from the caller (e.g. the newcomer tier) passes through otherwise
        self.default_socket = str(tmpdir / f"tmux-{os.getuid()}" / "default")
        self.flags = []

    @property
    def tmux_flags(self) -> list[str]:
        return self.flags or ["-S", self.default_socket]

    @property
    def config_dir(self) -> Path:
        return self.home / ".config" / "tmuxjail"

    @property
    def state_dir(self) -> Path:
        return self.home / ".local" / "state" / "tmuxjail"

    @property
    def store(self) -> Path:
        return self.state_dir / "store.db"

    def environ(self, **extra) -> dict:
        # Not the runner's PWD either: tmuxjail takes the workspace from $PWD, and a test's
        # processes run in the test's own directories (run() sets it to their cwd).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "XDG_")) and k not in ("PWD", "OLDPWD")}
        env.update(self.vars)
        env.update(extra)
        return env

    def run(self, *args, check=False, cwd=None, env_extra=None, timeout=60) -> subprocess.CompletedProcess:
        env = self.environ(PWD=str(cwd or self.ws), **(env_extra or {}))
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "tmuxjail", *self.flags, *args],  # -P: no cwd on sys.path, like the console script
            cwd=cwd or self.ws, env=env, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"tmuxjail {args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def json(self, *args, **kw):
        args = list(args)
        at = args.index("--") if "--" in args else len(args)
        proc = self.run(*args[:at], "--json", *args[at:], check=True, **kw)
        return json.loads(proc.stdout)

    def tmux(self, *args, check=True) -> str:
        # -u: what tmux prints is read byte for byte, also under LC_ALL=C (the newcomer tier).
        proc = subprocess.run(["tmux", "-u", *self.tmux_flags, *args], capture_output=True, text=True,
                              env=self.environ())
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {args}: {proc.stderr}")
        return proc.stdout

    def report(self, name: str = "codex", ws: Path | None = None, timeout: float = 10) -> dict:
        path = (ws or self.ws) / f".standin-{name}.report"
        wait_until(path.exists, timeout, f"a stand-in report at {path}")
        out: dict = {}
        for line in path.read_text().splitlines():
            k, _, v = line.partition(": ")
            out.setdefault(k, []).append(v)
        return {k: v[0] if len(v) == 1 else v for k, v in out.items()}

    def clear_report(self, name: str = "codex") -> None:
        (self.ws / f".standin-{name}.report").unlink(missing_ok=True)

    def kill(self):
        subprocess.run(["tmux", *self.tmux_flags, "kill-server"], capture_output=True, env=self.environ())
        # tmux leaves its socket file behind when the server exits: remove this test's (its own
        # server and any other it named after it, e.g. "<socket>-term"), so runs leave none.
        tmux_dir = Path("/tmp", f"tmux-{os.getuid()}")  # environ() drops TMUX_TMPDIR
        # ... and those of servers in a TMUX_TMPDIR inside this test's directory.
        for sock in [*tmux_dir.glob(f"{self.socket}*"), *self.root.glob("**/tmux-*/*")]:
            if sock.name == f"{self.socket}.lock":  # a server killed while it started leaves its lock
                sock.unlink(missing_ok=True)
            if not sock.is_socket():
                continue
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, env=self.environ())
            sock.unlink(missing_ok=True)


@pytest.fixture
def home_root():
    """A scratch directory outside /tmp and $TMPDIR, for a home that must not lie in a shared
    temp dir (a Mac's Seatbelt profiles share those); removed after. Skips without tmux."""
    import tempfile

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    base = Path(os.path.expanduser("~")) / ".cache"
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="tj-home-", dir=base))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.kill()


@pytest.fixture
def jail_env(env):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    return env


def process_chain(pid: int) -> list[str]:
    """Names of pid's ancestors, nearest first."""
    names = []
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            break
        names.append(stat[stat.index("(") + 1: stat.rindex(")")])
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return names


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except FileNotFoundError:
            continue
        for k in map(int, kids):
            out.append(k)
            todo.append(k)
    return out


# Shared by the adversarial tests: a fixture taken as a parameter, not imported into each module.
@pytest.fixture
def world(jail_env):
    return furnish(jail_env)


def furnish(env):
    """Things outside the jail that an attack would want, and a way to see they are unchanged."""
    (env.home / ".ssh").mkdir()
    (env.home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    sentinel = env.outside / "sentinel"
    sentinel.write_text("untouched")
    env.run("approve", "shell", "--yes", check=True)  # verified mode runs only what a human approved
    env.sentinel = sentinel

    def unchanged():
        assert sentinel.read_text() == "untouched"
        assert (env.home / ".ssh" / "id_ed25519").read_text() == "PRIVATE KEY"
        sessions = sorted(env.tmux("ls", "-F", "#{session_name}").split())
        assert sessions == ["j"], sessions
        n = sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0]
        assert n == 1
    env.unchanged = unchanged
    return env


def _tmux_reads_utf8() -> bool:
    """Whether tmux, started with this environment, prints non-ASCII: libtmux's object queries
    (Session/Pane lookups) split tmux's output on a non-ASCII separator and run tmux without -u,
    so under LC_ALL=C they fail inside libtmux itself. tmuxjail's own tmux calls pass -u."""
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = os.environ.get(name)
        if value:
            return "utf-8" in value.lower() or "utf8" in value.lower()
    return False


LIBTMUX_OBJECTS = pytest.mark.skipif(
    not _tmux_reads_utf8(), reason="libtmux's Session/Pane queries need a UTF-8 locale (under LC_ALL=C "
    "tmux prints its non-ASCII field separator as '_'); tmuxjail's own tmux calls pass -u")
