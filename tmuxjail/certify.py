"""`tmuxjail certify PROVIDER`: run the installed CLI in real jailed panes, per mode, and record
what was observed. Needs no credentials and no network.

Everything runs against a scratch HOME/XDG tree (its own store, approvals, private homes) and a
private tmux server (-L certify-<random>), by calling the real `tmuxjail` command with that
environment: the user's real state is never touched, and the real HOME is snapshotted before and
after to prove it. The evidence goes to the user's store (event "certify") and a JSON file only
after the last snapshot. A profile is never edited: the suggested change is printed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import TmuxjailError, UsageError
from .registry import MODES

if TYPE_CHECKING:
    from .model import Profile

SCREEN_TIMEOUT = 40.0
PROBE_TIMEOUT = 40.0
SMALL = 1 << 20  # files hashed by content in the real-home snapshot (the rest: by lstat incl. ctime)
STATE_NAMES = (".codex", ".claude", ".claude.json", ".pi", ".cursor", ".config", ".local/state",
               ".local/share/cursor-agent", ".agents", ".gitconfig")
CURSOR_STANDIN_VERSION = "2026.06.04-standin"


# -- per-provider drivers --------------------------------------------------------------------

@dataclass(frozen=True)
class Driver:
    provider: str
    first_screen: tuple[str, ...]  # regexes; any match = the CLI reached its first screen
    state_dir: str  # relative to HOME: where the CLI keeps its state once relocated/approved
    token_files: tuple[str, ...]  # relative to HOME: written on the first run, kept afterwards
    resume_syntax: str  # regex the relaunched CLI's argv must match
    child: str  # "session" (a second session runs the child) or "keys" (typed into run 1)
    child_note: str
    env: dict[str, str] = field(default_factory=dict)
    probe_env: dict[str, str] = field(default_factory=dict)

    def tokens(self, mode: str) -> tuple[str, ...]:
        if self.provider == "claude-code" and mode == "compatibility":
            return (".claude.json",)  # compatibility does not relocate: Claude's default place
        if self.provider == "claude-code" and mode == "verified":
            # A verified start seeds ~/.claude/.config.json from ~/.claude.json, and Claude reads
            # (and rewrites) that one first: one config shared with plain `claude` (issue 12.12).
            return (".claude/.config.json",)
        return self.token_files

    def child_args(self, probe: str, out: str) -> list[str]:
        cmd = f"/bin/sh {probe} {out}"
        if self.provider == "codex":
            # Codex's own bubblewrap, nested inside ours; workspace-write so the probe can report.
            return ["sandbox", "-c", 'sandbox_mode="workspace-write"', "--", "/bin/sh", probe, out]
        if self.provider == "claude-code":
            # apiKeyHelper is a shell command Claude runs before any login or API call.
            return ["-p", "tmuxjail certify probe", "--settings", json.dumps({"apiKeyHelper": cmd})]
        if self.provider == "cursor":
            return ["-p", "!" + cmd]
        return []

    def child_keys(self, probe: str, out: str) -> str:
        return f"!/bin/sh {probe} {out}"  # pi: "!" runs a bash command, no model needed


DRIVERS = {
    "codex": Driver(
        "codex", (r"Welcome to Codex", r"Sign in with ChatGPT", r"OpenAI's command-line coding agent"),
        ".codex", (".codex/installation_id",), r"--no-daemon resume (--last|\S+)", "session",
        "`codex sandbox -c sandbox_mode=\"workspace-write\" -- sh PROBE`: Codex's own bwrap nested in ours"),
    "claude-code": Driver(
        "claude-code", (r"Welcome to Claude Code", r"Unable to connect to Anthropic services",
                        r"Select login method", r"Choose the text style"),
        ".claude", (".claude/.claude.json",), r"--resume [0-9a-f-]{36}", "session",
        "`claude -p --settings '{\"apiKeyHelper\": \"sh PROBE\"}'`: Claude runs the key helper as a child before any API call",
        probe_env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}),
    "pi": Driver(
        "pi", (r"pi v\d+\.\d+", r"No models available"),
        ".pi/agent", (".pi/agent/auth.json", ".pi/agent/settings.json"), r"(--continue|--session \S+)", "keys",
        "`!sh PROBE` typed into Pi's editor: Pi's user bash command runs without a model (its bash tool needs one)",
        env={"PI_OFFLINE": "1"}),
    "cursor": Driver(
        "cursor", (r"Cursor Agent",), ".cursor", (".cursor/cli-config.json",), r"(--resume \S+|--continue)",
        "session", "stand-in `cursor-agent -p '!sh PROBE'` (spawns bash from its bundled node)"),
}

PROBE = r"""#!/bin/sh
# tmuxjail certify probe: runs as a child of the CLI inside the jail, reports what it can reach.
out="$1"; tmp="$out.tmp"
{
echo "uid: $(id -u)"
echo "pid1: $(cat /proc/1/comm 2>/dev/null)"
echo "procs: $(ls -d /proc/[0-9]* 2>/dev/null | wc -l)"
echo "home: $HOME"
for v in CODEX_HOME CLAUDE_CONFIG_DIR CLAUDE_CODE_TMPDIR IS_SANDBOX PI_CODING_AGENT_DIR PI_OFFLINE CURSOR_CONFIG_DIR TMUX; do
  eval "val=\${$v-}"; echo "env-$v: ${val:-<unset>}"
done
if cat "$HOME/.certify-canary" >/dev/null 2>&1; then echo "home-canary: visible"; else echo "home-canary: hidden"; fi
if echo escaped > "@OUTSIDE@" 2>/dev/null; then echo "outside-write: ok"; else echo "outside-write: denied"; fi
sd="$HOME/@STATE@"
if touch "$sd/.certify-write" 2>/dev/null; then echo "state-dir: writable"; rm -f "$sd/.certify-write"; else echo "state-dir: not writable"; fi
inst="@INSTALLDIR@"
if [ -n "$inst" ]; then
  if [ -e "$inst/../../not-the-install-root.txt" ]; then echo "install-sibling: visible"; else echo "install-sibling: hidden"; fi
  if touch "$inst/.certify-write" 2>/dev/null; then echo "install-root: writable"; rm -f "$inst/.certify-write"; else echo "install-root: read-only"; fi
  echo "local-bin: $(ls -A "$HOME/.local/bin" 2>/dev/null | tr '\n' ' ')"
fi
for f in @TOKENS@; do
  if [ -f "$HOME/$f" ]; then echo "state-seen: $f $(sha256sum "$HOME/$f" | cut -c1-64)"; else echo "state-seen: $f absent"; fi
done
if tmux -L "@SOCK@" new-window true >/dev/null 2>&1; then echo "tmux-L: ok"; else echo "tmux-L: failed"; fi
if tmux -S "@SOCKPATH@" new-window true >/dev/null 2>&1; then echo "tmux-S: ok"; else echo "tmux-S: failed"; fi
for kind in path abstract; do
  if [ $kind = path ]; then addr="@HOSTSOCK@"; else addr="@ABSTRACT@"; fi
  if python3 -c 'import socket,sys
a=sys.argv[1]; s=socket.socket(socket.AF_UNIX); s.settimeout(3)
s.connect("\0"+a[1:] if a.startswith("@") else a)' "$addr" 2>/dev/null
  then echo "socket-$kind: connected"; else echo "socket-$kind: failed"; fi
done
} > "$tmp" 2>&1
mv "$tmp" "$out"
cat "$out"
"""

CURSOR_WRAPPER = """#!/usr/bin/env bash
# Stand-in for the Cursor CLI's launcher: runs the bundled node on index.js beside it.
set -euo pipefail
DIR="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
exec "$DIR/node" "$DIR/index.js" "$@"
"""

CURSOR_INDEX = r"""// Stand-in for Cursor CLI (not on npm) following its documented contract: config in
// $CURSOR_CONFIG_DIR (else ~/.cursor)/cli-config.json, chats/<hash>/<chatId>/store.db,
// `--resume <chatId>`, `--continue`, `-p PROMPT` (a prompt "!cmd" runs cmd with bash).
const fs = require("fs"), path = require("path"), os = require("os"), cp = require("child_process"), crypto = require("crypto");
const argv = process.argv.slice(2);
const dir = process.env.CURSOR_CONFIG_DIR || path.join(os.homedir(), ".cursor");
if (argv[0] === "--version") { console.log(require("./package.json").version); process.exit(0); }
fs.mkdirSync(dir, { recursive: true });
const cfg = path.join(dir, "cli-config.json");
if (!fs.existsSync(cfg)) fs.writeFileSync(cfg, JSON.stringify({ version: 1, editor: { vimMode: false }, permissions: { allow: [], deny: [] } }, null, 2));
const proj = crypto.createHash("md5").update(process.cwd()).digest("hex");
const chats = path.join(dir, "chats", proj);
let chatId = null, i = argv.indexOf("--resume");
if (i >= 0) chatId = argv[i + 1];
if (argv.includes("--continue") && fs.existsSync(chats)) chatId = fs.readdirSync(chats).sort().pop() || null;
console.log("Cursor Agent " + require("./package.json").version + " (tmuxjail stand-in)");
if (chatId) {
  const ok = fs.existsSync(path.join(chats, chatId, "store.db"));
  console.log(ok ? "Resumed chat " + chatId : "Chat not found: " + chatId);
} else {
  chatId = new Date().toISOString().replace(/[:.]/g, "-") + "-" + crypto.randomUUID();
  fs.mkdirSync(path.join(chats, chatId), { recursive: true });
  fs.writeFileSync(path.join(chats, chatId, "store.db"), "stand-in chat\n");
  console.log("New chat " + chatId);
}
console.log("Press any key to sign in (Cursor login needs the network)");
const p = argv.indexOf("-p");
if (p >= 0 && (argv[p + 1] || "").startsWith("!")) {
  const r = cp.spawnSync("bash", ["-c", argv[p + 1].slice(1)], { stdio: "inherit" });
  process.exit(r.status ?? 1);
}
setInterval(() => {}, 1 << 30);
"""


# -- snapshots ---------------------------------------------------------------------------------

def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def snapshot(root: Path, exclude: tuple[str, ...] = (), content: str = "all") -> dict[str, tuple]:
    """Every entry under root: type, mode, owner, size, mtime/ctime (ns), inode, link target, and
    (content="all", or "state" for small files at depth <= 2 or in agent state dirs) its sha256.
    ctime is in the key: the kernel moves it on every write, chmod, link or rename, and userspace
    cannot set it, so an unchanged key with an unchanged content hash means unchanged bytes."""
    out: dict[str, tuple] = {}
    root_s = str(root)
    for dirpath, dirs, files in os.walk(root_s):
        rel_dir = os.path.relpath(dirpath, root_s)
        dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in exclude]
        for name in [*dirs, *files, *([] if rel_dir != "." else ["."])]:
            p = dirpath if name == "." else os.path.join(dirpath, name)
            rel = os.path.relpath(p, root_s)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            key: tuple = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_uid, st.st_gid, st.st_ino,
                          st.st_mtime_ns, st.st_ctime_ns)
            if stat.S_ISREG(st.st_mode):
                key += (st.st_size,)
                wanted = content == "all" or (
                    st.st_size <= SMALL and (rel.count("/") <= 1 or rel.startswith(STATE_NAMES)))
                if wanted:
                    try:
                        key += (_digest(p),)
                    except OSError:
                        key += ("unreadable",)
            elif stat.S_ISLNK(st.st_mode):
                key += (os.readlink(p),)
            out[rel] = key
    return out


def changed(before: dict, after: dict) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


# -- host-side listeners (the planted local services) --------------------------------------------

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

    def _loop(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.hits += 1
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join(1)
        self.sock.close()


# -- the run -------------------------------------------------------------------------------------

class Run:
    def __init__(self, provider: str, modes: tuple[str, ...], standin: bool, python: str, real_env: dict):
        self.provider = provider
        self.driver = DRIVERS[provider]
        self.modes = modes
        self.real_env = real_env
        self.real_home = Path(real_env.get("HOME") or os.path.expanduser("~"))
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
        self.tmpdir = self.root / "tmp" if self.root.resolve().is_relative_to(tmp) else None
        for d in (self.home, self.ws, self.outside, self.ws / ".certify", *filter(None, [self.tmpdir])):
            d.mkdir(parents=True, exist_ok=True)
        for own in (".config/tmuxjail", ".local/state/tmuxjail", ".local/share/tmuxjail"):
            (self.home / own).mkdir(parents=True, mode=0o700)
        (self.home / ".certify-canary").write_text("the scratch HOME's own file: hidden in strict modes\n")
        self.sock = f"certify-{secrets.token_hex(4)}"
        self.last_child: dict[str, Any] = {}  # what the last child-process start answered
        self.seen_process: tuple[str, str] | None = None
        self.python = python
        self.standin = standin
        self.env = self._scratch_env()
        from .tmux import default_socket

        # Where tmux puts `-L sock` for the scratch environment (which has no TMUX_TMPDIR).
        self.tmux_sock_path = default_socket(self.sock, self.env)
        self.host_dir = Path(tempfile.mkdtemp(prefix="certify-planted-", dir="/tmp"))
        self.listeners = [Listener(str(self.host_dir / "host.sock")), Listener(f"@tmuxjail-certify-{secrets.token_hex(4)}")]
        self.probe = self.ws / ".certify" / "probe.sh"
        self.probe.write_text(
            PROBE.replace("@OUTSIDE@", str(self.outside / "escape")).replace("@STATE@", self.driver.state_dir)
            .replace("@TOKENS@", " ".join(dict.fromkeys((*self.driver.tokens("isolated"), *self.driver.tokens("verified"), *self.driver.tokens("compatibility"))))).replace("@SOCK@", self.sock)
            .replace("@SOCKPATH@", self.tmux_sock_path).replace("@HOSTSOCK@", self.listeners[0].address)
            .replace("@ABSTRACT@", self.listeners[1].address)
            .replace("@INSTALLDIR@", str(self.home / ".local/share/cursor-agent/versions" / CURSOR_STANDIN_VERSION)
                     if standin else ""))

    # environment and commands
    def _scratch_env(self) -> dict:
        h = self.home
        env = {k: v for k, v in self.real_env.items()
               if not k.startswith(("TMUX", "XDG_")) and k not in ("HOME", "PWD")}
        env.update(HOME=str(h), XDG_CONFIG_HOME=str(h / ".config"), XDG_STATE_HOME=str(h / ".local/state"),
                   XDG_DATA_HOME=str(h / ".local/share"), XDG_CACHE_HOME=str(h / ".cache"),
                   TERM="xterm-256color", LANG=env.get("LANG") or "C.UTF-8", **self.driver.env)
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
            data = json.loads(proc.stdout)
        except ValueError:
            return {"error": proc.stderr.strip()}
        return data if isinstance(data, dict) else {"error": proc.stderr.strip(), "output": data}

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True,
                              env=self.env).stdout

    def screen(self, pane: str) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", pane)

    def wait_screen(self, pane: str, patterns=None, timeout: float = SCREEN_TIMEOUT) -> tuple[str | None, str]:
        """Poll capture-pane until a pattern shows; meanwhile note the CLI's argv and cwd (a CLI
        that stops at an offline screen may exit before the screen is read)."""
        patterns = patterns or self.driver.first_screen
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

    # cursor stand-in, installed inside the scratch HOME like the real installer does
    def install_cursor_standin(self) -> None:
        ver = self.home / ".local/share/cursor-agent/versions" / CURSOR_STANDIN_VERSION
        ver.mkdir(parents=True)
        node = shutil.which("node", path=self.env.get("PATH"))
        if not node:
            raise UsageError("cursor stand-in: node is not installed", hint="sudo apt-get install -y nodejs")
        shutil.copy2(os.path.realpath(node), ver / "node")  # the bundled node, as the real tarball has
        (ver / "index.js").write_text(CURSOR_INDEX)
        (ver / "package.json").write_text(json.dumps({"name": "cursor-agent-standin", "version": CURSOR_STANDIN_VERSION}))
        (ver / "cursor-agent").write_text(CURSOR_WRAPPER)
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

    def cli_process(self, pane: str, exe_hint: str = "") -> tuple[str, str] | None:
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


def _wait_file(path: Path, timeout: float, pane_dead=None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if pane_dead and pane_dead():
            time.sleep(0.5)
            return path.exists()
        time.sleep(0.2)
    return False


def _child(run: Run, mode: str, name: str, args: list[str], out: Path, extra_env: dict) -> str:
    run.last_child = {}
    info = run.tj_json("start", run.provider, "--mode", mode, "--workspace", str(run.ws), "--name", name,
                  "--detach", "--json", "--", *args, extra_env=extra_env, check=False)
    pane = info.get("tmux_pane")
    run.last_child = info
    if not pane:
        return str(info.get("error"))
    _wait_file(out, PROBE_TIMEOUT, lambda: run.tmux("display-message", "-p", "-t", pane, "#{pane_dead}").strip() == "1")
    return run.screen(pane)


Check = dict[str, Any]


def _check(checks: list[Check], name: str, ok: object, observed: object) -> bool:
    """Record one check; `ok` is taken for its truth (a matched pattern, a non-empty list)."""
    checks.append({"check": name, "ok": bool(ok), "observed": observed})
    return bool(ok)


def _excerpt(text: str, lines: int = 14) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][:lines]


def _parse(text: str) -> dict:
    out: dict = {}
    for line in text.splitlines():
        k, _, v = line.partition(": ")
        out.setdefault(k, []).append(v)
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def _hashes(base: Path, rels) -> dict[str, str | None]:
    return {r: (_digest(str(base / r)) if (base / r).is_file() else None) for r in rels}


def certify_mode(run: Run, mode: str, resolved) -> dict:
    d = run.driver
    checks: list[Check] = []
    name = f"cert-{mode[:4]}"
    own = tuple(str(run.home / p) for p in (".config/tmuxjail", ".local/state/tmuxjail", ".local/share/tmuxjail"))
    if mode == "verified":
        appr = run.tj_json("approve", run.provider, "--yes", "--json")
        _check(checks, "approval created in the scratch store", bool(appr.get("id")),
               {"approval": appr.get("id"), "store": str(run.home / ".local/state/tmuxjail/store.db")})
    home_before = snapshot(run.home, exclude=own)
    info = run.tj_json("start", run.provider, "--mode", mode, "--workspace", str(run.ws), "--name", name,
                  "--detach", "--json")
    if "error" in info:
        _check(checks, "starts in the jail", False, info["error"])
        return {"mode": mode, "ok": False, "checks": checks}
    pane = info["tmux_pane"]
    pat, text = run.wait_screen(pane)
    _check(checks, "first screen", pat, {"pattern": pat, "screen": _excerpt(text)})
    proc = run.seen_process
    pane_pid = run.tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip()
    try:
        comm = Path(f"/proc/{pane_pid}/comm").read_text().strip()
    except (OSError, ValueError):
        comm = None  # the pane's process is gone already
    start_cmd = run.tmux("display-message", "-p", "-t", pane, "#{pane_start_command}")
    _check(checks, "pane process is the jail", (comm == "bwrap" or (comm is None and "tmuxjail.launch" in start_cmd))
           and proc is not None,
           {"pane_process": comm or "exited (seen running under bwrap)", "cli": proc[0] if proc else None, "cwd": proc[1] if proc else None})
    if run.provider == "codex":
        _check(checks, "codex: --no-daemon on the command line", proc and "--no-daemon" in proc[0], proc and proc[0])

    # the CLI's child process, and the local-service bypass attempts made from it
    out = run.ws / ".certify" / f"probe-{mode}.txt"
    windows_before = run.tmux("list-windows", "-a", "-F", "#{window_id}").split()
    hits_before = [ln.hits for ln in run.listeners]
    nested = None
    if d.child == "keys":
        run.tmux("send-keys", "-t", pane, "-l", d.child_keys(str(run.probe), str(out)))
        run.tmux("send-keys", "-t", pane, "Enter")
        probe_names = []
        _wait_file(out, PROBE_TIMEOUT)
    else:
        probe_names = [f"{name}-child"]
        screen = _child(run, mode, probe_names[0], d.child_args(str(run.probe), str(out)), out, d.probe_env)
        if run.provider == "codex":
            nested = out.exists()
            why = next((ln for ln in screen.splitlines() if "bwrap" in ln), None)
            if "under temporary dir" in screen:  # Codex's own words: CODEX_HOME is inside TMPDIR
                why = f"{why}: codex made no codex-linux-sandbox link because CODEX_HOME is under the temp dir"
            if not nested:
                # Root in the jail has no CAP_SETFCAP, which Linux >= 5.12 requires to map uid 0
                # into a nested user namespace: Codex's bwrap cannot start. Its child still runs
                # in our jail with Codex's own sandbox off.
                probe_names.append(f"{name}-child-full")
                _child(run, mode, probe_names[1], ["sandbox", "-c", 'sandbox_mode="danger-full-access"', "--",
                                                   "/bin/sh", str(run.probe), str(out)], out, {})
            # Strict jails refuse nested user namespaces (bwrap --disable-userns): Codex's bwrap must
            # fail there, and the adapter runs Codex with its own sandbox off.
            if mode != "compatibility":
                _check(checks, "codex: its own bwrap cannot nest in a strict jail (no nested user namespaces); "
                       "fell back to sandbox_mode=danger-full-access, still inside our jail",
                       not nested, {"nested": nested, "bwrap_said": why, "uid": os.getuid()})
            else:
                _check(checks, "codex: its own bwrap nests inside ours" if nested or os.getuid() != 0 else
                       "codex: its own bwrap cannot nest as root (no CAP_SETFCAP to map uid 0); fell back to "
                       "sandbox_mode=danger-full-access, still inside our jail",
                       nested or os.getuid() == 0, {"nested": nested, "bwrap_said": why, "uid": os.getuid()})
    r = _parse(out.read_text()) if out.exists() else {}
    strict = mode != "compatibility"
    _check(checks, "child process ran", bool(r), {"how": d.child_note, "report": r or None})
    if r:
        _check(checks, "child: in the jail's PID namespace", int(r.get("procs", "999")) < 50,
               {"pid1": r.get("pid1"), "processes_visible": r.get("procs")})
        _check(checks, "child: tmux new-window refused", r.get("tmux-L") == "failed" and r.get("tmux-S") == "failed"
               and r.get("env-TMUX") == "<unset>",
               {"tmux -L": r.get("tmux-L"), "tmux -S": r.get("tmux-S"), "TMUX": r.get("env-TMUX")})
        want = "failed" if strict else "connected"
        # Compatibility keeps host /tmp and the host network namespace; a CLI whose own sandbox
        # runs there (Codex's, as an ordinary user) confines its child further, which is not ours
        # to certify either way.
        own_sandbox = not strict and bool(nested)
        _check(checks, "child: planted host sockets " + ("unreachable" if strict else
               "reachable (compatibility keeps host /tmp and the host network namespace by design)" if not own_sandbox
               else "not ours to block in compatibility (the CLI's own sandbox confined its child)"),
               own_sandbox or (r.get("socket-path") == want and r.get("socket-abstract") == want),
               {"path": r.get("socket-path"), "abstract": r.get("socket-abstract"),
                "host_side_connections": [ln.hits - h for ln, h in zip(run.listeners, hits_before, strict=True)]})
        _check(checks, "child: host files " + ("hidden and read-only" if strict else "visible (compatibility)"),
               (r.get("home-canary") == "hidden" and r.get("outside-write") == "denied") if strict
               else r.get("home-canary") == "visible",
               {"home-canary": r.get("home-canary"), "outside-write": r.get("outside-write")})
        _check(checks, f"child: state dir ~/{d.state_dir} writable", r.get("state-dir") == "writable" or
               (run.provider == "codex"),  # inside codex's own read-only-by-default sandbox: informative
               r.get("state-dir"))
    windows_after = run.tmux("list-windows", "-a", "-F", "#{window_id}").split()
    _check(checks, "no window was added to the tmux server", set(windows_after) <= set(windows_before) | {
        w for n in probe_names for w in run.tmux("list-windows", "-t", f"={n}", "-F", "#{window_id}").split()},
        {"before": len(windows_before), "after": len(windows_after)})
    if run.provider == "claude-code":
        _quirk_claude(run, mode, checks, r)
    if run.provider == "cursor" and r:
        _check(checks, "cursor: install root inside HOME " + ("re-exposed read-only, nothing else of HOME"
               if strict else "visible as on the host"),
               (r.get("install-sibling") == "hidden" and r.get("install-root") == "read-only"
                and not r.get("local-bin", "").strip()) if strict else r.get("install-root") == "writable",
               {k: r.get(k) for k in ("install-sibling", "install-root", "local-bin")})
    if run.provider == "pi":
        _check(checks, "pi: PI_OFFLINE=1 reaches the CLI", r.get("env-PI_OFFLINE") == "1", r.get("env-PI_OFFLINE"))
    child_sid = run.last_child.get("native_session_id")
    for n in probe_names:
        run.tj("stop", n, check=False)

    # where the state landed
    state_base = Path(info["private_home"]) if mode == "isolated" else run.home
    tokens = _hashes(state_base, d.tokens(mode))
    _check(checks, "state written", all(tokens.values()),
           {"where": str(state_base / d.state_dir), "files": sorted(
               str(p.relative_to(state_base)) for p in (state_base / d.state_dir).rglob("*") if p.is_file())[:40]
           if (state_base / d.state_dir).exists() else []})
    home_after = snapshot(run.home, exclude=own)
    moved = changed(home_before, home_after)
    if mode == "isolated":
        stray = moved
    elif mode == "verified":
        pol = run.tj_json("show", name, "--json").get("policy") or {}
        allowed = [os.path.relpath(p, run.home) for p in pol.get("host_write", ())]
        # the parent of an approved path changes when tmuxjail creates that path before the launch
        parents = {os.path.dirname(a) or "." for a in allowed}
        stray = [p for p in moved if p not in parents and not any(p == a or p.startswith(a + "/") for a in allowed)]
    else:
        stray = []
    _check(checks, "state only where the mode allows", not stray,
           {"changed_in_scratch_home": moved[:30], "outside_allowed": stray[:30]})
    if r:
        seen = {line.split()[0]: line.split()[1] for line in
                ([r["state-seen"]] if isinstance(r.get("state-seen"), str) else r.get("state-seen", []))}
        inside = {k: v for k, v in seen.items() if v != "absent"}
        _check(checks, "the jail sees the state it wrote", bool(inside),
               {"inside_jail": seen})

    # second run
    run.tj("stop", name)
    time.sleep(0.5)
    left = run.leftovers()
    _check(checks, "no process left after stop" + (" (no codex app-server)" if run.provider == "codex" else ""),
           not left, left)
    if run.provider == "codex":
        _check(checks, "codex: no daemon copy in CODEX_HOME",
               not (state_base / ".codex/packages").exists(), str(state_base / ".codex/packages"))
    name2 = name + "-2"
    info2 = run.tj_json("start", run.provider, "--mode", mode, "--workspace", str(run.ws), "--name", name2,
                   "--detach", "--json")
    pat2, _text2 = run.wait_screen(info2.get("tmux_pane", ""))
    tokens2 = _hashes(state_base, d.tokens(mode))
    _check(checks, "second run finds the earlier state", pat2 and tokens2 == tokens and all(tokens.values()),
           {"first_screen": pat2, "state_tokens": tokens2, "unchanged": tokens2 == tokens})

    # resume after the tmux server is gone
    run.tmux("kill-server")
    time.sleep(0.5)
    left = run.leftovers()
    _check(checks, "no process left after tmux kill-server", not left, left)
    res = run.tj_json("resume", name2, "--detach", "--json")
    pat3, text3 = run.wait_screen(res.get("tmux_pane", "")) if "error" not in res else (None, res["error"])
    proc3 = run.seen_process if pat3 else None
    tokens3 = _hashes(state_base, d.tokens(mode))
    _check(checks, "resume relaunches the CLI's own resume in the same workspace",
           pat3 and proc3 and re.search(d.resume_syntax, proc3[0]) and proc3[1] == str(run.ws) and tokens3 == tokens,
           {"first_screen": pat3, "cli": proc3 and proc3[0], "cwd": proc3 and proc3[1],
            "state_tokens_unchanged": tokens3 == tokens, "screen": _excerpt(text3, 8)})
    if run.provider == "claude-code":
        _claude_resume_probe(run, mode, checks, child_sid)
    run.tmux("kill-server")
    time.sleep(0.3)
    return {"mode": mode, "ok": all(c["ok"] for c in checks), "checks": checks}


def _quirk_claude(run: Run, mode: str, checks: list, r: dict) -> None:
    strict = mode != "compatibility"
    if r:
        _check(checks, "claude: CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR in the private home" if mode == "isolated"
               else "claude: relocation variables", (
                   r.get("env-CLAUDE_CONFIG_DIR") == f"{run.home}/.claude"
                   and r.get("env-CLAUDE_CODE_TMPDIR") == f"{run.home}/.claude/tmp") if mode == "isolated" else True,
               {k: r.get(f"env-{k}") for k in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR")})
        if os.getuid() == 0:
            _check(checks, "claude: IS_SANDBOX=1 as root in strict modes", (r.get("env-IS_SANDBOX") == "1") == strict,
                   r.get("env-IS_SANDBOX"))
    name = f"cert-{mode[:4]}-bypass"
    info = run.tj_json("start", "claude-code", "--mode", mode, "--workspace", str(run.ws), "--name", name, "--detach",
                  "--json", "--", "--dangerously-skip-permissions")
    refusal = r"cannot be used with root/sudo privileges"
    pat, text = run.wait_screen(info.get("tmux_pane", ""), (refusal, *run.driver.first_screen))
    refused = pat == refusal
    expect_refusal = os.getuid() == 0 and not strict
    _check(checks, "claude: --dangerously-skip-permissions " + ("refused as root (no IS_SANDBOX in compatibility)"
           if expect_refusal else "accepted in the jail"), pat is not None and refused == expect_refusal,
           {"uid": os.getuid(), "matched": pat, "screen": _excerpt(text, 4)})
    run.tj("stop", name, check=False)


def _claude_resume_probe(run: Run, mode: str, checks: list, sid: str | None) -> None:
    """Offline, Claude's TUI stops at its connectivity screen before loading a conversation, so ask
    its print mode from inside the jail about the conversation the child-process run (`-p` with
    --session-id) wrote: a known id reaches the login check, an unknown one says so."""
    if not sid:
        return
    name = f"cert-{mode[:4]}-resume-p"
    # --resume with --session-id needs --fork-session: the fork proves the old id was found.
    info = run.tj_json("start", "claude-code", "--mode", mode, "--workspace", str(run.ws), "--name", name, "--detach",
                  "--json", "--", "-p", "--resume", sid, "--fork-session", "again")
    pat, text = run.wait_screen(info.get("tmux_pane", ""), (r"Not logged in", r"No conversation found", r"Error"))
    _check(checks, "claude: `-p --resume <id>` finds the conversation inside the jail", pat == r"Not logged in",
           {"matched": pat, "screen": _excerpt(text, 4)})
    run.tj("stop", name, check=False)


def run_certify(provider: str, modes: tuple[str, ...], standin: bool = False, output: str | None = None,
                env: dict | None = None) -> dict:
    from . import __version__, identity, profiles
    from . import config as config_mod
    from . import paths as paths_mod
    from .adapters import get as get_adapter

    if provider not in DRIVERS:
        raise UsageError(f"certify: no certification driver for {provider!r}", hint="choose one of: " + ", ".join(DRIVERS))
    if provider == "cursor" and not standin:
        raise UsageError("certify cursor: the Cursor CLI is not on npm; certify its documented contract with --standin")
    if standin and provider != "cursor":
        raise UsageError("--standin applies to cursor only")
    for tool in ("tmux", "bwrap"):
        if not shutil.which(tool, path=(env or os.environ).get("PATH", os.defpath) + ":/usr/bin"):
            raise UsageError(f"certify needs {tool}", hint="run `tmuxjail doctor`")
    real_env = dict(os.environ if env is None else env)
    modes = tuple(dict.fromkeys(modes or MODES))
    adapter = get_adapter(provider)
    profile = profiles.load(provider)
    real_paths = paths_mod.get()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    real_before = snapshot(real_paths.home, content="state")
    run = Run(provider, modes, standin, sys.executable, real_env)
    results, error = [], None
    try:
        if standin:
            run.install_cursor_standin()
        cfg = config_mod.load(real_paths.config_file)
        if provider in cfg.executables:  # the user's own choice of executable, re-anchored
            exe = cfg.executables[provider].replace("~", str(real_paths.home), 1)
            cfgdir = run.home / ".config/tmuxjail"
            cfgdir.mkdir(parents=True, exist_ok=True)
            (cfgdir / "config.toml").write_text(f'[providers.{provider}]\nexecutable = {json.dumps(exe)}\n')
        path_env = run.env.get("PATH", os.defpath)
        found = identity.find(profile.executables, path_env, cfg.executables.get(provider) and exe, provider)
        resolved = identity.resolve(adapter, found, path_env, None)
        ident = resolved.identity.model_dump(mode="json")
        install_roots = list(resolved.install_roots)
        for mode in modes:
            try:
                results.append(certify_mode(run, mode, ident))
            except TmuxjailError as exc:
                results.append({"mode": mode, "ok": False, "checks": [
                    {"check": "certification ran", "ok": False, "observed": exc.message}]})
            finally:
                run.tmux("kill-server")
    except TmuxjailError as exc:
        error, ident, install_roots = exc.message, None, []
    finally:
        run.tmux("kill-server")
        Path(run.tmux_sock_path).unlink(missing_ok=True)  # tmux leaves its socket file behind
        for ln in run.listeners:
            ln.close()
        shutil.rmtree(run.host_dir, ignore_errors=True)
    real_after = snapshot(real_paths.home, content="state")
    real_changed = changed(real_before, real_after)
    record: dict[str, Any] = {
        "provider": provider, "tmuxjail": __version__, "started_at": started,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cli_version": ident["version"] if ident else None,
        "executable": {"path": ident["path"], "sha256": ident["sha256"], "found": str(found),
                       "extra": ident["extra"], "install_roots": install_roots} if ident else None,
        "standin": standin,
        "profile": {"version": profile.profile_version, "hash": profile.hash,
                    "certification": profile.certification, "certified_versions": list(profile.certified_versions)},
        "uid": os.getuid(), "kernel": os.uname().release,
        "scratch": str(run.root), "tmux_server": run.sock,
        "real_home": {"path": str(real_paths.home), "entries": len(real_after), "unchanged": not real_changed,
                      "changed": real_changed[:50],
                      "method": "lstat of every entry (type, mode, owner, inode, mtime_ns, ctime_ns, size, "
                                "link target) + sha256 of small files at depth <= 2 and in agent state dirs"},
        "modes": {r["mode"]: r for r in results},
        "error": error,
    }
    record["ok"] = not error and not real_changed and bool(results) and all(r["ok"] for r in results)
    others = other_instances(ident["path"], str(run.root)) if ident else []
    record["hint"] = None if record["ok"] or not others else (
        f"{len(others)} other process(es) of this CLI run outside the certification (pid "
        f"{', '.join(map(str, others[:5]))}): they share its state and may have caused this; stop them and rerun")
    record["suggestion"] = suggest(profile, record)
    if not real_env.get("TMUXJAIL_CERTIFY_KEEP"):
        shutil.rmtree(run.root, ignore_errors=True)
    # Evidence, written after the last snapshot of the real home.
    out = Path(output) if output else paths_mod.ensure_private_dir(real_paths.state_dir / "certify") / \
        f"{provider}-{record['cli_version']}-{started.replace(':', '')}.json"
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    record["evidence_file"] = str(out)
    from .store import Store

    store = Store(real_paths.store)
    store.event("certify", None, provider=provider, cli_version=record["cli_version"], ok=record["ok"],
                sha256=ident and ident["sha256"], profile_version=profile.profile_version, standin=standin,
                modes={m: r["ok"] for m, r in record["modes"].items()}, evidence_file=str(out),
                real_home_unchanged=not real_changed)
    store.close()
    return record


def suggest(profile: Profile, record: dict[str, Any]) -> list[str]:
    """The change to the provider's certification record a human may make (never applied here).
    The record lies outside the profile's hash: recording a version needs no re-approval."""
    ver = record.get("cli_version")
    from . import profiles

    fname = f"profiles/{profiles.record_name(profile.provider)}"
    if not ver:
        return []
    if not record["ok"]:
        failing = [m for m, r in record["modes"].items() if not r["ok"]]
        return [f"# {fname}: certification failed ({', '.join(failing) or record.get('error')}); keep",
                f'"certification": "{profile.certification if profile.certification != "certified" else "failing"}"']
    if record["standin"]:
        return [f"# {fname}: the stand-in of the documented contract passed; a stand-in run does not certify",
                f'# the real CLI: keep "certification": "documented-only" (currently "{profile.certification}")']
    versions = sorted(set(profile.certified_versions) | {ver})
    status = "certified"
    if status == profile.certification and ver in profile.certified_versions:
        return [f"# {fname}: already {status} on {ver}; no change"]
    return [f"# {fname} (outside the profile's hash: no version bump, no re-approval):",
            f'"certification": "{status}",',
            '"certified_versions": [' + ", ".join(json.dumps(v) for v in versions) + "]"]


