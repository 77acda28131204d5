"""What policy resolution is for, pinned where the mutation run (issue 29) found no test that
noticed a change: which workspaces a mode takes, which host paths a verified jail is given back and
where its provider state is guarded, what compatibility leaves visible of tmuxjail's own
directories, what the fingerprint holds, and how a `workspace` refusal says what changed."""

from __future__ import annotations

import dataclasses

import pytest
from test_policy import HOME, facts, resolve

from tmuxjail import policy, profiles
from tmuxjail.adapters import get as adapter
from tmuxjail.errors import UsageError
from tmuxjail.model import Mode, PathGrant

WS = f"{HOME}/src/app"
CFG = f"{HOME}/.config/tmuxjail"


# -- which workspaces a mode takes ----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
@pytest.mark.parametrize("ws", ["src/app", f"{HOME}/src/../.ssh", f"{HOME}/src/./app", f"{HOME}//src/app"])
def test_a_workspace_that_is_relative_or_not_canonical_is_refused(mode, ws):
    """The binds, the protected .git list and the resume key all compare workspace paths as text: a
    relative or `..` path would name one directory and bind another."""
    with pytest.raises(UsageError, match="not a canonical absolute path"):
        resolve(mode, ws=(ws,))


@pytest.mark.parametrize("ws", ["/opt/proj", "/usr/src/app", "/etc", "/run/user/1000/x", "/var/run/x"])
def test_a_system_directory_is_never_a_strict_workspace_but_compatibility_may_run_there(ws):
    """A strict jail binds its workspace writable over the read-only system: /opt or /usr as a
    workspace would hand the jail the host's programs. Compatibility is the host anyway."""
    for mode in ("isolated", "verified"):
        with pytest.raises(UsageError, match="is a system directory"):
            resolve(mode, ws=(ws,))
    assert resolve("compatibility", ws=(ws,))["workspace_write"] == [ws]


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_a_workspace_inside_tmuxjails_own_directory_is_not_told_to_try_compatibility(mode):
    """Compatibility refuses a workspace inside tmuxjail's state too: the hint offers it only where
    it would work (a workspace that contains the state, e.g. `cd ~`)."""
    with pytest.raises(UsageError, match="overlaps") as inside:
        resolve(mode, ws=(f"{HOME}/.local/share/tmuxjail/homes",))
    assert "compatibility" not in inside.value.hint
    with pytest.raises(UsageError, match="overlaps"):
        resolve("compatibility", ws=(f"{HOME}/.local/share/tmuxjail/homes",))
    with pytest.raises(UsageError, match="overlaps") as around:
        resolve(mode, ws=(f"{HOME}/.local",))
    assert "--mode compatibility" in around.value.hint
    resolve("compatibility", ws=(f"{HOME}/.local",))


# -- what compatibility and strict jails see of tmuxjail's own directories ------------------------

def test_a_strict_jail_hides_every_own_directory_the_config_too():
    for mode in ("isolated", "verified"):
        pol = resolve(mode)
        assert set(pol["hidden"]) == set(facts().own_dirs), mode
        assert CFG not in pol["protected"]


@pytest.mark.parametrize("own,cfg", [
    # macOS: platformdirs puts config, state and data in one directory
    ((f"{HOME}/Library/tj",) * 3, f"{HOME}/Library/tj"),
    # the config directory holds the state ...
    ((f"{HOME}/.tj", f"{HOME}/.tj/state", f"{HOME}/.tj/data"), f"{HOME}/.tj"),
    # ... or lies inside it
    ((f"{HOME}/.tj/state/config", f"{HOME}/.tj/state", f"{HOME}/.tj/data"), f"{HOME}/.tj/state/config"),
])
def test_compatibility_hides_a_config_that_shares_a_directory_with_the_state(own, cfg):
    """A compatibility jail may read the config only where it has a directory of its own: a config
    bound read-only that holds (or sits in) the state would show the jail the other sessions'
    homes, spool and store, or undo the state's mask."""
    pol = resolve("compatibility", own_dirs=own, config_dir=cfg)
    assert cfg in pol["hidden"]
    assert cfg not in pol["protected"]
    alone = resolve("compatibility")  # the config with a directory of its own: read-only, not hidden
    assert CFG in alone["protected"] and CFG not in alone["hidden"]


