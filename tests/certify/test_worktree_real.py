"""Issue 32 item 5 on the real CLIs (where scripts/install-certify-clis.sh installed them): Codex
and Claude Code started with --worktree in one repository, side by side and offline, each in a
checkout, branch and private home of its own; a shell in each jail commits (the CLIs cannot sign
in offline, so they do not write code themselves); neither sees the other's uncommitted files;
both land."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from conftest import have_jail, wait_until
from test_certify import installed_bin, offline

PROVIDERS = ("codex", "claude-code")


def _git(env, cwd: Path, *args: str) -> str:
    run = subprocess.run(["git", *args], cwd=cwd, env=env.environ(GIT_CONFIG_NOSYSTEM="1"), capture_output=True,
                         text=True, check=True)
    return run.stdout


def _in_shell(env, pane: str, cwd: Path, script: str, n: int) -> str:
    (cwd / f".s{n}.sh").write_text(script)
    env.tmux("send-keys", "-t", pane, f"sh .s{n}.sh > .s{n}.tmp 2>&1; mv .s{n}.tmp .s{n}.out", "Enter")
    out = cwd / f".s{n}.out"
    wait_until(out.exists, 30, f"a script in {pane}")
    return out.read_text()


def test_codex_and_claude_code_work_side_by_side_in_worktrees(env):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    bins = {p: installed_bin(p) for p in PROVIDERS}  # skips when a pin is not installed
    env.vars["PATH"] = ":".join([*(str(b) for b in bins.values()), env.vars["PATH"]])
    subprocess.run([*offline(bins["codex"]), "tmux", *env.tmux_flags, "new-session", "-d", "-s", "home"],
                   env=env.environ(), check=True, timeout=30)
    repo = env.ws
    _git(env, repo, "init", "-q")
    _git(env, repo, "config", "user.name", "u")
    _git(env, repo, "config", "user.email", "u@x.test")
    (repo / "README").write_text("x\n")
    _git(env, repo, "add", "README")
    _git(env, repo, "commit", "-qm", "init")
    rows = {}
    for p in PROVIDERS:
        rows[p] = env.json("start", p, "--mode", "isolated", "--workspace", str(repo), "--worktree", p, "--name", p,
                           "--detach", "--non-interactive", timeout=300)
    for p in PROVIDERS:
        pane = rows[p]["tmux_pane"]
        wait_until(lambda pane=pane: len(env.tmux("capture-pane", "-p", "-t", pane).split()) > 5, 120,
                   f"{p}'s first screen")
    time.sleep(3)
    listed = {d["name"]: d for d in env.json("list")}
    homes = {p: listed[p]["private_home"] for p in PROVIDERS}
    assert homes["codex"] != homes["claude-code"] and all(homes.values())
    assert {listed[p]["worktree"]["branch"] for p in PROVIDERS} == {"tmuxjail/codex", "tmuxjail/claude-code"}
    # (Offline, Claude Code may end at "Unable to connect" once its first request fails: its
    # session and jail policy stay, and the shell below runs in that same jail.)
    wt = {p: Path(rows[p]["workspace"]) for p in PROVIDERS}
    shells = {p: env.json("shell", p, "--detach")["shell_pane"] for p in PROVIDERS}
    for i, p in enumerate(PROVIDERS):
        other = wt[PROVIDERS[1 - i]]
        out = _in_shell(env, shells[p], wt[p], f"""
            echo {p} > {p}.txt
            ls {other} >/dev/null 2>&1 && echo SEES_OTHER
            ls {repo} >/dev/null 2>&1 && echo SEES_REPO
            git add {p}.txt && git commit -qm {p} && echo COMMIT
        """, i)
        assert out.split() == ["COMMIT"], out
    for p in PROVIDERS:
        env.run("land", p, check=True)
    assert (repo / "codex.txt").read_text() == "codex\n" and (repo / "claude-code.txt").read_text() == "claude-code\n"
    log = _git(env, repo, "log", "--format=%s")
    assert "codex" in log and "claude-code" in log
