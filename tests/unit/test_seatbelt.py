"""The macOS Seatbelt backend, checked offline: golden profiles, well-formedness, parameters,
decisions of a small SBPL evaluator (tmuxjail/sandbox/sbpl.py), hostile paths, and a runtime suite that
only runs where /usr/bin/sandbox-exec exists (never in CI today; see docs/macos.md).

Regenerate the goldens after an intended change with: TMUXJAIL_UPDATE_GOLDEN=1 pytest tests/unit/test_seatbelt.py
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmuxjail import identity, policy, profiles
from tmuxjail.adapters import get as get_adapter
from tmuxjail.effective import ExecutableIdentity
from tmuxjail.model import Mode
from tmuxjail.paths import APP, Paths
from tmuxjail.sandbox import (
    HostLayout,
    sbpl,
    seatbelt,
)
from tmuxjail.sandbox.sbpl import Request
from tmuxjail.sandbox.seatbelt import SANDBOX_EXEC, Seatbelt, env_overrides, profile, spellings
from tmuxjail.subpath import inside

GOLDEN = Path(__file__).parent / "golden"
HOME = "/Users/alice"
WS = f"{HOME}/src/app"
TMUX_DIR = "/private/tmp/tmux-501"  # exists at start
TMUX_ABSENT = f"{HOME}/.tmux-tmp/tmux-501"  # $TMUX_TMPDIR's dir, not created yet
TMUX_FILE = f"{HOME}/.tmux-agents.sock"  # a -S socket
PANE_TTY = "/dev/ttys004"
SESSION_TMP = "/private/var/folders/ab/cdef/T/tmuxjail-7f3a"
CODEX_ROOT = "/opt/homebrew/lib/node_modules/@openai/codex"
CODEX_EXE = f"{CODEX_ROOT}/node_modules/@openai/codex-darwin-arm64/vendor/aarch64-apple-darwin/bin/codex"
PROXY_PORT = 47123  # the session proxy's loopback port (network proxy)
HOST = HostLayout(tmux_dirs=(TMUX_DIR,), tmux_files=(TMUX_FILE,), tmux_dir_candidates=(TMUX_DIR, TMUX_ABSENT),
                  tty=PANE_TTY, session_tmp=SESSION_TMP, proxy_port=PROXY_PORT)


def mac_dirs(home: str = HOME) -> Paths:
    """tmuxjail's directories as the REAL platformdirs computes them on macOS, for `home`."""
    from platformdirs.macos import MacOS

    saved = dict(os.environ)
    try:
        for k in [k for k in os.environ if k.startswith("XDG_")]:
            del os.environ[k]
        os.environ["HOME"] = home
        d = MacOS(APP)
        return Paths(home=Path(home), config_dir=Path(d.user_config_dir), state_dir=Path(d.user_state_dir),
                     data_dir=Path(d.user_data_dir))
    finally:
        os.environ.clear()
        os.environ.update(saved)


DIRS = mac_dirs()
SUPPORT = str(DIRS.data_dir)  # config, state and data: one directory on macOS
STORE, SPOOL, HOMES = str(DIRS.store), str(DIRS.spool), str(DIRS.homes)


def resolved(mode: str, *, workspace: str = WS, caps=(), git: bool = True, home: str = HOME,
             provider: str = "codex", git_paths=None, network: str | None = None, own_install=()) -> dict:
    """policy.resolve on the real macOS layout, as sessions would call it on a Mac."""
    dirs = mac_dirs(home)
    facts = policy.Facts(
        home=home, uid=501, user="alice", login_shell="/bin/zsh",
        own_dirs=tuple(str(d) for d in dirs.own_dirs()), config_dir=str(dirs.config_dir),
        private_home=str(dirs.private_home(provider, "default")), backend="seatbelt",
        executable=identity.Resolved(ExecutableIdentity(path=CODEX_EXE, sha256="sha256:" + "a" * 64),
                                     [CODEX_EXE], (CODEX_ROOT,)),
        allowed_modes=("compatibility", "isolated", "verified"),
        git_paths=tuple(git_paths if git_paths is not None else [f"{workspace}/.git"] if git else []),
        own_install=tuple(own_install),
    )
    req = policy.Request(provider=provider, mode=Mode(mode), workspaces=(workspace,),
                         capabilities=tuple(caps), network=network)
    return policy.resolve(req, profiles.load(provider), get_adapter(provider), facts).to_data()


# The git-metadata model (issue 13, host.git_guards): every .git present at start (top level, a
# nested repository, a submodule's .git file, a worktree's .git file) and the gitdir a .git file
# names inside a workspace; policy.resolve puts them all in `protected`.
GIT_WORLD = [f"{WS}/.git", f"{WS}/vendor/lib/.git", f"{WS}/mods/sub/.git", f"{WS}/.git/modules/sub",
             f"{WS}/wt/.git", f"{HOME}/src/other/.git/worktrees/app"]


def git_model(pol: dict) -> dict:
    return resolved(pol["mode"], git_paths=GIT_WORLD) if pol["mode"] != "compatibility" else pol


def make_policy(mode: str, *, home: str = HOME, workspace: str = WS, support: str | None = None,
                capabilities=(), host_read=(), host_write=(), install_roots=(CODEX_ROOT,),
                git: bool = True, network: str = "host") -> dict:
    """A policy dict in the shape resolve gives on the macOS layout (one tmuxjail directory),
    for paths resolve would refuse to build (hostile names)."""
    strict = mode != "compatibility"
    support = support or f"{home}/Library/Application Support/tmuxjail"
    env_set = {}
    if strict:
        env_set = {"HOME": home, "USER": "alice", "LOGNAME": "alice", "SHELL": "/bin/zsh",
                   "PATH": policy.STRICT_PATH, "TMPDIR": "/tmp"}
    if mode == "isolated":
        env_set["CODEX_HOME"] = f"{home}/.codex"
    return {
        "schema_version": 1, "mode": mode, "provider": "codex", "backend": "seatbelt",
        "profile_version": "1", "profile_hash": "sha256:00",
        "executable": {"path": CODEX_EXE, "sha256": "00", "version": "1", "extra": []},
        "install_roots": list(install_roots), "home": home,
        "private_home": f"{support}/homes/codex/default" if mode == "isolated" else None,
        "workspace_read": [], "workspace_write": [workspace],
        "host_read": list(host_read) if mode == "verified" else [],
        "host_write": list(host_write) if mode == "verified" else [],
        "protected": [f"{workspace}/.git"] if strict and git else [], "hidden": [support],
        "env_inherit": not strict, "env_names": [], "env_set": sorted(env_set.items()),
        "capabilities": list(capabilities), "network": network,
    }


def _keychain_policy() -> dict:
    # No shipped profile lists macos-keychain yet; add it the way resolve would.
    pol = resolved("verified")
    return dict(pol, capabilities=[*pol["capabilities"], seatbelt.KEYCHAIN_CAPABILITY])


CASES = {
    "compatibility": lambda: resolved("compatibility"),
    "isolated": lambda: resolved("isolated"),
    "verified": lambda: resolved("verified", caps=["git-identity"]),
    "verified_keychain": _keychain_policy,
    "verified_proxy": lambda: resolved("verified", caps=["git-identity"], network="proxy"),
}


def build(name: str) -> tuple[dict, str, dict]:
    pol = CASES[name]()
    text, params = profile(pol, HOST)
    return pol, text, params


def evaluator(pol: dict, host: HostLayout = HOST) -> sbpl.Profile:
    text, params = profile(pol, host)
    return sbpl.Profile(text, params)


def golden_text(text: str, params: dict) -> str:
    # The profile exactly as passed with -p, then the -D parameters as SBPL comments.
    return text + "".join(f"; -D {k}={json.dumps(v)}\n" for k, v in params.items())


def R(op, **kw) -> Request:
    return Request(op, **kw)


def allowed(prof, *reqs):
    for req in reqs:
        assert prof.decide(req) == "allow", req


