"""libtmux is the tmux layer, loaded at its seam (tmuxjail/tmux.py, on the first tmux command):
the in-pane launcher is stdlib only, and the paths that never reach tmux do not import it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _modules(code: str, env: dict | None = None) -> set[str]:
    out = subprocess.run([sys.executable, "-P", "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, env=env, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_launcher_never_imports_libtmux():
    mods = _modules("import tmuxjail.launch")
    assert not {m for m in mods if m.split(".")[0] == "libtmux"}


@pytest.mark.parametrize("argv", [["--version"], ["list", "--json"]])
def test_paths_without_a_tmux_command_do_not_import_libtmux(tmp_path, argv):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TMUX_TMPDIR": str(tmp_path), "LANG": "C.UTF-8",
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    code = f"import sys\nfrom tmuxjail.cli import run\ntry:\n    run({argv!r})\nexcept SystemExit:\n    pass"
    mods = _modules(code, env)
    assert "tmuxjail.cli" in mods
    assert not {m for m in mods if m.split(".")[0] == "libtmux"}


def test_tmux_module_imports_libtmux_only_when_it_runs_tmux():
    assert "libtmux" not in _modules("import tmuxjail.tmux; tmuxjail.tmux.Tmux(socket_name='x')")
