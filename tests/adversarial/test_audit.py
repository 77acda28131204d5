"""`tmuxjail audit`: an agent inside a real jailed pane plants everything the host would later run
or trust (git repositories and their command keys, hooks, commondir, .gitmodules, direnv and
editor files, setuid/setgid files, links out, hard links), and the audit lists each with the right
kind; what was there before the start is not reported; traps (link loops, deep trees, FIFOs,
hostile names) neither hang it nor reach the terminal; a strict session that ends audits itself
and `list`/`show` flag it."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from conftest import wait_until
from test_escapes import ALL, STRICT, Jail

from tmuxjail.pane import command as pane_command

pytestmark = pytest.mark.adversarial
FINDINGS = 6
HOSTILE = "x\n#(touch /tmp/tj-audit-pwn)\x1b[31m"

PLANT = r"""
    set -u
    mkdir -p nested/.git/hooks nested/.git/objects
    echo 'ref: refs/heads/main' > nested/.git/HEAD
    printf '[core]\n\tfsmonitor = "touch /tmp/tj-fsmonitor"\n\thooksPath = ../hooks\n[alias]\n\tco = checkout\n\tst = "!sh -c id"\n[filter "x"]\n\tsmudge = cat\n[diff "y"] textconv = od\n[credential]\n\thelper = !cat\n[include]\n\tpath = ../elsewhere\n' > nested/.git/config
    printf '#!/bin/sh\ntouch /tmp/tj-hook\n' > nested/.git/hooks/post-checkout && chmod +x nested/.git/hooks/post-checkout
    printf '#!/bin/sh\n' > nested/.git/hooks/pre-commit.sample && chmod +x nested/.git/hooks/pre-commit.sample
    mkdir -p shared/.git && echo 'ref: refs/heads/main' > shared/.git/HEAD && echo ../../nested/.git > shared/.git/commondir
    mkdir -p wtree && echo 'gitdir: /tmp/tj-elsewhere/.git' > wtree/.git
    printf '[submodule "s"]\n\tpath = s\n\turl = ../s\n' > .gitmodules
    echo 'export PATH=.:$PATH' > .envrc
    echo 'A=1' > .env
    mkdir -p .vscode .idea/runConfigurations
    echo '{"version":"2.0.0","tasks":[{"label":"x","command":"id","runOptions":{"runOn":"folderOpen"}}]}' > .vscode/tasks.json
    echo '{"terminal.integrated.env.linux":{"X":"1"}}' > .vscode/settings.json
    echo '<component/>' > .idea/runConfigurations/run.xml
    echo 'vim.cmd("!id")' > .nvim.lua
    echo '!id' > .exrc
    cp /bin/true suid-file && chmod u+s suid-file 2>/dev/null
    cp /bin/true sgid-file && chmod g+s sgid-file 2>/dev/null
    ln -s /etc/passwd link-out
    ln -s . self && ln -s self/.. link-up
    ln -s inside-target link-in
    echo data > hard-a && ln hard-a hard-b
    echo ok
