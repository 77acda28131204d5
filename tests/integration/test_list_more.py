"""list's neighbours: prune, a table that fits the terminal, completion generated from the parser."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = pytest.mark.integration
GOLDEN = Path(__file__).parent / "golden"




def test_prune_forgets_what_is_over_and_never_a_live_session(jail_env, tmp_path):
    env = jail_env
    for d in ("live", "dead", "gone", "stop"):
        (env.home / "src" / d).mkdir(parents=True)
    start = lambda name, *a: env.json("start", "shell", "--mode", "isolated", "--workspace",  # noqa: E731
                                      str(env.home / "src" / name), "--name", name, "--detach", *a)
    start("live")
    start("dead", "--", "-c", "sleep 1; exit 3")
    wait_until(lambda: env.tmux("display-message", "-p", "-t", "=dead:", "#{pane_dead}").strip() == "1",
               timeout=15, what="the dead pane")
    start("gone")
    env.tmux("kill-session", "-t", "=gone")
    start("stop")
    env.run("stop", "stop", check=True)
    # A session recorded on another tmux server may be alive there: never pruned from here.
    other = env.run("-L", f"{env.socket}-other", "start", "shell", "--mode", "isolated", "--workspace",
                    str(env.ws), "--name", "elsewhere", "--detach", "--json")
    try:
        assert other.returncode == 0, other.stderr
        names = lambda: sorted(r[0] for r in sqlite3.connect(env.store).execute("SELECT name FROM sessions"))  # noqa: E731
        before = names()
        dry = env.json("prune", "--dry-run")
        assert dry["dry_run"] and sorted(d["name"] for d in dry["sessions"]) == ["gone", "stop"]
        assert names() == before
        assert env.json("prune", "--older-than", "1d")["sessions"] == []  # all are minutes old
        assert env.run("prune", "--older-than", "soon").returncode == 2
        ids = {r["name"]: r["id"] for r in env.json("list", "--all")}
        net = env.state_dir / "net"
        for name in ("gone", "stop", "live"):  # a network log, as a proxied session's
            (net / ids[name]).mkdir(parents=True, exist_ok=True)
            (net / ids[name] / "network.jsonl").write_text("{}\n")
        done = env.json("prune")
        assert sorted(d["name"] for d in done["sessions"]) == ["gone", "stop"]
        assert not (net / ids["gone"]).exists() and not (net / ids["stop"]).exists(), list(net.iterdir())
        assert (net / ids["live"] / "network.jsonl").exists()
        assert names() == sorted(["live", "dead", "elsewhere"])
        events = [(k, json.loads(d)) for k, d in sqlite3.connect(env.store).execute("SELECT kind, data FROM events")]
        assert sorted(d["name"] for k, d in events if k == "prune") == ["gone", "stop"]
        assert "pruned 0 session(s)" in env.run("prune", check=True).stdout
        assert sorted(r["name"] for r in env.json("list")) == ["dead", "elsewhere", "live"]  # every server (12.2)
    finally:
        subprocess.run(["tmux", "-L", f"{env.socket}-other", "kill-server"], capture_output=True)


def _norm(text: str) -> list[str]:
    text = re.sub(r"[0-9a-f]{8}…", "<fp>…", text)
    return [re.sub(r"%\d+", "%N", line) for line in text.splitlines()]


def test_list_fits_the_terminal_width_golden(jail_env):
    env = jail_env
    ws = env.home / "src" / "projects" / "customer-portal" / "backend-services"
    ws.mkdir(parents=True)
    for name, mode in (("portal-backend-agent", "isolated"), ("portal-backend-review", "compatibility")):
        env.json("start", "shell", "--mode", mode, "--workspace", str(ws), "--name", name, "--detach")
    env.tmux("split-window", "-d", "-t", "=portal-backend-agent:", "sleep 300")
    wide = env.run("list", "--color", "never", check=True).stdout
    assert max(map(len, wide.splitlines())) > 80 and str(ws) in wide  # into a pipe: whole
    got = {}
    for cols in (100, 80, 60):
        out = env.run("list", "--color", "never", env_extra={"COLUMNS": str(cols)}, check=True).stdout
        assert max(map(len, out.splitlines())) <= cols, out
        got[cols] = _norm(out)
    if os.environ.get("TMUXJAIL_UPDATE_GOLDEN"):
        (GOLDEN / "list_widths.json").write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    want = json.loads((GOLDEN / "list_widths.json").read_text())
    assert {str(k): v for k, v in got.items()} == want, json.dumps(got, indent=1, ensure_ascii=False)


def test_completion_covers_every_subcommand_and_flag(jail_env):
    """Generated from the parser: every subcommand, every flag, choices, and session names."""
    import argparse
    import sys

    from tmuxjail.cli.app import parser as _parser

    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "mine", "--detach")
    wrapper = env.bin / "tmuxjail"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -P -m tmuxjail -L {env.socket} \"$@\"\n")
    wrapper.chmod(0o755)
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cases = [("",), ("-",), ("start", ""), ("start", "--mode", ""), ("completion", ""), ("resume", ""),
             ("-L", "x", "stop", ""), ("menu", ""), ("list", "--color", "")]
    cases += [(name, "-") for name in sub.choices]
    script = [f"source <({wrapper} completion bash)",
              'comp() { COMP_WORDS=(tmuxjail "$@"); COMP_CWORD=$#; COMPREPLY=(); _tmuxjail; echo "${COMPREPLY[*]}"; }']
    script += ["comp " + " ".join(f"'{w}'" for w in c) for c in cases]
    out = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, env=env.environ(),
                         check=True).stdout.split("\n")
    got = {c: set(line.split()) for c, line in zip(cases, out, strict=False)}  # out ends in ""
    assert {"shell", "menu", "approve", "approvals", "revoke", "preflight", "certify", "prune"} <= got[("",)]
    assert got[("",)] == set(sub.choices)
    assert {"--version", "-L", "-S"} <= got[("-",)]
    for name, p in sub.choices.items():
        flags = {o for a in p._actions for o in a.option_strings if o.startswith("-")}
        assert flags and got[(name, "-")] == flags, name
    assert got[("start", "")] == {"codex", "claude-code", "cursor", "pi", "shell"}
    assert got[("start", "--mode", "")] == {"compatibility", "isolated", "verified"}
    assert got[("completion", "")] == {"bash", "zsh"}
    assert got[("resume", "")] == got[("-L", "x", "stop", "")] == {"mine"}
    assert got[("menu", "")] == {"start", "resume", "list", "shell", "policy", "stop"}  # not _start
    assert got[("list", "--color", "")] == {"auto", "always", "never"}
    zsh = env.run("completion", "zsh", check=True).stdout
    assert zsh.startswith("#compdef tmuxjail\n") and "bashcompinit" in zsh and "complete -F _tmuxjail" in zsh
