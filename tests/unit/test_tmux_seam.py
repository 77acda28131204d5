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
    mods = _modules("import tmuxjail.pane.launch")
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


HEAVY_LIBTMUX = {"libtmux.server", "libtmux.session", "libtmux.window", "libtmux.pane", "libtmux.client",
                 "libtmux.neo", "libtmux.hooks", "libtmux.options", "libtmux._internal.constants"}


def test_a_tmux_command_loads_only_libtmuxs_command_runner():
    """A command runs through libtmux's own runner (libtmux.common.tmux_cmd, what Server.cmd
    runs) without libtmux's __init__, which imports every object class: start and list pay for
    the runner only (bench/libtmux_cost.py measures both)."""
    mods = _modules("import tmuxjail.tmux as T; T.Tmux(socket_name='tj-seam-none').version()")
    assert {"libtmux", "libtmux.common", "libtmux.exc"} <= mods
    assert not mods & HEAVY_LIBTMUX


def test_the_package_completes_on_first_use_of_its_names():
    """After the lean load, libtmux is whole again on demand: its names, `from libtmux import`,
    and tmuxjail's Server class (the API's objects) are the real ones."""
    code = ("import tmuxjail.tmux as T; T.Tmux(socket_name='tj-seam-none').version()\n"
            "import libtmux, libtmux.server, libtmux.common\n"
            "from libtmux import Pane, Session\n"
            "assert libtmux.Server is libtmux.server.Server and Session.__module__ == 'libtmux.session'\n"
            "assert issubclass(T.server_class(), libtmux.Server) and libtmux.__version__\n"
            "assert T.tmux_cmd() is libtmux.common.tmux_cmd\n"
            "import pytest\n"
            "with pytest.raises(AttributeError):\n"
            "    libtmux.no_such_name\n")
    assert _modules(code) >= HEAVY_LIBTMUX
