"""Checks no registered guard pinned until a mutation run showed them removable (issue 29), each
written as the attack its removal re-opens, at the cheapest level that sees it. The same attacks
from inside a jail or through the CLI: tests/adversarial/test_unpinned_attacks.py and
tests/integration/test_unpinned_checks.py. scripts/mutation.py runs this file first for every module."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import stat

import pytest
from test_netpolicy import resolve as net_resolve
from test_netproxy import proxy
from test_policy import HOME, LAYOUT, resolve
from test_verified import KW

from tmuxjail import (
    config,
    identity,
    policycache,
    profiles,
    restrict,
    scan,
)
from tmuxjail.effective import ExecutableIdentity
from tmuxjail.errors import ConfigError, NotApproved, UsageError
from tmuxjail.net import check as netcheck
from tmuxjail.net import policy as netpolicy
from tmuxjail.net import proxy as netproxy
from tmuxjail.pane import binds, executable, narrow, refuse
from tmuxjail.pane import spec as pane_spec
from tmuxjail.sandbox.bwrap import Bwrap, Call, agent_roots


@pytest.fixture
def no_dns(monkeypatch):
    """Any lookup the proxy makes fails the test: nothing here may query a real resolver."""
    calls: list[str] = []

    def fake(name, *a, **k):
        calls.append(name)
        raise socket.gaierror(socket.EAI_NONAME, "no lookup expected (test resolver)")
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return calls


# -- network --------------------------------------------------------------------------------------

@pytest.mark.parametrize("wide", ["*", "*.com", "*.openai.com"])
def test_a_wildcard_added_in_verified_mode_is_an_approval_item(wide):
    """`--allow-domain '*'` (or '*.com') in verified mode widens the profile's list past every
    declared domain: it is an approval item of its own, never covered by a narrower declared one."""
    prof = profiles.load("codex")
    pol = net_resolve("verified", domains=[wide, "api.openai.com"])
    assert wide in pol["allow_domains"]
    assert netpolicy.DOMAIN_ITEM + wide in netpolicy.approval_items(prof, pol)
    assert netpolicy.extra_domains((wide,), ("api.openai.com", "*.openai.com")) == \
        (() if wide == "*.openai.com" else (wide,))


@pytest.mark.parametrize("host", ["internal", "home.arpa", "router.home.arpa", "lan", "intranet", "x.intranet",
                                  "local", "test", "invalid", "example"])
def test_special_use_names_are_refused_without_a_lookup(no_dns, host):
    """Names only a local resolver answers (the bare TLD as much as names under it) are refused
    before any lookup: the host's resolver would reach the LAN's DNS for them."""
    with pytest.raises(netproxy.Refused) as e:
        proxy().decide(host, 443)
    assert e.value.rule == "special-use" and no_dns == []


# -- restriction files, config, policy ------------------------------------------------------------

def test_a_restriction_to_a_workspace_does_not_admit_its_namesakes():
    """`workspaces = ["~/src/app"]` admits ~/src/app and what lies inside it, never
    ~/src/app-secrets or ~/src/apple."""
    rules = {"workspaces": ["~/src/app"]}
    for inside in ("/home/u/src/app", "/home/u/src/app/sub"):
        restrict.apply(rules, **dict(KW, workspaces=(inside,)))
    for outside in ("/home/u/src/app-secrets", "/home/u/src/apple", "/home/u/src"):
        with pytest.raises(NotApproved, match="outside the workspaces"):
            restrict.apply(rules, **dict(KW, workspaces=(outside,)))


@pytest.mark.parametrize("text", [
    'allow_unguarded_compatibility = "false"', 'allow_unguarded_compatibility = "true"',
    "allow_unguarded_compatibility = 0", "allow_unguarded_compatibility = 1",
    'allow_unguarded_compatibility = ["false"]',
])
def test_allow_unguarded_compatibility_is_true_or_false_only(text):
    """A quoted "false" is a non-empty string: read as truthy it would run compatibility without
    bubblewrap. Anything but a TOML boolean refuses the config."""
    with pytest.raises(ConfigError, match="allow_unguarded_compatibility"):
        config.parse(text + "\n", "config.toml", None, None)
    assert config.parse("allow_unguarded_compatibility = false\n", "c", None, None).allow_unguarded_compatibility is False


@pytest.mark.parametrize("root", [HOME, "/home", "/"])
def test_the_home_is_never_an_install_root_even_with_tmuxjails_dirs_elsewhere(root):
    """XDG_CONFIG_HOME & co. outside the home: tmuxjail's own dirs no longer lie in it, and the
    home (or a directory holding it) as the CLI's install root must still be refused."""
    own = ("/srv/xdg/config/tmuxjail", "/srv/xdg/state/tmuxjail", "/srv/xdg/data/tmuxjail")
    exe = identity.Resolved(ExecutableIdentity(path=f"{HOME}/.local/bin/codex", sha256="sha256:" + "a" * 64),
                            [f"{HOME}/.local/bin/codex"], (root,))
    with pytest.raises(UsageError, match="install root"):
        resolve(executable=exe, own_dirs=own, config_dir=own[0], private_home="/srv/xdg/data/tmuxjail/homes/c/d")


# -- the sandbox builders -------------------------------------------------------------------------

def test_approved_host_paths_are_bound_read_only():
    """git-identity and github-cli bring ~/.gitconfig, ~/.config/git and ~/.config/gh: each is
    bound read-only (the attack from inside a jail: tests/adversarial/test_unpinned_attacks.py)."""
    pol = resolve("verified", caps=("git-identity", "github-cli"))
    argv = Bwrap().wrap(pol, ["codex"], LAYOUT)
    pairs = {(argv[i], argv[i + 1]) for i in range(len(argv) - 1)}
    for p in (f"{HOME}/.gitconfig", f"{HOME}/.config/git", f"{HOME}/.config/gh"):
        assert p in pol["host_read"] and ("--ro-bind-try", p) in pairs
        assert not {("--bind-try", p), ("--bind", p)} & pairs


# -- the launcher ---------------------------------------------------------------------------------

@pytest.mark.parametrize("err,dies", [(38, False), (1, False), (22, True), (12, True)])
def test_no_own_keyring_refuses_unless_there_are_no_keyrings_at_all(monkeypatch, capsys, err, dies):
    """ENOSYS (no keyrings) and EPERM (a filter above us denies them) leave nothing to share;
    any other failure would leave the jail in the host's session keyring: refused."""
    from tmuxjail.sandbox import libc

    monkeypatch.setattr(libc, "syscall", lambda *a: -1)
    monkeypatch.setattr(libc, "get_errno", lambda: err)
    if dies:
        with pytest.raises(SystemExit):
            narrow.own_session_keyring()
        assert "own session keyring" in capsys.readouterr().err
    else:
        narrow.own_session_keyring()


@pytest.mark.parametrize("rel", ["//x", "/x/", "/./x", "/x/../y", "/x/."])
def test_a_bind_source_that_is_not_canonical_is_refused(tmp_path, capsys, rel):
    (tmp_path / "x").mkdir()
    with pytest.raises(SystemExit):
        binds.open_beneath(str(tmp_path), str(tmp_path) + rel, False)
    assert "not a canonical path" in capsys.readouterr().err


def test_a_link_above_an_inner_root_is_refused(tmp_path, capsys):
    """An approved path inside a workspace (an inner root) reached through a link the jail planted
    in the workspace above it: the walk starts at the outer root and refuses the link; started at
    the inner root, the kernel would follow it."""
    ws = tmp_path / "ws"
    (ws / "real" / "sub").mkdir(parents=True)
    (ws / "lnk").symlink_to(ws / "real")
    inner = f"{ws}/lnk/sub"
    pol = dict(workspace_write=[str(ws)], workspace_read=[], host_write=[inner], host_read=[], private_home=None)
    call = Call("/usr/bin/bwrap")
    call.setup = [("--bind", inner, inner)]
    call.mark_beneath(agent_roots(pol))
    with pytest.raises(SystemExit):
        binds.fd_binds(call)
    assert "symbolic link" in capsys.readouterr().err


# -- the policy cache -----------------------------------------------------------------------------

def _forge(d, key_name: str, entry: dict, mac_key: bytes) -> None:
    body = json.dumps({**entry, "key": key_name}, separators=(",", ":")).encode()
    mac = hmac.new(mac_key, body, "sha256").hexdigest().encode()
    path = d / f"{key_name}.json"
    path.write_bytes(mac + b"\n" + body)
    path.chmod(0o600)


def test_an_empty_mac_key_authenticates_nothing(tmp_path):
    """A start that died between creating mac.key and writing it leaves it empty: an HMAC under
    the empty key is one anybody can compute, so the cache must not take (or make) entries then."""
    cache = policycache.PolicyCache(tmp_path)
    d = tmp_path / policycache.DIR
    d.mkdir(mode=0o700)
    (d / policycache.KEY_FILE).write_bytes(b"")
    (d / policycache.KEY_FILE).chmod(0o600)
    k = hashlib.sha256(b"request").hexdigest()
    _forge(d, k, {"policy": {"workspace_write": ["/"]}}, b"")
    assert cache.get(k) is None
    assert cache.put(hashlib.sha256(b"other").hexdigest(), {"policy": {}}) is False
    assert (d / policycache.KEY_FILE).read_bytes() == b""


