"""Pure network policy (issue 15): domain patterns, the allowlist per mode, narrowing, the
approval items an added domain needs, and the `network` reason code."""

from __future__ import annotations

import pytest

from tmuxjail import approvals, config, identity, policy, profiles
from tmuxjail.adapters import get as adapter
from tmuxjail.effective import ExecutableIdentity
from tmuxjail.errors import ConfigError, NotApproved, UsageError
from tmuxjail.model import Mode
from tmuxjail.net import policy as netpolicy

HOME = "/home/u"
MODES = ("compatibility", "isolated", "verified")


def resolve(mode="isolated", network="proxy", domains=None, caps=(), ceiling="host", allow=("*",),
            provider="codex"):
    facts = policy.Facts(
        home=HOME, uid=1000, user="u", login_shell="/bin/sh",
        own_dirs=(f"{HOME}/.config/tmuxjail", f"{HOME}/.local/state/tmuxjail", f"{HOME}/.local/share/tmuxjail"),
        config_dir=f"{HOME}/.config/tmuxjail", private_home=f"{HOME}/.local/share/tmuxjail/homes/x/default",
        backend="bwrap",
        executable=identity.Resolved(ExecutableIdentity(path="/opt/x/x", sha256="sha256:" + "a" * 64),
                                     ["/opt/x/x"], ("/opt/x",)),
        allowed_modes=MODES, network=ceiling, allow_ceiling=tuple(allow),
    )
    req = policy.Request(provider=provider, mode=Mode(mode), workspaces=(f"{HOME}/src/app",), network=network,
                         capabilities=tuple(caps), allow_domains=None if domains is None else tuple(domains))
    return policy.resolve(req, profiles.load(provider), adapter(provider), facts).to_data()


# -- patterns --------------------------------------------------------------------------------

@pytest.mark.parametrize("good,norm", [("*", "*"), ("Example.COM", "example.com"), ("*.example.com", "*.example.com"),
                                       ("a-b.example.co.uk.", "a-b.example.co.uk"), ("xn--bcher-kva.de", "xn--bcher-kva.de")])
def test_check_pattern_accepts_and_normalises(good, norm):
    assert netpolicy.check_pattern(good) == norm


@pytest.mark.parametrize("bad", ["", "*.", "*.*", "a.*.com", "*example.com", "127.0.0.1", "1.0x1", "0x7f.1",
                                 "[::1]", "::1", "localhost", "db.localhost", "exa mple.com", "-a.com", "a-.com",
                                 "a..com", "http://a.com", "a.com:443", "a.com/x", 5, None])
def test_check_pattern_refuses_addresses_and_junk_in_one_line(bad):
    with pytest.raises(UsageError) as e:
        netpolicy.check_pattern(bad)
    assert e.value.message.startswith("--allow-domain") and "\n" not in e.value.message


@pytest.mark.parametrize("wide,narrow,expect", [
    ("*", "a.com", True), ("*", "*.a.com", True), ("a.com", "*", False),
    ("a.com", "a.com", True), ("*.a.com", "a.com", False), ("*.a.com", "x.a.com", True),
    ("*.a.com", "*.x.a.com", True), ("*.a.com", "xa.com", False), ("x.a.com", "*.a.com", False),
    ("*.x.a.com", "*.a.com", False), ("*.a.com", "evil-a.com", False),
])
def test_covers(wide, narrow, expect):
    assert netpolicy.covers(wide, narrow) is expect


def test_intersect_and_normalize():
    assert netpolicy.intersect("*", "pypi.org") == "pypi.org"
    assert netpolicy.intersect("*.github.com", "api.github.com") == "api.github.com"
    assert netpolicy.intersect("pypi.org", "github.com") is None
    assert netpolicy.normalize(["b.com", "*.a.com", "x.a.com", "b.com"]) == ("*.a.com", "b.com")
    assert netpolicy.normalize(["*", "a.com"]) == ("*",)


# -- defaults and narrowing per mode ----------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("network", ["host", "none"])
def test_no_allowlist_without_the_proxy(mode, network):
    assert "allow_domains" not in resolve(mode, network)  # absent: host/none fingerprints stay
    with pytest.raises(UsageError) as e:
        resolve(mode, network, domains=["pypi.org"])
    assert "--network proxy" in e.value.message


def test_isolated_proxy_allows_every_public_destination_by_default():
    assert resolve("isolated")["allow_domains"] == ["*"]
    assert resolve("compatibility")["allow_domains"] == ["*"]


def test_isolated_allow_domain_replaces_the_star_with_the_list():
    pol = resolve("isolated", domains=["pypi.org", "files.pythonhosted.org", "PyPI.org"])
    assert pol["allow_domains"] == ["files.pythonhosted.org", "pypi.org"]


def test_verified_allows_exactly_the_profiles_domains_plus_approved_capabilities():
    prof = profiles.load("codex")
    declared = netpolicy.declared(prof, prof.baseline)
    assert resolve("verified")["allow_domains"] == list(declared)
    assert "*" not in declared and "api.openai.com" in declared
    with_gh = resolve("verified", caps=["github"])["allow_domains"]
    assert set(with_gh) == {*declared, *prof.capabilities["github"].network}
    added = resolve("verified", domains=["pypi.org"])["allow_domains"]
    assert set(added) == {*declared, "pypi.org"}


