"""Discovery (issue 16): a stand-in CLI observed in a real jailed pane under strace; evidence,
classification, candidate, approval on a terminal only, replay under verified mode."""

from __future__ import annotations

import json
import shutil
import time
import tomllib
from pathlib import Path

import pytest

STANDIN = Path(__file__).parent.parent / "standins" / "discover.sh"


def have_strace() -> bool:
    return shutil.which("strace") is not None


@pytest.fixture
def world(jail_env):
    if not have_strace():
        pytest.skip("strace is not installed (scripts/needs.sh lists it)")
    env = jail_env
    h = env.home
    (h / ".aws").mkdir()
    (h / ".gitconfig").write_text("[user]\n\tname = Someone\n")
    (h / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    (h / ".secret-token").write_text("s3cret-value-never-copied\n")
    (h / ".config").mkdir(exist_ok=True)
    (h / ".config" / "standin-extra.conf").write_text("extra\n")
    shutil.copy(STANDIN, env.bin / "codex")
    (env.bin / "codex").chmod(0o755)
    return env


def discover(env, *extra) -> str:
    out = env.json("discover", "codex", "--non-interactive", "--timeout", "60", *extra, timeout=120)
    assert out["finished"] is True
    return out["id"]


def show(env, did: str) -> dict:
    return env.json("discover", "show", did)


def _on_a_terminal(env, *args, answer="y\n", timeout=60):
    """Run tmuxjail with a real pseudo-terminal as stdin/stdout, answering its question."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "tmuxjail", *env.flags, *args], cwd=env.ws,
                            env=env.environ(PWD=str(env.ws)), stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out, answered, deadline = b"", False, time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if select.select([master], [], [], 0.1)[0]:
                out += os.read(master, 4096)
        except OSError:
            break
        if not answered and b"[y/N]" in out:
            os.write(master, answer.encode())
            answered = True
    proc.wait(timeout=5)
    try:
        while select.select([master], [], [], 0.1)[0]:
            out += os.read(master, 4096)
    except OSError:
        pass
    os.close(master)
    return proc.returncode, out.decode(errors="replace")


def by_path(uses) -> dict:
    return {u["path"]: u for u in uses}


def test_evidence_lists_each_access_with_its_kind(world):
    env = world
    did = discover(env)
    d = show(env, did)
    ev = d["evidence"]
    h = str(env.home)
    assert ev["schema"] == "tmuxjail.discovery.evidence/1" and ev["mode"] == "isolated"
    assert ev["identity"]["path"] == str(env.bin / "codex") and ev["identity"]["sha256"].startswith("sha256:")
    assert ev["exit"] == {"status": 0, "signal": None, "finished": True, "timed_out": False}
    assert ev["duration_s"] is not None and ev["trace"]["rejected"] == 0
    # would-be denials: the jail hid these host files, the CLI (and its grandchild) tried to read them
    den = by_path(ev["denials"])
    for p in (".gitconfig", ".aws/config", ".secret-token", ".config/standin-extra.conf"):
        assert den[f"{h}/{p}"]["tried"].get("read") == "ENOENT", p
        assert den[f"{h}/{p}"]["hidden"] is True
    # the cache file it wrote in its (private) home, with its kind
    used = by_path(ev["paths"])
    assert "create" in used[f"{h}/.cache/standin/cache.bin"]["kinds"]
    assert "mkdir" in used[f"{h}/.cache/standin"]["kinds"]
    # the process tree, with each binary it exec'd: git, and the grandchild's cat
    execs = {x for p in ev["processes"] for x in p["execs"]}
    assert "/usr/bin/git" in execs and "/usr/bin/cat" in execs
    pids = {p["pid"]: p for p in ev["processes"]}
    chains = [(p, pids.get(p["parent"]), pids.get(pids[p["parent"]]["parent"]) if p["parent"] in pids else None)
              for p in ev["processes"] if p["execs"] == ["/usr/bin/cat"]]
    assert any(par and gp and par["execs"] == ["/usr/bin/sh"] and gp["execs"] == ["/usr/bin/sh"]
               for _, par, gp in chains), ev["processes"]  # sh -c 'sh -c "cat ..."': a grandchild
    # paths and kinds, never contents
    raw = Path(d["evidence_file"]).read_text()
    assert "s3cret-value-never-copied" not in raw and "eu-west-1" not in raw
    assert ev["env"]["provided"] and "network" in ev and ev["network"]["observed_by_proxy"] is False
    # the observed run was a real jailed pane: isolated mode, recorded like any session
    rows = {r["name"]: r for r in env.json("list", "--all")}
    assert rows[did]["mode"] == "isolated"


def _left_running(env) -> list[str]:
    """This test's tracer, launcher (the proxy runs its code) and sandbox processes still alive."""
    out = []
    for p in Path("/proc").iterdir():
        try:
            cmd = (p / "cmdline").read_bytes()
            state = (p / "stat").read_text().rsplit(") ", 1)[1][:1]
        except (OSError, IndexError):
            continue
        argv0 = cmd.split(b"\0")[0]
        if (state not in "ZX" and str(env.root).encode() in cmd
                and (b"tmuxjail.pane.launch" in cmd or argv0.endswith((b"strace", b"bwrap")))):
            out.append(f"{p.name}: {cmd[:200]!r}")
    return out


def test_a_discovery_run_leaves_nothing_running(world):
    """The observed run is proxied (isolated mode's default): strace waits for every child of the
    process it replaced, so a proxy that is one of them, waiting in turn for strace to exit, kept
    both alive forever. Nothing of the run may outlive it."""
    env = world
    did = discover(env)
    assert show(env, did)["evidence"]["exit"]["finished"] is True
    deadline = time.monotonic() + 20
    while _left_running(env) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _left_running(env) == []


def test_candidate_maps_catalogue_and_leaves_the_token_raw(world):
    env = world
    did = discover(env)
    d = show(env, did)
    h = str(env.home)
    cls = d["classification"]
    assert cls["overlay"]["git-identity"] == [f"{h}/.gitconfig"]
    assert cls["overlay"]["aws"] == [f"{h}/.aws/config"]
    assert f"{h}/.secret-token" in cls["raw"]
    cand = Path(d["candidate"])
    assert cand.parent == env.config_dir / "candidates" and not str(cand).startswith(str(env.ws))
    assert not list(env.ws.rglob("*.toml"))
    data = tomllib.loads(cand.read_text())
    assert data["provider"] == "codex" and "git-identity" in data["baseline"] and "aws" in data["baseline"]
    assert any(e.startswith("raw, not granted: read") and e.endswith(")") and "/.secret-token" in e
               for e in data["evidence"])
    assert all(".secret-token" not in json.dumps(c) for c in data.get("capabilities", {}).values())
    assert data["evidence"][0].startswith(f"discovery {did}: evidence ")
    text = env.run("discover", "show", did, check=True).stdout
    assert "RAW" in text and "NOT approved" in text and f"tmuxjail approve codex --candidate {did}" in text


def test_nothing_is_approved_without_a_human_at_a_terminal(world):
    env = world
    did = discover(env)
    r = env.run("approve", "codex", "--candidate", did)  # stdin is not a terminal
    assert r.returncode == 2 and "terminal" in r.stderr
    assert "WIDENS the shipped baseline" in r.stdout and "Use Git identity" in r.stdout
    r = env.run("approve", "codex", "--candidate", did, "--yes")
    assert r.returncode == 2 and "--yes" in r.stderr
    assert env.json("approvals") == []
    assert env.run("preflight", "codex", "--mode", "verified", "--candidate", did).returncode == 4
    r = env.run("discover", "replay", did)
    assert r.returncode == 4 and f"approve codex --candidate {did}" in r.stderr
    assert env.run("discover", "codex", "--yes").returncode == 2  # discover has no --yes


def test_not_approved_when_piped_a_yes(world):
    """A script (or the CLI itself) piping 'y' is not a human at a terminal."""
    import subprocess
    import sys

    env = world
    did = discover(env)
    p = subprocess.run([sys.executable, "-P", "-m", "tmuxjail", *env.flags, "approve", "codex", "--candidate", did],
                       input="y\n", capture_output=True, text=True, env=env.environ(PWD=str(env.ws)), cwd=env.ws,
                       timeout=60)
    assert p.returncode != 0
    assert env.json("approvals") == []


def test_terminal_approval_then_replay_reports_the_token_denied(world):
    env = world
    did = discover(env)
    code, out = _on_a_terminal(env, "approve", "codex", "--candidate", did, "--details", answer="n\n")
    assert code == 1 and "not approved" in out and "\x1b[1;31m" in out  # widening said in red
    assert env.json("approvals") == []
    code, out = _on_a_terminal(env, "approve", "codex", "--candidate", did, "--details")
    assert code == 0 and "approved" in out and "~/.aws" in out, out
    ok = env.json("preflight", "codex", "--mode", "verified", "--candidate", did)
    assert ok["ok"] and set(ok["capabilities"]) >= {"git-identity", "aws"}
    rep = env.json("discover", "replay", did, "--timeout", "60", timeout=120)
    assert rep["replay_of"] == did
    h = str(env.home)
    changes = {p.get("path") or p.get("capability"): p for p in rep["proposed_changes"]}
    assert changes[f"{h}/.secret-token"]["change"] == "review-raw-path"
    assert f"{h}/.gitconfig" not in changes and "git-identity" not in changes and "aws" not in changes
    ev = show(env, rep["id"])["evidence"]
    assert ev["mode"] == "verified"
    assert f"{h}/.gitconfig" in by_path(ev["paths"])  # granted now: read for real


def test_interactive_discovery_attaches_and_ends_with_the_cli(world):
    """Without --non-interactive the user's terminal is attached to the observed pane; when the
    CLI exits, tmuxjail ends the session and shows the evidence."""
    env = world
    code, out = _on_a_terminal(env, "discover", "codex", timeout=90)
    assert code == 0, out
    assert "discovery codex-ws-1" in out and "would-be denials" in out and "NOT approved" in out
    assert env.json("discover", "list")[0]["finished"] is True
    assert not env.tmux("list-sessions", "-F", "#{session_name}", check=False).strip()


def test_discovery_refuses_without_a_terminal_or_strace_args(world):
    env = world
    r = env.run("discover", "codex")  # no terminal, not --non-interactive
    assert r.returncode == 2 and "--non-interactive" in r.stderr
    assert env.run("discover", "show", "../x").returncode == 2
    assert env.run("discover", "replay").returncode == 2
    assert env.run("discover", "codex", "--non-interactive", "--timeout", "0").returncode == 2


PROXY_PROBE = r"""#!/bin/sh
python3 - <<'PY' > "$PWD/proxy-answer" 2>&1
import os, socket
url = os.environ.get("HTTPS_PROXY", "")
try:
    s = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=20)
    s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
    print(s.recv(64).split(b"\r\n")[0].decode())
except Exception as exc:
    print("ERROR", type(exc).__name__, url)
PY
"""


def test_the_observed_run_is_served_by_its_proxy(world):
    """In a discovery run the proxy is strace's grandchild (its parent, the middle process, exits at
    once): it must not take that for its launcher's death. A CLI under observation that asks the
    proxy for a name gets the proxy's answer, not a dead port."""
    env = world
    (env.bin / "codex").write_text(PROXY_PROBE)
    discover(env)
    assert (env.ws / "proxy-answer").read_text().strip() == "HTTP/1.1 403 Forbidden"
