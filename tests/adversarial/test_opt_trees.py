"""A strict jail gets of /opt only the top-level trees its CLI lives in (bwrap.opt_trees), so a
root-run start looks for root-only files in those trees alone, never in all of /opt (issue 30.7).
Each test runs from inside a real jail; those that plant in /opt need a writable /opt (root)."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pytest
from conftest import wait_until
from test_escapes import STRICT, Jail

pytestmark = pytest.mark.adversarial

# The CLI: a cursor-agent (its install root is its directory) that probes /opt and then waits
# like a TUI. Expected report: "PUBLIC end" and nothing else.
PROBE = """#!/bin/sh
out="$PWD/.opt-probe.report"
{{
  cat {tree}/secret 2>/dev/null
  ls -A {tree}/private 2>/dev/null
  cat {tree}/public
  [ -e {other} ] && echo OTHER_VISIBLE
  cat {other}/public {other}/secret 2>/dev/null
  /usr/bin/python3 -c 'import os, sys; sys.exit(not os.statvfs(sys.argv[1]).f_flag & os.ST_RDONLY)' {tree} \\
    || echo TREE_WRITABLE
  echo end
}} > "$out.tmp" 2>&1
mv "$out.tmp" "$out"
exec sleep 600
"""


@pytest.fixture
def opt_world(world):
    """Two trees in the real /opt, removed after: the CLI's own and an unrelated one, each with a
    file everyone reads, a root-only file and (the CLI's) a root-only directory."""
    if not os.access("/opt", os.W_OK):
        pytest.skip("the test plants its CLI in /opt, which only root may write here")
    env = world
    tag = secrets.token_hex(4)
    tree, other = Path(f"/opt/tjtest-cli-{tag}"), Path(f"/opt/tjtest-other-{tag}")
    try:
        for d, text in ((tree, "PUBLIC"), (other, "OTHER")):
            d.mkdir(mode=0o755)
            d.chmod(0o755)
            (d / "public").write_text(text + "\n")
            (d / "public").chmod(0o644)
            (d / "secret").write_text("ROOT-ONLY")
            (d / "secret").chmod(0o600)
        (tree / "private").mkdir(mode=0o700)
        (tree / "private" / "key").write_text("ROOT-ONLY")
        cli = tree / "cursor-agent"
        cli.write_text(PROBE.format(tree=tree, other=other))
        cli.chmod(0o755)
        env.vars["PATH"] = f"{tree}:{env.vars['PATH']}"
        env.run("approve", "cursor", "--yes", check=True)
        env.opt_tree, env.opt_other = tree, other
        yield env
    finally:
        env.kill()
        shutil.rmtree(tree, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


@pytest.mark.parametrize("mode", STRICT)
def test_a_cli_under_opt_runs_and_sees_only_its_tree_with_root_only_files_hidden(opt_world, mode):
    """The CLI's own /opt tree is there, read-only, with its root-only file and directory hidden
    (a root-run jail's uid 0 would read them); an unrelated /opt tree is simply not there."""
    env = opt_world
    info = env.json("start", "cursor", "--mode", mode, "--workspace", str(env.ws), "--name", "c", "--detach")
    report = Path(info["workspace"]) / ".opt-probe.report"
    wait_until(report.exists, 15, "the /opt CLI's report")
    out = report.read_text()
    assert out.split() == ["PUBLIC", "end"], out


@pytest.mark.parametrize("mode", STRICT)
def test_a_jail_of_a_cli_outside_opt_has_no_opt(world, mode):
    """The jailed shell (/bin/sh) lives outside /opt: nothing of /opt is mounted, whoever runs it."""
    env = world
    jail = Jail(env, mode)
    out = jail.sh("""
        ls -A /opt 2>/dev/null
        echo end
    """)
    assert out.split() == ["end"], out
    env.unchanged()
