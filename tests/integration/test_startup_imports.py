"""Start-up is guarded here, not by imports scattered through functions: each fast path runs in a
fresh interpreter (the installed package), and the modules it loaded are checked against what it
must never load. The one place that imports a command's code is the command table (cli/app.py);
docs/architecture.md lists the seams."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

HEAVY = ("pydantic", "structlog", "libtmux", "sqlite3", "platformdirs")
POLICY_CODE = ("tmuxjail.plan", "tmuxjail.jail", "tmuxjail.policy", "tmuxjail.model", "tmuxjail.profiles")

# The modules are listed at exit (atexit: cli.leave exits without returning, and runs these).
RUN = """
import atexit, json, sys
sys.argv = ["tmuxjail", *json.loads(sys.argv[1])]
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
from tmuxjail.cli import main
main()
"""


def loaded(env, *args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-P", "-c", RUN, json.dumps(list(args))],
                          cwd=env.ws, env=env.environ(PWD=str(env.ws)), capture_output=True, text=True, timeout=60)
    line = proc.stderr.rsplit("\nMODULES ", 1)
    assert len(line) == 2, proc.stderr
    return set(json.loads(line[1]))


def top(mods: set[str]) -> set[str]:
    return {m.partition(".")[0] for m in mods}


def test_version_loads_nothing_but_the_entry_point(env):
    mods = loaded(env, "--version")
    assert not top(mods) & set(HEAVY)
    assert "argparse" not in mods
    assert {m for m in mods if m.startswith("tmuxjail")} == {"tmuxjail", "tmuxjail.cli"}


def test_list_loads_no_policy_code_and_no_logging(env):
    mods = loaded(env, *env.flags, "list")
    assert not top(mods) & {"pydantic", "structlog"}
    assert not mods & set(POLICY_CODE)
    assert "tmuxjail.commands.list" in mods
    # the command table (declarations only) and list's own handler, no other command's code
    assert not {m for m in mods if m.startswith("tmuxjail.commands.")} - {"tmuxjail.commands.list", "tmuxjail.commands.table"}


def test_help_lists_every_command_from_the_table_alone(env):
    """Each command declares its arguments next to its handler; `--help` lists every command
    without importing any handler, and a command's own help imports only its handler."""
    mods = loaded(env, "--help")
    assert {m for m in mods if m.startswith("tmuxjail.commands.")} == {"tmuxjail.commands.table"}
    assert not top(mods) & {"pydantic", "sqlite3"}
    mods = loaded(env, "stop", "--help")
    assert {m for m in mods if m.startswith("tmuxjail.commands.")} == {"tmuxjail.commands.table",
                                                                       "tmuxjail.commands.stop"}


def test_list_check_is_where_the_policy_code_loads(env):
    """The other side of the seam: --check needs the policy, so it loads it (the test above would
    pass vacuously if nothing could)."""
    mods = loaded(env, *env.flags, "list", "--check")
    assert "tmuxjail.plan" in mods and "pydantic" in top(mods)


@pytest.mark.parametrize("action", ["list", "resume", "stop"])
def test_menu_popups_load_no_policy_code(env, action):
    mods = loaded(env, *env.flags, "menu", action, "--print", *(["-t", "%0"] if action == "stop" else []))
    assert not top(mods) & {"pydantic", "structlog", "libtmux"}
    assert not mods & set(POLICY_CODE)


def test_launcher_is_stdlib_only(env):
    """The in-pane launcher runs with -I -S on every start: importing it loads nothing from outside
    the standard library except tmuxjail's own stdlib-only modules."""
    code = ("import sys, json; import tmuxjail.pane.launch, tmuxjail.sandbox.bwrap, tmuxjail.render; "
            "print(json.dumps(sorted(sys.modules)))")
    import tmuxjail

    root = str(__import__("pathlib").Path(tmuxjail.__file__).parents[1])
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path[:0] = [{root!r}]; {code}"],
                          capture_output=True, text=True, timeout=60, check=True)
    mods = set(json.loads(proc.stdout))
    outside = {m for m in top(mods) if m not in sys.stdlib_module_names and m not in ("tmuxjail", "__main__")}
    assert outside == set()
    assert not mods & {"sqlite3", *POLICY_CODE}


def test_a_warm_start_loads_no_pydantic_no_structlog_and_no_policy_code(jail_env):
    """The second start of the same request takes its policy from the cache (tmuxjail.warm): no
    pydantic, no structlog, no profile parsing, no policy building. The first one resolves in
    full (the other side of the seam: this test would pass vacuously if nothing could load)."""
    env = jail_env
    start = (*env.flags, "start", "codex", "--mode", "isolated", "--detach")
    cold = loaded(env, *start)
    assert "tmuxjail.plan" in cold and "pydantic" in top(cold)
    warm = loaded(env, *start)
    assert "tmuxjail.warm" in warm and "tmuxjail.jail" in warm  # it did start a jail
    assert not top(warm) & {"pydantic", "structlog", "libtmux"}  # tmux commands run tmux.ClientCmd
    assert not warm & {"tmuxjail.plan", "tmuxjail.policy", "tmuxjail.model", "tmuxjail.profiles"}
    assert "tmuxjail.sandbox.seatbelt" not in warm  # the macOS backend: `--backend seatbelt --dry-run` only
    assert "tmuxjail.sandbox.sbpl" not in cold | warm  # the SBPL reader: doctor on macOS and the tests only
    # Nor the stdlib it has no use for on the way to the pane (issue 18.1: several ms of imports).
    assert not warm & {"dataclasses", "inspect", "ast", "uuid", "platform"}
    # typing (~3 ms, and ~3.6 ms more compiling NamedTuple annotations): records are record.Record.
    assert "typing" not in warm
    # OpenSSL (hashlib, hmac, secrets): ~2.5 ms to load; the warm path hashes with canon's sha256.
    assert not warm & {"hashlib", "_hashlib", "hmac", "secrets"}
    assert [r["status"] for r in env.json("list")] == ["running", "running"]
