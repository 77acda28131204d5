"""The macOS Seatbelt backend, checked offline: golden profiles, well-formedness, parameters,
decisions of a small SBPL evaluator (tests/unit/sexpr.py), hostile paths, and a runtime suite that
only runs where /usr/bin/sandbox-exec exists (never in CI today; see docs/macos.md).

Regenerate the goldens after an intended change with: TMUXJAIL_UPDATE_GOLDEN=1 pytest tests/unit/test_seatbelt.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import sexpr  # noqa: E402
from sexpr import Request  # noqa: E402

from tmuxjail.sandbox import HostLayout  # noqa: E402
from tmuxjail.sandbox import seatbelt  # noqa: E402
from tmuxjail.sandbox.seatbelt import SANDBOX_EXEC, Seatbelt, env_overrides, profile, spellings  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"
HOME = "/Users/alice"
SUPPORT = f"{HOME}/Library/Application Support/tmuxjail"
CONFIG = f"{HOME}/Library/Preferences/tmuxjail"
STATE = f"{HOME}/Library/Application Support/tmuxjail-state"
WS = f"{HOME}/src/app"
TMUX_DIR = "/private/tmp/tmux-501"
TMUX_FILE = f"{HOME}/.tmux-agents.sock"
HOST = HostLayout(tmux_dirs=(TMUX_DIR,), tmux_files=(TMUX_FILE,))


def make_policy(mode: str, *, home: str = HOME, workspace: str = WS, support: str = SUPPORT,
                config: str = CONFIG, state: str = STATE, capabilities=(), host_read=(),
                host_write=(), install_roots=("/opt/homebrew/lib/node_modules/@openai/codex",),
                git: bool = True, network: str = "host") -> dict:
    """The dict form of a tmuxjail.model.Policy, built by hand (as policy.resolve would)."""
    strict = mode != "compatibility"
    hidden = sorted([support, state] + ([config] if strict else []))
    protected = []
    if strict and git:
        protected = [f"{workspace}/.git/hooks", f"{workspace}/.git/config"]
    if not strict:
        protected = [config]
    env_set = {}
    if strict:
        env_set = {"HOME": home, "USER": "alice", "LOGNAME": "alice", "SHELL": "/bin/zsh",
                   "PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"}
    if mode == "isolated":
        env_set["CODEX_HOME"] = f"{home}/.codex"
    return {
        "schema_version": 1, "mode": mode, "provider": "codex", "backend": "seatbelt",
        "profile_version": "1", "profile_hash": "sha256:00",
        "executable": {"path": "/opt/homebrew/bin/codex", "sha256": "00", "version": "1", "extra": []},
        "install_roots": list(install_roots),
        "home": home,
        "private_home": f"{support}/homes/codex/default" if mode == "isolated" else None,
        "workspace_read": [], "workspace_write": [workspace],
        "host_read": list(host_read) if mode == "verified" else [],
        "host_write": list(host_write) if mode == "verified" else [],
        "protected": protected, "hidden": hidden,
        "env_inherit": not strict, "env_names": [], "env_set": sorted(env_set.items()),
        "capabilities": list(capabilities), "network": network,
    }


CASES = {
    "compatibility": dict(mode="compatibility"),
    "isolated": dict(mode="isolated"),
    "verified": dict(mode="verified", host_read=[f"{HOME}/.gitconfig"], host_write=[f"{HOME}/.codex"]),
    "verified_keychain": dict(mode="verified", host_write=[f"{HOME}/.codex"], capabilities=["macos-keychain"]),
}


def build(name: str) -> tuple[dict, str, dict]:
    pol = make_policy(**CASES[name])
    text, params = profile(pol, HOST)
    return pol, text, params


def evaluator(pol: dict, host: HostLayout = HOST) -> sexpr.Profile:
    text, params = profile(pol, host)
    return sexpr.Profile(text, params)


def golden_text(text: str, params: dict) -> str:
    # The profile exactly as passed with -p, then the -D parameters as SBPL comments.
    return text + "".join(f"; -D {k}={json.dumps(v)}\n" for k, v in params.items())


# ---------------------------------------------------------------------------------------------
# goldens and structure

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
    forms = sexpr.parse((GOLDEN / f"seatbelt_{name}.sb").read_text())
    assert forms[0] == [sexpr.Sym("version"), sexpr.Sym("1")]


def check_well_formed(text: str, params: dict) -> list:
    forms = sexpr.parse(text)
    assert forms[0] == [sexpr.Sym("version"), sexpr.Sym("1")], "the profile must open with (version 1)"
    used = sexpr.params_used(forms)
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
    defaults = [f for f in forms if f[1:] == [sexpr.Sym("default")]]
    if pol["mode"] == "compatibility":
        assert defaults == [[sexpr.Sym("allow"), sexpr.Sym("default")]]
        # allow default, then only denies: precedence between an allow and a deny never arises
        assert all(f[0] == sexpr.Sym("deny") for f in forms[2:])
    else:
        assert defaults == [[sexpr.Sym("deny"), sexpr.Sym("default")]]
        assert forms[1] == [sexpr.Sym("deny"), sexpr.Sym("default")]
        # deny default, then only allows
        assert all(f[0] == sexpr.Sym("allow") for f in forms[2:])


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_path_in_profile_text(name):
    pol, text, params = build(name)
    for value in params.values():
        if value.startswith(HOME):
            assert value not in text
    assert HOME not in text


def test_private_tmp_spellings():
    assert spellings("/tmp/tmux-501") == ("/tmp/tmux-501", "/private/tmp/tmux-501")
    assert spellings("/private/tmp/tmux-501") == ("/private/tmp/tmux-501", "/tmp/tmux-501")
    assert spellings("/var/folders/x/T/") == ("/var/folders/x/T", "/private/var/folders/x/T")
    assert spellings("/private/etc/hosts") == ("/private/etc/hosts", "/etc/hosts")
    assert spellings("/tmpfoo/x") == ("/tmpfoo/x",)
    assert spellings("/Users/a") == ("/Users/a",)


def test_tmux_dir_is_given_in_both_spellings():
    _, text, params = build("compatibility")
    assert TMUX_DIR in params.values() and "/tmp/tmux-501" in params.values()
    _, text, params = build("isolated")
    assert TMUX_DIR in params.values() and "/tmp/tmux-501" in params.values()


# ---------------------------------------------------------------------------------------------
# decisions (evaluated offline)

def probes(pol: dict) -> list[Request]:
    """Every request the decision tests ask about; none may hit both an allow and a deny."""
    ws = pol["workspace_write"][0]
    paths = [ws, f"{ws}/src/a.py", f"{ws}/.git", f"{ws}/.git/hooks", f"{ws}/.git/hooks/pre-commit",
             f"{ws}/.git/config", f"{ws}/.git/index", pol["home"], f"{pol['home']}/.ssh/id_rsa",
             "/tmp/x", "/private/tmp/x", f"{TMUX_DIR}/default", "/tmp/tmux-501/default", TMUX_FILE,
             "/usr/bin/git", "/private/etc/hosts", "/etc/hosts",
             "/private/tmp/com.apple.launchd.abc/Listeners",
             "/private/var/folders/ab/cdef/T/x", "/private/var/folders/ab/cdef/C/x"]
    paths += [p for h in pol["hidden"] for p in (h, f"{h}/store.db", f"{h}/homes/other/default/x")]
    paths += [p for p in pol["protected"]]
    if pol["private_home"]:
        paths += [pol["private_home"], f"{pol['private_home']}/.codex/auth.json"]
    paths += [*pol["host_read"], *pol["host_write"]]
    ops = ["file-read-data", "file-read-metadata", "file-write-data", "file-write-create",
           "file-write-unlink"]
    out = [Request(op, path=p) for p in paths for op in ops]
    out += [Request(op, unix=p) for p in paths for op in ("network-outbound", "network-bind")]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_request_depends_on_rule_precedence(name):
    pol, text, params = build(name)
    prof = sexpr.Profile(text, params)
    for req in probes(pol):
        prof.decide(req)  # raises on an allow/deny overlap


@pytest.mark.parametrize("name", sorted(CASES))
def test_tmux_socket_is_denied(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    for sock in (f"{TMUX_DIR}/default", "/tmp/tmux-501/default", TMUX_FILE):
        assert prof.decide(Request("network-outbound", unix=sock)) == "deny", sock
        assert prof.decide(Request("network-bind", unix=sock)) == "deny", sock
        assert prof.decide(Request("file-read-data", path=sock)) == "deny", sock
        assert prof.decide(Request("file-write-create", path=sock)) == "deny", sock
    assert prof.decide(Request("file-read-data", path=TMUX_DIR)) == "deny"  # no listing


@pytest.mark.parametrize("name", sorted(CASES))
def test_tmuxjail_state_is_denied(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    for d in (SUPPORT, STATE):
        for p in (d, f"{d}/store.db", f"{d}/homes/claude-code/default/.claude/x"):
            for op in ("file-read-data", "file-write-data", "file-write-create", "file-write-unlink"):
                assert prof.decide(Request(op, path=p)) == "deny", (op, p)
            assert prof.decide(Request("network-outbound", unix=p)) == "deny", p
    # the config: read-only in compatibility, hidden in strict modes
    expect = "allow" if pol["mode"] == "compatibility" else "deny"
    assert prof.decide(Request("file-read-data", path=f"{CONFIG}/config.toml")) == expect
    assert prof.decide(Request("file-write-data", path=f"{CONFIG}/config.toml")) == "deny"
    assert prof.decide(Request("file-write-create", path=CONFIG)) == "deny"


def test_compatibility_is_the_host_minus_guards():
    pol, *_ = build("compatibility")
    prof = evaluator(pol)
    allow = [Request("file-read-data", path=f"{HOME}/.ssh/id_rsa"),
             Request("file-write-data", path=f"{HOME}/notes.txt"),
             Request("file-write-data", path=f"{WS}/.git/hooks/pre-commit"),
             Request("file-write-data", path="/private/tmp/x"),
             Request("network-outbound", unix=f"{HOME}/.ssh/agent.sock"),
             Request("mach-lookup", mach="com.apple.SecurityServer"),
             Request("network-outbound", ip=True)]
    for req in allow:
        assert prof.decide(req) == "allow", req


@pytest.mark.parametrize("name", ["compatibility", "isolated", "verified"])
def test_rename_bypass_parents_cannot_be_moved(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    if name == "compatibility":
        # moving a parent of the hidden/read-only trees away would move them out of their rules
        for p in (f"{HOME}/Library", f"{HOME}/Library/Application Support", f"{HOME}/Library/Preferences"):
            assert prof.decide(Request("file-write-unlink", path=p)) == "deny", p
    else:
        # mv .git g; write g/hooks/pre-commit; mv g .git
        assert prof.decide(Request("file-write-unlink", path=f"{WS}/.git")) == "deny"
        assert prof.decide(Request("file-write-unlink", path=f"{WS}/.git/hooks")) == "deny"
        assert prof.decide(Request("file-write-create", path=f"{WS}/.git/hooks/pre-commit")) == "deny"
        assert prof.decide(Request("file-write-data", path=f"{WS}/.git/config")) == "deny"
        assert prof.decide(Request("file-write-data", path=f"{WS}/.git/index")) == "allow"
        assert prof.decide(Request("file-write-create", path=f"{WS}/.git/objects/ab/cd")) == "allow"


@pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
def test_rename_bypass_socket_parents(mode):
    # a tmux socket in a directory of the shared /tmp: moving the directory away would give the
    # socket a name no rule covers
    host = HostLayout(tmux_dirs=(TMUX_DIR,), tmux_files=("/private/tmp/agents/run/tmux.sock",))
    prof = evaluator(make_policy(mode), host)
    for p in ("/private/tmp/agents", "/private/tmp/agents/run", "/tmp/agents/run", TMUX_DIR):
        assert prof.decide(Request("file-write-unlink", path=p)) == "deny", p
    assert prof.decide(Request("network-outbound", unix="/private/tmp/agents/run/tmux.sock")) == "deny"
    if mode != "compatibility":
        assert prof.decide(Request("file-write-create", path="/private/tmp/agents/other")) == "allow"
        assert prof.decide(Request("file-write-create", path="/private/var/folders/a/b/T")) == "deny"
        assert prof.decide(Request("file-write-create", path="/private/var/folders/a/b/T/x")) == "allow"


def test_isolated_sees_the_private_home_not_the_real_one():
    pol, *_ = build("isolated")
    prof = evaluator(pol)
    ph = pol["private_home"]
    for p in (f"{HOME}/.ssh/id_rsa", f"{HOME}/.codex/auth.json", f"{HOME}/Documents/x", HOME):
        assert prof.decide(Request("file-read-data", path=p)) == "deny", p
        assert prof.decide(Request("file-write-create", path=p)) == "deny", p
    for p in (ph, f"{ph}/.codex/auth.json"):
        assert prof.decide(Request("file-read-data", path=p)) == "allow", p
        assert prof.decide(Request("file-write-data", path=p)) == "allow", p
    # other sessions' private homes stay hidden
    other = f"{SUPPORT}/homes/claude-code/default/.claude/.credentials.json"
    assert prof.decide(Request("file-read-data", path=other)) == "deny"
    # stat of the parents of the private home only
    assert prof.decide(Request("file-read-metadata", path=f"{SUPPORT}/homes")) == "allow"
    assert prof.decide(Request("file-read-data", path=f"{SUPPORT}/homes")) == "deny"


@pytest.mark.parametrize("name", ["isolated", "verified"])
def test_strict_workspace_system_and_temp(name):
    pol, *_ = build(name)
    prof = evaluator(pol)
    allow = [Request("file-read-data", path=f"{WS}/src/a.py"),
             Request("file-write-create", path=f"{WS}/src/new.py"),
             Request("file-write-unlink", path=f"{WS}/src/a.py"),
             Request("file-read-data", path="/usr/bin/git"),
             Request("file-read-data", path="/private/etc/hosts"),
             Request("file-read-data", path="/System/Library/Frameworks/x"),
             Request("file-write-create", path="/private/tmp/x"),
             Request("file-write-create", path="/tmp/x"),
             Request("file-write-create", path="/private/var/folders/ab/cdef/T/x"),
             Request("file-write-data", path="/dev/null"),
             Request("network-outbound", unix="/private/tmp/my.sock"),
             Request("network-outbound", unix=f"{WS}/.sock"),
             Request("network-outbound", unix="/private/var/run/mDNSResponder"),
             Request("network-outbound", ip=True),
             Request("file-read-metadata", path="/Users"),
             Request("file-read-metadata", path=HOME)]
    deny = [Request("file-write-create", path="/usr/local/bin/x"),
            Request("file-write-data", path="/private/etc/hosts"),
            Request("file-read-data", path=f"{HOME}/.ssh/id_rsa"),
            Request("file-read-data", path="/Users"),
            Request("file-read-data", path="/private/var/folders/ab/cdef/C/x"),
            Request("file-read-data", path="/Library/Keychains/System.keychain"),
            Request("network-outbound", unix="/private/tmp/com.apple.launchd.abc/Listeners"),
            Request("file-read-data", path="/private/tmp/com.apple.launchd.abc/Listeners"),
            Request("network-outbound", unix="/private/var/run/docker.sock"),
            Request("network-outbound", unix=f"{HOME}/.ssh/agent.sock"),
            Request("mach-lookup", mach="com.apple.security.agent"),
            Request("mach-lookup", mach="com.apple.coreservices.appleevents")]
    for req in allow:
        assert prof.decide(req) == "allow", req
    for req in deny:
        assert prof.decide(req) == "deny", req


def test_verified_grants_exactly_the_approved_paths():
    pol, *_ = build("verified")
    prof = evaluator(pol)
    assert prof.decide(Request("file-read-data", path=f"{HOME}/.gitconfig")) == "allow"
    assert prof.decide(Request("file-write-data", path=f"{HOME}/.gitconfig")) == "deny"
    assert prof.decide(Request("file-write-create", path=f"{HOME}/.codex/sessions/x")) == "allow"
    assert prof.decide(Request("file-read-data", path=f"{HOME}/.aws/credentials")) == "deny"
    assert pol["private_home"] is None
    assert env_overrides(pol) == {}


def test_keychain_rules_only_with_the_capability():
    _, plain, _ = build("verified")
    pol, text, params = build("verified_keychain")
    assert "com.apple.security.agent" not in plain and "com.apple.secd" not in plain
    assert "com.apple.security.agent" in text and "AppleDatabaseChanged" in text
    prof = sexpr.Profile(text, params)
    assert prof.decide(Request("mach-lookup", mach="com.apple.SecurityServer")) == "allow"
    assert prof.decide(Request("file-read-data", path=f"{HOME}/Library/Keychains/login.keychain-db")) == "allow"
    assert prof.decide(Request("file-read-data", path=f"{HOME}/Library/Mail/x")) == "deny"
    # the capability never reaches into tmuxjail's state
    assert prof.decide(Request("file-read-data", path=f"{SUPPORT}/store.db")) == "deny"


def test_keychain_capability_is_declared_unverified():
    data = tomllib.loads((Path(__file__).parents[2] / "profiles" / "capabilities.toml").read_text())
    cap = data["capabilities"]["macos-keychain"]
    assert cap["label"] == "Use your macOS Keychain login"
    assert cap["unverified"] is True
    assert "mach-lookup" in cap["description"] and "Keychains" in cap["description"]


def test_no_network_means_no_ip_rules():
    pol = make_policy("verified", network="none")
    prof = evaluator(pol)
    assert prof.decide(Request("network-outbound", ip=True)) == "deny"


def test_workspace_under_tmp_still_hides_tmux_and_launchd():
    pol = make_policy("isolated", workspace="/private/tmp/work")
    prof = evaluator(pol)
    assert prof.decide(Request("file-write-create", path="/private/tmp/work/x")) == "allow"
    assert prof.decide(Request("network-outbound", unix=f"{TMUX_DIR}/default")) == "deny"
    assert prof.decide(Request("network-outbound", unix="/private/tmp/com.apple.launchd.x/Listeners")) == "deny"


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
    assert argv[sep + 1:] == ["/opt/homebrew/bin/codex", "--yolo"]


def test_wrap_isolated_points_home_at_the_private_home():
    pol, *_ = build("isolated")
    argv = Seatbelt().wrap(pol, ["/opt/homebrew/bin/codex"], HOST)
    tail = argv[argv.index("--") + 1:]
    ph = pol["private_home"]
    assert tail == ["/usr/bin/env", f"CODEX_HOME={ph}/.codex", f"HOME={ph}", "/opt/homebrew/bin/codex"]


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
       mode=st.sampled_from(["compatibility", "isolated", "verified"]))
def test_hostile_paths_stay_out_of_the_profile(ws, home, state, tmux, long, mode):
    h = "/Users/" + _component(home, False)
    workspace = f"{h}/src/{_component(ws, long)}"
    support = f"{h}/Library/{_component(state, long)}"
    tmux_dir = f"/private/tmp/{_component(tmux, False)}"
    pol = make_policy(mode, home=h, workspace=workspace, support=support,
                      config=f"{h}/Library/cfg", state=f"{h}/Library/st",
                      host_read=[f"{h}/.{_component(ws, False)}"], install_roots=[f"{h}/.local/{_component(tmux, False)}"],
                      capabilities=["macos-keychain"])
    host = HostLayout(tmux_dirs=(tmux_dir,), tmux_files=(f"{h}/{_component(tmux, long)}.sock",))
    text, params = profile(pol, host)
    check_well_formed(text, params)
    for path in (workspace, support, tmux_dir, h):
        assert path not in text
    assert "\n(" in text and all(line.isprintable() for line in text.splitlines())
    argv = Seatbelt().wrap(pol, ["/bin/sh"], host)
    assert argv[2] == text
    prof = sexpr.Profile(text, params)
    assert prof.decide(Request("network-outbound", unix=f"{tmux_dir}/default")) == "deny"
    assert prof.decide(Request("file-read-data", path=f"{support}/store.db")) == "deny"
    if mode != "compatibility":
        assert prof.decide(Request("file-write-create", path=f"{workspace}/x")) == "allow"
        assert prof.decide(Request("file-write-create", path=f"{workspace}/.git/hooks/x")) == "deny"
        assert prof.decide(Request("file-write-unlink", path=f"{workspace}/.git")) == "deny"
        assert prof.decide(Request("file-read-data", path=f"{h}/.ssh/id_rsa")) == "deny"


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=200))
def test_reader_rejects_or_accepts_without_crashing(text):
    try:
        sexpr.parse(text)
    except sexpr.ParseError:
        pass


@pytest.mark.parametrize("bad", ['(allow', '(allow))', '(a "x)', '(a #"x)', "x", "()", '(a "\\'])
def test_reader_rejects_malformed(bad):
    with pytest.raises(sexpr.ParseError):
        sexpr.parse(bad)


# ---------------------------------------------------------------------------------------------
# runtime: only where sandbox-exec exists (a Mac). Never run in CI today; see docs/macos.md.

def _need_sandbox_exec():
    if not os.access(SANDBOX_EXEC, os.X_OK):
        pytest.skip(f"{SANDBOX_EXEC} is not available here (macOS only); the profile is checked offline above")


class TestRuntimeOnMac:
    """What a first run on a Mac confirms. Paths are real (tmp_path resolves /var -> /private/var)."""

    def setup_method(self):
        _need_sandbox_exec()

    def _layout(self, tmp_path: Path, mode: str) -> tuple[dict, HostLayout, dict]:
        root = tmp_path.resolve()
        home = root / "home"
        ws = home / "src" / "app"
        (ws / ".git" / "hooks").mkdir(parents=True)
        (ws / ".git" / "config").write_text("[core]\n")
        support = home / "Library" / "Application Support" / "tmuxjail"
        state = home / "Library" / "State" / "tmuxjail"
        config = home / "Library" / "Preferences" / "tmuxjail"
        for d in (support, state, config):
            d.mkdir(parents=True)
        (state / "store.db").write_text("secret")
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_rsa").write_text("key")
        tmux_dir = root / "tmux-501"
        tmux_dir.mkdir()
        pol = make_policy(mode, home=str(home), workspace=str(ws), support=str(support),
                          config=str(config), state=str(state), install_roots=[])
        if pol["private_home"]:
            Path(pol["private_home"]).mkdir(parents=True)
        host = HostLayout(tmux_dirs=(str(tmux_dir),))
        where = {"home": home, "ws": ws, "state": state, "tmux": tmux_dir, "root": root}
        return pol, host, where

    def _run(self, pol, host, script: str) -> subprocess.CompletedProcess:
        argv = Seatbelt().wrap(pol, ["/bin/sh", "-c", script], host)
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    @pytest.mark.parametrize("mode", ["isolated", "verified"])
    def test_write_inside_and_outside(self, tmp_path, mode):
        pol, host, w = self._layout(tmp_path, mode)
        r = self._run(pol, host, f'echo ok > "{w["ws"]}/inside" && echo ok > /tmp/tmuxjail-sb-$$ && rm /tmp/tmuxjail-sb-$$')
        assert r.returncode == 0, r.stderr
        r = self._run(pol, host, f'echo x > "{w["home"]}/outside"')
        assert r.returncode != 0 and not (w["home"] / "outside").exists()
        r = self._run(pol, host, f'echo x > "{w["ws"]}/.git/hooks/pre-commit"')
        assert r.returncode != 0 and not (w["ws"] / ".git/hooks/pre-commit").exists()

    def test_isolated_cannot_read_the_real_home(self, tmp_path):
        pol, host, w = self._layout(tmp_path, "isolated")
        r = self._run(pol, host, f'cat "{w["home"]}/.ssh/id_rsa"')
        assert r.returncode != 0 and "key" not in r.stdout
        r = self._run(pol, host, 'echo "$HOME"; echo hi > "$HOME/x" && cat "$HOME/x"')
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0] == pol["private_home"]

    @pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
    def test_state_is_hidden(self, tmp_path, mode):
        pol, host, w = self._layout(tmp_path, mode)
        r = self._run(pol, host, f'cat "{w["state"]}/store.db"')
        assert r.returncode != 0 and "secret" not in r.stdout

    @pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
    def test_cannot_connect_to_the_tmux_socket(self, tmp_path, mode):
        pol, host, w = self._layout(tmp_path, mode)
        path = str(w["tmux"] / "default")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        try:
            code = ("import socket,sys; s=socket.socket(socket.AF_UNIX); "
                    f"s.connect({path!r}); print('connected')")
            r = self._run(pol, host, f"/usr/bin/python3 -c \"{code}\"")
            assert "connected" not in r.stdout
        finally:
            server.close()

    @pytest.mark.parametrize("mode", ["compatibility", "isolated"])
    def test_rename_bypass(self, tmp_path, mode):
        pol, host, w = self._layout(tmp_path, mode)
        if mode == "compatibility":
            lib = w["home"] / "Library"
            r = self._run(pol, host, f'mv "{lib}" "{w["home"]}/L2" && cat "{w["home"]}/L2/State/tmuxjail/store.db"')
            assert "secret" not in r.stdout and lib.exists()
        else:
            ws = w["ws"]
            r = self._run(pol, host, f'cd "{ws}" && mv .git g && echo evil > g/hooks/pre-commit && mv g .git')
            assert r.returncode != 0
            assert not (ws / ".git" / "hooks" / "pre-commit").exists()
