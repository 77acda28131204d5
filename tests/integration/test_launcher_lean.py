"""The in-pane launcher's start-up budget (issue 18.3): it runs on every start, so on its whole
path to exec'ing bubblewrap it imports nothing but the few stdlib modules it needs. Checked on
the real path: a spec made from `start --dry-run`, every check the launcher makes, and exec
replaced by a report of what was imported. Timing is bench/'s job (launcher vs python -c pass)."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import have_jail

from tmuxjail.pane import command, launch
from tmuxjail.sandbox import landlock

# What the launcher must never import: each costs about as much as the interpreter's own start.
HEAVY = ("json", "re", "enum", "dataclasses", "typing", "inspect", "platform", "hashlib", "pydantic",
         "structlog", "tomllib", "tmuxjail.policy", "tmuxjail.model", "tmuxjail.sessions", "tmuxjail.store")


def _spec(env, tmp_path: Path, mode: str) -> tuple[Path, str]:
    out = env.json("start", "shell", "--mode", mode, "--workspace", str(env.ws), "--dry-run")
    pol = out["policy"]
    if pol.get("private_home"):
        Path(pol["private_home"]).mkdir(parents=True, exist_ok=True)
    store = tmp_path / "store.db"
    db = sqlite3.connect(store)
    db.execute("CREATE TABLE sessions (id TEXT, fingerprint TEXT, status TEXT)")
    db.execute("INSERT INTO sessions VALUES ('lean', ?, 'starting')", (out["fingerprint"],))
    db.commit()
    db.close()
    spec = tmp_path / "lean.json"
    spec.write_text(json.dumps({
        "session_id": "lean", "fingerprint": out["fingerprint"], "policy": pol, "argv": out["cli_argv"], "call": out["sandbox_call"],
        "env": dict(pol["env_set"]), "store": str(store), "status_file": str(tmp_path / "lean.status"),
        "machine": platform.machine(), "sandboxed": True, "layout": out["host_layout"],
        "landlock_scope": mode != "compatibility" and landlock.abi() >= landlock.MIN_ABI}))
    spec.chmod(0o600)
    return spec, out["fingerprint"]


@pytest.mark.parametrize("mode", ["compatibility", "isolated"])
def test_launcher_imports_only_what_it_needs(jail_env, tmp_path, mode):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    spec, fp = _spec(jail_env, tmp_path, mode)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(launch.__file__))))
    # The pane's own command (command.launcher), with exec replaced by a report.
    argv = command.launcher(sys.executable, fp, str(spec))
    stub = argv[4].replace("from tmuxjail.pane.launch import main;",
                           "import os; os.execve = lambda *a: (print(' '.join(sorted(sys.modules))), print(a[1][0]),"
                           " sys.stdout.flush(), os._exit(0)); from tmuxjail.pane.launch import main;")
    assert stub != argv[4] and root in stub
    proc = subprocess.run([*argv[:4], stub, *argv[5:]], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TERM": "xterm"}, cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[-1:] in (["/usr/bin/bwrap"], ["/bin/bwrap"]), proc.stderr  # it got as far as exec'ing bwrap
    assert not spec.exists()  # and read the spec once
    loaded = set(lines[0].split())
    heavy = sorted(m for m in HEAVY if m in loaded or any(n.startswith(m + ".") for n in loaded))
    assert heavy == [], f"the launcher imported {heavy}"
