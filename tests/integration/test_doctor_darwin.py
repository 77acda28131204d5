"""`tmuxjail doctor` on macOS, through the Darwin seam (tmuxjail.testing.darwin): Seatbelt's checks
(sandbox-exec, the profile of a dry run parsed with tmuxjail/sandbox/sbpl.py, the keychain note)
in place of Linux's; and on Linux, without the seam, Linux's checks and none of these."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tmuxjail import doctor
from tmuxjail.errors import UsageError

pytestmark = [pytest.mark.integration, pytest.mark.macos_seam]

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "sandbox_exec.py"
MAC = ("sandbox-exec", "seatbelt profile", "keychain")
LINUX = ("bubblewrap", "user namespaces", "seccomp filter", "strace", "landlock scope", "legacy TIOCSTI",
         "XDG_RUNTIME_DIR", "tmpfs sizes", "jail share", "not shared out", "process limit", "memory limit",
         "jail namespace limits", "egress proxy")


def stand_in(env) -> Path:
    """An executable stand-in sandbox-exec (it records each run in its directory's decisions.jsonl)."""
    d = env.root / "sandbox-exec-stand-in"
    d.mkdir(exist_ok=True)
    wrapper = d / "sandbox-exec"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} {d} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def seam(env, sandbox_exec: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "tmuxjail.testing.darwin", "--sandbox-exec", sandbox_exec,
                           *env.flags, *args], cwd=env.ws, env=env.environ(PWD=str(env.ws)),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_doctor_on_macos_runs_seatbelts_checks_and_not_linuxs(env):
    wrapper = stand_in(env)
    proc = seam(env, str(wrapper), "doctor", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    names = {c["check"]: c for c in doc["checks"]}
    assert doc["ok"]
    assert sorted(set(LINUX) & set(names)) == []
    assert {"tmux", "tmux socket dir", "home", "config", "store"} <= set(names)
    sx = names["sandbox-exec"]
    assert sx["ok"] and sx["required"] and sx["detail"] == str(wrapper)
    sb = names["seatbelt profile"]
    assert sb["ok"] and sb["required"], sb
    assert all(f"codex {m}" in sb["detail"] for m in ("compatibility", "isolated", "verified")), sb
    kc = names["keychain"]
    assert kc["ok"] and not kc["required"] and "macos-keychain" in kc["detail"]
    assert "Claude Code" in kc["detail"] and "Cursor" in kc["detail"]
    assert "every profile denies it by each spelling" in names["tmux socket dir"]["detail"]
    # It builds and reads the profiles; it never runs the sandbox, and it leaves no state behind.
    assert not (wrapper.parent / "decisions.jsonl").exists()
    assert "(created at the first start)" in names["store"]["detail"], names["store"]
    assert [p for p in env.home.rglob("*") if p.is_file()] == []
    text = seam(env, str(wrapper), "doctor")
    assert text.returncode == 0 and "ok    seatbelt profile: the codex compatibility" in text.stdout, text.stdout


def test_with_a_dash_s_socket_the_socket_is_what_the_profiles_deny(env):
    env.flags = ["-S", str(env.root / "socks" / "agents.sock")]
    (env.root / "socks").mkdir()
    doc = json.loads(seam(env, str(stand_in(env)), "doctor", "--json").stdout)
    tmux = next(c for c in doc["checks"] if c["check"] == "tmux socket dir")
    assert tmux["ok"] and "denies this server's socket" in tmux["detail"], tmux


def test_without_codex_the_profile_checked_is_the_shells(env):
    (env.bin / "codex").unlink()
    doc = json.loads(seam(env, str(stand_in(env)), "doctor", "--json").stdout)
    sb = next(c for c in doc["checks"] if c["check"] == "seatbelt profile")
    assert sb["ok"] and "shell isolated" in sb["detail"], sb


def test_the_profiles_checked_are_those_of_the_modes_the_config_allows(env):
    wrapper = stand_in(env)
    doc = json.loads(seam(env, str(wrapper), "doctor", "--json").stdout)
    cfg = Path(next(c for c in doc["checks"] if c["check"] == "config")["detail"].split(" (")[0])
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('allowed_modes = ["isolated"]\n')
    doc = json.loads(seam(env, str(wrapper), "doctor", "--json").stdout)
    sb = next(c for c in doc["checks"] if c["check"] == "seatbelt profile")
    assert sb["ok"] and "codex isolated" in sb["detail"] and "verified" not in sb["detail"], sb


def test_the_seam_refuses_a_relative_stand_in(env):
    proc = seam(env, "sandbox-exec", "doctor", "--json")
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is not an absolute path" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("what", ["missing", "not executable", "a directory"])
def test_without_a_runnable_sandbox_exec_no_start_and_doctor_says_so(env, what):
    """A Mac whose sandbox-exec is gone: the start's own check refuses (one line, exit 5, nothing
    started) and doctor fails the check; the seam passes the path through as a Mac has it."""
    path = {"missing": str(env.root / "nowhere" / "sandbox-exec"), "a directory": str(env.root)}.get(what)
    if what == "not executable":
        f = env.root / "sandbox-exec"
        f.write_text("#!/bin/sh\n")
        f.chmod(0o644)
        path = str(f)
    assert path is not None
    proc = seam(env, path, "start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--detach")
    assert proc.returncode == 5 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[0] == (f"tmuxjail: isolated mode cannot be enforced: Seatbelt is not available "
                                           f"here: {path} is missing or not executable (it ships with macOS)"), proc.stderr
    doc = json.loads(seam(env, path, "doctor", "--json").stdout)
    check = next(c for c in doc["checks"] if c["check"] == "sandbox-exec")
    assert not check["ok"] and doc["ok"] is False


@pytest.mark.skipif(sys.platform == "darwin", reason="Linux's doctor: a Mac takes the macOS path without the seam")
def test_doctor_on_linux_runs_linuxs_checks_and_not_seatbelts(env):
    doc = json.loads(env.run("doctor", "--json").stdout)
    names = {c["check"] for c in doc["checks"]}
    assert sorted(set(MAC) & names) == []
    assert {"bubblewrap", "seccomp filter", "landlock scope", "jail namespace limits", "egress proxy"} <= names
    tmux = next(c for c in doc["checks"] if c["check"] == "tmux socket dir")
    assert "every profile denies it" not in tmux["detail"]


# -- the checks themselves ---------------------------------------------------------------------

GOOD = '(version 1)(deny default)(allow file-read* (subpath (param "HOME")))'


@pytest.mark.parametrize(("text", "params", "says"), [
    ('(version 1)(deny default)(allow file-read* (subpath "/a")', {}, "does not parse: unbalanced '('"),
    ('(version 1)(allow file-read* (subpath "/a))', {}, "does not parse: unterminated string"),
    ("(deny default)", {}, "does not open with (version 1)"),
    (GOOD, {}, "names parameters it is not given: HOME"),
], ids=["unbalanced", "unterminated", "no-version", "missing-param"])
def test_a_profile_sandbox_exec_would_refuse_fails_the_check_and_says_why(text, params, says):
    ok, detail, required = doctor.seatbelt_check(lambda: [("codex isolated", GOOD, {"HOME": "/Users/a"}),
                                                           ("codex verified", text, params)])
    assert not ok and required
    assert detail == f"codex verified: {says}"


def test_a_profile_that_parses_with_its_parameters_passes():
    ok, detail, required = doctor.seatbelt_check(lambda: [("codex isolated", GOOD, {"HOME": "/Users/a"})])
    assert ok and required and "codex isolated" in detail


@pytest.mark.parametrize("error", [UsageError("codex: no executable named codex found on PATH"),
                                   FileNotFoundError(2, "No such file or directory")], ids=["tmuxjail", "os"])
def test_no_dry_run_to_check_is_a_warning_not_a_failure(error):
    def none():
        raise error

    ok, detail, required = doctor.seatbelt_check(none)
    assert not ok and not required and detail.startswith("no dry run to check: ")
    assert ("no executable named codex" if isinstance(error, UsageError) else "No such file") in detail


def test_sandbox_exec_must_be_an_executable_file(tmp_path):
    f = tmp_path / "sandbox-exec"
    assert not doctor.sandbox_exec_check(str(f))[0]
    f.write_text("#!/bin/sh\n")
    f.chmod(0o644)
    ok, detail, fix = doctor.sandbox_exec_check(str(f))
    assert not ok and "is not an executable file" in detail and "ships with macOS" in fix
    f.chmod(0o755)
    assert doctor.sandbox_exec_check(str(f))[0]
    assert not doctor.sandbox_exec_check(str(tmp_path))[0]
