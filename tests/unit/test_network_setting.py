"""Pure pieces of the network setting: config parsing and narrowing, policy resolution, argv."""

from __future__ import annotations

import pytest

from tmuxjail import config, identity, policy, profiles
from tmuxjail.adapters import get as adapter
from tmuxjail.effective import ExecutableIdentity
from tmuxjail.errors import NotApproved, UsageError
from tmuxjail.model import Mode
from tmuxjail.sandbox import HostLayout
from tmuxjail.sandbox.bwrap import Bwrap

HOME = "/home/u"
MODES = ("compatibility", "isolated", "verified")
LAYOUT = HostLayout(top={"/bin": "usr/bin"}, tmux_dirs=(), tmux_files=(), etc_secrets=())


def resolve(mode="isolated", network=None, ceiling="host"):
    facts = policy.Facts(
        home=HOME, uid=1000, user="u", login_shell="/bin/sh",
        own_dirs=(f"{HOME}/.config/tmuxjail", f"{HOME}/.local/state/tmuxjail", f"{HOME}/.local/share/tmuxjail"),
        config_dir=f"{HOME}/.config/tmuxjail", private_home=f"{HOME}/.local/share/tmuxjail/homes/codex/default",
        backend="bwrap",
        executable=identity.Resolved(ExecutableIdentity(path="/opt/codex/codex", sha256="sha256:" + "a" * 64),
                                     ["/opt/codex/codex"], ("/opt/codex",)),
        allowed_modes=MODES, network=ceiling,
    )
    req = policy.Request(provider="codex", mode=Mode(mode), workspaces=(f"{HOME}/src/app",), network=network)
    return policy.resolve(req, profiles.load("codex"), adapter("codex"), facts).to_data()


def test_config_network_defaults_host_in_compatibility_and_proxy_in_strict_modes():
    assert config.parse("", "c.toml").network == {"compatibility": "host", "isolated": "proxy", "verified": "proxy"}
    assert config.Config().network == config.parse("", "c.toml").network


def test_config_network_per_mode_and_the_environment_only_narrows():
    c = config.parse('[network]\nisolated = "none"\n', "c.toml")
    assert c.network == {"compatibility": "host", "isolated": "none", "verified": "proxy"}
    assert config.parse('[network]\nisolated = "none"\n', "c.toml", env_network="host").network == c.network
    assert config.parse("", "c.toml", env_network="none").network == dict.fromkeys(MODES, "none")
    # proxy lies between: it narrows host, never widens none.
    c = config.parse('[network]\nisolated = "none"\n', "c.toml", env_network="proxy")
    assert c.network == {"compatibility": "proxy", "isolated": "none", "verified": "proxy"}


@pytest.mark.parametrize("text,env,needle", [
    ('[network]\nisolated = "off"\n', None, "host, proxy or none"),
    ('[network.resolve]\n"up.test" = "localhost"\n', None, "network.resolve.up.test"),
    ('[network.resolve]\n"127.1" = "127.0.0.1"\n', None, "IPv4 address form"),
    ('[network.resolve]\n"up.test" = { address = "127.0.0.1", test_upstream = "yes" }\n', None, "test_upstream"),
    ("", "open", "TMUXJAIL_NETWORK"),
    ('[network]\nstrict = "none"\n', None, "table of mode"),
    ('network = "none"\n', None, "table of mode"),
])
def test_config_network_refuses_what_it_cannot_enforce(text, env, needle):
    with pytest.raises(UsageError) as e:
        config.parse(text, "c.toml", env_network=env)
    assert needle in e.value.message and "\n" not in e.value.message


@pytest.mark.parametrize("mode", MODES)
def test_policy_network_default_request_and_narrowing(mode):
    assert resolve(mode)["network"] == "host"
    assert resolve(mode, "none")["network"] == "none"
    assert resolve(mode, ceiling="none")["network"] == "none"
    with pytest.raises(NotApproved) as e:
        resolve(mode, "host", ceiling="none")  # a request never widens the operator's setting
    assert e.value.data["reason"] == "network"