# -- scan -----------------------------------------------------------------------------------------

def test_scan_reads_the_worktree_config_git_runs(tmp_path):
    """git (2.39 here) runs an fsmonitor set in .git/config.worktree once extensions.worktreeConfig
    is on: the scan lists the command keys of both files."""
    git = tmp_path / "repo" / ".git"
    git.mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text("[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n")
    (git / "config.worktree").write_text('[core]\n\tfsmonitor = "touch /tmp/tj-worktree-config"\n')
    found = {(os.path.relpath(f["path"], tmp_path), f["kind"], f["detail"]) for f in scan.scan([str(tmp_path)]).findings}
    assert ("repo/.git/config.worktree", "git-config", "core.fsmonitor = touch /tmp/tj-worktree-config") in found, found
    assert stat.S_ISREG((git / "config.worktree").stat().st_mode)


# -- survivors of the mutation run: netcheck ------------------------------------------------------

def test_a_name_is_at_most_253_characters_and_printable():
    longest = ".".join(["a" * 63] * 3 + ["a" * 61])
    assert len(longest) == 253 and netcheck.check_name(longest) == longest
    for bad in (".".join(["a" * 60] * 5), "example.com\n", "example.com\t", "\texample.com", 5, None, b"x.com"):
        with pytest.raises(ValueError, match=r"^must be a DNS name$"):
            netcheck.check_name(bad)


def test_name_errors_say_what_the_name_is():
    for v6 in ("[x]", "a:b", "[::1"):
        with pytest.raises(ValueError, match="IPv6 address"):
            netcheck.check_name(v6)
    with pytest.raises(ValueError, match="internationalised"):
        netcheck.check_name("é" * 64 + ".com")


def test_only_a_whole_bracket_pair_is_stripped_from_a_literal():
    assert str(netcheck.literal("[::1]")) == "::1"
    assert netcheck.literal("[::1") is None and netcheck.literal("::1]") is None


def test_a_request_outside_an_empty_ceiling_says_nothing_is_allowed():
    with pytest.raises(NotApproved) as e:
        netpolicy.allowlist("isolated", "proxy", ("pypi.org",), (), ceiling=())
    assert e.value.hint.endswith("allows: nothing"), e.value.hint


# -- survivors of the mutation run: bwrap ---------------------------------------------------------

def _pairs(argv):
    return [(argv[i], argv[i + 1]) for i in range(len(argv) - 1)]


def test_the_agent_socket_is_bound_only_for_an_approved_verified_ssh_agent():
    from tmuxjail.sandbox import HostLayout

    layout = HostLayout(top=LAYOUT.top, agent_socket="/run/user/1000/agent.sock")
    bound = ("--ro-bind", "/run/user/1000/agent.sock")
    assert bound in _pairs(Bwrap().wrap(resolve("verified", caps=("ssh-agent",)), ["x"], layout))
    assert bound not in _pairs(Bwrap().wrap(resolve("verified"), ["x"], layout))
    assert bound not in _pairs(Bwrap().wrap(resolve("isolated"), ["x"], layout))
    assert bound not in _pairs(Bwrap().wrap(resolve("verified", caps=("ssh-agent",)), ["x"], LAYOUT))


def test_compatibility_pins_every_directory_above_a_mask():
    """`mv ~/.local/state x` would carry the mask of tmuxjail's state along: each ancestor of a
    hidden or protected path is a mount point of its own, bound before the mask."""
    pol = resolve("compatibility")
    pairs = _pairs(Bwrap().wrap(pol, ["x"], LAYOUT))
    assert pol["hidden"]
    for path in pol["hidden"]:
        up = os.path.dirname(path)
        while up not in ("/", ""):
            assert pairs.index(("--bind", up)) < pairs.index(("--tmpfs", path)), up
            up = os.path.dirname(up)
    assert ("--bind", "/") in pairs and pairs.count(("--bind", "/")) == 1


def test_a_root_run_strict_jail_masks_the_dirs_only_root_could_enter():
    from tmuxjail.sandbox import HostLayout

    layout = HostLayout(top=LAYOUT.top, root_only_dirs=("/etc/ssl/private", "/opt/vault"))
    argv = Bwrap().wrap(resolve("isolated"), ["x"], layout)
    pairs = _pairs(argv)
    for d in ("/etc/ssl/private", "/opt/vault"):
        assert pairs.index(("--tmpfs", d)) < pairs.index(("--remount-ro", d)), d


def test_bubblewrap_is_found_by_its_fixed_paths_in_order(monkeypatch):
    """Never through PATH (a workspace could plant one): /usr/bin/bwrap, else /bin/bwrap."""
    from tmuxjail.sandbox import bwrap

    for present, found in ((("/bin/bwrap",), "/bin/bwrap"), (("/usr/bin/bwrap", "/bin/bwrap"), "/usr/bin/bwrap"),
                           ((), "/usr/bin/bwrap")):
        monkeypatch.setattr(bwrap.os, "access", lambda p, mode, present=present: p in present)
        assert bwrap.find().path == found, present
    assert "not installed" in (bwrap.find().available() or "")


LEAN = {  # module -> what it must not load: the launcher and the warm start import them on every start
    "sandbox.bwrap": "typing", "sandbox.seccomp": "typing", "sandbox.pids": "typing", "sandbox.landlock": "typing",
    "pane.launch": "typing", "pane.command": "typing", "net.check": "typing", "net.policy": "typing", "policycache": "typing",
    "approvals": "pydantic", "warm": "pydantic", "identity": "pydantic", "config": "pydantic",
    "restrict": "pydantic", "net.log": "pydantic", "audit": "pydantic",
}


def test_the_start_paths_modules_stay_lean():
    """Annotation-only imports stay behind TYPE_CHECKING: typing costs the launcher as much as
    the interpreter's start, pydantic the warm start ten times that."""
    import subprocess
    import sys

    # Each module in a fresh interpreter: one that loads typing would hide the next one's import.
    for name, heavy in LEAN.items():
        code = f"import sys; import tmuxjail.{name}; print({heavy!r} in sys.modules)"
        out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "False", (name, heavy)


# -- survivors of the mutation run: netlog --------------------------------------------------------

ROW = {"time": "t", "host": "a b\x7f~", "port": 443, "address": "", "decision": "denied", "rule": "allowlist"}


def _log_dir(tmp_path, sid="sid-1"):
    store = tmp_path / "store.db"
    d = netproxy.session_dir(str(store), sid)
    os.makedirs(d, exist_ok=True)
    return str(store), os.path.join(d, netproxy.LOG_NAME)


def test_show_network_prints_space_and_tilde_but_not_delete(tmp_path):
    from tmuxjail.net import log as netlog

    store, log = _log_dir(tmp_path)
    with open(log, "w") as f:
        f.write(json.dumps(ROW) + "\n")
    assert [r["host"] for r in netlog.read(store, "sid-1")] == ["a b?~"]