def test_the_operator_ceiling_cuts_every_list_and_refuses_a_request_outside_it():
    assert resolve("isolated", allow=["pypi.org", "*.github.com"])["allow_domains"] == ["*.github.com", "pypi.org"]
    assert resolve("isolated", domains=["api.github.com"], allow=["*.github.com"])["allow_domains"] == ["api.github.com"]
    # verified: the profile's domains outside the ceiling are dropped, not added
    assert resolve("verified", allow=["api.openai.com", "pypi.org"])["allow_domains"] == ["api.openai.com"]
    with pytest.raises(NotApproved) as e:
        resolve("isolated", domains=["evil.example"], allow=["pypi.org"])
    assert e.value.data["reason"] == "network" and "outside the operator's allow list" in e.value.message
    with pytest.raises(NotApproved):
        resolve("isolated", domains=["*"], allow=["pypi.org"])  # * is not narrower than the ceiling


@pytest.mark.parametrize("want,ceiling,ok", [("proxy", "host", True), ("none", "proxy", True),
                                              ("host", "proxy", False), ("proxy", "none", False)])
def test_network_order_none_proxy_host(want, ceiling, ok):
    if ok:
        assert resolve(network=want, ceiling=ceiling)["network"] == want
    else:
        with pytest.raises(NotApproved) as e:
            resolve(network=want, ceiling=ceiling)
        assert e.value.data["reason"] == "network"


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_proxy_mode_never_passes_the_hosts_proxy_variables(mode):
    """The profiles declare HTTPS_PROXY and friends (host and none keep passing them); under the
    proxy the jail's own values are the only ones."""
    assert "HTTPS_PROXY" in resolve(mode, "host")["env_names"]
    names = resolve(mode)["env_names"]
    assert not set(names) & netpolicy.PROXY_ENV, names


# -- reason codes -----------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [
    (dict(), dict(domains=["pypi.org"])),                       # a changed --allow-domain
    (dict(domains=["pypi.org"]), dict(domains=["a.pypi.org"])),
    (dict(network="host"), dict()),                             # a changed mode default
    (dict(allow=["*"]), dict(allow=["pypi.org"])),              # a changed config list
])
def test_a_changed_allowlist_or_network_is_the_network_reason(a, b):
    x, y = resolve(**a), resolve(**b)
    assert policy.fingerprint(x) != policy.fingerprint(y)
    # host -> proxy also stops passing the host's proxy variables (environment)
    assert policy.diff(x, y) == (["environment", "network"] if a.get("network") == "host" else ["network"])


def test_a_changed_profile_domain_list_is_profile_and_network():
    x = resolve("verified")
    y = dict(x, allow_domains=[*x["allow_domains"], "new.openai.com"], profile_hash="sha256:other")
    assert policy.diff(x, y) == ["profile", "network"]


# -- approvals --------------------------------------------------------------------------------

def test_added_domains_are_approval_items_and_declared_ones_are_not():
    prof = profiles.load("codex")
    pol = resolve("verified", caps=["github"], domains=["pypi.org", "api.github.com", "api.openai.com"])
    items = netpolicy.approval_items(prof, pol)
    assert items == (*pol["capabilities"], "domain:pypi.org")
    assert approvals.fix_command("codex", items, prof.baseline) == \
        "tmuxjail approve codex --capability github --allow-domain pypi.org"
    ident = pol["executable"]
    old = {"provider": "codex", "profile_hash": prof.hash, "executable": approvals.identity_key(ident),
           "capabilities": [*pol["capabilities"]]}
    assert not approvals.covers(old, "codex", prof.hash, ident, items)
    assert approvals.missing([old], prof, ident, items) == ["capability not approved: Reach pypi.org through the proxy (domain:pypi.org)"]
    assert approvals.covers(dict(old, capabilities=[*old["capabilities"], "domain:pypi.org"]), "codex", prof.hash, ident, items)


# -- config -----------------------------------------------------------------------------------

def test_config_allow_domains_per_mode():
    c = config.parse('[network]\nisolated = "proxy"\n[network.allow_domains]\nisolated = ["PyPI.org", "*.github.com"]\n',
                     "c.toml")
    assert c.network["isolated"] == "proxy"
    assert c.allow_domains == {"compatibility": ("*",), "isolated": ("pypi.org", "*.github.com"), "verified": ("*",)}


@pytest.mark.parametrize("text,needle", [
    ('[network.allow_domains]\nisolated = "pypi.org"\n', "must be a list"),
    ('[network.allow_domains]\nstrict = ["pypi.org"]\n', "table of mode"),
    ('[network.allow_domains]\nisolated = ["127.0.0.1"]\n', "IPv4 address form"),
])
def test_config_allow_domains_errors_are_one_line(text, needle):
    with pytest.raises(ConfigError) as e:
        config.parse(text, "c.toml")
    assert needle in e.value.message and "\n" not in e.value.message


def test_every_shipped_profile_declares_valid_domains():
    for name in profiles.available():
        prof = profiles.load(name)
        for cid in prof.baseline:
            for d in prof.capabilities[cid].network:
                assert netpolicy.check_pattern(d) == d and d != "*", (name, cid, d)
    assert netpolicy.declared(profiles.load("shell"), profiles.load("shell").baseline) == ()


def test_cursor_is_told_to_use_the_proxy_variables_and_the_pinned_clis_need_nothing():
    assert dict(map(tuple, resolve("isolated", provider="cursor")["env_set"]))["NODE_USE_ENV_PROXY"] == "1"
    assert "NODE_USE_ENV_PROXY" not in dict(map(tuple, resolve("isolated", "host", provider="cursor")["env_set"]))
    for provider in ("codex", "claude-code", "pi"):
        assert adapter(provider).proxy_env == ()