"""

KINDS = {"git-repo", "git-config", "git-hook", "git-commondir", "gitmodules", "direnv", "editor",
         "setuid", "setgid", "symlink-out", "hardlink"}


def audit(env, name="j", *extra):
    proc = env.run("audit", name, "--json", *extra, timeout=60)
    assert proc.returncode in (0, FINDINGS), proc.stderr
    data = json.loads(proc.stdout)
    assert proc.returncode == (FINDINGS if data["count"] else 0)
    return data


def by_path(data, ws: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in data["findings"]:
        out.setdefault(os.path.relpath(f["path"], ws), set()).add(f["kind"])
    return out


def _setbits_if_refused(ws: Path) -> None:
    """A kernel filter may refuse chmod u+s/g+s inside the jail (that is the "kernel" guard);
    the audit must still list such a file, e.g. one left by an older jail: set the bit here."""
    for name, bit in (("suid-file", stat.S_ISUID), ("sgid-file", stat.S_ISGID)):
        p = ws / name
        if not p.lstat().st_mode & bit:
            p.chmod(stat.S_IMODE(p.lstat().st_mode) | bit)


@pytest.mark.parametrize("mode", ALL)
def test_audit_lists_everything_planted_from_inside(world, mode):
    env = world
    jail = Jail(env, mode)
    before = audit(env)
    assert before["count"] == 0 and before["baseline"], before
    assert jail.sh(PLANT).split() == ["ok"]
    _setbits_if_refused(jail.ws)
    data = audit(env)
    got = by_path(data, jail.ws)
    want = {
        "nested/.git": {"git-repo"}, "nested/.git/config": {"git-config"},
        "nested/.git/hooks/post-checkout": {"git-hook"}, "shared/.git": {"git-repo"},
        "shared/.git/commondir": {"git-commondir"}, "wtree/.git": {"git-repo"},
        ".gitmodules": {"gitmodules"}, ".envrc": {"direnv"}, ".env": {"direnv"},
        ".vscode/tasks.json": {"editor"}, ".vscode/settings.json": {"editor"},
        ".idea/runConfigurations/run.xml": {"editor"}, ".nvim.lua": {"editor"}, ".exrc": {"editor"},
        "suid-file": {"setuid"}, "sgid-file": {"setgid"}, "link-out": {"symlink-out"},
        "link-up": {"symlink-out"}, "hard-a": {"hardlink"}, "hard-b": {"hardlink"},
    }
    for path, kinds in want.items():
        assert kinds <= got.get(path, set()), (path, got)
    assert {f["kind"] for f in data["findings"]} == KINDS
    keys = {f["detail"].split(" = ")[0] for f in data["findings"] if f["kind"] == "git-config"}
    assert keys == {"core.fsmonitor", "core.hookspath", "alias.st", "filter.x.smudge", "diff.y.textconv",
                    "credential.helper", "include.path"}, keys
    assert "nested/.git/hooks/pre-commit.sample" not in got and "link-in" not in got and "self" not in got
    assert all(f["change"] == "added" for f in data["findings"])
    # Nothing the audit read ran anything.
    assert not Path("/tmp/tj-fsmonitor").exists() and not Path("/tmp/tj-hook").exists()
    # A change to something already reported is reported as changed.
    (jail.ws / ".envrc").write_text("echo changed\n")
    env.run("audit", "j", "--json")  # audits are not baselines: still relative to the start
    again = {os.path.relpath(f["path"], jail.ws): f["change"] for f in audit(env)["findings"]}
    assert again[".envrc"] == "added"
    text = env.run("audit", "j")
    assert text.returncode == FINDINGS and "+ direnv" in text.stdout and "core.fsmonitor" in text.stdout


@pytest.mark.parametrize("mode", ("compatibility", "isolated"))
def test_untouched_workspace_reports_nothing_and_all_shows_what_was_there(world, mode):
    env = world
    ws = env.root / "pre"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".git" / "config").write_text("[core]\n\tpager = less\n")
    (ws / ".envrc").write_text("use nix\n")
    (ws / ".env").write_text("A=1\n")  # .envrc itself is read-only in strict modes (issue 26)
    (ws / "blob").write_text("x")
    os.link(ws / "blob", ws / "blob-again")  # hard links from before the start are not news
    jail = Jail(env, mode, workspace=ws)
    jail.sh("ls -la > /dev/null; echo ok")
    data = audit(env)
    assert data["count"] == 0 and data["baseline"], data
    assert env.run("audit", "j").returncode == 0
    jail.sh("echo 'PATH=.:/usr/bin' >> .env; echo ok")
    changed = {os.path.relpath(f["path"], jail.ws): f["change"] for f in audit(env)["findings"]}
    assert changed == {".env": "changed"}, changed
    everything = audit(env, "j", "--all")
    kinds = {(os.path.relpath(f["path"], jail.ws), f["kind"]) for f in everything["findings"]}
    assert {(".git", "git-repo"), (".git/config", "git-config"), (".envrc", "direnv"), ("blob", "hardlink")} <= kinds
    assert all(f["change"] == "present" for f in everything["findings"])


@pytest.mark.parametrize("mode", STRICT)
def test_traps_do_not_hang_or_mislead_the_audit(world, mode):
    env = world
    jail = Jail(env, mode)
    out = jail.sh(r"""
        ln -s loop-a loop-b; ln -s loop-b loop-a; ln -s . dot; ln -s dot/dot/dot/.. dotdot
        mkdir -p fifo/.git && mkfifo fifo/.git/config && mkfifo fifo/.envrc && echo x > fifo/.git/HEAD
        mkdir -p fifo/.git/objects
        top=$(pwd); i=0; while [ $i -lt 120 ]; do mkdir -p deep && cd deep; i=$((i+1)); done; echo 'x' > .envrc
        cd "$top"
        mkdir -p "$(printf 'x\n#(touch /tmp/tj-audit-pwn)\033[31m')" && echo 1 > "$(printf 'x\n#(touch /tmp/tj-audit-pwn)\033[31m')/.envrc"
        echo ok
    """)
    assert out.split() == ["ok"], out
    started = time.monotonic()
    data = audit(env)
    assert time.monotonic() - started < 30
    got = by_path(data, jail.ws)
    assert got.get("dotdot") == {"symlink-out"}, got  # a chain of links inside that leaves it
    assert "loop-a" not in got and "dot" not in got
    assert got.get("fifo/.envrc") == {"direnv"} and got.get("fifo/.git") == {"git-repo"}
    assert any("depth cap" in c for c in data["capped"]), data["capped"]
    hostile = os.path.join(HOSTILE, ".envrc")
    assert got.get(hostile) == {"direnv"}, got
    text = env.run("audit", "j")
    assert text.returncode == FINDINGS
    assert "\x1b" not in text.stdout and "x\\x0a#(touch /tmp/tj-audit-pwn)\\x1b[31m/.envrc" in text.stdout
    assert all(".envrc" in line for line in text.stdout.splitlines() if "tj-audit-pwn" in line), text.stdout
    assert "depth cap" in text.stdout  # says the report is incomplete
    assert not Path("/tmp/tj-audit-pwn").exists()


def _events(env, kind):
    db = sqlite3.connect(env.store)
    try:
        return [json.loads(r[0]) for r in db.execute("SELECT data FROM events WHERE kind=? ORDER BY id", (kind,))]
    finally:
        db.close()




@pytest.mark.parametrize("mode", STRICT)
def test_a_strict_session_that_ends_audits_itself_and_list_flags_it(world, mode):
    env = world
    jail = Jail(env, mode)
    hooks = env.tmux("show-hooks", "-w", "-t", "=j:")
    assert "pane-died" in hooks and "_audit --id " + jail.info["id"] in hooks, hooks
    assert jail.sh("mkdir -p r/.git && echo x > r/.git/HEAD && echo 'export A=1' > .envrc; echo ok").split() == ["ok"]
    env.tmux("send-keys", "-t", "=j:", "exit", "Enter")
    dead = lambda: env.tmux("display-message", "-p", "-t", "=j:", "#{pane_dead}").strip() == "1"  # noqa: E731
    assert wait_until(dead, 30), env.tmux("capture-pane", "-p", "-t", "=j:")
    if not wait_until(lambda: _events(env, "audit"), 30):
        # tmux 3.3a does not always fire pane-died (the pane shows dead, its process is never
        # reaped: README, "After a session"). The hook installed above is what it would run:
        # run that very text the way tmux runs a hook, and the session must still be audited.
        stored = hooks.split("\n")[0].split(" ", 1)[1]
        conf = env.root / "hook.conf"
        conf.write_text(stored + "\n")
        env.tmux("source-file", str(conf))
        assert wait_until(lambda: _events(env, "audit"), 30), "no audit stored by the hook's command"
    assert _events(env, "audit")[-1]["count"] == 2
    rows = env.json("list")
    assert rows[0]["audit"] == 2
    table = env.run("list", "--color", "never").stdout
    assert re.search(r"exited\(\d+\)!audit\(2\)", table), table  # dash as the login shell exits 2
    shown = env.json("show", "j")
    assert shown["audit"]["count"] == 2 and {f["kind"] for f in shown["audit"]["findings"]} == {"git-repo", "direnv"}
    assert "audit: 2 finding(s)" in env.run("show", "j").stdout


def test_compatibility_sessions_have_no_hook_but_stop_audits(world):
    env = world
    jail = Jail(env, "compatibility")
    assert "pane-died" not in env.tmux("show-hooks", "-w", "-t", "=j:")
    jail.sh("echo x > .envrc; echo ok")
    env.run("stop", "j", check=True)
    assert _events(env, "audit")[-1]["count"] == 1
    assert env.json("list", "--all")[0]["audit"] == 1


def test_hidden_audit_takes_only_a_session_id(env):
    for argv in (["_audit"], ["_audit", "--id", "j"], ["_audit", "--id", "#(touch /tmp/x)"],
                 ["_audit", "--id", "00000000-0000-0000-0000-000000000000", "x"]):
        proc = env.run(*argv)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (argv, proc.stderr)
    proc = env.run("audit", "nope")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert env.run("audit", "bad;name").returncode == 2


def test_hook_command_quotes_the_interpreter_for_tmux_and_the_shell():

    sid = "0123abcd-0000-4000-8000-0123456789ab"
    cmd = pane_command.hook_command(sid)
    assert cmd.startswith('run-shell -b "exec ') and cmd.endswith('>/dev/null 2>&1"') and sid in cmd
    with pytest.raises(ValueError, match="not a session id"):
        pane_command.hook_command("x; run-shell 'id'")


def test_odd_interpreter_path_survives_tmux_parsing(jail_env, tmp_path):
    """The hook's text is parsed by tmux when set and format-expanded by run-shell when it
    fires: a path with spaces, quotes, $ and # still names exactly that file."""

    env = jail_env
    odd = tmp_path / "a b'c\"$HOME#{pane_id}"
    odd.mkdir()
    out = tmp_path / "out"
    script = odd / "py"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {out}\n")
    script.chmod(0o755)
    import sys

    real, sys.executable = sys.executable, str(script)
    try:
        cmd = pane_command.hook_command("0123abcd-0000-4000-8000-0123456789ab")
    finally:
        sys.executable = real
    # Parsed by tmux's own parser exactly as set-hook stores it (read back), then run the way the
    # hook runs it: the stored text, as a tmux command (run-shell expands its formats).
    env.tmux("new-session", "-d", "-s", "h", "sleep 600")
    env.tmux("set-hook", "-w", "-t", "=h:", "pane-died", cmd)
    stored = env.tmux("show-hooks", "-w", "-t", "=h:").split(" ", 1)[1].rstrip("\n")
    assert stored == cmd
    conf = tmp_path / "hook.conf"
    conf.write_text(stored + "\n")
    env.tmux("source-file", str(conf))
    assert wait_until(lambda: out.exists() and out.read_text().strip(), 20)
    assert out.read_text().split() == ["-E", "-P", "-m", "tmuxjail", "_audit", "--id",
                                       "0123abcd-0000-4000-8000-0123456789ab"]
