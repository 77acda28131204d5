"""The tmux seam (tmuxjail/tmux.py): tmuxjail's own commands run libtmux's command runner as
`ClientCmd` (its argv, decoding and lines, plus `env=`) and import no libtmux; the API's Server is
libtmux's, imported plainly, and runs its commands through the same runner. The in-pane launcher
is stdlib only. A stand-in tmux that prints its argv and environment shows what the client got."""

from __future__ import annotations

import json
import os
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


def test_a_tmux_command_imports_no_libtmux():
    """A start runs several tmux commands and imports no libtmux (its __init__ imports every
    object class; bench/libtmux_cost.py --lean measures what that would add)."""
    mods = _modules("import tmuxjail.tmux as T; T.Tmux(socket_name='tj-seam-none').version()")
    assert "subprocess" in mods and not {m for m in mods if m.split(".")[0] == "libtmux"}


def test_the_api_server_is_libtmuxs_imported_plainly():
    code = ("import tmuxjail.tmux as T; T.Tmux(socket_name='tj-seam-none').version()\n"
            "import libtmux, libtmux.server, libtmux.common\n"
            "from libtmux import Pane, Session\n"
            "assert libtmux.Server is libtmux.server.Server and Session.__module__ == 'libtmux.session'\n"
            "assert issubclass(T.server_class(), libtmux.Server) and libtmux.__version__\n")
    assert {"libtmux.server", "libtmux.pane", "libtmux.session"} <= _modules(code)


FAKE_TMUX = """#!/bin/sh
[ -n "$FAKE_QUIET" ] || printf '%s\\n' "$@"
[ -n "$FAKE_QUIET" ] || printf '\\n\\n'
printf 'err one\\n\\nerr two\\n' >&2
if [ -n "$FAKE_ENV_OUT" ]; then env > "$FAKE_ENV_OUT"; fi
exit 3
"""


@pytest.fixture
def fake_tmux(tmp_path):
    exe = tmp_path / "tmux"
    exe.write_text(FAKE_TMUX)
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.parametrize("where", [{"socket_name": "tj-x"}, {"socket_path": "/tmp/tj-x/s"},
                                   {"socket_name": "tj-x", "config_file": "/dev/null", "colors": 256},
                                   {"socket_path": "/tmp/tj-x/s", "colors": 88}])
@pytest.mark.parametrize("target", [None, "%1"])
def test_jail_server_runs_the_argv_libtmux_builds(fake_tmux, where, target):
    """JailServer.cmd runs what libtmux's Server.cmd would, with -u before the command name, and
    its result reads as libtmux's own tmux_cmd (lines, errors, exit status)."""
    import libtmux
    import libtmux.common

    from tmuxjail.tmux import server_class

    ours = server_class()(**where, tmux_bin=fake_tmux, client_env={"PATH": "/usr/bin:/bin"})
    theirs = libtmux.Server(**where, tmux_bin=fake_tmux)
    got = ours.cmd("display-message", "-p", "x;", target=target)
    want = theirs.cmd("display-message", "-p", "x;", target=target)
    assert isinstance(got, libtmux.common.tmux_cmd)
    cut = got.cmd.index("-u")
    assert got.cmd[:cut] + got.cmd[cut + 1:] == want.cmd and got.cmd[cut + 1] == "display-message"
    assert got.stdout[:cut - 1] + got.stdout[cut:] == want.stdout  # the stand-in prints its argv
    assert (got.stderr, got.returncode) == (want.stderr, want.returncode) == (["err one", "err two"], 3)


@pytest.mark.parametrize("quiet", ["", "1"])
def test_client_cmd_reads_output_as_libtmux_does(fake_tmux, monkeypatch, quiet):
    """Trailing empty lines dropped, empty error lines dropped, has-session's error as its output
    when it printed none: what libtmux's tmux_cmd makes of the same output."""
    import libtmux.common

    from tmuxjail.tmux import ClientCmd

    monkeypatch.setenv("FAKE_QUIET", quiet)
    for argv in (["has-session", "-t", "=x"], ["-V"]):
        got = ClientCmd([fake_tmux, *argv], dict(os.environ))
        want = libtmux.common.tmux_cmd(*argv, tmux_bin=fake_tmux)
        assert (got.cmd, got.stdout, got.stderr, got.returncode) == (want.cmd, want.stdout, want.stderr, want.returncode)


def test_the_client_gets_the_narrowed_environment_and_os_environ_stays(fake_tmux, tmp_path, monkeypatch):
    from tmuxjail.tmux import Tmux, server_class

    out = tmp_path / "env"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seam")
    before = dict(os.environ)
    tmux = Tmux(socket_name="tj-x", env={**os.environ, "FAKE_ENV_OUT": str(out)})
    client = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FAKE_ENV_OUT": str(out)}
    server = server_class()(socket_name="tj-x", tmux_bin=fake_tmux, client_env=client)
    server.cmd("list-sessions")
    assert "OPENAI_API_KEY" not in out.read_text() and f"HOME={tmp_path}" in out.read_text()
    tmux.binary = fake_tmux
    tmux.env["FAKE_ENV_OUT"] = str(out)
    tmux.run("list-sessions", check=False)
    assert "OPENAI_API_KEY" not in out.read_text()
    assert dict(os.environ) == before