def test_refusing_a_wider_network_names_the_config_line_that_allows_it():
    with pytest.raises(NotApproved) as e:
        resolve("isolated", "host", ceiling="proxy")
    assert e.value.data["reason"] == "network" and "the widest allowed there is proxy" in e.value.message
    assert f'`isolated = "host"` under [network] in {HOME}/.config/tmuxjail/config.toml' in (e.value.hint or "")
    # When the environment narrowed it, the config line would not help: say so instead.
    assert "unset it" in config.network_fix("isolated", "host", "c.toml", "none")
    assert "under [network]" in config.network_fix("isolated", "host", "c.toml", "host")


def test_network_change_is_the_network_reason_and_changes_the_fingerprint():
    a, b = resolve(), resolve(network="none")
    assert policy.fingerprint(a) != policy.fingerprint(b)
    assert policy.diff(a, b) == ["network"]


@pytest.mark.parametrize("mode", MODES)
def test_bwrap_unshares_the_network_only_for_none(mode):
    assert "--unshare-net" in Bwrap().wrap(resolve(mode, "none"), ["x"], LAYOUT)
    assert "--unshare-net" not in Bwrap().wrap(resolve(mode), ["x"], LAYOUT)


@pytest.mark.parametrize("mode", MODES)
def test_seatbelt_network_none_allows_no_ip_in_any_mode(mode):
    """The macOS backend enforces none too: compatibility is (allow default) plus denies, so it
    needs its own IP denies; strict modes allow IP only for host."""
    from test_seatbelt import R, allowed, denied, evaluator, make_policy

    none = evaluator(make_policy(mode, network="none"))
    denied(none, R("network-outbound", ip=True), R("network-bind", ip=True), R("network-inbound", ip=True))
    allowed(evaluator(make_policy(mode)), R("network-outbound", ip=True))


def test_config_proxy_narrows_between_none_and_host():
    assert config.parse('[network]\nisolated = "proxy"\n', "c.toml").network["isolated"] == "proxy"
    assert config.parse("", "c.toml", env_network="proxy").network == dict.fromkeys(MODES, "proxy")
    assert config.parse('[network]\nisolated = "none"\n', "c.toml", env_network="proxy").network["isolated"] == "none"


def test_config_resolve_table_is_the_config_files_only():
    c = config.parse('[network.resolve]\n"Up.Test." = { address = "127.0.0.1", test_upstream = true }\n'
                     '"mirror.example" = "::1"\n', "c.toml")
    assert c.resolve == (("mirror.example", "::1", False), ("up.test", "127.0.0.1", True))


@pytest.mark.parametrize("value,ok", [
    ("*", "*"), ("Example.COM", "example.com"), ("*.example.com", "*.example.com"), ("example.com.", "example.com"),
    ("bücher.example", "xn--bcher-kva.example"),
    ("", None), ("*example.com", None), ("a.*.example.com", None), ("127.0.0.1", None), ("2130706433", None),
    ("0x7f.1", None), ("127.1", None), ("::1", None), ("[::1]", None), ("localhost", None), ("a..b", None),
    ("-a.example", None), ("a b.example", None), ("x" * 64 + ".example", None), (None, None), ("a\nb", None),
])
def test_domain_patterns(value, ok):
    from tmuxjail.net import check as netcheck

    if ok is None:
        with pytest.raises(UsageError) as e:
            netcheck.check_pattern(value, "--allow-domain", UsageError)
        assert "\n" not in e.value.message and e.value.message.startswith("--allow-domain")
    else:
        assert netcheck.check_pattern(value) == ok


def test_policy_proxy_allow_domains_per_mode_and_fingerprint():
    iso = resolve("isolated", "proxy")
    assert iso["allow_domains"] == ["*"] and iso["network"] == "proxy"
    assert resolve("verified", "proxy")["allow_domains"] == ["api.openai.com", "auth.openai.com", "chatgpt.com"]
    host = resolve("isolated")
    assert "allow_domains" not in host and "resolve" not in host  # host/none fingerprints unchanged
    # environment too: under proxy the host's HTTPS_PROXY & co. (which codex.cli declares) stay out
    assert policy.diff(host, iso) == ["environment", "network"]