# -- the host paths a verified jail is given back -------------------------------------------------

def test_a_home_link_into_the_home_is_bound_where_it_leads_and_guarded_there():
    """~/.codex as a link to ~/dotfiles/codex (a dotfiles checkout) is allowed: bound at the
    directory it really is, and the provider's command files guarded there, not at the link."""
    pol = resolve("verified", realpaths={f"{HOME}/.codex": f"{HOME}/dotfiles/codex"})
    assert pol["host_write"] == [f"{HOME}/dotfiles/codex"]
    assert f"{HOME}/dotfiles/codex/config.toml" in pol["state_guards"]
    assert not [g for g in pol["state_guards"] if g.startswith(f"{HOME}/.codex")]


def _with_grant(grant: PathGrant, provider: str = "codex"):
    prof = profiles.load(provider)
    cli = prof.capabilities[f"{provider}.cli"]
    return prof.model_copy(update={"capabilities": {
        **prof.capabilities, f"{provider}.cli": cli.model_copy(update={"paths": (*cli.paths, grant)})}})


def _verified(prof, **kw):
    req = policy.Request(provider=prof.provider, mode=Mode.verified, workspaces=(WS,))
    return policy.resolve(req, prof, adapter(prof.provider), facts(**kw)).to_data()


def test_an_absolute_grant_is_bound_and_may_lead_only_below_itself():
    """A profile may name an absolute host path: bound as it is, or where a link inside it leads,
    never where a link leads out of it (into the home, or anywhere)."""
    prof = _with_grant(PathGrant(path="/srv/models", access="ro"))
    assert "/srv/models" in _verified(prof)["host_read"]
    moved = _verified(prof, realpaths={"/srv/models": "/srv/models/v2"})
    assert "/srv/models/v2" in moved["host_read"] and "/srv/models" not in moved["host_read"]
    for out in (f"{HOME}/.ssh", "/srv", "/etc"):
        with pytest.raises(UsageError, match="outside"):
            _verified(prof, realpaths={"/srv/models": out})


@pytest.mark.parametrize("target", [f"{HOME}/.config", CFG, f"{HOME}/.local/state/tmuxjail/sessions",
                                    f"{HOME}/.local"])
def test_a_granted_path_that_leads_onto_tmuxjails_own_directories_is_refused(target):
    """A ~/.codex planted as a link to ~/.config (or into the state) would bind tmuxjail's config,
    store or other sessions' homes writable into a verified jail."""
    with pytest.raises(UsageError, match="overlaps tmuxjail's own directory"):
        resolve("verified", realpaths={f"{HOME}/.codex": target})
    prof = _with_grant(PathGrant(path=target, access="ro"))
    with pytest.raises(UsageError, match="overlaps tmuxjail's own directory"):
        _verified(prof)


# -- provider state in what is bound back writable ------------------------------------------------

def test_claudes_state_is_guarded_and_its_rewritten_config_copied_exactly():
    """Every command file of Claude's state under the writable ~/.claude and ~/.claude.json is
    guarded where it is (no other path), and the config Claude rewrites gets a private copy from
    this provider's copies directory."""
    pol = resolve("verified", provider="claude-code", state_copies="/s/copies")
    assert pol["state_guards"] == [f"{HOME}/.claude.json", f"{HOME}/.claude/agents", f"{HOME}/.claude/commands",
                                   f"{HOME}/.claude/hooks", f"{HOME}/.claude/plugins",
                                   f"{HOME}/.claude/settings.json"]
    assert pol["state_copies"] == [[f"{HOME}/.claude/.config.json", "/s/copies/.claude/.config.json"]]
    assert not pol.get("state_audit")


def test_pis_state_is_guarded_copied_and_audited_each_in_its_own_list():
    pol = resolve("verified", provider="pi", state_copies="/s/copies")
    assert pol["state_guards"] == [f"{HOME}/.pi/agent/bin", f"{HOME}/.pi/agent/extensions",
                                   f"{HOME}/.pi/agent/models.json", f"{HOME}/.pi/agent/tools"]
    assert pol["state_copies"] == [[f"{HOME}/.pi/agent/settings.json", "/s/copies/.pi/agent/settings.json"]]
    assert pol["state_audit"] == [f"{HOME}/.pi/agent/auth.json"]


