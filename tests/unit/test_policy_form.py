"""The policy's JSON form is what every stored session's fingerprint was computed from: the one
policy type must give exactly the form the pydantic model gave (same keys, order, empties
dropped, nested shapes), or every existing session would refuse its resume. The golden
fingerprints below were computed before the policy became plain data."""

from __future__ import annotations

import json

import pytest
from test_policy import HOME, USER_LIMITS, facts

from tmuxjail import identity, policy, profiles
from tmuxjail.adapters import get as adapter
from tmuxjail.effective import ExecutableIdentity, McpServer, Policy
from tmuxjail.registry import Mode

WS = (f"{HOME}/src/app", f"{HOME}/src/lib")
NAMES = (("up.test", "127.0.0.1", True),)
CLAUDE = identity.Resolved(
    ExecutableIdentity(path="/opt/claude/cli.js", sha256="sha256:" + "c" * 64, version="2.0.1",
                       extra=(("/usr/bin/node", "sha256:" + "d" * 64),)),
    ["/usr/bin/node", "/opt/claude/cli.js"], ("/opt/claude",))

CASES = {
    "compatibility-host": (dict(provider="codex", mode="compatibility"),
                           dict(own_install=("/usr/lib/python3/tmuxjail",))),
    "isolated-none": (dict(provider="codex", mode="isolated", network="none"),
                      dict(git_paths=(f"{HOME}/src/app/.git",), user_limits=USER_LIMITS)),
    "isolated-proxy": (dict(provider="codex", mode="isolated", network="proxy", allow_domains=("api.openai.test",)),
                       dict(network="proxy", resolve=NAMES, allow_ceiling=("*",), limits={"nproc": 64})),
    "verified-claude-copies": (dict(provider="claude-code", mode="verified"),
                               dict(state_copies="/s/copies", user_limits=USER_LIMITS, executable=CLAUDE)),
    "verified-pi-proxy-audit": (dict(provider="pi", mode="verified", network="proxy"),
                                dict(network="proxy", state_copies="/s/copies", resolve=NAMES)),
    "verified-codex-git-write": (dict(provider="codex", mode="verified", capabilities=("git-metadata-write",)),
                                 dict(trust_paths=(f"{HOME}/src/app/.envrc",))),
}

GOLDEN = {
    "compatibility-host": "sha256:252eca0ecdf2a9fa46b89df654ed5d86d8f3ed6352ef471abb747187e784b8e0",
    "isolated-none": "sha256:30c3f397554bc62e4601b46dd3dee28ce65cb2da83cd222e54d9299aa519b292",
    "isolated-proxy": "sha256:764da33829c03c4b5cc50f35759d6a0cb5a3e502faefb915e06176efc41d166a",
    "verified-claude-copies": "sha256:b7c1cc9a382647fc3e7c45d5048a91173bfbf3204d41e62815637629a45aa8fe",
    "verified-codex-git-write": "sha256:2fd30a67ce96b98b791095cc09da1d45f9ffb2270b37b96c427d203e6239af5a",
    "verified-pi-proxy-audit": "sha256:bad9c17abd0c78d9143dbc5697bf9080fa3601fc35437115fe6dfc12cadc2f6d",
}


def _resolve(case: str):
    req_kw, facts_kw = CASES[case]
    req = policy.Request(workspaces=WS, **{**req_kw, "mode": Mode(req_kw["mode"])})
    return policy.resolve(req, profiles.load(req.provider), adapter(req.provider), facts(**facts_kw))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_json_form_keeps_every_stored_sessions_fingerprint(case):
    assert policy.fingerprint(_resolve(case)) == GOLDEN[case]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_stored_form_reads_back_as_the_same_policy(case):
    """The warm start and resume read the stored JSON back: the same policy, the same JSON form."""
    pol = _resolve(case)
    stored = json.loads(json.dumps(pol.to_data(), sort_keys=True))
    assert Policy.from_data(stored) == pol
    assert Policy.from_data(stored).to_data() == stored == pol.to_data()


def test_the_json_form_drops_only_the_empty_late_fields():
    data = _resolve("compatibility-host").to_data()
    assert list(data)[:3] == ["schema_version", "mode", "provider"] and data["private_home"] is None
    assert not set(data) & {"allow_domains", "resolve", "state_guards", "state_copies", "state_audit"}
    assert data["executable"] == {"path": "/opt/codex/codex", "sha256": "sha256:" + "a" * 64, "version": "unknown",
                                  "extra": []}


def test_a_policy_is_plain_frozen_data():
    pol = _resolve("isolated-proxy")
    with pytest.raises(AttributeError):
        pol.mode = Mode.compatibility  # type: ignore[misc]
    assert hash(pol) == hash(_resolve("isolated-proxy"))


@pytest.mark.parametrize("change,error", [
    pytest.param(dict(network="host"), "apply to network proxy only", id="domains-on-host"),
    pytest.param(dict(network="none", allow_domains=()), "apply to network proxy only", id="resolve-on-none"),
    pytest.param(dict(allow_domains=("not a pattern",)), "allow_domains", id="bad-pattern"),
    pytest.param(dict(network="everywhere"), "must be host, none or proxy", id="unknown-network"),
])
def test_a_policy_whose_invariants_fail_is_never_built(change, error):
    """Checked when built, by the resolver and from stored JSON alike (the warm path's read)."""
    data = {**_resolve("isolated-proxy").to_data(), **change}
    with pytest.raises(ValueError, match=error):
        Policy.from_data(data)


def test_a_host_mcp_server_keeps_the_form_it_had_before_run_jail():
    """A server of run = "host" is stored without `run` (as before run = "jail" existed, so its
    sessions resume); one in the jail says so; both read back as themselves."""
    pol = _resolve("isolated-none")._replace(
        mcp=(McpServer("gh", "/opt/gh", "sha256:x"), McpServer("l", "/opt/l", "sha256:y", run="jail")),
        mcp_stub="/usr/bin/python3")
    data = pol.to_data()
    assert "run" not in data["mcp"][0] and data["mcp"][1]["run"] == "jail"
    assert Policy.from_data(json.loads(json.dumps(data))) == pol
    with pytest.raises(ValueError, match="no env, env_file or tools"):
        Policy.from_data({**data, "mcp": [{**data["mcp"][1], "tools": ["x"]}]})