def denied(prof, *reqs):
    for req in reqs:
        assert prof.decide(req) == "deny", req


# ---------------------------------------------------------------------------------------------
# the evaluator itself: Seatbelt's semantics

def test_evaluator_last_matching_rule_wins():
    p = sbpl.Profile('(version 1)(deny default)(allow file-read* (subpath "/a"))(deny file-read* (subpath "/a/b"))', {})
    assert p.decide(R("file-read-data", path="/a/c")) == "allow"
    assert p.decide(R("file-read-data", path="/a/b/x")) == "deny"
    assert p.decide(R("file-read-data", path="/z")) == "deny"
    q = sbpl.Profile('(version 1)(deny default)(deny file-read* (subpath "/a/b"))(allow file-read* (subpath "/a"))', {})
    assert q.decide(R("file-read-data", path="/a/b/x")) == "allow"
    assert not q.precedence_free(R("file-read-data", path="/a/b/x"))
    assert q.precedence_free(R("file-read-data", path="/a/c"))
    c = sbpl.Profile('(version 1)(allow default)(deny file-write* (subpath "/s"))(allow file-write* (literal "/s/ok"))', {})
    assert c.decide(R("file-write-data", path="/s/ok")) == "allow"
    assert c.decide(R("file-write-data", path="/s/no")) == "deny"


def test_evaluator_default_does_not_cover_the_stragglers():
    p = sbpl.Profile("(version 1)(deny default)", {})
    for op in ("process-info-pidinfo", "process-info-codesignature", "nvram-get", "nvram-set",
               "iokit-get-properties", "file-map-executable", "dynamic-code-generation"):
        assert p.decide(R(op, path="/x", target="other")) == "allow", op
    for op in ("file-read-data", "mach-lookup", "sysctl-read", "lsopen", "appleevent-send", "process-exec"):
        assert p.decide(R(op, path="/x")) == "deny", op
    q = sbpl.Profile("(version 1)(deny default)(deny process-info*)(allow process-info* (target same-sandbox))", {})
    assert q.decide(R("process-info-pidinfo", target="other")) == "deny"
    assert q.decide(R("process-info-pidinfo", target="same-sandbox")) == "allow"
    assert q.decide(R("process-info-pidinfo", target="self")) == "allow"


def test_evaluator_filters_we_emit():
    p = sbpl.Profile('(version 1)(deny default)'
                      '(allow sysctl-read (sysctl-name "hw.ncpu") (sysctl-name-prefix "kern.proc.pid."))'
                      '(allow file-read* (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))'
                      '(allow user-preference-read (preference-domain "kCFPreferencesAnyApplication"))'
                      '(allow file-write* (prefix (param "P")))', {"P": "/k/login.keychain-db.sb-"})
    allowed(p, R("sysctl-read", sysctl="hw.ncpu"), R("sysctl-read", sysctl="kern.proc.pid.12"),
            R("file-read-data", path="/dev/ttys003", extensions=frozenset({"com.apple.sandbox.pty"})),
            R("user-preference-read", domain="kCFPreferencesAnyApplication"),
            R("file-write-create", path="/k/login.keychain-db.sb-1-2"))
    denied(p, R("sysctl-read", sysctl="kern.procargs2"), R("file-read-data", path="/dev/ttys003"),
           R("user-preference-read", domain="com.apple.Safari"), R("file-write-create", path="/k/x"))


# ---------------------------------------------------------------------------------------------
# goldens and structure