def test_state_under_a_read_only_grant_needs_no_guard():
    """State that lies in a grant bound read-only is read-only already: no guard, no copy."""
    prof = profiles.load("claude-code")
    state = prof.capabilities["claude-code.state"]
    ro = tuple(g.model_copy(update={"access": "ro"}) for g in state.paths)
    prof = prof.model_copy(update={"capabilities": {
        **prof.capabilities, "claude-code.state": state.model_copy(update={"paths": ro})}})
    pol = _verified(prof, state_copies="/s/copies")
    assert pol["host_read"] == [f"{HOME}/.claude", f"{HOME}/.claude.json"] and pol["host_write"] == []
    assert not pol.get("state_guards") and not pol.get("state_copies")


# -- what the fingerprint holds -------------------------------------------------------------------

NAMES = (("up.test", "127.0.0.1", True),)


def _net(want, **kw):
    req = policy.Request(provider="codex", mode=Mode.isolated, workspaces=(WS,), network=want)
    return policy.resolve(req, profiles.load("codex"), adapter("codex"), facts(**kw)).to_data()


def test_the_configs_resolve_entries_reach_a_proxied_jail_only():
    """[network.resolve] is what a proxied jail's proxy answers for .test names: in its policy (and
    so its fingerprint) under --network proxy; on host or none it is nothing the jail uses, and a
    change to it must not refuse those sessions' resume."""
    proxied = _net("proxy", network="host", resolve=NAMES)
    assert proxied["resolve"] == [list(n) for n in NAMES]
    assert policy.fingerprint(proxied) != policy.fingerprint(_net("proxy", network="host"))
    for net in ("host", "none"):
        pol = _net(net, network="host", resolve=NAMES)
        assert not pol.get("resolve")
        assert policy.fingerprint(pol) == policy.fingerprint(_net(net, network="host"))


def test_a_request_cannot_be_changed_once_made():
    """The request is resolved once and stored beside its fingerprint: it is frozen (and so can
    key a cache), never edited after the policy was computed from it."""
    req = policy.Request(provider="codex", mode=Mode.isolated, workspaces=(WS,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.mode = Mode.compatibility  # type: ignore[misc]
    assert hash(req) == hash(policy.Request(provider="codex", mode=Mode.isolated, workspaces=(WS,)))


def test_the_facts_cannot_be_changed_once_gathered():
    """The facts are gathered once and shared by the full and the warm path: a resolution may not
    edit them for the next one (say, drop an own directory from what is hidden)."""
    f = facts()
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.own_dirs = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.home = "/"  # type: ignore[misc]


# -- what a `workspace` refusal says ---------------------------------------------------------------

def test_a_workspace_refusal_names_each_repository_and_guard_that_came_or_went():
    old = resolve(git_paths=(f"{WS}/.git", f"{WS}/old/.git"), trust_paths=(f"{WS}/.envrc", f"{WS}/.keep"))
    new = resolve(git_paths=(f"{WS}/.git", f"{WS}/vendor/lib/.git"), trust_paths=(f"{WS}/.keep", f"{WS}/.mcp.json"))
    assert policy.workspace_changes(old, new) == [
        "`.mcp.json` appeared (kept read-only in the jail)",
        "a new repository appeared at `vendor/lib/.git`",
        "`.envrc` is gone",
        "the repository at `old/.git` is gone",
    ]
    assert policy.workspace_changes(new, new) == []


def test_a_workspace_refusal_names_the_workspaces_added_and_dropped():
    old = {"workspace_write": [WS, "/w/b"], "workspace_read": ["/r/a", "/r/b"],
           "protected": ["/w/b/.git", "/elsewhere/x"]}
    new = {"workspace_write": [WS, "/w/c"], "workspace_read": ["/r/b", "/r/c/"],
           "protected": ["/elsewhere/x", "/r/c/.git", "/r/a/.git"]}
    assert policy.workspace_changes(old, new) == [
        "a new repository appeared at `.git`",  # below a workspace it had: said relative to it
        "a new repository appeared at `/r/c/.git`",  # below a new one: said whole
        "the repository at `.git` is gone",
        "workspace `/w/c` was added",
        "workspace `/w/b` was dropped",
        "read-only workspace `/r/c/` was added",
        "read-only workspace `/r/a` was dropped",
    ]