def render(record: dict) -> str:
    lines = [f"certify {record['provider']} {record['cli_version']}"
             + (" (stand-in)" if record["standin"] else "") + f": {'PASS' if record['ok'] else 'FAIL'}"]
    if record.get("error"):
        lines.append(f"  error: {record['error']}")
    if record.get("executable"):
        lines.append(f"  executable: {record['executable']['path']} {record['executable']['sha256'][:23]}…")
    for mode, r in record["modes"].items():
        lines.append(f"  {mode}: {'pass' if r['ok'] else 'FAIL'}")
        for c in r["checks"]:
            obs = c["observed"]
            short = json.dumps(obs, sort_keys=True) if not isinstance(obs, str) else obs
            lines.append(f"    {'ok  ' if c['ok'] else 'FAIL'} {c['check']}" + ("" if c["ok"] else f": {short[:300]}"))
    rh = record["real_home"]
    lines.append(f"  real home {rh['path']}: {'unchanged' if rh['unchanged'] else 'CHANGED: ' + ', '.join(rh['changed'][:5])}"
                 f" ({rh['entries']} entries)")
    lines.append(f"  evidence: {record.get('evidence_file')}")
    if record.get("hint"):
        lines.append(f"  hint: {record['hint']}")
    if record["suggestion"]:
        lines.append("  suggested certification record (not applied):")
        lines += ["    " + s for s in record["suggestion"]]
    return "\n".join(lines)