def test_goldens_come_from_the_real_macos_layout():
    assert DIRS.config_dir == DIRS.state_dir == DIRS.data_dir
    assert f"{HOME}/Library/Application Support/tmuxjail" == SUPPORT


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_profiles(name):
    _, text, params = build(name)
    got = golden_text(text, params)
    path = GOLDEN / f"seatbelt_{name}.sb"
    if os.environ.get("TMUXJAIL_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"missing golden {path}; run with TMUXJAIL_UPDATE_GOLDEN=1"
    assert got == path.read_text(), f"{path.name} changed; review, then TMUXJAIL_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_files_are_well_formed_sbpl(name):
    forms = sbpl.parse((GOLDEN / f"seatbelt_{name}.sb").read_text())
    assert forms[0] == [sbpl.Sym("version"), sbpl.Sym("1")]


def check_well_formed(text: str, params: dict) -> list:
    forms = sbpl.parse(text)
    assert forms[0] == [sbpl.Sym("version"), sbpl.Sym("1")], "the profile must open with (version 1)"
    used = sbpl.params_used(forms)
    assert used <= set(params), f"undefined parameters: {used - set(params)}"
    assert set(params) <= used, f"parameters never referenced: {set(params) - used}"
    for key in params:
        assert key.replace("_", "").isalnum() and key.isupper(), key
    heads = {f[0].name for f in forms}
    assert heads <= {"version", "allow", "deny"}, heads
    return forms


@pytest.mark.parametrize("name", sorted(CASES))
def test_profile_structure(name):
    pol, text, params = build(name)
    forms = check_well_formed(text, params)
    Sym = sbpl.Sym
    defaults = [f for f in forms if f[1:] == [Sym("default")]]
    if pol["mode"] == "compatibility":
        assert defaults == [[Sym("allow"), Sym("default")]]
        # allow default, then only denies: precedence between an allow and a deny never arises
        assert all(f[0] == Sym("deny") for f in forms[2:])
    else:
        assert forms[1] == [Sym("deny"), Sym("default")]
        # the operations (deny default) leaves allowed, denied right after it
        assert forms[2] == [Sym("deny"), *(Sym(op) for op in seatbelt.STRAGGLERS)]
        assert {s.rstrip("*") for s in seatbelt.STRAGGLERS} == set(sbpl.STRAGGLERS)
        assert all(f[0] == Sym("allow") for f in forms[3:])


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_path_in_profile_text(name):
    _pol, text, params = build(name)
    for value in params.values():
        if value.startswith(HOME):
            assert value not in text
    assert HOME not in text


def test_spellings():
    D = "/System/Volumes/Data"
    assert spellings("/tmp/tmux-501") == ("/tmp/tmux-501", "/private/tmp/tmux-501", f"{D}/private/tmp/tmux-501")
    assert spellings("/private/tmp/tmux-501") == ("/private/tmp/tmux-501", "/tmp/tmux-501", f"{D}/private/tmp/tmux-501")
    assert spellings("/var/folders/x/T/") == ("/var/folders/x/T", "/private/var/folders/x/T", f"{D}/private/var/folders/x/T")
    assert spellings("/private/etc/hosts") == ("/private/etc/hosts", "/etc/hosts", f"{D}/private/etc/hosts")
    assert spellings("/tmpfoo/x") == ("/tmpfoo/x",)
    assert spellings("/Users/a") == ("/Users/a", f"{D}/Users/a")
    assert spellings(f"{D}/Users/a") == (f"{D}/Users/a", "/Users/a")
    assert spellings("/usr/bin/git") == ("/usr/bin/git",)
    assert spellings("/usr/local/bin/x") == ("/usr/local/bin/x", f"{D}/usr/local/bin/x")


# ---------------------------------------------------------------------------------------------
# decisions (evaluated offline)

def probes(pol: dict) -> list[Request]:
    """File and socket requests the decision tests ask about."""
    ws = pol["workspace_write"][0]
    paths = [ws, f"{ws}/src/a.py", f"{ws}/.git", f"{ws}/.git/hooks", f"{ws}/.git/hooks/pre-commit",
             f"{ws}/.git/config", f"{ws}/.git/index", f"{ws}/.GIT/config", pol["home"], f"{pol['home']}/.ssh/id_rsa",
             "/tmp/x", "/private/tmp/x", f"{TMUX_DIR}/default", "/tmp/tmux-501/default", TMUX_FILE,
             TMUX_ABSENT, f"{TMUX_ABSENT}/default", PANE_TTY, "/dev/ttys009",
             "/usr/bin/git", "/private/etc/hosts", "/etc/hosts", SESSION_TMP, f"{SESSION_TMP}/s.sock",
             "/private/tmp/com.apple.launchd.abc/Listeners",
             "/private/var/folders/ab/cdef/T/x", "/private/var/folders/ab/cdef/C/x",
             STORE, SPOOL + "/x.json", f"{HOMES}/other/default/x", SUPPORT.lower() + "/store.db",
             "/System/Volumes/Data" + STORE]
    paths += [p for h in pol["hidden"] for p in (h, f"{h}/store.db", f"{h}/homes/other/default/x")]
    paths += list(pol["protected"])
    if pol["private_home"]:
        paths += [pol["private_home"], f"{pol['private_home']}/.codex/auth.json"]
    paths += [*pol["host_read"], *pol["host_write"]]
    ops = ["file-read-data", "file-read-metadata", "file-write-data", "file-write-create",
           "file-write-unlink", "file-ioctl"]
    out = [Request(op, path=p) for p in paths for op in ops]
    out += [Request(op, unix=p) for p in paths for op in ("network-outbound", "network-bind")]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_file_or_socket_decision_depends_on_rule_precedence(name):
    pol, _text, _params = build(name)
    for p in (pol, git_model(pol)):
        prof = evaluator(p)
        for req in probes(p):
            assert prof.precedence_free(req), req


@pytest.mark.parametrize("name", sorted(CASES))
def test_tmux_socket_is_denied(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    for sock in (f"{TMUX_DIR}/default", "/tmp/tmux-501/default", TMUX_FILE, f"{TMUX_ABSENT}/default",
                 "/System/Volumes/Data/private/tmp/tmux-501/default", "/private/tmp/TMUX-501/default"):
        denied(prof, R("network-outbound", unix=sock), R("network-bind", unix=sock),
               R("file-read-data", path=sock), R("file-write-create", path=sock))
    denied(prof, R("file-read-data", path=TMUX_DIR))  # no listing


@pytest.mark.parametrize("name", sorted(CASES))
def test_tmux_socket_dirs_cannot_be_created_when_absent(name):
    # item 4: /tmp/tmux-UID (or $TMUX_TMPDIR/tmux-UID) missing at start: the jail must not make
    # it and serve a fake tmux server there
    pol, *_ = build(name)
    prof = evaluator(pol)
    for d in (TMUX_ABSENT, TMUX_DIR, "/tmp/tmux-501"):
        denied(prof, R("file-write-create", path=d), R("network-bind", unix=f"{d}/default"))
    if pol["mode"] != "compatibility":
        allowed(prof, R("file-write-create", path="/private/tmp/tmux-other"))
    # no tmux server running at all: /tmp/tmux-UID is only a candidate, and still guarded
    prof = evaluator(pol, HostLayout(tmux_dir_candidates=("/private/tmp/tmux-501",), tty=PANE_TTY, proxy_port=PROXY_PORT))
    denied(prof, R("file-write-create", path="/private/tmp/tmux-501"), R("file-write-create", path="/tmp/tmux-501"),
           R("network-bind", unix="/private/tmp/tmux-501/default"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_item1_tmuxjail_state_spool_and_private_homes_are_denied(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    for p in (SUPPORT, STORE, f"{STORE}-wal", SPOOL, f"{SPOOL}/1-tok.json", f"{SUPPORT}/config.toml",
              f"{HOMES}/claude-code/default/.claude/.credentials.json", f"{SUPPORT}/tmuxjail.log"):
        denied(prof, *(R(op, path=p) for op in ("file-read-data", "file-write-data", "file-write-create",
                                               "file-write-unlink")))
        denied(prof, R("network-outbound", unix=p))


def test_item1_compatibility_hides_the_whole_macos_directory():
    pol = resolved("compatibility")
    assert pol["hidden"] == [SUPPORT] and pol["protected"] == []
    prof = evaluator(pol)
    denied(prof, R("file-read-data", path=STORE), R("file-read-data", path=f"{HOMES}/codex/default/.codex/auth.json"),
           R("file-read-data", path=f"{SPOOL}/x.json"), R("file-write-unlink", path=f"{HOME}/Library/Application Support"))
    # the twin: the rest of the host is as it is
    allowed(prof, R("file-read-data", path=f"{HOME}/Library/Application Support/Other/x"),
            R("file-read-data", path=f"{HOME}/.ssh/id_rsa"))


def test_item1_linux_layout_keeps_its_config_read_only():
    # the fix only hides the config when it shares a directory; with its own it stays readable
    facts = dict(home="/home/u", uid=1000, user="u", login_shell="/bin/sh",
                 own_dirs=("/home/u/.config/tmuxjail", "/home/u/.local/state/tmuxjail", "/home/u/.local/share/tmuxjail"),
                 config_dir="/home/u/.config/tmuxjail", private_home="/home/u/.local/share/tmuxjail/homes/codex/default",
                 backend="bwrap", executable=identity.Resolved(ExecutableIdentity(path=CODEX_EXE, sha256="sha256:" + "a" * 64),
                                                               [CODEX_EXE], (CODEX_ROOT,)),
                 allowed_modes=("compatibility",))
    req = policy.Request(provider="codex", mode=Mode("compatibility"), workspaces=("/home/u/src/app",))
    pol = policy.resolve(req, profiles.load("codex"), get_adapter("codex"), policy.Facts(**facts))
    assert pol.hidden == ("/home/u/.local/share/tmuxjail", "/home/u/.local/state/tmuxjail")
    assert pol.protected == ("/home/u/.config/tmuxjail",)


def test_compatibility_is_the_host_minus_guards():
    pol, *_ = build("compatibility")
    prof = evaluator(pol)
    allowed(prof, R("file-read-data", path=f"{HOME}/.ssh/id_rsa"),
            R("file-write-data", path=f"{HOME}/notes.txt"),
            R("file-write-data", path=f"{WS}/.git/hooks/pre-commit"),
            R("file-write-data", path="/private/tmp/x"),
            R("network-outbound", unix=f"{HOME}/.ssh/agent.sock"),
            R("mach-lookup", mach="com.apple.SecurityServer"),
            R("network-outbound", ip=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_item2_only_the_panes_own_terminal(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    pty = frozenset({seatbelt.PTY_EXTENSION})
    for op in ("file-read-data", "file-write-data", "file-ioctl"):
        allowed(prof, R(op, path=PANE_TTY), R(op, path="/dev/ttys011", extensions=pty), R(op, path="/dev/tty"))
        denied(prof, R(op, path="/dev/ttys009"), R(op, path="/dev/ttys000"), R(op, path="/dev/ttyp3"))


def test_item2_without_a_known_tty_no_other_terminal_is_reachable():
    host = HostLayout(tmux_dirs=(TMUX_DIR,))
    for mode in ("compatibility", "isolated"):
        prof = evaluator(resolved(mode), host)
        denied(prof, R("file-write-data", path=PANE_TTY))
        allowed(prof, R("file-write-data", path="/dev/tty"))


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_item3_every_git_is_read_only_and_roots_stay_put(mode):
    pol = git_model(resolved(mode))
    assert pol["protected"] == sorted(p for p in GIT_WORLD if p.startswith(WS + "/"))
    prof = evaluator(pol)
    for p in (f"{WS}/.git/config", f"{WS}/.git/commondir", f"{WS}/.git/hooks/pre-commit",
              f"{WS}/.git/modules/sub/hooks/post-checkout", f"{WS}/.git/worktrees/w/commondir",
              f"{WS}/.git/info/attributes", f"{WS}/vendor/lib/.git/hooks/pre-commit",
              f"{WS}/mods/sub/.git", f"{WS}/wt/.git",
              f"{WS}/.GIT/hooks/pre-commit", f"{WS}/.Git/config", f"/System/Volumes/Data{WS}/.git/config"):
        denied(prof, R("file-write-data", path=p), R("file-write-create", path=p), R("file-write-unlink", path=p))
    # rename away and back: .git, its parents inside the workspace, and the workspace root itself
    for p in (WS, f"{WS}/.git", f"{WS}/vendor", f"{WS}/vendor/lib", f"{WS}/mods/sub"):
        denied(prof, R("file-write-unlink", path=p))
    denied(prof, R("file-write-mode", path=WS), R("file-link", path=f"{WS}/h"))
    # the twins
    allowed(prof, R("file-write-create", path=f"{WS}/src/new.py"), R("file-write-unlink", path=f"{WS}/src/a.py"),
            R("file-write-unlink", path=f"{WS}/src"), R("file-read-data", path=f"{WS}/.git/config"),
            R("file-write-data", path=f"{WS}/vendor/lib/x.c"))


def test_item3_capability_git_metadata_write_lifts_it():
    pol = resolved("isolated", caps=["git-metadata-write"], git_paths=GIT_WORLD)
    assert pol["protected"] == []
    prof = evaluator(pol)
    allowed(prof, R("file-write-data", path=f"{WS}/.git/index"), R("file-write-create", path=f"{WS}/.git/objects/ab/cd"))
    denied(prof, R("file-write-unlink", path=WS))


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_item4_unix_sockets_only_in_the_jails_own_places(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    for op in ("network-outbound", "network-bind"):
        denied(prof, R(op, unix="/private/tmp/ssh-XXXX/agent.123"), R(op, unix="/tmp/.s.PGSQL.5432"),
               R(op, unix="/private/tmp/screens/S-alice/1.pts"), R(op, unix="/private/var/folders/ab/cdef/T/x.sock"),
               R(op, unix=f"{HOME}/.ssh/agent.sock"), R(op, unix="/private/var/run/docker.sock"))
        allowed(prof, R(op, unix=f"{WS}/.sock"), R(op, unix=f"{SESSION_TMP}/s.sock"))
        if pol["private_home"]:
            allowed(prof, R(op, unix=f"{pol['private_home']}/.x.sock"))
    # files in the shared temp dirs stay usable
    allowed(prof, R("file-write-create", path="/private/tmp/x"), R("file-write-create", path="/private/var/folders/ab/cdef/T/x"))
    denied(prof, R("file-write-unlink", path="/private/tmp"), R("file-write-unlink", path=SESSION_TMP))


def test_item4_tmpdir_points_at_the_session_temp_dir():
    env = env_overrides(resolved("verified"), HOST)
    assert env["TMPDIR"] == SESSION_TMP
    assert env_overrides(resolved("compatibility"), HOST) == {}


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_item5_explicit_sysctls_no_procargs(name):
    pol, text, _ = build(name)
    prof = evaluator(pol)
    assert '(sysctl-name-prefix "kern.")' not in text
    denied(prof, *(R("sysctl-read", sysctl=n) for n in ("kern.procargs2", "kern.procargs", "kern.proc.all",
                                                        "kern.proc.uid.501", "kern.bootargs")))
    allowed(prof, *(R("sysctl-read", sysctl=n) for n in ("hw.ncpu", "kern.osrelease", "kern.proc.pid.42",
                                                         "hw.optional.arm.FEAT_SHA3", "machdep.cpu.brand_string")))


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_item6_stragglers_are_denied(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    denied(prof, R("process-info-pidinfo", target="other"), R("process-info-codesignature", target="other"),
           R("nvram-get"), R("iokit-get-properties"), R("file-map-executable", path=f"{HOME}/.ssh/x.dylib"),
           R("file-map-executable", path=f"{STORE}"))
    allowed(prof, R("process-info-pidinfo", target="same-sandbox"), R("dynamic-code-generation"),
            R("file-map-executable", path="/usr/lib/libSystem.B.dylib"),
            R("file-map-executable", path=f"{CODEX_ROOT}/x.node"), R("file-map-executable", path=f"{WS}/node_modules/a.node"))


def test_item7_compatibility_denies_launchservices_and_apple_events():
    prof = evaluator(resolved("compatibility"))
    denied(prof, R("lsopen"), R("appleevent-send"),
           *(R("mach-lookup", mach=s) for s in seatbelt.LAUNCH_SERVICES))
    allowed(prof, R("mach-lookup", mach="com.apple.cfprefsd.agent"), R("process-exec", path="/usr/bin/open"))


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_item7_strict_no_services_no_foreign_preferences(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    denied(prof, R("lsopen"), R("appleevent-send"), *(R("mach-lookup", mach=s) for s in seatbelt.LAUNCH_SERVICES),
           R("mach-lookup", mach="com.apple.security.agent"),
           R("user-preference-read", domain="com.apple.Safari"), R("user-preference-read", domain="com.openai.chat"))
    allowed(prof, R("user-preference-read", domain="kCFPreferencesAnyApplication"),
            R("mach-lookup", mach="com.apple.system.opendirectoryd.libinfo"))


def test_item7_keychain_capability_is_the_login_keychain_file_only():
    _pol, text, params = build("verified_keychain")
    prof = sbpl.Profile(text, params)
    kc = f"{HOME}/Library/Keychains"
    allowed(prof, R("file-read-data", path=f"{kc}/login.keychain-db"), R("file-write-data", path=f"{kc}/login.keychain-db"),
            R("file-write-create", path=f"{kc}/login.keychain-db.sb-5a1c-xyz"), R("mach-lookup", mach="com.apple.SecurityServer"))
    denied(prof, R("file-write-create", path=f"{kc}/other.keychain-db"), R("file-read-data", path=f"{kc}/metadata.keychain-db"),
           R("file-write-data", path=f"{kc}/3F2A/keychain-2.db"), R("file-read-data", path=f"{HOME}/Library/Mail/x"),
           R("file-read-data", path=STORE))


def test_item8_every_path_is_canonicalised_before_it_is_a_parameter():
    pol = resolved("isolated")
    real = {WS: "/Volumes/Work/app", HOME: "/Users/Alice", SUPPORT: "/Users/Alice/Library/Application Support/tmuxjail",
            pol["private_home"]: "/Users/Alice/Library/Application Support/tmuxjail/homes/codex/default"}
    host = HostLayout(tmux_dirs=(TMUX_DIR,), tty=PANE_TTY, realpaths=real)
    text, params = profile(pol, host)
    assert "/Volumes/Work/app" in params.values() and WS not in params.values()
    prof = sbpl.Profile(text, params)
    allowed(prof, R("file-write-create", path="/Volumes/Work/app/x"))
    denied(prof, R("file-write-create", path="/Volumes/Work/app/.git/config"),
           R("file-read-data", path="/Users/Alice/Library/Application Support/tmuxjail/store.db"))
    assert env_overrides(pol, host)["HOME"] == real[pol["private_home"]]


def test_item8_a_git_symlink_is_guarded_where_it_is_and_where_it_points():
    pol = resolved("isolated")
    host = HostLayout(tmux_dirs=(TMUX_DIR,), tty=PANE_TTY, realpaths={f"{WS}/.git": "/private/tmp/planted"})
    prof = evaluator(pol, host)
    denied(prof, R("file-write-unlink", path=f"{WS}/.git"), R("file-write-create", path=f"{WS}/.git/config"),
           R("file-write-data", path="/private/tmp/planted/config"))
    allowed(prof, R("file-write-create", path="/private/tmp/x"))


def test_item8_mac_layout_canonicalises_sockets_tmux_tmpdir_and_home(tmp_path):
    from tmuxjail import host as host_mod

    realdir = tmp_path / "real"
    (realdir / "sock").mkdir(parents=True)
    (tmp_path / "link").symlink_to(realdir)
    sock = realdir / "sock" / "agents"
    sock.write_text("")
    pol = make_policy("isolated", home=str(tmp_path / "link" / "home"), workspace=str(tmp_path / "link" / "ws"))
    lay = host_mod.mac_layout(pol, str(tmp_path / "link" / "sock" / "agents"),
                              {"TMUX_TMPDIR": str(tmp_path / "link" / "tt")}, tty=None)
    uid = os.getuid()
    assert lay.tmux_files == (str(sock),)
    assert str(realdir / "tt" / f"tmux-{uid}") in lay.tmux_dir_candidates  # absent, still listed
    assert f"/tmp/tmux-{uid}" in lay.tmux_dir_candidates
    assert lay.realpaths[pol["home"]] == str(realdir / "home")
    assert lay.realpaths[pol["workspace_write"][0]] == str(realdir / "ws")


@pytest.mark.parametrize("name", sorted(CASES))
def test_item8_firmlink_and_case_spellings_reach_no_guarded_file(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    D = "/System/Volumes/Data"
    for p in (f"{D}{STORE}", STORE.lower(), STORE.upper(), f"{D}{SUPPORT.upper()}/spool/x",
              f"{HOME}/library/application support/TMUXJAIL/homes/codex/default/.codex/auth.json"):
        denied(prof, R("file-read-data", path=p), R("file-write-data", path=p))
    for p in (f"{D}{HOME}/Library", f"{HOME}/library"):
        denied(prof, R("file-write-unlink", path=p))


def test_compatibility_rename_bypass_parents_cannot_be_moved():
    prof = evaluator(resolved("compatibility"))
    for p in (f"{HOME}/Library", f"{HOME}/Library/Application Support", HOME, "/private/tmp"):
        denied(prof, R("file-write-unlink", path=p))


@pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
def test_rename_bypass_socket_parents(mode):
    # a tmux socket in a directory of the shared /tmp: moving the directory away would give the
    # socket a name no rule covers
    host = HostLayout(tmux_dirs=(TMUX_DIR,), tmux_files=("/private/tmp/agents/run/tmux.sock",))
    prof = evaluator(resolved(mode), host)
    for p in ("/private/tmp/agents", "/private/tmp/agents/run", "/tmp/agents/run", TMUX_DIR):
        denied(prof, R("file-write-unlink", path=p))
    denied(prof, R("network-outbound", unix="/private/tmp/agents/run/tmux.sock"))
    if mode != "compatibility":
        allowed(prof, R("file-write-create", path="/private/tmp/agents/other"),
                R("file-write-create", path="/private/var/folders/a/b/T/x"))
        denied(prof, R("file-write-create", path="/private/var/folders/a/b/T"))


def test_isolated_sees_the_private_home_not_the_real_one():
    pol, *_ = build("isolated")
    prof = evaluator(pol)
    ph = pol["private_home"]
    assert ph == f"{HOMES}/codex/default" and " " in ph
    for p in (f"{HOME}/.ssh/id_rsa", f"{HOME}/.codex/auth.json", f"{HOME}/Documents/x", HOME):
        denied(prof, R("file-read-data", path=p), R("file-write-create", path=p))
    allowed(prof, R("file-read-data", path=ph), R("file-read-data", path=f"{ph}/.codex/auth.json"),
            R("file-write-data", path=f"{ph}/.codex/auth.json"), R("file-write-create", path=f"{ph}/.zshrc"))
    denied(prof, R("file-write-unlink", path=ph))  # the root stays put
    # other sessions' private homes stay hidden
    denied(prof, R("file-read-data", path=f"{HOMES}/claude-code/default/.claude/.credentials.json"))
    # stat of the parents of the private home only
    allowed(prof, R("file-read-metadata", path=HOMES))
    denied(prof, R("file-read-data", path=HOMES))


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_strict_workspace_system_and_temp(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    allowed(prof, R("file-read-data", path=f"{WS}/src/a.py"),
            R("file-write-create", path=f"{WS}/src/new.py"),
            R("file-write-unlink", path=f"{WS}/src/a.py"),
            R("file-read-data", path="/usr/bin/git"),
            R("file-read-data", path="/private/etc/hosts"),
            R("file-read-data", path="/System/Library/Frameworks/x"),
            R("file-write-create", path="/private/tmp/x"),
            R("file-write-create", path="/tmp/x"),
            R("file-write-create", path="/private/var/folders/ab/cdef/T/x"),
            R("file-write-data", path="/dev/null"),
            R("network-outbound", unix="/private/var/run/mDNSResponder"),
            R("network-outbound", ip=True),
            R("file-read-metadata", path="/Users"),
            R("file-read-metadata", path=HOME))
    denied(prof, R("file-write-create", path="/usr/local/bin/x"),
           R("file-write-data", path="/private/etc/hosts"),
           R("file-read-data", path=f"{HOME}/.ssh/id_rsa"),
           R("file-read-data", path=f"/System/Volumes/Data{HOME}/.ssh/id_rsa"),
           R("file-read-data", path=f"/System/Volumes/data{HOME}/.ssh/id_rsa"),
           R("file-read-data", path="/Users"),
           R("file-read-data", path="/Library/Keychains/System.keychain"),
           R("network-outbound", unix="/private/tmp/com.apple.launchd.abc/Listeners"),
           R("file-read-data", path="/private/tmp/com.apple.launchd.abc/Listeners"),
           R("mach-lookup", mach="com.apple.security.agent"),
           R("mach-lookup", mach="com.apple.coreservices.appleevents"))


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_item9_startup_grants(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    allowed(prof, R("file-read-data", path="/private/var/run/resolv.conf"),
            R("file-read-data", path="/private/var/db/DarwinDirectory/local/recordStore.data"),
            R("file-write-create", path="/private/var/folders/ab/cdef/C/clang/ModuleCache/x"),
            R("file-read-data", path="/var/folders/ab/cdef/C/x"),
            R("mach-lookup", mach="com.apple.trustd"), R("mach-lookup", mach="com.apple.trustd.agent"),
            R("file-read-data", path="/opt/homebrew/bin/git"))
    env = env_overrides(pol, HOST)
    assert env["PATH"].split(":")[:2] == ["/opt/homebrew/bin", "/opt/homebrew/sbin"]
    assert env["PATH"].endswith(policy.STRICT_PATH)


@pytest.mark.parametrize("provider", ["codex", "claude-code", "cursor"])
def test_item9_resume_keeps_the_own_sandbox_off_flags(provider):
    ad = get_adapter(provider)
    assert ad.seatbelt_args
    mac = ad.backend_resume_argv("seatbelt", ["/x/cli"], "id-1", [])
    linux = ad.backend_resume_argv("bwrap", ["/x/cli"], "id-1", [])
    assert linux == ad.resume_argv(["/x/cli"], "id-1", [])
    assert mac[:len(linux)] == linux and mac[len(linux):] == list(ad.seatbelt_args)
    start = ad.start_argv(["/x/cli"], "id-1", [*ad.seatbelt_args])
    assert all(a in start for a in ad.seatbelt_args)


def test_verified_grants_exactly_the_approved_paths():
    pol, *_ = build("verified")
    prof = evaluator(pol)
    allowed(prof, R("file-read-data", path=f"{HOME}/.gitconfig"), R("file-write-create", path=f"{HOME}/.codex/sessions/x"))
    denied(prof, R("file-write-data", path=f"{HOME}/.gitconfig"), R("file-read-data", path=f"{HOME}/.aws/credentials"),
           R("file-write-unlink", path=f"{HOME}/.codex"))
    assert pol["private_home"] is None
    assert "HOME" not in env_overrides(pol, HOST)


def test_keychain_rules_only_with_the_capability():
    _, plain, _ = build("verified")
    _, text, _ = build("verified_keychain")
    assert "com.apple.security.agent" not in plain and "com.apple.secd" not in plain
    assert "com.apple.security.agent" in text and "AppleDatabaseChanged" in text


def test_keychain_capability_is_declared_unverified():
    data = tomllib.loads((Path(__file__).parents[2] / "profiles" / "capabilities.toml").read_text())
    cap = data["capabilities"]["macos-keychain"]
    assert cap["label"] == "Use your macOS Keychain login"
    assert cap["unverified"] is True
    assert "mach-lookup" in cap["description"] and "Keychains" in cap["description"]


def test_no_network_means_no_ip_rules():
    prof = evaluator(dict(resolved("verified"), network="none"))
    denied(prof, R("network-outbound", ip=True))


def test_workspace_under_tmp_still_hides_tmux_and_launchd():
    prof = evaluator(make_policy("isolated", workspace="/private/tmp/work"))
    allowed(prof, R("file-write-create", path="/private/tmp/work/x"), R("network-outbound", unix="/private/tmp/work/s"))
    denied(prof, R("network-outbound", unix=f"{TMUX_DIR}/default"),
           R("network-outbound", unix="/private/tmp/com.apple.launchd.x/Listeners"))


# ---------------------------------------------------------------------------------------------
# argv

def test_wrap_argv_shape():
    pol, text, params = build("verified")
    argv = Seatbelt().wrap(pol, ["/opt/homebrew/bin/codex", "--yolo"], HOST)
    assert argv[:3] == [SANDBOX_EXEC, "-p", text]
    sep = argv.index("--")
    defs = argv[3:sep]
    assert defs[0::2] == ["-D"] * len(params)
    assert dict(d.split("=", 1) for d in defs[1::2]) == params
    env = env_overrides(pol, HOST)
    assert argv[sep + 1:] == ["/usr/bin/env", *(f"{k}={v}" for k, v in env.items()), "/opt/homebrew/bin/codex", "--yolo"]


def test_wrap_isolated_points_home_at_the_private_home():
    pol, *_ = build("isolated")
    argv = Seatbelt().wrap(pol, ["/opt/homebrew/bin/codex"], HOST)
    tail = argv[argv.index("--") + 1:]
    ph = pol["private_home"]
    env = dict(a.split("=", 1) for a in tail[1:-1])
    assert tail[0] == "/usr/bin/env" and tail[-1] == "/opt/homebrew/bin/codex"
    assert env["CODEX_HOME"] == f"{ph}/.codex" and env["HOME"] == ph  # one argv element, space and all
    assert f"HOME={ph}" in tail and " " in ph


def test_wrap_is_pure_and_uses_the_fixed_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    pol, *_ = build("compatibility")
    a = Seatbelt().wrap(pol, ["x"], HOST)
    b = Seatbelt().wrap(pol, ["x"], HOST)
    assert a == b and a[0] == "/usr/bin/sandbox-exec"
    assert Seatbelt.name == "seatbelt"


def test_available_only_with_sandbox_exec(monkeypatch):
    monkeypatch.setattr(seatbelt.os, "access", lambda p, m: False)
    assert "sandbox-exec" in Seatbelt().available()
    monkeypatch.setattr(seatbelt.os, "access", lambda p, m: p == "/usr/bin/sandbox-exec")
    monkeypatch.setattr(seatbelt.os.path, "isfile", lambda p: p == "/usr/bin/sandbox-exec")
    assert Seatbelt().available() is None


# ---------------------------------------------------------------------------------------------
# hostile paths

NASTY = st.text(
    alphabet=st.one_of(
        st.sampled_from(list('"()\\;#|\n\t\r \'`$*?[]{}^.=-_') + ["é", "ß", "☃", "𝄞", "\u202e", "\u00a0"]),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
    ),
    min_size=1, max_size=40,
).filter(lambda s: s not in (".", ".."))


def _component(s: str, long: bool) -> str:
    return ("zz" + s + "z" * 255)[:255] if long else "zz" + s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ws=NASTY, home=NASTY, state=NASTY, tmux=NASTY, long=st.booleans(),
       mode=st.sampled_from(["compatibility", "isolated", "verified"]), network=st.sampled_from(["host", "proxy", "none"]))
def test_hostile_paths_stay_out_of_the_profile(ws, home, state, tmux, long, mode, network):
    h = "/Users/" + _component(home, False)
    workspace = f"{h}/src/{_component(ws, long)}"
    support = f"{h}/Library/{_component(state, long)}"
    tmux_dir = f"/private/tmp/{_component(tmux, False)}"
    pol = make_policy(mode, home=h, workspace=workspace, support=support,
                      host_read=[f"{h}/.{_component(ws, False)}"], install_roots=[f"{h}/.local/{_component(tmux, False)}"],
                      capabilities=["macos-keychain"], network=network)
    host = HostLayout(tmux_dirs=(tmux_dir,), tmux_files=(f"{h}/{_component(tmux, long)}.sock",),
                      tmux_dir_candidates=(f"{h}/{_component(state, False)}/tmux-501",),
                      session_tmp=f"/private/var/folders/zz/{_component(ws, False)}/T/s", proxy_port=PROXY_PORT)
    text, params = profile(pol, host)
    check_well_formed(text, params)
    for path in (workspace, support, tmux_dir, h):
        assert path not in text
    assert "\n(" in text and all(line.isprintable() for line in text.splitlines())
    argv = Seatbelt().wrap(pol, ["/bin/sh"], host)
    assert argv[2] == text
    prof = sbpl.Profile(text, params)
    assert prof.decide(Request("network-outbound", unix=f"{tmux_dir}/default")) == "deny"
    assert prof.decide(Request("file-read-data", path=f"{support}/store.db")) == "deny"
    assert prof.decide(Request("file-read-data", path=f"{support.upper()}/store.db")) == "deny"
    assert prof.decide(Request("file-read-data", path=f"/System/Volumes/Data{support}/x")) == "deny"
    assert prof.decide(Request("file-write-create", path=host.tmux_dir_candidates[0])) == "deny"
    if mode != "compatibility":
        assert prof.decide(Request("file-write-create", path=f"{workspace}/x")) == "allow"
        assert prof.decide(Request("file-write-create", path=f"{workspace}/.git/hooks/x")) == "deny"
        assert prof.decide(Request("file-write-unlink", path=f"{workspace}/.git")) == "deny"
        assert prof.decide(Request("file-read-data", path=f"{h}/.ssh/id_rsa")) == "deny"


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=200))
def test_reader_rejects_or_accepts_without_crashing(text):
    with contextlib.suppress(sbpl.ParseError):
        sbpl.parse(text)


@pytest.mark.parametrize("bad", ['(allow', '(allow))', '(a "x)', '(a #"x)', "x", "()", '(a "\\'])
def test_reader_rejects_malformed(bad):
    with pytest.raises(sbpl.ParseError):
        sbpl.parse(bad)


# ---------------------------------------------------------------------------------------------
# runtime: only where sandbox-exec exists (a Mac). Never run in CI today; see docs/macos.md.
#
# Rules for these tests (item 10): fixtures live under the real home, never under $TMPDIR or
# /tmp (strict profiles open those, so a denial there proves nothing); every denial has an allowed
# twin run under the SAME profile (if the probe cannot start at all, the twin fails too); and each
# denial must show up as a Seatbelt log line naming the path.

TEMP_ROOTS = ("/tmp", "/private/tmp", "/var/folders", "/private/var/folders")


def fixture_root(home: str, tmpdir: str, token: str) -> str:
    """Where the Mac runtime tests put their files: under the real home, refused when that is
    itself inside a temp dir the strict profiles open."""
    home = os.path.realpath(home)
    for t in (*TEMP_ROOTS, os.path.realpath(tmpdir) if tmpdir else None):
        if t and inside(home, t):
            raise ValueError(f"{home} is inside {t}, which strict profiles open; run with a real HOME")
    return f"{home}/.tmuxjail-mac-tests/{token}"


def test_item10_runtime_fixtures_stay_out_of_the_temp_dirs():
    assert fixture_root("/Users/alice", "/var/folders/ab/cd/T/", "x") == "/Users/alice/.tmuxjail-mac-tests/x"
    for home, tmp in (("/private/tmp/h", ""), ("/var/folders/ab/cd/T/h", ""), ("/Users/a/t/h", "/Users/a/t")):
        with pytest.raises(ValueError, match="which strict profiles open"):
            fixture_root(home, tmp, "x")


# sysctl by MIB numbers through libc, printing the raw answer; exit 1 when refused.
SYSCTL_PROBE = ("/usr/bin/python3 -c 'import ctypes,sys; a=[int(x) for x in sys.argv[1:]]; m=(ctypes.c_int*len(a))(*a); "
                "n=ctypes.c_size_t(1<<16); b=ctypes.create_string_buffer(1<<16); "
                "r=ctypes.CDLL(None).sysctl(m,len(a),b,ctypes.byref(n),None,0); "
                "sys.stdout.buffer.write(b.raw[:n.value]); sys.exit(r != 0)'")


def _need_sandbox_exec():
    if not os.access(SANDBOX_EXEC, os.X_OK):
        pytest.skip(f"{SANDBOX_EXEC} is not available here (macOS only); the profile is checked offline above")


class TestRuntimeOnMac:
    """What a first run on a Mac confirms, each denial paired with an allowed twin."""

    def setup_method(self):
        _need_sandbox_exec()
        import uuid

        self.root = Path(fixture_root(str(Path.home()), os.environ.get("TMPDIR", ""), uuid.uuid4().hex[:8]))
        self.root.mkdir(parents=True)

    def teardown_method(self):
        import shutil

        if getattr(self, "root", None):
            shutil.rmtree(self.root, ignore_errors=True)

    def _layout(self, mode: str, **kw):
        root = self.root
        home = root / "home"
        ws = home / "src" / "app"
        (ws / ".git" / "hooks").mkdir(parents=True)
        (ws / ".git" / "config").write_text("[core]\n")
        (ws / "src").mkdir()
        support = home / "Library" / "Application Support" / "tmuxjail"
        (support / "spool").mkdir(parents=True)
        (support / "store.db").write_text("secret")
        (home / "Library" / "Application Support" / "Other").mkdir()
        (home / "Library" / "Application Support" / "Other" / "x").write_text("other")
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_rsa").write_text("key")
        tmux_dir = root / "tmux-501"
        tmux_dir.mkdir()
        sess = root / "session-tmp"
        sess.mkdir()
        pol = make_policy(mode, home=str(home), workspace=str(ws), support=str(support), install_roots=[], **kw)
        if pol["private_home"]:
            Path(pol["private_home"]).mkdir(parents=True)
        host = HostLayout(tmux_dirs=(str(tmux_dir),), tmux_dir_candidates=(str(root / "tt" / "tmux-501"),),
                          session_tmp=str(sess), tty=os.ttyname(0) if os.isatty(0) else None)
        return pol, host, {"home": home, "ws": ws, "support": support, "tmux": tmux_dir, "root": root, "sess": sess}

    def _run(self, pol, host, script: str) -> subprocess.CompletedProcess:
        argv = Seatbelt().wrap(pol, ["/bin/sh", "-c", script], host)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

    def _log(self, since: str, needle: str) -> list[str]:
        """Seatbelt's own log lines since `since` that deny something naming `needle`."""
        import time

        for _ in range(10):
            out = subprocess.run(["/usr/bin/log", "show", "--style", "compact", "--start", since,
                                  "--predicate", 'sender == "Sandbox" OR eventMessage CONTAINS "Sandbox:"'],
                                 capture_output=True, text=True, timeout=60).stdout
            lines = [ln for ln in out.splitlines() if "deny" in ln and needle in ln]
            if lines:
                return lines
            time.sleep(1)
        return []

    def _pair(self, pol, host, allowed_script: str, denied_script: str, needle: str):
        import time

        since = time.strftime("%Y-%m-%d %H:%M:%S")
        ok = self._run(pol, host, allowed_script + " && echo TWIN-OK")
        assert ok.returncode == 0 and "TWIN-OK" in ok.stdout, ("the allowed twin failed", ok.stderr)
        bad = self._run(pol, host, denied_script + " && echo ESCAPED")
        assert "ESCAPED" not in bad.stdout and bad.returncode != 0, bad.stdout
        assert self._log(since, needle), f"no Seatbelt deny line naming {needle}"
        return bad

    @pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
    def test_item1_state_is_hidden(self, mode):
        pol, host, w = self._layout(mode)
        other = w["home"] / "Library" / "Application Support" / "Other" / "x"
        allowed_script = f'cat "{other}"' if mode == "compatibility" else f'cat "{w["ws"]}/.git/config"'
        self._pair(pol, host, allowed_script, f'cat "{w["support"]}/store.db"', "store.db")

    @pytest.mark.parametrize("mode", ["compatibility", "isolated"])
    def test_item2_other_terminals(self, mode):
        pol, host, _w = self._layout(mode)
        _, slave = os.openpty()
        other = os.ttyname(slave)
        own = "/usr/bin/python3 -c 'import os; m, s = os.openpty(); os.write(s, b\"x\")'"
        self._pair(pol, host, own, f"echo x > {other}", other)

    @pytest.mark.parametrize("mode", ["isolated", "verified"])
    def test_item3_git_and_root(self, mode):
        pol, host, w = self._layout(mode)
        ws = w["ws"]
        self._pair(pol, host, f'echo ok > "{ws}/src/x"', f'echo evil > "{ws}/.git/hooks/pre-commit"', "pre-commit")
        self._pair(pol, host, f'mv "{ws}/src" "{ws}/src2" && mv "{ws}/src2" "{ws}/src"',
                   f'mv "{ws}" "{ws}.away"', str(ws))
        self._pair(pol, host, f'echo ok > "{ws}/src/y"', f'cd "{ws}" && mv .git g', ".git")
        bad = self._run(pol, host, f'echo > "{ws}/.git/hooks/h0"; ln "{ws}/.git/config" "{ws}/h" && echo evil >> "{ws}/h"')
        assert (ws / ".git" / "config").read_text() == "[core]\n", bad.stderr

    @pytest.mark.parametrize("mode", ["isolated", "verified"])
    def test_item4_unix_sockets(self, mode):
        pol, host, w = self._layout(mode)
        servers = []
        try:
            for path in (w["root"] / "agent.sock", w["sess"] / "own.sock"):
                srv = socket.socket(socket.AF_UNIX)
                srv.bind(str(path))
                srv.listen(1)
                servers.append(srv)
            probe = "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "
            self._pair(pol, host, probe + f'"{w["sess"]}/own.sock"', probe + f'"{w["root"]}/agent.sock"', "agent.sock")
            tt = w["root"] / "tt" / "tmux-501"
            self._pair(pol, host, f'mkdir "{w["ws"]}/tmux-501"', f'mkdir -p "{tt}"', "tmux-501")
        finally:
            for srv in servers:
                srv.close()

    @pytest.mark.parametrize("mode", ["isolated", "verified"])
    def test_item5_and_6_other_processes(self, mode):
        pol, host, _w = self._layout(mode)
        victim = subprocess.Popen(["/bin/sleep", "60"], env={"TJ_SECRET": "tj-marker-5"})
        try:
            # not /bin/ps: it is setuid, which a sandbox does not honour, so it fails for another reason
            r = self._pair(pol, host, f"{SYSCTL_PROBE} 1 14 1 {victim.pid} >/dev/null",  # kern.proc.pid
                           f"{SYSCTL_PROBE} 1 49 {victim.pid} | grep -q tj-marker-5",  # kern.procargs2
                           "procargs")
            assert "tj-marker-5" not in r.stdout
        finally:
            victim.kill()

    def test_item7_apple_events_in_compatibility(self):
        pol, host, _w = self._layout("compatibility")
        self._pair(pol, host, "/usr/bin/osascript -e 'return 1'",
                   "/usr/bin/osascript -e 'tell application \"System Events\" to return 1'", "appleevent-send")

    @pytest.mark.parametrize("mode", ["compatibility", "isolated"])
    def test_item8_other_spellings(self, mode):
        pol, host, w = self._layout(mode)
        store = str(w["support"] / "store.db")
        twin = str(w["ws"] / ".git" / "config")
        self._pair(pol, host, f'cat "/System/Volumes/Data{twin}"', f'cat "/System/Volumes/Data{store}"', "store.db")
        self._pair(pol, host, f'cat "{twin}"', f'cat "{store.replace("tmuxjail", "TMUXJAIL")}"', "store.db")

    @pytest.mark.parametrize("mode", ["isolated", "verified"])
    def test_item9_startup_needs(self, mode):
        pol, host, w = self._layout(mode)
        r = self._run(pol, host, 'cat /etc/resolv.conf >/dev/null; /usr/bin/id -un && echo "$TMPDIR" && /usr/bin/git --version')
        assert r.returncode == 0, r.stderr
        assert str(w["sess"]) in r.stdout

    def test_isolated_home_is_the_private_home(self):
        pol, host, w = self._layout("isolated")
        self._pair(pol, host, 'echo hi > "$HOME/x" && cat "$HOME/x"', f'cat "{w["home"]}/.ssh/id_rsa"', "id_rsa")


# ---------------------------------------------------------------------------------------------
# issue 33 item 6: the review of the generated profiles

STRICT_CASES = [n for n in sorted(CASES) if n != "compatibility"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_i33_no_hard_link_or_clone_of_a_hidden_path(name):
    # Seatbelt judges the path it is given: a link of the tmux socket, the store or a private
    # home's file made under another name would be judged by the alias's path
    pol, *_ = build(name)
    prof = evaluator(pol)
    for src in (f"{TMUX_DIR}/default", "/tmp/tmux-501/default", TMUX_FILE, STORE, f"{STORE.upper()}",
                f"/System/Volumes/Data{STORE}", f"{HOMES}/codex/default/.codex/auth.json", f"{SPOOL}/1-tok.json"):
        denied(prof, R("file-link", path=src), R("file-clone", path=src))
    if pol["mode"] == "compatibility":  # the twin: the rest of the host is as it is
        allowed(prof, R("file-link", path=f"{HOME}/notes.txt"), R("file-clone", path=f"{HOME}/notes.txt"))


INSTALL = (f"{HOME}/.local/pipx/venvs/tmuxjail", "/opt/homebrew/Cellar/python@3.12/3.12.7")


def test_i33_compatibility_keeps_tmuxjails_own_install_read_only_on_macos():
    pol = resolved("compatibility", own_install=INSTALL)
    assert pol["hidden"] == [SUPPORT]  # config, state and data share one directory here
    assert set(INSTALL) <= set(pol["protected"])
    prof = evaluator(pol)
    for p in (f"{INSTALL[0]}/lib/python3.12/site-packages/tmuxjail/cli/app.py", f"{INSTALL[1]}/bin/python3.12"):
        denied(prof, R("file-write-data", path=p), R("file-write-create", path=p), R("file-write-unlink", path=p),
               R("file-link", path=p))
        allowed(prof, R("file-read-data", path=p))
    denied(prof, R("file-write-unlink", path=INSTALL[0]), R("file-write-unlink", path=f"{HOME}/.local/pipx"))
    allowed(prof, R("file-write-create", path=f"{HOME}/.local/pipx/venvs/other/x"))


def test_i33_compatibility_keeps_homebrews_tmux_read_only():
    prof = evaluator(resolved("compatibility"))
    for p in ("/opt/homebrew/bin/tmux", "/opt/homebrew/Cellar/tmux/3.5a/bin/tmux", "/opt/homebrew/opt/tmux",
              "/opt/homebrew/opt/libevent/lib/libevent_core-2.1.7.dylib", "/opt/homebrew/Cellar/utf8proc/2.9.0/lib/x.dylib",
              "/opt/homebrew/Cellar/ncurses/6.5/share/terminfo/x/xterm", "/usr/local/bin/tmux",
              "/usr/local/Cellar/tmux/3.5a/bin/tmux", "/OPT/homebrew/bin/tmux", "/System/Volumes/Data/opt/homebrew/bin/tmux"):
        denied(prof, R("file-write-data", path=p), R("file-write-create", path=p), R("file-write-unlink", path=p))
        allowed(prof, R("file-read-data", path=p))
    for p in ("/opt/homebrew", "/opt/homebrew/bin", "/opt/homebrew/Cellar", "/opt/homebrew/opt"):
        denied(prof, R("file-write-unlink", path=p))  # no renaming a parent away
    allowed(prof, R("file-write-create", path="/opt/homebrew/Cellar/node/22/bin/x"),
            R("file-write-create", path="/opt/homebrew/bin/node"))


@pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
def test_i33_proxy_allows_out_only_the_session_proxys_port(mode):
    pol = resolved(mode, network="proxy")
    assert pol["network"] == "proxy"
    text, params = profile(pol, HOST)
    check_well_formed(text, params)
    assert "localhost:*" not in text and "*:*" not in text
    prof = sbpl.Profile(text, params)
    allowed(prof, R("network-outbound", ip=f"localhost:{PROXY_PORT}"))
    denied(prof, R("network-outbound", ip=f"localhost:{PROXY_PORT + 1}"), R("network-outbound", ip="localhost:22"),
           R("network-outbound", ip=True), R("network-bind", ip=True), R("network-inbound", ip=True),
           R("network-outbound", unix=seatbelt.DNS_SOCKET))
    # the proxy resolves names; TLS is still checked in the jail
    denied(prof, R("mach-lookup", mach="com.apple.dnssd.service"),
           R("mach-lookup", mach="com.apple.SystemConfiguration.DNSConfiguration"))
    allowed(prof, R("mach-lookup", mach="com.apple.trustd"))
    with pytest.raises(ValueError, match="proxy"):
        profile(pol, HostLayout(tmux_dirs=(TMUX_DIR,), tty=PANE_TTY))


@pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
def test_i33_network_none_allows_no_outbound_and_host_is_unchanged(mode):
    prof = evaluator(resolved(mode, network="none"))
    denied(prof, R("network-outbound", ip=True), R("network-outbound", ip=f"localhost:{PROXY_PORT}"),
           R("network-outbound", unix=seatbelt.DNS_SOCKET))
    if mode != "compatibility":
        denied(prof, R("mach-lookup", mach="com.apple.dnssd.service"), R("mach-lookup", mach="com.apple.trustd"))
    host = evaluator(resolved(mode, network="host"))
    allowed(host, R("network-outbound", ip=True), R("network-outbound", ip="localhost:22"),
            R("network-outbound", unix=seatbelt.DNS_SOCKET), R("network-bind", ip=True))


@pytest.mark.parametrize("name", STRICT_CASES)
def test_i33_homebrews_var_is_not_readable(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    for p in ("/opt/homebrew/var/postgresql@16/base/1/1259", "/opt/homebrew/var/log/redis.log",
              "/OPT/Homebrew/VAR/x", "/usr/local/var/mysql/ibdata1"):
        denied(prof, R("file-read-data", path=p), R("file-map-executable", path=p))
    allowed(prof, R("file-read-data", path="/opt/homebrew/bin/git"), R("file-read-data", path="/opt/homebrew/etc/gitconfig"),
            R("file-read-data", path="/usr/local/bin/x"))


@pytest.mark.parametrize("name", STRICT_CASES)
def test_i33_other_sessions_temp_dirs_are_out_of_reach(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    other = "/private/var/folders/ab/cdef/T/tmuxjail-9c1d"
    for p in (other, f"{other}/x", "/var/folders/ab/cdef/T/tmuxjail-9c1d/x", f"/System/Volumes/Data{other}/x"):
        denied(prof, R("file-read-data", path=p), R("file-write-create", path=p), R("file-write-data", path=p))
    allowed(prof, R("file-read-data", path=f"{SESSION_TMP}/x"), R("file-write-create", path=f"{SESSION_TMP}/x"),
            R("file-write-create", path="/private/var/folders/ab/cdef/T/x"))
