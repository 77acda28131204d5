"""The scratch world of one certification run: a temp HOME/XDG tree with its own store, a private
tmux server, planted host services, and the real `tmuxjail` command run against them."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TmuxjailError, UsageError
from ..registry import Mode
from ..subpath import inside
from ..tmux import Tmux, default_socket

if TYPE_CHECKING:
    from ..adapters.base import Adapter, Certification

SCREEN_TIMEOUT = 40.0
PROBE_TIMEOUT = 40.0
CURSOR_STANDIN_VERSION = "2026.06.04-standin"
OWN_DIRS = (".config/tmuxjail", ".local/state/tmuxjail", ".local/share/tmuxjail")


def data(name: str) -> str:
    """A probe or stand-in shipped in tmuxjail/certify/data/."""
    return resources.files(__package__).joinpath("data", name).read_text()


class Listener:
    """A unix socket service planted on the host: counts every connection made to it."""

    def __init__(self, address: str):
        self.address, self.hits = address, 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join(1)
        self.sock.close()


class Run:
    def __init__(self, adapter: Adapter, hooks: Certification, standin: bool, python: str,
                 real_env: dict[str, str]):
        self.provider = adapter.provider
        self.adapter, self.hooks = adapter, hooks
        self.real_env = real_env
        base = real_env.get("TMUXJAIL_CERTIFY_SCRATCH") or ("/var/tmp" if os.path.isdir("/var/tmp") else None)
        # Not under /tmp: Codex refuses to create its helper links (codex-linux-sandbox, which its
        # bwrap execs by name) when CODEX_HOME is under the temp dir, so its own sandbox cannot start.
        self.root = Path(tempfile.mkdtemp(prefix="tmuxjail-certify-", dir=base))
        self.home = self.root / "home"
        self.ws = self.root / "workspace"
        self.outside = self.root / "outside"
        # A scratch dir chosen under the temp dir (the tests' TMUXJAIL_CERTIFY_SCRATCH) gets a temp
        # dir of its own beside the home, as a real account's home is not inside its temp dir.
        tmp = Path(real_env.get("TMPDIR") or "/tmp").resolve()
        self.tmpdir = self.root / "tmp" if inside(str(self.root.resolve()), str(tmp)) else None
        for d in (self.home, self.ws, self.outside, self.ws / ".certify", *filter(None, [self.tmpdir])):
            d.mkdir(parents=True, exist_ok=True)
        for own in OWN_DIRS:
            (self.home / own).mkdir(parents=True, mode=0o700)
        (self.home / ".certify-canary").write_text("the scratch HOME's own file: hidden in strict modes\n")
        self.sock = f"certify-{secrets.token_hex(4)}"
        self.last_child: dict[str, Any] = {}  # what the last child-process start answered
        self.seen_process: tuple[str, str] | None = None
        self.python = python
        self.standin = standin
        self.env = self._scratch_env()
        # Where tmux puts `-L sock` for the scratch environment (which has no TMUX_TMPDIR).
        self.tmux_sock_path = default_socket(self.sock, self.env)
        self.host_dir = Path(tempfile.mkdtemp(prefix="certify-planted-", dir="/tmp"))
        self.listeners = [Listener(str(self.host_dir / "host.sock")),
                          Listener(f"@tmuxjail-certify-{secrets.token_hex(4)}")]
        self.probe = self.ws / ".certify" / "probe.sh"
        self.probe.write_text(self._probe_text())

    def _probe_text(self) -> str:
        tokens = dict.fromkeys(t for m in (Mode.isolated, Mode.verified, Mode.compatibility) for t in self.adapter.certify_tokens(m))
        install = self.home / ".local/share/cursor-agent/versions" / CURSOR_STANDIN_VERSION
        fill = {"OUTSIDE": str(self.outside / "escape"), "STATE": self.hooks.state_dir, "TOKENS": " ".join(tokens),
                "SOCK": self.sock, "SOCKPATH": self.tmux_sock_path, "HOSTSOCK": self.listeners[0].address,
                "ABSTRACT": self.listeners[1].address, "INSTALLDIR": str(install) if self.standin else ""}
        return re.sub(r"@([A-Z]+)@", lambda m: fill.get(m.group(1), m.group(0)), data("probe.sh"))

    # environment and commands
    def _scratch_env(self) -> dict[str, str]:
        h = self.home
        env = {k: v for k, v in self.real_env.items()
               if not k.startswith(("TMUX", "XDG_")) and k not in ("HOME", "PWD")}
        env.update(HOME=str(h), XDG_CONFIG_HOME=str(h / ".config"), XDG_STATE_HOME=str(h / ".local/state"),
                   XDG_DATA_HOME=str(h / ".local/share"), XDG_CACHE_HOME=str(h / ".cache"),
                   TERM="xterm-256color", LANG=env.get("LANG") or "C.UTF-8", **self.hooks.env)
        if self.tmpdir:
            env["TMPDIR"] = str(self.tmpdir)
        if self.standin:
            env["PATH"] = f"{h}/.local/bin:" + env.get("PATH", os.defpath)
        return env

    def _tj(self, args: tuple[str, ...], check: bool, extra_env: dict[str, str] | None,
            timeout: float) -> subprocess.CompletedProcess[str]:
        argv = [self.python, "-E", "-P", "-m", "tmuxjail", "-L", self.sock, *args]
        proc = subprocess.run(argv, env={**self.env, **(extra_env or {})}, cwd=self.ws, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise TmuxjailError(f"certify: `tmuxjail {' '.join(args[:3])}` failed: {msg[0] if msg else proc.returncode}")
        return proc

    def tj(self, *args: str, check: bool = True, extra_env: dict[str, str] | None = None,
           timeout: float = 120) -> str:
        return self._tj(args, check, extra_env, timeout).stdout

    def tj_json(self, *args: str, check: bool = True, extra_env: dict[str, str] | None = None,
                timeout: float = 120) -> dict[str, Any]:
        """A --json command's answer; {"error": stderr} when it printed no JSON object."""
        proc = self._tj(args, check, extra_env, timeout)
        try:
            answer = json.loads(proc.stdout)
        except ValueError:
            return {"error": proc.stderr.strip()}
        return answer if isinstance(answer, dict) else {"error": proc.stderr.strip(), "output": answer}

    def start(self, mode: Mode, name: str, *args: str, provider: str | None = None, check: bool = True,
              extra_env: dict[str, str] | None = None) -> dict[str, Any]:
        """`tmuxjail start` of this run's CLI (or `provider`) in the scratch workspace, detached."""
        return self.tj_json("start", provider or self.provider, "--mode", mode, "--workspace", str(self.ws),
                            "--name", name, "--detach", "--json",
                            *(("--network", "proxy") if mode.strict else ()),  # strict: via the proxy
                            *(("--", *args) if args else ()),
                            check=check, extra_env=extra_env)

    def start_child(self, mode: Mode, name: str, args: list[str], out: Path, extra_env: dict[str, str]) -> str:
        """A session whose CLI runs the probe as its child; its screen once the probe wrote `out`."""
        self.last_child = self.start(mode, name, *args, check=False, extra_env=extra_env)
        pane = self.last_child.get("tmux_pane")
        if not pane:
            return str(self.last_child.get("error"))
        wait_file(out, PROBE_TIMEOUT, lambda: self.pane_dead(pane))
        return self.screen(pane)

    def probe_out(self, mode: Mode) -> Path:
        return self.ws / ".certify" / f"probe-{mode}.txt"

    def tmux(self, *args: str) -> str:
        return Tmux(socket_name=self.sock, env=self.env).run(*args, check=False).stdout

    def screen(self, pane: str) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", pane)

    def pane_dead(self, pane: str) -> bool:
        return self.tmux("display-message", "-p", "-t", pane, "#{pane_dead}").strip() == "1"

    def wait_screen(self, pane: str, patterns: tuple[str, ...] = (),
                    timeout: float = SCREEN_TIMEOUT) -> tuple[str | None, str]:
        """Poll capture-pane until a pattern shows; meanwhile note the CLI's argv and cwd (a CLI
        that stops at an offline screen may exit before the screen is read)."""
        patterns = patterns or self.hooks.first_screen
        deadline, text = time.monotonic() + timeout, ""
        self.seen_process = None
        while time.monotonic() < deadline:
            self.seen_process = self.seen_process or self.cli_process(pane)
            text = self.screen(pane)
            for pat in patterns:
                if re.search(pat, text):
                    time.sleep(0.5)  # let the screen settle before recording it
                    self.seen_process = self.seen_process or self.cli_process(pane)
                    return pat, self.screen(pane)
            time.sleep(0.1)
        return None, text

    def install_cursor_standin(self) -> None:
        """The Cursor stand-in, installed inside the scratch HOME like the real installer does."""
        ver = self.home / ".local/share/cursor-agent/versions" / CURSOR_STANDIN_VERSION
        ver.mkdir(parents=True)
        node = shutil.which("node", path=self.env.get("PATH"))
        if not node:
            raise UsageError("cursor stand-in: node is not installed", hint="sudo apt-get install -y nodejs")
        shutil.copy2(os.path.realpath(node), ver / "node")  # the bundled node, as the real tarball has
        (ver / "index.js").write_text(data("cursor-index.js"))
        (ver / "package.json").write_text(json.dumps({"name": "cursor-agent-standin", "version": CURSOR_STANDIN_VERSION}))
        (ver / "cursor-agent").write_text(data("cursor-agent"))
        (ver / "cursor-agent").chmod(0o755)
        (self.home / ".local/share/cursor-agent/not-the-install-root.txt").write_text("must stay hidden\n")
        bindir = self.home / ".local/bin"
        bindir.mkdir(parents=True)
        for name in ("cursor-agent", "agent"):
            (bindir / name).symlink_to(ver / "cursor-agent")

    # processes
    def leftovers(self) -> list[str]:
        """Processes still running in this run's workspace (a CLI or daemon that outlived its pane)."""
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("tmux"):
                continue  # the run's own tmux server (it keeps the cwd it was started in)
            if cwd.startswith(str(self.ws)) or ("app-server" in cmd and str(self.root) in cmd):
                out.append(f"{pid} {cmd.strip()[:160]}")
        return out

    def cli_process(self, pane: str) -> tuple[str, str] | None:
        """(argv, cwd) of the CLI under the pane: the argv as the innermost bwrap was given it
        (a CLI may rewrite its own, as Pi does with process.title), the cwd of its first process."""
        try:
            pid = int(self.tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip())
        except ValueError:
            return None
        todo, argv = [pid], None
        while todo:
            p = todo.pop()
            try:
                cmd = [c.decode(errors="replace") for c in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0") if c]
                if cmd and os.path.basename(cmd[0]) == "bwrap":
                    if "--" in cmd:
                        argv = cmd[cmd.index("--") + 1:]
                elif cmd and argv:
                    return shlex.join(argv), os.readlink(f"/proc/{p}/cwd")
                todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
            except (OSError, ValueError):
                continue
        return None

    def close(self) -> None:
        """Stop the run's tmux server and planted services (its scratch tree stays for the caller)."""
        self.tmux("kill-server")
        Path(self.tmux_sock_path).unlink(missing_ok=True)  # tmux leaves its socket file behind
        for listener in self.listeners:
            listener.close()
        shutil.rmtree(self.host_dir, ignore_errors=True)


def other_instances(exe: str, exclude_root: str) -> list[int]:
    """Processes running this executable (in their argv: node CLIs run as `node …/cli.js`) that
    are not part of this certification run."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if int(pid) != os.getpid() and exe.encode() in argv[:4] and not cwd.startswith(exclude_root):
            out.append(int(pid))
    return sorted(out)


def wait_file(path: Path, timeout: float, pane_dead: Callable[[], bool] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if pane_dead and pane_dead():
            time.sleep(0.5)
            return path.exists()
        time.sleep(0.2)
    return False
