"""`tmuxjail certify` against the real CLIs pinned in certify/pins.json (installed by
scripts/install-certify-clis.sh into a cache outside the repo), and the Cursor stand-in.
A pin that is not installed skips with the reason; it never passes silently."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import have_jail

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "certify" / "pins.json"
MODES = ("compatibility", "isolated", "verified")


def cache_dir() -> Path:
    base = os.environ.get("TMUXJAIL_CERTIFY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tmuxjail-certify")
    return Path(base, hashlib.sha256(PINS.read_bytes()).hexdigest()[:12])


def installed_bin(provider: str) -> Path:
    pin = json.loads(PINS.read_text())["packages"][provider]
    pdir = cache_dir() / provider
    exe = pdir / "node_modules" / ".bin" / pin["bin"]
    if (pdir / "SKIP").exists():
        pytest.skip(f"{pin['npm']}@{pin['version']} not installed: {(pdir / 'SKIP').read_text().strip()}")
    if not exe.exists():
        pytest.skip(f"{pin['npm']}@{pin['version']} not installed in {pdir}; run scripts/install-certify-clis.sh")
    return exe.parent


def offline(bindir: Path | None) -> list[str]:
    """The prefix that runs a real CLI's test with no route out (scripts/offline): it asks for its
    provider's hosts at start, and the proxy would look them up with the host's resolver. A
    stand-in (bindir None) asks for nothing and runs as it is, for every user."""
    if bindir is None:
        return []
    if os.geteuid() != 0:
        pytest.skip("a real CLI runs only in a network namespace with no route out, which needs root here")
    return [str(REPO / "scripts" / "offline")]


def certify(tmp_path: Path, provider: str, mode: str, bindir: Path | None, *extra: str) -> dict:
    if (why := have_jail()) is not None:
        pytest.skip(why)
    home = tmp_path / "realhome"  # stands for the user's real home, snapshotted by certify
    (home / ".config").mkdir(parents=True)
    (home / ".profile").write_text("# a file that must stay byte-for-byte the same\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "XDG_"))}
    env.update(HOME=str(home), PATH=(f"{bindir}:" if bindir else "") + "/usr/local/bin:/usr/bin:/bin",
               LANG="C.UTF-8", TMUXJAIL_CERTIFY_SCRATCH=str(tmp_path))
    out = tmp_path / "evidence.json"
    proc = subprocess.run([*offline(bindir), sys.executable, "-P", "-m", "tmuxjail", "certify", provider, "--mode", mode,
                           "--json", "--output", str(out), *extra], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, cwd=home)  # from $HOME: issue 28.8
    assert "Traceback" not in proc.stderr, proc.stderr
    rec = json.loads(proc.stdout)
    assert json.loads(out.read_text())["modes"] == rec["modes"]
    failed = [c for r in rec["modes"].values() for c in r["checks"] if not c["ok"]]
    assert proc.returncode == 0 and rec["ok"], json.dumps(failed or rec.get("error"), indent=1)[:4000]
    assert rec["real_home"]["unchanged"] and (home / ".profile").read_text().startswith("# a file")
    # Nothing left behind: tmux's socket file and the planted host sockets (issue 12.11).
    assert not Path(f"/tmp/tmux-{os.getuid()}", rec["tmux_server"]).exists()
    assert not list(Path("/tmp").glob(f"certify-planted-*/{rec['tmux_server']}*"))
    assert rec["executable"]["sha256"].startswith("sha256:") and rec["cli_version"]
    assert rec["profile"]["version"] and rec["started_at"] and rec["finished_at"]
    # The store of the "real" home holds the evidence event; the approval went to the scratch store only.
    import sqlite3

    db = sqlite3.connect(home / ".local/state/tmuxjail/store.db")
    assert db.execute("SELECT count(*) FROM events WHERE kind='certify'").fetchone()[0] == 1
    assert db.execute("SELECT count(*) FROM approvals").fetchone()[0] == 0
    return {c["check"]: c for c in rec["modes"][mode]["checks"]}


def names(checks: dict, prefix: str) -> list[str]:
    return [n for n in checks if n.startswith(prefix)]


ASKED = "network: what the CLI asked the proxy for at start (offline the attempt is the evidence)"


def asked(checks: dict, mode: str) -> set[str]:
    """Strict modes run through the session's proxy: the hosts the CLI asked it for (issue 15)."""
    if mode == "compatibility":
        assert ASKED not in checks
        return set()
    assert checks[ASKED]["ok"] and checks["network: nothing outside the allow list went through"]["ok"]
    seen = checks[ASKED]["observed"]
    return set() if seen == "nothing" else {d["host"] for d in seen}


