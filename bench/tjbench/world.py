"""A private tmuxjail world per part: temp HOME and XDG dirs, its own tmux server, stand-in CLIs."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

from .tools import Tools

READY = ".ready"
SMALL_SIZE = 1024


class Servers:
    """The private tmux servers of a run, so that every one is killed at the end."""

    def __init__(self, tmux: str):
        self.tmux = tmux
        self.sockets: list[str] = []

    def new(self) -> str:
        sock = f"bench-{secrets.token_hex(4)}"
        self.sockets.append(sock)
        return sock

    def kill_all(self) -> None:
        """Kill our private servers, and remove the socket files tmux 3.3 leaves behind."""
        sockdir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")
        for sock in self.sockets:
            subprocess.run([self.tmux, "-L", sock, "kill-server"], capture_output=True, check=False)
            path = sockdir / sock
            if path.is_socket() and subprocess.run([self.tmux, "-L", sock, "list-sessions"],
                                                   capture_output=True, check=False).returncode != 0:
                path.unlink(missing_ok=True)
        self.sockets.clear()


class World:
    """A temporary HOME + XDG dirs + a private tmux server socket name."""

    def __init__(self, tools: Tools, servers: Servers, base: Path, label: str):
        self.tools = tools
        self.root = base / label
        self.home = self.root / "home"
        self.bin = self.root / "bin"
        for d in (self.home, self.bin):
            d.mkdir(parents=True)
        self.socket = servers.new()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            PATH=f"{self.bin}:{env.get('PATH', os.defpath)}",
            LC_ALL="C.UTF-8",
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env = env

    def env_with_bin(self, bindir: Path) -> dict[str, str]:
        return dict(self.env, PATH=f"{bindir}:{self.env['PATH']}")

    def tj(self, *args: str) -> list[str]:
        return self.tools.tmuxjail(self.socket, *args)

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([self.tools.tmux, "-L", self.socket, *args], env=self.env, capture_output=True,
                           text=True, check=False)
        if check and p.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {p.stderr.strip()}")
        return p

    def store_path(self) -> Path:
        return self.home / ".local" / "state" / "tmuxjail" / "store.db"

    def workspace(self, name: str) -> Path:
        ws = self.root / "ws" / name
        ws.mkdir(parents=True, exist_ok=True)
        return ws

    def dry_run(self, ws: Path, env: dict[str, str] | None = None, provider: str = "codex") -> dict[str, Any]:
        p = subprocess.run(self.tj("start", provider, "--mode", "isolated", "--workspace", str(ws),
                                   "--dry-run", "--json"), env=env or self.env, capture_output=True, text=True,
                           check=False)
        if p.returncode != 0:
            raise RuntimeError(f"tmuxjail start --dry-run failed: {p.stderr.strip()}")
        out: dict[str, Any] = json.loads(p.stdout)
        return out

    def dry_run_argv(self, ws: Path, env: dict[str, str] | None = None) -> list[str]:
        """The bwrap argv tmuxjail would run for this workspace (the launcher adds only its
        --seccomp and --json-status-fd fds). A dry run creates nothing: make the private home
        the argv binds, as a real start would."""
        d = self.dry_run(ws, env)
        home = d["policy"].get("private_home")
        if home:
            Path(home, ".codex").mkdir(parents=True, exist_ok=True, mode=0o700)
        argv: list[str] = d["sandbox_argv"]
        return argv

    def kill_session(self, name: str) -> None:
        self.tmux("kill-session", "-t", f"={name}", check=False)

    def pane_pid(self, name: str) -> int | None:
        p = self.tmux("display-message", "-p", "-t", f"={name}:", "#{pane_pid}", check=False)
        return int(p.stdout.strip()) if p.stdout.strip().isdigit() else None


def make_standin(path: Path, size: int) -> Path:
    """A stand-in provider CLI: writes the ready file into its cwd (the workspace), then sleeps.
    Padded to `size` bytes after the exec line (sparse past the first KB); sh never reads that far."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = f"#!/bin/sh\n: > {READY}\nexec sleep 3600\n".encode()
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"\0" * (min(size, SMALL_SIZE) - len(head)))
    if size > SMALL_SIZE:
        os.truncate(path, size)
    path.chmod(0o755)
    return path