def test_show_network_reads_no_link_no_fifo_and_no_missing_log(tmp_path):
    """The log path is opened without following a link (a planted one would show another file)
    and without blocking (a FIFO there would hang `show`); a session without a log has no rows."""
    import threading

    from tmuxjail.net import log as netlog

    store, log = _log_dir(tmp_path)
    assert netlog.read(store, "sid-1") == [] and netlog.read(store, "no-such-session") == []
    other = tmp_path / "elsewhere.jsonl"
    other.write_text(json.dumps(ROW) + "\n")
    os.symlink(other, log)
    assert netlog.read(store, "sid-1") == []
    os.unlink(log)
    os.mkfifo(log)
    got: list = []
    t = threading.Thread(target=lambda: got.append(netlog.read(store, "sid-1")), daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # release the reader before failing
        os.close(os.open(log, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO at the log path blocked")
    assert got == [[]]


# -- the pids cgroup (a root-run jail's process limit), in a cgroup tree of files -------------------

@pytest.fixture
def cgroups(tmp_path, monkeypatch):
    from tmuxjail.sandbox import pids

    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    v2.mkdir()
    monkeypatch.setattr(pids, "V2", str(v2))
    monkeypatch.setattr(pids, "V1", str(v1))
    return pids, v2, v1


def test_the_pids_controller_is_found_only_where_it_is(cgroups):
    pids, v2, v1 = cgroups
    assert pids.hierarchy() is None
    v1.mkdir()
    (v1 / "cgroup.procs").write_text("")
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    assert pids.hierarchy() is None  # a v2 host without pids: v1's leftovers do not count
    (v2 / "cgroup.controllers").write_text("cpu pidsx memory\n")
    assert pids.hierarchy() is None
    (v2 / "cgroup.controllers").write_text("cpu pids memory\n")
    assert pids.hierarchy() == (str(v2), True)
    (v2 / "cgroup.controllers").unlink()
    assert pids.hierarchy() == (str(v1), False)
    (v1 / "cgroup.procs").unlink()
    with pytest.raises(OSError, match="no pids cgroup"):
        pids.join(10, "s")


def test_joining_sets_the_limit_and_moves_this_process(cgroups):
    pids, v2, v1 = cgroups
    (v2 / "cgroup.controllers").write_text("pids\n")
    path = pids.join(77, "s1")
    assert path == f"{v2}/tmuxjail/s1"
    assert (v2 / "cgroup.subtree_control").read_text() == "+pids"
    assert (v2 / "tmuxjail" / "cgroup.subtree_control").read_text() == "+pids"
    assert (v2 / "tmuxjail" / "s1" / "pids.max").read_text() == "77"
    assert (v2 / "tmuxjail" / "s1" / "cgroup.procs").read_text() == str(os.getpid())
    assert pids.join(78, "s1") == path  # the same name again (a relaunch): the group is reused
    assert (v2 / "tmuxjail" / "s1" / "pids.max").read_text() == "78"
    (v2 / "cgroup.controllers").unlink()
    v1.mkdir()
    (v1 / "cgroup.procs").write_text("")
    path = pids.join(5, "s2")
    single = len(os.listdir("/proc/self/task")) == 1
    moved = (v1 / "tmuxjail" / "s2" / ("tasks" if single else "cgroup.procs")).read_text()
    assert moved == ("0" if single else str(os.getpid()))
    assert not (v1 / "tmuxjail" / "cgroup.subtree_control").exists() and not (v1 / "cgroup.subtree_control").exists()


def test_sweep_removes_only_finished_jails_groups(cgroups):
    import time

    pids, v2, _ = cgroups
    (v2 / "cgroup.controllers").write_text("pids\n")
    top = v2 / "tmuxjail"
    old, young, busy = top / "old", top / "young", top / "busy"
    for d in (old, young, busy):
        d.mkdir(parents=True)
    (busy / "pids.max").write_text("1")  # rmdir refuses a group still holding something
    (top / "stray").write_text("")
    past = time.time() - 3600
    for d in (old, busy, top / "stray"):
        os.utime(d, (past, past))
    pids.sweep()
    assert not old.exists() and young.is_dir() and busy.is_dir() and (top / "stray").exists()


# -- survivors of the mutation run: restrict ------------------------------------------------------

@pytest.mark.parametrize("text", ['capabilities = "aws"', "capabilities = [1]", 'capabilities = [""]',
                                  'workspaces = ["~/src", 2]', "env_names = {a = 1}"])
def test_a_restriction_field_is_a_list_of_non_empty_strings(text):
    with pytest.raises(UsageError, match=r"^r\.toml: [a-z_]+: must be a list of strings$"):
        restrict.parse(text, "r.toml")
    assert restrict.parse('capabilities = ["aws", "aws", "git-identity"]', "r.toml") == \
        {"capabilities": ["aws", "git-identity"]}


def test_an_unreadable_restriction_file_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"^r\.toml: not valid TOML: "):
        restrict.parse("capabilities = [", "r.toml")
    missing = tmp_path / "none.toml"
    with pytest.raises(UsageError) as e:
        restrict.load(str(missing))
    assert e.value.message == f"{missing}: cannot read the restriction file: No such file or directory"
    bad = tmp_path / "latin.toml"
    bad.write_bytes(b'capabilities = ["\xe9"]\n')
    with pytest.raises(UsageError) as e:
        restrict.load(str(bad))
    assert "codec can't decode" in e.value.message
    assert restrict.from_file(None) is None and restrict.from_file("") is None


# -- config validation: every field refuses what it cannot mean, in one line ------------------------

CONFIG_ERRORS = [
    ("nope = 1", "unknown key 'nope'"),
    ("x = [", "not valid TOML"),
    ('allowed_modes = "verified"', "allowed_modes: must be a non-empty list"),
    ("allowed_modes = []", "allowed_modes: must be a non-empty list"),
    ('allowed_modes = ["verified", "root"]', "allowed_modes: must be a non-empty list"),
    ('default_mode = "root"', "default_mode: must be one of"),
    ('accept_missing_guards = "x"', "accept_missing_guards: must be a list"),
    ("accept_missing_guards = [1]", "accept_missing_guards: must be a list"),
    ("providers = 1", "providers: must be a table"),
    ('[providers.nope]\nexecutable = "/x"', "providers.nope: unknown provider"),
    ("[providers]\ncodex = 1", "providers.codex: only 'executable'"),
    ('[providers.codex]\nexecutable = "/x"\nother = 1', "providers.codex: only 'executable'"),
    ('[providers.codex]\nexecutable = "bin/codex"', "providers.codex.executable: must be an absolute path"),
    ("[providers.codex]\nexecutable = 5", "providers.codex.executable: must be an absolute path"),
    ("limits = 1", "limits: must be a table"),
    ("[limits]\nbogus = 1", "limits.bogus: unknown"),
    ('[limits]\nnproc = "64"', "limits.nproc: must be a whole number of at least 16"),
    ("[limits]\nnproc = true", "limits.nproc: must be a whole number"),
    ("[limits]\nnproc = 15", "limits.nproc: must be a whole number of at least 16"),
    ('[limits]\ntmp = "16Q"', "limits.tmp: must be a whole number"),
    ('[limits]\ntmp = "M"', "limits.tmp: must be a whole number"),
    ('[limits]\ntmp = "1.5G"', "limits.tmp: must be a whole number"),
    ("[limits]\nhome = 1048575", "limits.home: must be a whole number of at least 1048576 bytes"),
    ("network = 1", "network: must be a table"),
    ('[network]\nwide = "host"', "network: must be a table"),
    ('[network]\nisolated = "wide"', "network.isolated: network must be host, proxy or none"),
    ("[network]\nresolve = 1", "network.resolve: must be a table"),
    ('[network.resolve]\n"a.test" = { address = "127.0.0.1", test_upstream = "yes" }', "network.resolve.a.test: must be"),
    ('[network.resolve]\n"a.test" = { address = "127.0.0.1", extra = 1 }', "network.resolve.a.test: must be"),
    ('[network.resolve]\n"1.2.3.4" = "127.0.0.1"', "network.resolve.1.2.3.4:"),
    ('[network.resolve]\n"a.test" = "nope"', "network.resolve.a.test:"),
    ("[network]\nallow_domains = 1", "network.allow_domains: must be a table"),
    ('[network.allow_domains]\nroot = ["*"]', "network.allow_domains: must be a table"),
    ('[network.allow_domains]\nisolated = "*"', "network.allow_domains.isolated: must be a list"),
    ('[network.allow_domains]\nisolated = ["127.0.0.1"]', "network.allow_domains.isolated:"),
]


@pytest.mark.parametrize("text,needle", CONFIG_ERRORS)
def test_a_bad_config_field_is_one_line_naming_it(text, needle):
    with pytest.raises(ConfigError) as e:
        config.parse(text + "\n", "c.toml")
    assert e.value.message.startswith("c.toml: ") and needle in e.value.message, e.value.message
    assert "\n" not in e.value.message


def test_config_values_as_read():
    c = config.parse('[limits]\ntmp = "16M"\nrun = "2g"\nhome = 1048576\nnproc = 16\n'
                     '[providers.codex]\nexecutable = "~/bin/codex"\n'
                     '[network.resolve]\n"b.test" = "203.0.113.7"\n"a.test" = { address = "127.0.0.1", test_upstream = true }\n'
                     '[network.allow_domains]\nverified = ["pypi.org", "*.example.com"]\n', "c.toml")
    assert c.limits == {"tmp_bytes": 16 << 20, "run_bytes": 2 << 30, "home_bytes": 1 << 20, "nproc": 16}
    assert c.executables == {"codex": "~/bin/codex"}
    assert c.resolve == (("a.test", "127.0.0.1", True), ("b.test", "203.0.113.7", False))
    assert c.allow_domains == {"compatibility": ("*",), "isolated": ("*",), "verified": ("pypi.org", "*.example.com")}
    assert c.network == config.DEFAULT_NETWORK and c.env_network is None and c.source == "c.toml"
    assert config.parse("", "c.toml").allowed_modes == ("compatibility", "isolated", "verified")


def test_the_environment_only_narrows_the_config():
    c = config.parse('allowed_modes = ["isolated", "verified"]\n', "c", "verified, compatibility ,", "proxy")
    assert c.allowed_modes == ("verified",) and c.env_network == "proxy"
    assert c.network == {"compatibility": "proxy", "isolated": "proxy", "verified": "proxy"}
    assert config.parse("", "c", None, "none").network == dict.fromkeys(config.MODES, "none")
    assert config.parse('[network]\ncompatibility = "none"\n', "c", None, "host").network["compatibility"] == "none"
    with pytest.raises(ConfigError, match="TMUXJAIL_ALLOWED_MODES: must be"):
        config.parse("", "c", "root")
    with pytest.raises(ConfigError, match="leaves no allowed mode"):
        config.parse('allowed_modes = ["verified"]\n', "c", "isolated")
    with pytest.raises(ConfigError, match="TMUXJAIL_NETWORK"):
        config.parse("", "c", None, "wide")
    assert config.narrower("proxy", "host") == "proxy" and config.narrower("host", "none") == "none"
    assert config.narrower("proxy", "proxy") == "proxy"


def test_config_load_reads_the_file_or_the_defaults(tmp_path, monkeypatch):
    for k in ("TMUXJAIL_ALLOWED_MODES", "TMUXJAIL_NETWORK"):
        monkeypatch.delenv(k, raising=False)
    assert config.load(tmp_path / "none.toml").source == "(defaults)"
    (tmp_path / "bad.toml").write_bytes(b'default_mode = "\xe9"\n')
    for path, why in ((tmp_path / "bad.toml", "codec can't decode"), (tmp_path, "cannot read the config: Is a directory")):
        with pytest.raises(ConfigError) as e:
            config.load(path)
        assert "cannot read the config: " in e.value.message and why in e.value.message, e.value.message
        assert "Errno" not in e.value.message
    monkeypatch.setenv("TMUXJAIL_NETWORK", "none")
    (tmp_path / "ok.toml").write_text('default_mode = "isolated"\n')
    c = config.load(tmp_path / "ok.toml")
    assert c.default_mode == "isolated" and c.source == str(tmp_path / "ok.toml") and c.network["compatibility"] == "none"


# -- approvals: find and describe -----------------------------------------------------------------

def test_missing_names_what_the_closest_approval_lacks():
    """Of several approvals of the same executable, the one sharing most of the request is the
    one whose gaps are named (not the one with most capabilities overall)."""
    from tmuxjail import approvals

    prof = profiles.load("codex")
    ident = {"path": "/x", "sha256": "sha256:" + "a" * 64, "version": "1", "extra": []}
    rec = lambda caps: {"provider": "codex", "profile_hash": prof.hash, "executable": approvals.identity_key(ident),  # noqa: E731
                        "capabilities": list(caps)}
    near, big = rec(["codex.cli", "aws"]), rec(["github", "github-cli", "npm-cache", "pip-cache"])
    assert approvals.missing([near, big], prof, ident, ("codex.cli", "aws", "gcloud")) == [
        "capability not approved: Access the configured Google Cloud account (gcloud)"]


def test_find_takes_the_newest_covering_approval():
    from tmuxjail import approvals

    prof = profiles.load("codex")
    ident = {"path": "/x", "sha256": "sha256:" + "a" * 64, "version": "1", "extra": []}
    key = approvals.identity_key(ident)
    rec = lambda i, caps: {"id": i, "provider": "codex", "profile_hash": prof.hash, "executable": key,  # noqa: E731
                           "capabilities": list(caps)}
    old, narrow, new = rec("old", ["codex.cli", "aws"]), rec("narrow", ["codex.cli"]), rec("new", ["codex.cli", "aws"])
    assert approvals.find([old, narrow, new], "codex", prof.hash, ident, ["aws"])["id"] == "new"
    assert approvals.find([old, narrow], "codex", prof.hash, ident, ["aws"])["id"] == "old"
    assert approvals.find([narrow], "codex", prof.hash, ident, ["aws"]) is None
    assert approvals.find([], "codex", prof.hash, ident, []) is None


def test_describe_says_exactly_what_an_approval_grants():
    from tmuxjail import approvals

    prof = profiles.load("codex")
    ident = {"path": "/x", "sha256": "s", "version": "1", "extra": [("/i", "d")]}
    assert approvals.describe(prof, ident, ("domain:pypi.org", "aws", "git-identity"), details=True)[1:] == [
        "  - Reach pypi.org through the proxy   [added domain]",
        "  - Access the configured AWS account",
        "      ro dir ~/.aws (if present)",
        "      env: AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN",
        "      network: *.amazonaws.com",
        "  - Use Git identity",
        "      ro file ~/.gitconfig (if present)",
        "      ro dir ~/.config/git (if present)",
        "      env: GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL",
        "  executable: /x",
        "    version 1, s",
        "    runs with /i d",
    ]
    assert approvals.describe(prof, ident, ("aws",), details=False)[1:3] == [
        "  - Access the configured AWS account", "  executable: /x"]
    from tmuxjail.registry import PROVIDERS

    for provider in PROVIDERS:
        p = profiles.load(provider)
        for cid in (*p.baseline, *p.optional):
            line = approvals.describe(p, ident, (cid,), details=False)[1]
            assert line.endswith("[unverified]") == bool(p.capabilities[cid].unverified), (provider, cid)


# -- identity: which program runs, behind what, from which install ----------------------------------

def _exe(path, text="#!/bin/sh\n", mode=0o755):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_which_takes_the_first_runnable_regular_file(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _exe(a / "tool", mode=0o644)  # not executable
    (b / "tool").mkdir(parents=True)  # a directory
    os.mkfifo(tmp_path / "fifo")
    _exe(c / "tool")
    path = os.pathsep.join(["rel", str(a), str(b), str(c)])
    assert identity.which("tool", path) == str(c / "tool")
    assert identity.which("nope", path) is None
    assert identity.find(("nope", "tool"), path, None, "x") == c / "tool"
    with pytest.raises(UsageError, match="no executable named nope or nah found on PATH"):
        identity.find(("nope", "nah"), path, None, "x")
    assert identity.find(("nope",), "", str(c / "tool"), "x") == c / "tool"
    for bad in (a / "tool", b / "tool", tmp_path / "fifo", tmp_path / "missing"):
        with pytest.raises(UsageError, match="is not an executable file"):
            identity.find(("tool",), path, str(bad), "x")


def test_a_shebang_is_read_from_a_regular_file_only(tmp_path):
    assert identity._shebang(_exe(tmp_path / "s", "#!/usr/bin/env  node --flag\nrest\n")) == ["/usr/bin/env", "node", "--flag"]
    assert identity._shebang(_exe(tmp_path / "b", "\x7fELF...")) == []
    assert identity._shebang(tmp_path / "missing") == []
    os.mkfifo(tmp_path / "fifo")
    assert identity._shebang(tmp_path / "fifo") == []  # and it did not wait for a writer
    (tmp_path / "d").mkdir()
    assert identity._shebang(tmp_path / "d") == []


def test_locate_follows_the_shebang_and_finds_the_install_root(tmp_path, monkeypatch):
    from tmuxjail.adapters import get as adapter

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    interp = _exe(tmp_path / "bin" / "mynode")
    prefix = tmp_path / "opt" / "lib" / "node_modules"
    pkg = prefix / "@scope" / "tool"
    (pkg / "package.json").parent.mkdir(parents=True)
    (pkg / "package.json").write_text('{"version": "1.2.3"}')
    script = _exe(pkg / "dist" / "cli.js", "#!/usr/bin/env mynode\n")
    at = identity.locate(adapter("pi"), script, str(interp.parent))
    assert at.real == script and at.interpreter == interp and at.version == "1.2.3"
    assert at.argv == [str(interp), str(script)] and at.install_roots == (str(prefix), str(interp))
    bare = identity.locate(adapter("pi"), _exe(pkg / "dist" / "bare.js", "#!/usr/bin/env\n"), str(interp.parent))
    assert bare.argv[0] == os.path.realpath("/usr/bin/env")
    with pytest.raises(UsageError, match="its interpreter 'nonode' cannot be found"):
        identity.locate(adapter("pi"), _exe(pkg / "dist" / "other.js", "#!/usr/bin/env nonode\n"), str(interp.parent))
    # A native binary with a package.json beside it (no node_modules): the package is the root.
    native = _exe(tmp_path / "srv" / "tool" / "bin" / "tool", "\x7fELF")
    (tmp_path / "srv" / "tool" / "package.json").write_text('{"version": "9"}')
    at = identity.locate(adapter("pi"), native, "")
    assert at.install_roots == (str(tmp_path / "srv" / "tool"),) and at.argv == [str(native)] and at.version == "9"
    # codex-package.json marks bin/<triple>/ two levels below the package.
    deep = _exe(tmp_path / "cx" / "vendor" / "x86" / "codex" / "codex", "\x7fELF")
    (deep.parent / "codex-package.json").write_text('{"version": "0.1"}')
    assert identity.locate(adapter("pi"), deep, "").install_roots == (str(tmp_path / "cx" / "vendor"),)
    # Nothing found: the file itself, or its directory for CLIs installed as a directory.
    lone = _exe(tmp_path / "lone" / "tool", "\x7fELF")
    assert identity.locate(adapter("pi"), lone, "").install_roots == (str(lone),)
    assert identity.locate(adapter("cursor"), lone, "").install_roots == (str(lone.parent),)
    # A package.json in the home (or above it) never makes the home the root; a broken one is skipped.
    (home / "package.json").write_text('{"version": "1"}')
    mine = _exe(home / ".local" / "bin" / "tool", "\x7fELF")
    assert identity.locate(adapter("pi"), mine, "").install_roots == (str(mine),)
    (tmp_path / "lone" / "package.json").write_text("{not json")
    assert identity.locate(adapter("pi"), lone, "").version == "unknown"
    # A broken package.json beside a valid codex-package.json: the valid one counts.
    (deep.parent / "package.json").write_text("{not json")
    assert identity.locate(adapter("pi"), deep, "").install_roots == (str(tmp_path / "cx" / "vendor"),)


# -- audit's text and the policy cache's round trip -----------------------------------------------

def test_audit_text_escapes_exactly_what_a_terminal_would_act_on():
    from tmuxjail import audit

    raw = b"a\\b\x00\x1f \x7e\x7f\xc2\x9f\xc2\xa0\x80\xff".decode("utf-8", "surrogateescape")
    assert audit.clean(raw) == "a\\\\b\\x00\\x1f ~\\x7f\\x9f\u00a0\\x80\\xff"
    assert audit.clean("x\u202ey\u2028z\U000e0001é") == "x\\u202ey\\u2028z\\U000e0001é"


def test_the_policy_cache_returns_what_it_stored_and_only_to_its_key(tmp_path):
    cache = policycache.PolicyCache(tmp_path)
    k, other = hashlib.sha256(b"a").hexdigest(), hashlib.sha256(b"b").hexdigest()
    entry = {"policy": {"mode": "isolated"}, "fingerprint": "sha256:x"}
    assert cache.get(k) is None and cache.put(k, entry) is True
    assert cache.get(k) == {**entry, "key": k}
    d = tmp_path / policycache.DIR
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in d.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    os.replace(d / f"{k}.json", d / f"{other}.json")  # a valid entry renamed to another key
    assert cache.get(other) is None and cache.get(k) is None
    assert cache.get("A" * 64) is None and cache.put("../x", entry) is False


# -- the proxy's request head and a failed upstream ------------------------------------------------

def test_a_head_of_exactly_max_head_bytes_is_read(no_dns):
    """The bound is MAX_HEAD bytes of head: that many pass, one more is a 431 (the head arrives in
    two parts, the size is checked between them)."""
    import threading
    import time

    for extra, ok in ((0, True), (1, False)):
        a, b = socket.socketpair()
        start = b"CONNECT a.test:443 HTTP/1.1\r\nX: "
        head = start + b"y" * (netproxy.MAX_HEAD + extra - len(start))

        def send(b=b, head=head):
            b.sendall(head)
            time.sleep(1.0)
            try:
                b.sendall(b"\r\n\r\nearly")
            except OSError:
                pass
        t = threading.Thread(target=send, daemon=True)
        t.start()
        a.settimeout(30)
        try:
            if ok:
                got, early = netproxy.read_head(a)
                assert got == head and b"early".startswith(early)
            else:
                with pytest.raises(netproxy.BadRequest) as e:
                    netproxy.read_head(a)
                assert e.value.status == 431
        finally:
            t.join()
            a.close()
            b.close()


# -- gitconfig: the reader agrees with git itself ------------------------------------------------

GIT_OK = [
    '[core]\n\tfsmonitor = "touch x"\n\tbare\n[alias]\n\tst = !sh -c id # comment\n',
    '[remote "Origin"]\n\turl = a\\\n b\n\tpushurl = c\\\r\nd\n',
    "[section.Sub]\n\tkey = v ; comment\n",
    '[a "b\\"c\\\\d"]\n\tk = "quoted # not; a comment"  \n',
    "[x]\n\tk = v\\tw\\n\\b\\\\\\\"\n",
    "[X]\n\tK=  spaced value   \n\tL = \n",
    "; comment\n# c\n\n[y]\nk\nm = 1\n[y]\n  n=\"a\"b\" c\"\n",
    "[z]\r\n\tk = v\r\n",
    '[s "sub"] k = v\n',
    "[s]\n\tk-1 = x\t\n",
]
GIT_BAD = {  # sample -> the lines reported unparsed
    "[bad\n": [1], '[a "b]\n': [1], '[s]\n\tk = "unterminated\n': [2], "[s]\n\tk = \\q\n": [2],
    "[s]\n\t1k = v\n": [2], "[s]\n\tk v\n": [2], "[]\n": [1], "[s]\n\té = v\n": [2], '[s "x\n"]\n': [1, 2],
}
STRICTER = {"k = v\n": [1], '[a.b "c"]\n': [1]}  # git takes these; the reader reports them for a human


def _git_list(tmp_path, text: str):
    import subprocess

    f = tmp_path / "config"
    f.write_bytes(text.encode())
    env = {"HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin", "LANG": "C"}
    proc = subprocess.run(["git", "config", "--file", str(f), "--no-includes", "--list", "-z"],
                          capture_output=True, env=env)
    if proc.returncode:
        return None
    out = []
    for item in proc.stdout.decode().split("\0")[:-1]:
        key, nl, value = item.partition("\n")
        out.append((key, value if nl else None))
    return out


@pytest.mark.parametrize("text", GIT_OK)
def test_the_config_reader_reads_what_git_reads(tmp_path, text):
    from tmuxjail import gitconfig

    git = _git_list(tmp_path, text)
    assert git is not None, "git itself must accept this sample"
    assert gitconfig.parse(text) == (git, [])


@pytest.mark.parametrize("text", [*GIT_BAD, *STRICTER])
def test_what_git_refuses_is_reported_unparsed(tmp_path, text):
    from tmuxjail import gitconfig

    assert (_git_list(tmp_path, text) is None) is (text in GIT_BAD), "git itself must refuse this sample"
    assert gitconfig.parse(text) == ([], {**GIT_BAD, **STRICTER}[text])


@pytest.mark.parametrize("key,value,runs", [
    ("core.fsmonitor", "x", True), ("core.hookspath", None, True), ("core.pager", "less", True),
    ("core.bare", "true", False), ("include.path", "../x", True), ("includeif.gitdir:/a.path", "x", True),
    ("credential.helper", "store", True), ("credential.https://h.helper", "x", True),
    ("filter.lfs.smudge", "x", True), ("filter.lfs.required", "true", False), ("diff.x.textconv", "od", True),
    ("remote.o.uploadpack", "x", True), ("remote.o.url", "x", False), ("alias.st", "!id", True),
    ("alias.st", "status", False), ("alias.st", None, False), ("submodule.s.update", " !id", True),
    ("submodule.s.update", "checkout", False), ("pager.log", "less", True), ("pager.log", "True", False),
    ("pager.log", None, False), ("pager.log", "", False), ("user.name", "!x", False), ("CORE.FSMONITOR", "x", True),
])
def test_which_keys_make_git_run_something(key, value, runs):
    from tmuxjail import gitconfig

    assert gitconfig.runs(key, value) is runs


# -- scan: everything the host will later run or trust, and nothing else ---------------------------

def _plant(ws):
    """What tests/adversarial/test_audit.py plants from a jail, made here directly."""
    def w(rel, text="", mode=0o644):
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(mode)
    w("nested/.git/HEAD", "ref: refs/heads/main\n")
    (ws / "nested/.git/objects").mkdir()
    w("nested/.git/config", '[core]\n\tfsmonitor = "touch x"\n\tbare = false\n[alias]\n\tst = !id\n\tco = checkout\n[x\n')
    w("nested/.git/hooks/post-checkout", "#!/bin/sh\n", 0o755)
    w("nested/.git/hooks/pre-commit.sample", "#!/bin/sh\n", 0o755)
    w("nested/.git/hooks/not-executable", "#!/bin/sh\n")
    os.symlink("/bin/true", ws / "nested/.git/hooks/pre-push")
    w("shared/HEAD", "ref: refs/heads/main\n")
    w("shared/commondir", "../nested/.git\n")
    w("wtree/.git", "gitdir: /elsewhere/.git\n")
    w("emptygit/.git", "")
    for rel in (".gitmodules", ".envrc", ".env", ".nvim.lua", ".exrc", ".vscode/tasks.json", ".vscode/notes.txt",
                ".idea/runConfigurations/run.xml", ".idea/other/x.xml", ".run/a.run.xml", "sub/.zed/tasks.json"):
        w(rel, "x")
    w("suid", "", 0o755)
    os.chmod(ws / "suid", 0o4755)
    w("sgid", "", 0o755)
    os.chmod(ws / "sgid", 0o2755)
    w("hard-a", "data")
    os.link(ws / "hard-a", ws / "hard-b")
    os.symlink("/etc/passwd", ws / "link-out")
    os.symlink("hard-a", ws / "link-in")
    os.symlink("/etc", ws / ".vimrc")  # a trusted name as a link out
    os.mkfifo(ws / ".dir-locals.el")  # a FIFO under a trusted name: reported, never read
    w("node_modules/evil/.envrc", "x")  # skipped, and said so
    w("plain/file.txt", "x")


def test_a_snapshot_skips_the_stat_of_plain_files_and_the_bounds_say_so(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    _plant(ws)
    kinds = {f["kind"] for f in scan.scan([str(ws)], stat_files=False).findings}
    assert not kinds & {"setuid", "setgid", "hardlink"} and {"direnv", "git-config", "editor"} <= kinds
    monkeypatch.setattr(scan, "MAX_DEPTH", 2)
    s = scan.scan([str(ws)])
    assert any(c.startswith("depth cap: ") for c in s.capped), s.capped
    assert not any(f["path"].endswith("nested/.git/config") for f in s.findings)  # depth 3
    monkeypatch.setattr(scan, "MAX_DEPTH", 48)
    assert scan.scan([str(tmp_path / "missing")]).capped == [f"{tmp_path / 'missing'}: not scanned (No such file or directory)"]
    monkeypatch.setattr(scan, "READ_BUDGET", 0)
    envrc = [f for f in scan.scan([str(ws)]).findings if f["kind"] == "direnv" and f["path"].endswith(".envrc")]
    assert envrc and envrc[0]["detail"].startswith("unread:")


def test_the_proxys_own_addresses_are_exactly_this_hosts(no_dns):
    """Every local IPv4 address (the kernel's /32 host LOCAL routes), and no network or broadcast
    address of a prefix: those are not this host, and the check would refuse public ones."""
    import ipaddress
    import shutil
    import subprocess

    if shutil.which("ip") is None:
        pytest.skip("ip(8) (iproute2) is not installed here")
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    mine = {ipaddress.ip_address(line.split()[3].split("/")[0]) for line in out.splitlines()}
    assert {a for a in netproxy.own_addresses() if a.version == 4} == mine
    out6 = subprocess.run(["ip", "-6", "-o", "addr", "show"], capture_output=True, text=True).stdout
    mine6 = {ipaddress.ip_address(line.split()[3].split("/")[0].split("%")[0]) for line in out6.splitlines()}
    assert {a for a in netproxy.own_addresses() if a.version == 6} == mine6


def test_a_proxy_that_cannot_read_its_own_addresses_refuses(monkeypatch, no_dns):
    """Not knowing this host's addresses, the proxy cannot tell a name that resolves to one of
    them: it refuses everything rather than guess."""
    def unreadable():
        raise OSError(13, "Permission denied")
    monkeypatch.setattr(netproxy, "own_addresses", unreadable)
    p = netproxy.Proxy(("*",), (("pub.test", "203.0.113.7", False),), None)
    with pytest.raises(netproxy.Refused) as e:
        p.decide("pub.test", 443)
    assert e.value.rule == "self-unknown"


@pytest.mark.parametrize("port,rule", [(0, "port"), (65536, "port"), (99999, "port"), (1, "no-address"),
                                       (65535, "no-address")])
def test_the_port_is_checked_before_any_lookup(no_dns, port, rule):
    with pytest.raises(netproxy.Refused) as e:
        proxy().decide("pub.example.net", port)
    assert e.value.rule == rule and no_dns == ([] if rule == "port" else ["pub.example.net"])


@pytest.mark.parametrize("head", [
    b"CONNECT a.test:443 HTTP/1.1\r\nX: \x7f", b"CONNECT a.test HTTP/1.1", b"CONNECT :443 HTTP/1.1",
    b"CONNECT a.test:123456 HTTP/1.1", b"CONNECT a.test:4x3 HTTP/1.1", b"CONNECT a.test: HTTP/1.1",
])
def test_a_malformed_connect_is_a_400(head):
    with pytest.raises(netproxy.BadRequest) as e:
        netproxy.parse_request(head)
    assert e.value.status == 400
    assert netproxy.parse_request(b"CONNECT A.Test:99999 HTTP/1.0\r\nHost:\tx")[:2] == ("a.test", 99999)


def test_a_full_proxy_sheds_connections_and_keeps_serving(tmp_path, no_dns):
    """Past its connection limit the proxy closes new connections at once, and serves again as
    soon as a slot is free: the limit never stops the accept loop."""
    import threading

    p = proxy(allow=("allowed.test",))
    p.slots = threading.BoundedSemaphore(1)
    p.slots.acquire()  # the one slot is taken: the proxy is full
    path = str(tmp_path / "p.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    threading.Thread(target=p.serve, args=(listener,), daemon=True).start()

    def ask():
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(20)
        c.connect(path)
        try:
            c.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
            return c.recv(100)
        except (BrokenPipeError, ConnectionResetError):
            return b""  # closed unread
        finally:
            c.close()
    assert ask() == b"" and ask() == b""  # closed without an answer, twice
    p.slots.release()
    assert ask().startswith(b"HTTP/1.1 403")


def test_no_landlock_is_abi_zero_not_an_error(monkeypatch):
    """A kernel (or libc) without Landlock reads as ABI 0: the start then refuses strict modes or
    takes the operator's accept_missing_guards, instead of the launcher failing on a traceback."""
    from tmuxjail.sandbox import landlock

    for exc in (OSError(38, "ENOSYS"), AttributeError("syscall")):
        def boom(*a, exc=exc):
            raise exc
        monkeypatch.setattr(landlock.libc, "syscall", boom)
        assert landlock.abi() == 0
    monkeypatch.setattr(landlock.libc, "syscall", lambda *a: -1)
    assert landlock.abi() == 0
    monkeypatch.setattr(landlock.libc, "syscall", lambda *a: 6)
    assert landlock.abi() == 6


@pytest.mark.parametrize("plain,with_arg,fits", [(84, 0, True), (81, 2, False), (85, 0, False)])
def test_a_filter_whose_jumps_do_not_fit_a_byte_is_refused(monkeypatch, plain, with_arg, fits):
    """Classic BPF jump offsets are 8 bits: a rule set long enough to need a jump of 256 would
    wrap it to 0 and make the filter skip to the wrong rule. program() refuses to build it.
    (81 plain rules and 2 with an argument: the foreign-architecture jump is exactly 256; 85
    plain: the x32 jump is.)"""
    from tmuxjail.sandbox import seccomp

    rules = (("io_uring_setup", seccomp.EPERM, ()),) * plain + \
        (("chmod", seccomp.EPERM, ((1, "set", seccomp.SUID_SGID),)),) * with_arg
    monkeypatch.setattr(seccomp, "EVERY_MODE", rules)
    monkeypatch.setattr(seccomp, "STRICT_ONLY", ())
    if fits:
        assert len(seccomp.program("x86_64", strict=False)) % 8 == 0
    else:
        with pytest.raises(AssertionError):
            seccomp.program("x86_64", strict=False)


def test_the_x86_64_filter_denies_every_x32_system_call():
    """x86_64 has a second syscall table (x32, numbers with bit 30 set) that the per-number rules
    never see: the filter denies all of it, TIOCSTI or not."""
    from test_policy import _run_bpf

    from tmuxjail.sandbox import seccomp

    prog = seccomp.program("x86_64")
    for nr in (seccomp.X32_BIT | 0, seccomp.X32_BIT | 16, seccomp.X32_BIT | 0x200):
        assert _run_bpf(prog, nr, 0xC000003E, 0, 0x5401) == 0x00050000 | 1, hex(nr)


@pytest.mark.parametrize("shell,want", [("", "/bin/sh"), ("bin/bash", "/bin/sh"), ("/nonexistent/sh", "/bin/sh"),
                                        ("/usr/sbin/nologin", "/bin/sh"), ("/etc/passwd", "/bin/sh"),
                                        ("/bin/bash", "/bin/bash")])
def test_the_login_shell_is_an_absolute_runnable_program_or_sh(monkeypatch, shell, want):
    import pwd

    if not os.access("/bin/bash", os.X_OK):
        pytest.skip("needs /bin/bash")
    real = pwd.getpwuid(os.getuid())
    fake = pwd.struct_passwd((*real[:6], shell))
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: fake)
    assert identity.login_shell() == want
    assert pane_spec.login_shell() == want


def test_the_proxy_refuses_this_hosts_addresses_as_they_are_now(monkeypatch, no_dns):
    """The host's own addresses are read on the first decision and again once they are a second
    old: a name resolving to one of them (here a public one) is refused, also after it changed."""
    import time

    now = {"addrs": frozenset({netcheck.literal("8.8.8.8")})}
    monkeypatch.setattr(netproxy, "own_addresses", lambda: now["addrs"])
    p = netproxy.Proxy(("*",), (("a.test", "8.8.8.8", False), ("b.test", "8.8.4.4", False)), None)
    with pytest.raises(netproxy.Refused) as e:
        p.decide("a.test", 443)
    assert e.value.rule == "own-address"
    assert p.decide("b.test", 443)[0] == [("8.8.4.4", 443)]
    now["addrs"] = frozenset({netcheck.literal("8.8.4.4")})
    p._own = (time.monotonic() - 2.0, p._own[1])  # a second and more later
    with pytest.raises(netproxy.Refused) as e:
        p.decide("b.test", 443)
    assert e.value.rule == "own-address"


def test_a_failed_accept_never_stops_the_proxy(tmp_path, no_dns):
    import threading

    path = str(tmp_path / "p.sock")
    real = socket.socket(socket.AF_UNIX)
    real.bind(path)
    real.listen(8)

    class Flaky:  # the first accept fails (EMFILE, say), the rest are the socket's own
        failed = False

        def accept(self):
            if not Flaky.failed:
                Flaky.failed = True
                raise OSError(24, "Too many open files")
            return real.accept()
    threading.Thread(target=proxy(allow=("allowed.test",)).serve, args=(Flaky(),), daemon=True).start()
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(20)
    c.connect(path)
    c.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
    assert c.recv(100).startswith(b"HTTP/1.1 403") and Flaky.failed
    c.close()


def test_audit_text_counts_what_it_did_not_look_into():
    from tmuxjail import audit

    result = {"name": "j", "mode": "isolated", "workspaces": ["/ws"], "count": 0, "baseline": True, "all": False,
              "findings": [], "capped": [], "skipped": [f"/ws/d{i}/node_modules" for i in range(7)]}
    last = audit.render(result).splitlines()[-1]
    assert last.startswith("not looked into: d0/node_modules, ") and last.endswith(" and 2 more"), last


def test_a_key_whose_inputs_cannot_be_read_caches_nothing(monkeypatch):
    from tmuxjail import warm

    for exc in (OSError(2, "gone"), KeyError("PATH")):
        def unreadable(*a, exc=exc):
            raise exc
        monkeypatch.setattr(warm, "inputs", unreadable)
        assert warm.key_of(None, None, None, "", "/usr/bin/bwrap", False) is None


# -- survivors of the mutation run: netlog (show --network) -------------------------------------

def _counter_file(directory, name, table):
    (directory / f"counters-{name}.json").write_text(json.dumps({"allowed": 0}) + "\n" + table + "\n")


def test_show_network_merges_every_proxys_counters_past_unreadable_ones(tmp_path):
    """Each proxy of a session keeps its own counters file; one that is torn or forged (the host
    names in it came from the jail) is skipped, never the end of the reading."""
    from tmuxjail.net import log as netlog

    _counter_file(tmp_path, "1", "{torn")
    _counter_file(tmp_path, "2", "[1, 2]")
    e = {"allowed": 0, "denied": 1, "failed": 0, "bytes": 0, "ports": [443]}
    _counter_file(tmp_path, "3", json.dumps({"destinations": {"a.test": "x", "b.test": {**e, "rule": "first", "last": "2"}},
                                             "other": {"denied:allowlist": 4}}))
    _counter_file(tmp_path, "4", json.dumps({"destinations": {"b.test": {**e, "rule": "same-time", "last": "2"},
                                                              "c.test": {**e, "rule": "new", "last": "5"}}}))
    _counter_file(tmp_path, "5", json.dumps({"destinations": {"c.test": {**e, "rule": "older", "last": "3"}}}))
    got = netlog.counters(str(tmp_path))
    assert set(got["destinations"]) == {"b.test", "c.test"} and got["other"] == {"denied:allowlist": 4}
    assert got["destinations"]["b.test"]["denied"] == 2 and got["destinations"]["c.test"]["denied"] == 2
    # the rule shown is the latest one's; of two at the same time, the later file's
    assert got["destinations"]["b.test"]["rule"] == "same-time" and got["destinations"]["c.test"]["rule"] == "new"


def test_show_network_says_what_would_allow_a_denied_destination():
    from tmuxjail.net import log as netlog

    iso, compat = {"mode": "isolated", "provider": "codex"}, {"mode": "compatibility", "provider": "codex"}
    assert netlog.fix("allowlist", "x.test", iso, None).startswith("a new session (today's config allows it): ")
    assert netlog.fix("allowlist", "x.test", compat, None).startswith("a new session: tmuxjail start codex")
    assert netlog.fix("literal-address", "x.test", iso, None).startswith("connect by name")
    assert netlog.fix("loopback", "127.0.0.1", iso, None).startswith("connect by name")


def test_show_network_text_shows_every_part_it_has(tmp_path):
    from tmuxjail.net import log as netlog

    session = {"id": "s1", "name": "j", "policy": {"network": "proxy", "allow_domains": ["a.test", "b.test"]}}
    rep = netlog.report(session, str(tmp_path / "store.db"))
    assert rep["network"] == "proxy" and rep["allow_domains"] == ["a.test", "b.test"]
    assert netlog.text(rep).splitlines() == ["network: proxy", "allowed domains: a.test b.test", "no destinations yet"]
    assert netlog.text({**rep, "network": "host"}).splitlines() == ["network: host", "no proxy: nothing is logged"]
    assert netlog.text({**rep, "allow_domains": []}).splitlines()[1] == "allowed domains: (none)"

    def dest(host, allowed, denied):
        return {"host": host, "allowed": allowed, "denied": denied, "failed": 0, "bytes": 0, "ports": [443], "rule": "r"}
    row = {"time": "T", "host": "a.test", "port": 443, "address": "192.0.2.1", "decision": "allowed", "rule": "a.test"}
    full = {**rep, "rows": [row, {**row, "address": "", "rule": "", "decision": "malformed", "count": 3}],
            "dropped": {"rotated": 3, "unwritten": 2}, "totals": {"allowed": 1},
            "by_destination": [dest("a.test", 1, 1)] + [dest(f"d{i:02}.test", 0, 1) for i in range(netlog.SHOWN + 1)],
            "other": {"denied:allowlist": 7}}
    lines = netlog.text(full).splitlines()
    assert lines[2].startswith("log: 5 older rows dropped (3 by rotation, 2 unwritable)")
    assert lines[4] == "by destination:" and lines[5].startswith("  a.test:443  1 allowed, 1 denied")
    assert [ln for ln in lines if ln.startswith("  d")] == [f"  d{i:02}.test:443  0 allowed, 1 denied, 0 failed, 0 B  (r)"
                                                          for i in range(netlog.SHOWN)]
    assert "  ... and 1 more denied destinations (--json lists them)" in lines
    assert "  (beyond the table) denied by rule allowlist: 7" in lines
    assert lines[-3:] == ["recent (the last 2 of 2 rows kept):", "  T  allowed  a.test:443  192.0.2.1  (a.test)",
                          "  T  malformed  a.test:443  -  (-) x3"]
    exactly = {**full, "by_destination": full["by_destination"][:netlog.SHOWN + 1]}
    assert not any(ln.startswith("  ... and") for ln in netlog.text(exactly).splitlines())
    no_rows = netlog.text({**full, "rows": [], "by_destination": []}).splitlines()
    assert not any(ln.startswith(("recent", "by destination")) for ln in no_rows) and no_rows[-1].startswith("  (beyond")
    only_rows = netlog.text({**full, "totals": {}, "dropped": {"rotated": 0, "unwritten": 0}}).splitlines()
    assert only_rows[2].startswith("by destination")


# -- survivors of the mutation run: discovery's classification -----------------------------------

def test_classify_folds_only_mere_probes_outside_the_home_and_what_the_layout_hides():
    """A path the jail hid is folded away (never proposed) only when it is a system path or a mere
    existence check outside the home; a hidden home path that was only probed, or a hidden path
    that was read or written, is matched against the capabilities or left raw for a human."""
    from types import SimpleNamespace as NS

    from tmuxjail.discover.classify import classify
    from tmuxjail.discover.evidence import PathUse

    def use(path, area, tried, kinds=()):
        return PathUse(path=path, area=area, kinds=list(kinds), tried=tried, hidden=True, lines=[1])
    grant = NS(path="~/.aws", kind="dir")
    profile = NS(capabilities={"aws": NS(paths=[grant])}, baseline=[], optional=["aws"])
    ev = NS(home="/h", paths=[], denials=[
        use("/sys/x", "system", {"read": "ENOENT"}),
        use("/.dockerenv", "other", {"probe": "ENOENT"}),
        use("/h/.aws/config", "home", {"probe": "ENOENT"}),
        use("/h/.probed-only", "home", {"probe": "ENOENT"}),
        use("/opt/read", "other", {"probe": "ENOENT", "read": "ENOENT"}),
        use("/opt/made", "other", {"probe": "ENOENT"}, kinds=["create"]),
    ])
    c = classify(ev, profile, {})
    assert c.folded == {"hidden-system": 1, "probed": 1}
    assert list(c.overlay) == ["aws"] and [u.path for u in c.overlay["aws"]] == ["/h/.aws/config"]
    assert [u.path for u in c.raw] == ["/h/.probed-only", "/opt/read", "/opt/made"]



def test_classify_folds_what_the_jail_gives_counts_it_by_area_and_keeps_odd_paths_raw():
    """What the jail gives already (the private home, system, scratch, install) is folded and
    counted by area, and classification goes on past it; a path with odd bytes is raw even inside a
    capability's path (never granted); a home path marks the baseline capability it falls in as
    used, a system path that happens to match one does not; a baseline capability without paths
    is always kept, one whose paths were never touched is dropped."""
    from types import SimpleNamespace as NS

    from tmuxjail.discover.classify import classify
    from tmuxjail.discover.evidence import PathUse

    def use(path, area, odd=False):
        return PathUse(path=path, area=area, kinds=["read"], odd=odd, lines=[1])
    profile = NS(capabilities={"cfg": NS(paths=[NS(path="~/.cfg", kind="dir")]),
                               "etc": NS(paths=[NS(path="/etc/app", kind="dir")]),
                               "bare": NS(paths=[]),
                               "aws": NS(paths=[NS(path="~/.aws", kind="dir")])},
                  baseline=["cfg", "etc", "bare"], optional=["aws"])
    ev = NS(home="/h", denials=[], paths=[
        use("/h/.local/state/tmuxjail/store.db", "tmuxjail"),
        use("/h/.cfg/a", "home"),
        use("/h/.cfg/b", "home"),
        use("/etc/app/x", "system"),
        use("/tmp/s", "scratch"),
        use("/h/.aws/\udcff", "home", odd=True),
        use("/srv/data", "other"),
    ])
    c = classify(ev, profile, {})
    assert c.folded == {"private-home": 2, "system": 1, "scratch": 1}
    assert [u.path for u in c.raw] == ["/h/.aws/\udcff", "/srv/data"] and c.overlay == {}
    assert c.baseline == ["cfg", "bare"] and c.dropped == ["etc"]
    assert [u.path for u in c.never] == ["/h/.local/state/tmuxjail/store.db"]

def test_show_network_counts_no_forged_negative_and_names_the_fix_of_denied_rows_only(tmp_path):
    from tmuxjail.net import log as netlog

    d = tmp_path / "net" / "s1"
    d.mkdir(parents=True)
    (d / "counters-0.json").write_text(json.dumps({"allowed": 1}))  # a totals line only, no newline
    e = {"allowed": 0, "denied": 2, "failed": 0, "bytes": 0, "ports": [443], "rule": "allowlist", "last": "1"}
    _counter_file(d, "1", json.dumps({"destinations": {"ok.test": {**e, "allowed": 3, "denied": 0},
                                                       "no.test": {**e, "denied": -5, "bytes": -9}},
                                      "other": {"denied:port": 0, "denied:private": -4}}))
    _counter_file(d, "2", json.dumps({"destinations": {"no.test": e}}))
    session = {"id": "s1", "name": "j", "mode": "isolated", "provider": "codex",
               "request": {"workspaces": ["/w"]}, "policy": {"network": "proxy"}}
    rep = netlog.report(session, str(tmp_path / "store.db"))
    by = {x["host"]: x for x in rep["by_destination"]}
    assert by["no.test"]["denied"] == 2 and by["no.test"]["bytes"] == 0 and rep["other"] == {"denied:port": 0}
    assert "fix" not in by["ok.test"]
    assert by["no.test"]["fix"].endswith("--mode isolated --network proxy --workspace /w --allow-domain no.test")
    assert netlog.fix("allowlist", "no.test", {}, None).endswith("--network proxy --allow-domain no.test")
    assert netlog.fix("allowlist", "not a name!", {}, None) == "not a name any allowlist can hold"


def test_state_guards_are_read_only_and_every_directory_above_them_is_pinned():
    """A provider's command files in its state dir bound back writable: each guard read-only onto
    itself, each private copy over the host's file, and each directory between the bound root and
    them bound onto itself first (a mount point cannot be renamed away, guards and all)."""
    from tmuxjail.sandbox.bwrap import _state_binds

    policy = {"host_write": ["/h/.pi", "/h/.codex"],
              "state_guards": ["/h/.pi/agent/hooks/x.json", "/h/.codex/config.toml"],
              "state_copies": [("/h/.pi/agent/auth.json", "/s/auth.json")]}
    assert [x for entry in _state_binds(policy) for x in entry] == [
        "--bind", "/h/.pi/agent", "/h/.pi/agent", "--bind", "/h/.pi/agent/hooks", "/h/.pi/agent/hooks",
        "--ro-bind-try", "/h/.codex/config.toml", "/h/.codex/config.toml",
        "--ro-bind-try", "/h/.pi/agent/hooks/x.json", "/h/.pi/agent/hooks/x.json",
        "--bind", "/s/auth.json", "/h/.pi/agent/auth.json"]


def test_binds_added_to_a_built_call_go_before_its_closing_remount_and_chdir():
    """The seal (read-only remounts, then --chdir) stays last of the setup whatever is added to the
    setup after the build (the bridge's binds), and the command is never part of it."""
    call = Bwrap().call(resolve("compatibility"), ["/bin/cli", "--remount-ro", "x", "--chdir", "y"], LAYOUT)
    seal = [x for entry in call.seal for x in entry]
    call.setup.append(("--bind", "/n", "/n"))
    argv = call.argv()
    i = argv.index("--")
    assert argv[i - len(seal) - 3:i] == ["--bind", "/n", "/n", *seal] and call.seal[0][0] == "--remount-ro"
    assert argv[-5:] == ["/bin/cli", "--remount-ro", "x", "--chdir", "y"]


def test_a_zero_rlimit_share_is_set_not_dropped():
    """0 is a limit (a user whose memlock is 0 shares none of it); only -1 means none to share."""
    from tmuxjail.sandbox.bwrap import PRLIMIT, _nproc

    lim = {"nofile": 64, "sigpending": -1, "msgqueue": 0, "memlock": 0, "nproc": 10}
    assert _nproc({"limits": lim}) == [PRLIMIT, "--nofile=64", "--msgqueue=0", "--memlock=0", "--nproc=10", "--"]


def test_a_strict_jail_binds_its_cli_install_root_read_only_unless_a_system_dir_holds_it():
    pol = resolve("isolated")
    pol = {**pol, "install_roots": ["/home/u/.local/lib/node_modules/@x/cli", "/usr/lib/node_modules/y"]}
    pairs = _pairs(Bwrap().wrap(pol, ["x"], LAYOUT))
    assert ("--ro-bind", "/home/u/.local/lib/node_modules/@x/cli") in pairs
    assert not any(p[1] == "/usr/lib/node_modules/y" for p in pairs)


def test_a_pty_share_of_zero_still_binds_the_launchers_own_devpts():
    """ptys >= 0: the launcher mounted the jail's own devpts with max= that share (0 included);
    bwrap's /dev/pts, which has no max=, must not replace it. Only -1 (no share) keeps bwrap's."""
    from tmuxjail.sandbox.bwrap import _dev

    for ptys, bound in ((0, True), (8, True), (-1, False)):
        argv = [x for entry in _dev({"limits": {"ptys": ptys, "tmp_bytes": 1 << 20}}) for x in entry]
        assert (("--dev-bind", "/dev/pts") in _pairs(argv)) is bound, ptys


def test_the_resume_hint_for_a_changed_resolve_table_replaces_or_removes_it():
    from tmuxjail import config

    old = {"network": "proxy", "allow_domains": [], "resolve": [["up.test", "192.0.2.7", False]]}
    today = config.parse('[network]\nisolated = "proxy"\n', "c.toml")
    steps = config.restore_network("isolated", old, {}, today, "c.toml")
    assert steps and steps[-1] == 'replace [network.resolve] in c.toml with: `"up.test" = "192.0.2.7"`', steps
    today = config.parse('[network]\nisolated = "proxy"\n[network.resolve]\n"x.test" = "192.0.2.8"\n', "c.toml")
    steps = config.restore_network("isolated", {**old, "resolve": []}, {}, today, "c.toml")
    assert steps and steps[-1] == "remove [network.resolve] from c.toml", steps


def test_a_config_size_is_a_whole_non_negative_number_of_bytes_or_units():
    from tmuxjail.config import _size

    assert _size(0) == 0 and _size(5) == 5 and _size("16") == 16
    for bad in (-1, True, False, 1.5, "16X", "-1", "M", ""):
        assert _size(bad) is None, bad


def test_resume_hints_name_only_the_config_changes_that_are_needed():
    from tmuxjail import config

    def cfg(network, allow):
        return config.parse(f'[network]\nisolated = "{network}"\n[network.allow_domains]\nisolated = {allow}\n', "c.toml")
    old = {"network": "proxy", "allow_domains": [], "resolve": []}
    assert config.restore_network("isolated", old, {"network": "proxy"}, cfg("proxy", "[]"), "c.toml") == []
    assert config.restore_network("isolated", old, {}, cfg("host", "[]"), "c.toml") == [
        'add `isolated = "proxy"` under [network] in c.toml (the widest network isolated sessions may ask, and their default)']
    asked = {**old, "allow_domains": ["b.test"]}
    assert config.restore_network("isolated", asked, {"network": "proxy", "allow_domains": ["b.test"]},
                                  cfg("proxy", '["a.test"]'), "c.toml") == [
        'under [network.allow_domains] in c.toml set `isolated = ["a.test", "b.test"]`']


def test_the_discovery_trace_cap_is_checked():
    from tmuxjail.config import _discover

    assert _discover({"trace_cap": "1M"}, "c") == 1 << 20 and _discover({}, "c") > 1 << 20
    for bad in ([], {"trace_cap": "1M", "other": 1}, {"trace_cap": "x"}, {"trace_cap": (1 << 20) - 1}):
        with pytest.raises(ConfigError):
            _discover(bad, "c")


def test_resume_hints_blame_tmuxjail_network_only_when_it_narrows(monkeypatch):
    from tmuxjail import config

    today = config.parse('[network]\nisolated = "proxy"\n[network.allow_domains]\nisolated = []\n', "c.toml")
    old = {"network": "proxy", "allow_domains": [], "resolve": []}
    monkeypatch.setenv("TMUXJAIL_NETWORK", "proxy")
    assert config.restore_network("isolated", old, {"network": "proxy"}, today, "c.toml") == []
    monkeypatch.setenv("TMUXJAIL_NETWORK", "none")
    assert config.restore_network("isolated", old, {"network": "proxy"}, today, "c.toml") == [
        "TMUXJAIL_NETWORK=none narrows every mode: unset it"]


def test_an_executable_the_cache_has_no_digest_for_is_hashed_and_a_changed_one_refused(tmp_path, capsys):
    """The launcher trusts the store's cached digest only when it equals the approved one; any
    other answer (none, or a stale one) means hashing the opened file, and a file whose sha256 is
    not the approved digest never runs."""
    import hashlib


    exe = tmp_path / "codex"
    exe.write_bytes(b"#!/bin/sh\necho swapped\n")
    approved = "sha256:" + hashlib.sha256(b"#!/bin/sh\necho approved\n").hexdigest()
    fd = os.open(exe, os.O_RDONLY)
    try:
        for cached in ([], [""], ["sha256:" + "0" * 64]):
            with pytest.raises(SystemExit) as exit_:
                executable.exe_checked([(str(exe), approved, fd, [])], cached)
            assert exit_.value.code == refuse.EXIT_REFUSED
            assert "changed since this session's policy" in capsys.readouterr().err
        executable.exe_checked([(str(exe), approved, fd, [])], [approved])  # the cache vouches: no hash
        actual = "sha256:" + hashlib.sha256(exe.read_bytes()).hexdigest()
        executable.exe_checked([(str(exe), actual, fd, [])], [""])
    finally:
        os.close(fd)