@pytest.mark.parametrize("mode", MODES)
def test_certify_codex(tmp_path, mode):
    checks = certify(tmp_path, "codex", mode, installed_bin("codex"))
    # Quirks: --no-daemon (no leftover app-server, no 424 MB daemon copy), CODEX_HOME made first.
    assert checks["codex: --no-daemon on the command line"]["ok"]
    assert checks["no process left after stop (no codex app-server)"]["ok"]
    assert checks["codex: no daemon copy in CODEX_HOME"]["ok"]
    assert names(checks, "codex: its own bwrap")
    if mode == "compatibility" and os.getuid() != 0:
        # Issue 12.11: Codex's own bwrap really nests in our compatibility jail as a user (its
        # codex-linux-sandbox link exists because the scratch HOME is not inside TMPDIR).
        assert checks["codex: its own bwrap nests inside ours"]["observed"]["nested"] is True
    assert checks["state written"]["ok"] and ".codex/installation_id" in checks["state written"]["observed"]["files"]
    assert mode == "compatibility" or asked(checks, mode)  # its TUI start asks for chatgpt.com, GitHub, ...


@pytest.mark.parametrize("mode", MODES)
def test_certify_claude_code(tmp_path, mode):
    checks = certify(tmp_path, "claude-code", mode, installed_bin("claude-code"))
    assert names(checks, "claude: --dangerously-skip-permissions")
    if os.getuid() == 0:
        assert checks["claude: IS_SANDBOX=1 as root in strict modes"]["ok"]
    assert checks["claude: `-p --resume <id>` finds the conversation inside the jail"]["ok"]
    if mode == "isolated":
        assert checks["claude: CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR in the private home"]["ok"]
    assert mode == "compatibility" or "api.anthropic.com" in asked(checks, mode)


@pytest.mark.parametrize("mode", MODES)
def test_certify_pi(tmp_path, mode):
    checks = certify(tmp_path, "pi", mode, installed_bin("pi"))
    assert checks["pi: PI_OFFLINE=1 reaches the CLI"]["ok"]
    assert checks["child: state dir ~/.pi/agent writable"]["ok"]
    assert asked(checks, mode) == set()  # PI_OFFLINE=1: not one attempt


@pytest.mark.parametrize("mode", MODES)
def test_certify_cursor_standin(tmp_path, mode):
    if not any(Path(d, "node").exists() for d in ("/usr/bin", "/usr/local/bin")):
        pytest.skip("node is not installed: the Cursor stand-in bundles a copy of it")
    checks = certify(tmp_path, "cursor", mode, None, "--standin")
    assert names(checks, "cursor: install root inside HOME")
    assert checks[names(checks, "cursor: install root inside HOME")[0]]["ok"]


def test_certify_errors_are_one_line(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    for args, code in ((["cursor"], 2), (["codex", "--standin"], 2), (["nope"], 2)):
        proc = subprocess.run([sys.executable, "-P", "-m", "tmuxjail", "certify", *args], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr


def test_other_instances_of_the_cli_get_a_hint(tmp_path):
    """Another running session of the same CLI shares its state: a failed certification says so."""
    from tmuxjail import certify as cert

    exe = str(tmp_path / "bin" / "codex")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", exe], cwd=tmp_path)
    try:
        import time

        deadline = time.monotonic() + 5
        while other.pid not in cert.other_instances(exe, "/nonexistent-root") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert other.pid in cert.other_instances(exe, "/nonexistent-root")
        assert other.pid not in cert.other_instances(exe, str(tmp_path))  # the run's own processes
    finally:
        other.kill()
        other.wait()
