"""The cache of resolved policies (tmuxjail.warm, tmuxjail.policycache), in process against the
installed package, real bubblewrap checks and a real SQLite store: over generated requests a hit
is exactly what a full resolution makes (policy, canonical JSON, fingerprint, argv); changing any
one input misses and resolves afresh; a corrupt, truncated, tampered, foreign or linked entry is a
miss, never an error and never another policy. (From inside a jail: tests/adversarial.)"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
from pathlib import Path

import pytest
from conftest import STANDIN, have_jail

from tmuxjail import canon, plan, policycache, warm
from tmuxjail.context import Context
from tmuxjail.errors import TmuxjailError
from tmuxjail.paths import Paths
from tmuxjail.request import StartRequest
from tmuxjail.tmux import Tmux

pytestmark = pytest.mark.integration

PROVIDERS = ("codex", "claude-code", "pi", "cursor", "shell")
SEED = int(os.environ.get("TMUXJAIL_PROPERTY_SEED", "1812"))
CASES = int(os.environ.get("TMUXJAIL_PROPERTY_CASES", "24"))


class World:
    """A private HOME/XDG tree, workspaces, stand-in CLIs (one behind its own interpreter and a
    package.json), and a Context on them; os.environ follows it (config.load and the identity
    code read it)."""

    def __init__(self, root: Path, monkeypatch):
        self.root, self.mp = root, monkeypatch
        self.home = root / "home"
        self.bin = root / "bin"
        self.pkg = root / "opt" / "pkg"  # pi: a script with its own interpreter, in a package
        self.wss = [root / "ws-a", root / "ws-b", root / "ws c"]
        for d in (self.home, self.bin, self.pkg / "bin", *self.wss):
            d.mkdir(parents=True, exist_ok=True)
        for name in ("codex", "claude", "cursor-agent"):
            shutil.copy(STANDIN, self.bin / name)
            (self.bin / name).chmod(0o755)
        self.interp = self.pkg / "bin" / "pish"
        shutil.copy(os.path.realpath("/bin/sh"), self.interp)
        pi = self.pkg / "bin" / "pi-cli"
        pi.write_text(f"#!{self.interp}\n" + STANDIN.read_text().split("\n", 1)[1])
        pi.chmod(0o755)
        (self.pkg / "package.json").write_text('{"name": "pi", "version": "1.2.3"}')
        (self.bin / "pi").symlink_to(pi)
        self.vars = {
            "HOME": str(self.home), "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "XDG_CONFIG_HOME": str(self.home / ".config"), "XDG_STATE_HOME": str(self.home / ".local/state"),
            "XDG_DATA_HOME": str(self.home / ".local/share"), "LANG": "C.UTF-8",
        }
        for k in ("TMUXJAIL_ALLOWED_MODES", "TMUXJAIL_NETWORK"):
            monkeypatch.delenv(k, raising=False)
        self.setenv(**self.vars)

    def setenv(self, **kv: str) -> None:
        for k, v in kv.items():
            self.mp.setenv(k, v)
            self.vars[k] = v

    @property
    def paths(self) -> Paths:
        h = Path(self.vars["HOME"])
        return Paths(home=h, config_dir=Path(self.vars["XDG_CONFIG_HOME"], "tmuxjail"),
                     state_dir=Path(self.vars["XDG_STATE_HOME"], "tmuxjail"),
                     data_dir=Path(self.vars["XDG_DATA_HOME"], "tmuxjail"))

    @property
    def config(self) -> Path:
        return self.paths.config_file

    def write_config(self, text: str) -> None:
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text(text)

    def ctx(self) -> Context:
        env = dict(os.environ)
        return Context(Tmux(socket_name="tj-warm-unused", env=env), env=env, paths=self.paths)

    def built(self, opts: StartRequest) -> StartRequest:
        """The request as a start builds it: its workspaces canonical, from the first workspace."""
        return StartRequest.build(str(self.wss[0]), **opts._asdict())

    def warm(self, opts: StartRequest) -> warm.WarmPlan:
        """A start, as a fresh `tmuxjail start` process makes it (it loads the install as it is now)."""
        self.mp.setattr(warm, "_LOADED", warm._identity_now())
        ctx = self.ctx()
        return warm.resolve(ctx, self.built(opts))

    def full(self, opts: StartRequest) -> plan.Plan:
        return plan.resolve(self.ctx(), self.built(opts))

    def approve(self, opts: StartRequest) -> None:
        """Approve exactly what a verified request runs (as `tmuxjail approve` records it)."""
        p = plan.resolve(self.ctx(), self.built(opts)._replace(mode="verified", restriction=None, candidate=None),
                         gate=False)
        from tmuxjail import profiles
        from tmuxjail.net import policy as netpolicy

        prof = profiles.load(opts.provider)
        self.ctx().store.add_approval(prof.provider, prof.profile_version, prof.hash, p.policy.to_data()["executable"],
                                      netpolicy.approval_items(prof, p.policy.to_data()), "test")

    def entries(self) -> list[Path]:
        d = self.paths.state_dir / policycache.DIR
        return sorted(d.glob("*.json")) if d.is_dir() else []


@pytest.fixture
def world(tmp_path, monkeypatch):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    return World(tmp_path, monkeypatch)


def same(hit: warm.WarmPlan, p: plan.Plan) -> None:
    """A warm plan is exactly the full resolution: the policy (as data, as the store's JSON and
    canonically), the fingerprint, how the CLI starts, and the approval."""
    data = p.policy.to_data()
    assert hit.policy == p.policy  # one policy type, read back from the cache or resolved
    assert hit.policy.to_data() == data
    assert json.dumps(hit.policy.to_data(), sort_keys=True) == json.dumps(data, sort_keys=True)  # the store row
    assert list(hit.policy.to_data()) == list(data)  # the spec's key order too
    assert canon.canonical_json(hit.policy.to_data()) == canon.canonical_json(data)
    assert hit.fingerprint == p.fingerprint == canon.fingerprint(hit.policy.to_data())
    assert hit.argv == list(p.resolved.argv)
    assert (hit.approval or {}).get("id") == (p.approval or {}).get("id")


def hit_then_same(w: World, opts: StartRequest) -> warm.WarmPlan:
    """A miss that fills the cache, then a hit; both equal a full resolution made now."""
    first = w.warm(opts)
    second = w.warm(opts)
    assert second.hit, "an unchanged request must hit"
    p = w.full(opts)
    same(first, p)
    same(second, p)
    return second


# -- the property: over generated requests, a hit is the full resolution ------------------------

CONFIGS = (
    "",
    'default_mode = "isolated"\n',
    "[limits]\nnproc = 512\ntmp = \"64M\"\n",
    '[network]\ncompatibility = "host"\nisolated = "proxy"\nverified = "proxy"\n',
    '[network]\nisolated = "none"\n[network.allow_domains]\nisolated = ["*.example.com"]\n',
    'allowed_modes = ["isolated", "verified"]\n',
    '[limits]\r\nnproc = 600\r\n',  # read as config.load reads it (universal newlines)
    'allowed_modes = [\n',  # a broken config: refused alike
)


def request(rng: random.Random, w: World) -> StartRequest:
    provider = rng.choice(PROVIDERS)
    mode = rng.choice(["compatibility", "isolated", "verified", None])
    wss = tuple(str(p) for p in rng.sample(w.wss, rng.choice([1, 1, 2, 3])))
    caps: tuple[str, ...] = ()
    if mode == "isolated" and rng.random() < 0.3:
        caps = ("git-metadata-write",)
    elif mode == "verified":
        from tmuxjail import profiles

        optional = profiles.load(provider).optional
        caps = tuple(rng.sample(optional, rng.randint(0, min(2, len(optional)))))
    network = rng.choice([None, None, "none", "proxy", "host"])
    domains = None
    if network == "proxy" or rng.random() < 0.1:  # elsewhere refused: --allow-domain needs a proxy
        domains = rng.choice([None, ("api.example.com",), ("*.example.org", "api.example.com")])
    return StartRequest(provider=provider, mode=mode, workspaces=wss, env_name=rng.choice(["default", "work"]),
                        capabilities=caps, network=network, allow_domains=domains)


def test_a_hit_is_exactly_the_full_resolution_over_generated_requests(world):
    rng = random.Random(SEED)
    (world.wss[1] / ".git").mkdir()  # strict jails protect it: a host fact of the policy
    checked = refused = 0
    for i in range(CASES):
        world.write_config(rng.choice(CONFIGS))
        opts = request(rng, world)
        refusal: TmuxjailError | None = None
        try:
            if opts.mode == "verified" and rng.random() < 0.8:
                world.approve(opts)
            expected = world.full(opts)
        except TmuxjailError as exc:
            refusal = exc
        if refusal is not None:
            # What the full resolution refuses, the warm path refuses alike (and caches nothing).
            before = world.entries()
            with pytest.raises(type(refusal)) as got:
                world.warm(opts)
            assert got.value.message == refusal.message, (i, opts)
            assert world.entries() == before
            refused += 1
            continue
        hit = hit_then_same(world, opts)
        same(hit, expected)
        checked += 1
    assert checked >= CASES // 3 and refused >= 1, (checked, refused)  # the generator reaches both


# -- changing any one input misses ---------------------------------------------------------------

BASE = StartRequest(provider="pi", mode="isolated")


def _touch(p: Path) -> None:
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same times: only ctime moves


def _rewrite_same_size(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[-2] = ord("#") if data[-2] != ord("#") else ord(" ")
    st = p.stat()
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _installed(package: str, name: str) -> Path:
    from importlib import import_module

    return Path(str(import_module(package).__file__)).parent / name


CHANGES = {
    # input -> (how to change it, the request then made)
    "config": (lambda w: w.write_config("[limits]\nnproc = 333\n"), BASE),
    "config, same policy": (lambda w: w.write_config("# a comment\n"), BASE),
    "TMUXJAIL_NETWORK": (lambda w: w.setenv(TMUXJAIL_NETWORK="none"), BASE),
    "TMUXJAIL_ALLOWED_MODES": (lambda w: w.setenv(TMUXJAIL_ALLOWED_MODES="isolated,verified"), BASE),
    "executable content": (lambda w: _rewrite_same_size(w.pkg / "bin" / "pi-cli"), BASE),
    "executable inode": (lambda w: _touch(w.pkg / "bin" / "pi-cli"), BASE),
    "interpreter": (lambda w: _touch(w.interp), BASE),
    "package version": (lambda w: (w.pkg / "package.json").write_text('{"version": "1.2.4"}'), BASE),
    "which executable PATH finds": (lambda w: (w.bin / "pi").unlink() or (w.bin / "pi").symlink_to(
        shutil.copy(w.pkg / "bin" / "pi-cli", w.pkg / "bin" / "pi-two")), BASE),
    "PATH": (lambda w: w.setenv(PATH=w.vars["PATH"] + ":/sbin"), BASE),
    "a .git appears in the workspace": (lambda w: (w.wss[0] / "sub" / ".git").mkdir(parents=True), BASE),
    "tmuxjail's own files": (lambda w: _touch(_installed("tmuxjail.profile_data", "pi.toml")), BASE),
    "tmuxjail's code": (lambda w: _touch(_installed("tmuxjail", "policy.py")), BASE),
    "an adapter": (lambda w: _touch(_installed("tmuxjail.adapters", "pi.py")), BASE),
    "XDG state dir": (lambda w: w.setenv(XDG_STATE_HOME=str(w.home / ".state2")), BASE),
    "HOME": (lambda w: (w.root / "home2").mkdir() or w.setenv(HOME=str(w.root / "home2")), BASE),
    "mode": (lambda w: None, StartRequest(provider="pi", mode="compatibility")),
    "provider": (lambda w: None, StartRequest(provider="codex", mode="isolated")),
    "workspaces": (lambda w: None, lambda w: StartRequest(provider="pi", mode="isolated",
                                                          workspaces=(str(w.wss[0]), str(w.wss[1])))),
    "env name": (lambda w: None, StartRequest(provider="pi", mode="isolated", env_name="other")),
    "capabilities": (lambda w: None, StartRequest(provider="pi", mode="isolated",
                                                  capabilities=("git-metadata-write",))),
    "network": (lambda w: None, StartRequest(provider="pi", mode="isolated", network="none")),
    "allowed domains": (lambda w: None, StartRequest(provider="pi", mode="isolated", network="proxy",
                                                     allow_domains=("api.example.com",))),
    "the MAC key": (lambda w: (w.paths.state_dir / policycache.DIR / policycache.KEY_FILE).write_bytes(b"k" * 32), BASE),
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_changing_any_input_misses(world, name):
    change, after = CHANGES[name]
    if name == "allowed domains":
        world.write_config('[network]\nisolated = "proxy"\n')
    hit_then_same(world, BASE)
    change(world)
    after = after(world) if callable(after) else after
    got = world.warm(after)
    assert not got.hit, f"{name}: a changed input must miss"
    same(got, world.full(after))
    assert world.warm(after).hit  # and the new resolution is the one remembered


def test_a_changed_user_limit_misses(world):
    """A jail's share of the user's per-user limits is in the policy (docs/resources.md): a start
    under another limit (here RLIMIT_SIGPENDING, halved) resolves it again."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)
    if soft == resource.RLIM_INFINITY or soft < 8:
        pytest.skip("RLIMIT_SIGPENDING is unlimited (or tiny) here")
    hit_then_same(world, BASE)
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (soft // 2, hard))
    try:
        got = world.warm(BASE)
        assert not got.hit, "a changed user limit must miss"
        same(got, world.full(BASE))
        assert got.policy.to_data()["limits"]["sigpending"] == int(soft // 2 * 0.25)
    finally:
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (soft, hard))


def test_a_revoked_approval_misses_and_refuses(world):
    opts = StartRequest(provider="codex", mode="verified")
    world.approve(opts)
    hit_then_same(world, opts)
    assert world.ctx().store.revoke("codex")
    with pytest.raises(TmuxjailError) as got:
        world.warm(opts)
    assert type(got.value).__name__ == "NotApproved"


def test_a_symlink_change_of_a_declared_path_misses(world):
    """verified mode binds the profile's host paths by their realpath: a link moved since is new."""
    from tmuxjail import profiles

    opts = StartRequest(provider="codex", mode="verified", capabilities=tuple(profiles.load("codex").optional[:1]))
    declared = plan.declared_paths(profiles.load("codex"), str(world.home))
    target = Path(declared[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    (world.home / "real-a").mkdir()
    target.symlink_to(world.home / "real-a")
    world.approve(opts)
    hit_then_same(world, opts)
    target.unlink()
    (world.home / "real-b").mkdir()
    target.symlink_to(world.home / "real-b")
    world.approve(opts)
    got = world.warm(opts)
    assert not got.hit
    same(got, world.full(opts))


def test_what_never_uses_the_cache(world):
    """--restrict, a discovery candidate and a trace resolve in full, and store nothing."""
    rules = world.root / "r.toml"
    rules.write_text('allowed_modes = ["isolated"]\n')
    from tmuxjail import restrict

    for opts in (StartRequest(provider="pi", mode="isolated", restriction=restrict.from_file(str(rules))),
                 StartRequest(provider="pi", mode="isolated", trace=str(world.root / "t"))):
        assert not warm.cacheable(opts)
        assert not world.warm(opts).hit and not world.warm(opts).hit
    assert world.entries() == []


# -- a bad entry is a miss, never an error and never another policy ------------------------------

def _only_entry(w: World) -> Path:
    [entry] = w.entries()
    return entry


def _widen(w: World, entry: Path) -> None:
    """The attack the MAC exists for: a wider policy, same fingerprint scheme, the old MAC."""
    mac, body = entry.read_bytes().split(b"\n", 1)
    data = json.loads(body)
    data["policy"]["hidden"] = []
    data["policy"]["env_inherit"] = True
    data["fingerprint"] = canon.fingerprint(data["policy"])
    entry.write_bytes(mac + b"\n" + json.dumps(data, separators=(",", ":")).encode())


def _resign_other_key(w: World, entry: Path) -> None:
    import hmac

    body = entry.read_bytes().split(b"\n", 1)[1]
    entry.write_bytes(hmac.new(b"x" * 32, body, "sha256").hexdigest().encode() + b"\n" + body)


def _symlinked(w: World, entry: Path) -> None:
    copy = w.root / "elsewhere.json"
    shutil.copy(entry, copy)
    entry.unlink()
    entry.symlink_to(copy)


def _other_keys_entry(w: World, entry: Path) -> None:
    """A valid entry of another request, renamed into this one's place."""
    other = w.warm(StartRequest(provider="codex", mode="isolated"))
    assert not other.hit
    newest = max((p for p in w.entries() if p != entry), key=lambda p: p.stat().st_mtime_ns)
    os.replace(newest, entry)


def _foreign(w: World, entry: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("making a file another user's needs root")
    os.chown(entry, 65534, 65534)


def _dir_foreign(w: World, entry: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("making a directory another user's needs root")
    os.chown(entry.parent, 65534, 65534)


BAD = {
    "truncated": lambda w, e: e.write_bytes(e.read_bytes()[: len(e.read_bytes()) // 2]),
    "empty": lambda w, e: e.write_bytes(b""),
    "corrupt": lambda w, e: e.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(3000))),
    "not JSON under a valid MAC": None,  # filled below: needs the key
    "tampered, old MAC": _widen,
    "signed with another key": _resign_other_key,
    "a symlink to a valid copy": _symlinked,
    "another request's valid entry": _other_keys_entry,
    "readable by others": lambda w, e: e.chmod(0o644),
    "a directory": lambda w, e: e.unlink() or e.mkdir(),
    "a fifo": lambda w, e: e.unlink() or os.mkfifo(e, 0o600),
    "another user's": _foreign,
    "cache dir another user's": _dir_foreign,
    "cache dir open to others": lambda w, e: e.parent.chmod(0o755),
    "MAC key missing": lambda w, e: (e.parent / policycache.KEY_FILE).unlink(),
    "MAC key a symlink": lambda w, e: (e.parent / policycache.KEY_FILE).rename(w.root / "k") or
    (e.parent / policycache.KEY_FILE).symlink_to(w.root / "k"),
}


def _valid_mac_garbage(w: World, entry: Path) -> None:
    import hmac

    key = (entry.parent / policycache.KEY_FILE).read_bytes()
    body = b'{"key": "' + entry.stem.encode() + b'", "policy": [1, 2'
    entry.write_bytes(hmac.new(key, body, "sha256").hexdigest().encode() + b"\n" + body)


BAD["not JSON under a valid MAC"] = _valid_mac_garbage


def _valid_mac_odd_record(w: World, entry: Path) -> None:
    """Well-formed JSON of another shape under a valid MAC (a bug, or an older tmuxjail's entry):
    the host facts a list, not a table."""
    import hmac

    key = (entry.parent / policycache.KEY_FILE).read_bytes()
    data = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    data["record"] = [data["record"]]
    body = json.dumps(data, separators=(",", ":")).encode()
    entry.write_bytes(hmac.new(key, body, "sha256").hexdigest().encode() + b"\n" + body)


BAD["another shape under a valid MAC"] = _valid_mac_odd_record


def _valid_mac_policy(change):
    """A policy of another shape under a valid MAC and its own fingerprint: one this version would
    not write (an extra key), or one that breaks the policy's invariants (domains on the host's
    network). Read back, it would not be the policy the spec and the store must hold."""
    def edit(w: World, entry: Path) -> None:
        import hmac

        key = (entry.parent / policycache.KEY_FILE).read_bytes()
        data = json.loads(entry.read_bytes().split(b"\n", 1)[1])
        data["policy"] = {**data["policy"], **change}
        data["fingerprint"] = canon.fingerprint(data["policy"])
        body = json.dumps(data, separators=(",", ":")).encode()
        entry.write_bytes(hmac.new(key, body, "sha256").hexdigest().encode() + b"\n" + body)
    return edit


BAD["a policy with a key this version does not write"] = _valid_mac_policy({"later_field": [1]})
BAD["a policy with domains on the host's network"] = _valid_mac_policy({"network": "host", "allow_domains": ["*"]})


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_entry_is_a_miss_and_the_same_policy(world, name):
    hit_then_same(world, BASE)
    entry = _only_entry(world)
    BAD[name](world, entry)
    got = world.warm(BASE)  # never raises
    assert not got.hit, name
    same(got, world.full(BASE))
    if stat.S_ISREG(os.lstat(entry).st_mode) and name != "another user's" and "dir" not in name:
        assert world.warm(BASE).hit  # the miss wrote a good entry back in its place


def test_entries_are_private_and_written_whole(world):
    hit_then_same(world, BASE)
    d = world.paths.state_dir / policycache.DIR
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in d.iterdir():
        assert stat.S_IMODE(f.lstat().st_mode) == 0o600 and f.lstat().st_uid == os.getuid()
    assert not [f for f in d.iterdir() if f.name.endswith(".tmp")]


def test_the_key_has_every_variable_the_resolution_reads():
    """The environment reaches the policy only through config.load's TMUXJAIL_* variables (in the
    key), PATH and HOME/XDG_* (in the key through the paths): a new variable read anywhere in
    the resolution must join warm.ENV_READ, or a changed value would hit a stale policy."""
    import re

    import tmuxjail
    from tmuxjail import config

    read = set(re.findall(r'environ(?:\.get)?\(\s*"([A-Z_]+)"|environ\[\s*"([A-Z_]+)"\]|getenv\(\s*"([A-Z_]+)"',
                          Path(config.__file__).read_text()))
    assert {n for t in read for n in t if n} == set(warm.ENV_READ)
    root = Path(tmuxjail.__file__).parent
    resolution = ["plan.py", "policy.py", "profiles.py", "identity.py", "host.py", "net/policy.py", "net/check.py",
                  "restrict.py", "request.py", "approvals.py", "model.py", "effective.py", "paths.py",
                  "sandbox/bwrap.py", "sandbox/landlock.py", "sandbox/pids.py", "sandbox/seccomp.py",
                  *(f"adapters/{p.name}" for p in (root / "adapters").glob("*.py"))]
    for name in resolution:
        src = (root / name).read_text()
        assert not re.search(r"os\.environ|getenv\(", src), f"{name} reads the environment: add it to the key"
FRESH = """
import json, os, sys
from tmuxjail import plan, warm
from tmuxjail.context import Context
from tmuxjail.request import StartRequest
from tmuxjail.tmux import Tmux
ctx = Context(Tmux(socket_name="tj-warm-unused", env=dict(os.environ)))
opts = StartRequest.build(sys.argv[1], "pi", mode="isolated")
got = warm.resolve(ctx, opts)
p = plan.resolve(ctx, opts)
print(json.dumps({"hit": got.hit, "fingerprint": got.fingerprint, "full": p.fingerprint}))
"""


def test_a_process_older_than_the_install_never_fills_the_cache(world, monkeypatch):
    """An orchestrator imports tmuxjail once (tmuxjail.api) and starts jails for hours. After an
    upgrade it still runs the code and holds the profiles it loaded before (profiles.load is
    cached per process): its resolution is not what a fresh start makes, and must not be
    remembered under the new install's key, where every later start would take it."""
    import subprocess
    import sys

    from tmuxjail import profiles

    hit_then_same(world, BASE)
    held = profiles.load("pi")  # what this process loaded before the upgrade (here: a stale copy)
    monkeypatch.setattr(profiles, "load", lambda provider: held.model_copy(update={"profile_version": "0-old"}))
    _touch(_installed("tmuxjail.profile_data", "pi.toml"))  # the upgrade: the install changes on disk
    assert not warm.resolve(world.ctx(), world.built(BASE)).hit  # this old process starts one
    proc = subprocess.run([sys.executable, "-P", "-c", FRESH, str(world.wss[0])], capture_output=True, text=True,
                          check=True, env=dict(os.environ, **world.vars))
    fresh = json.loads(proc.stdout)
    assert fresh["fingerprint"] == fresh["full"], "a fresh start took the stale process's policy from the cache"


def test_an_mcp_start_is_warm_until_its_server_or_its_config_changes(world):
    """A start with --mcp reuses its policy while the server's command is the very file that was
    hashed; a new build (or a changed allowlist) is a miss, and the policy names the new digest."""
    import hashlib

    server = world.root / "srv" / "server"
    server.parent.mkdir()
    server.write_text("#!/bin/sh\necho one\n")
    server.chmod(0o755)
    world.write_config(f'[mcp.s]\ncommand = "{server}"\ntools = ["a"]\n')
    opts = StartRequest("codex", mode="isolated", mcp=("s",))
    first = world.warm(opts)
    assert not first.hit and first.policy.mcp[0].sha256.endswith(hashlib.sha256(server.read_bytes()).hexdigest())
    again = world.warm(opts)
    assert again.hit and again.policy == first.policy
    server.write_text("#!/bin/sh\necho two\n")  # a new build, same path
    rebuilt = world.warm(opts)
    assert not rebuilt.hit
    assert rebuilt.policy.mcp[0].sha256.endswith(hashlib.sha256(server.read_bytes()).hexdigest())
    world.write_config(f'[mcp.s]\ncommand = "{server}"\ntools = ["a", "b"]\n')
    narrowed = world.warm(opts)
    assert not narrowed.hit and narrowed.policy.mcp[0].tools == ("a", "b")
    assert world.warm(StartRequest("codex", mode="isolated")).policy.mcp == ()
