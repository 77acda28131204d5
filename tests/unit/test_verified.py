"""Pure pieces of verified mode: approval matching and wording, restriction algebra, profile hashes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmuxjail import approvals, profiles, restrict
from tmuxjail.errors import NotApproved, UsageError
from tmuxjail.model import PathGrant

IDENT = {"path": "/opt/codex", "sha256": "sha256:" + "a" * 64, "version": "0.171.0", "extra": []}
PROFILE = profiles.load("codex")
BASE = tuple(PROFILE.baseline)


def approval(**kw):
    a = {"id": "a1", "provider": "codex", "profile_hash": PROFILE.hash,
         "executable": approvals.identity_key(IDENT), "capabilities": list(BASE)}
    a.update(kw)
    return a


def test_approval_covers_exactly_profile_executable_and_capabilities():
    a = approval()
    assert approvals.covers(a, "codex", PROFILE.hash, IDENT, BASE)
    assert not approvals.covers(a, "codex", "sha256:other", IDENT, BASE)
    assert not approvals.covers(a, "codex", PROFILE.hash, dict(IDENT, sha256="sha256:" + "b" * 64), BASE)
    assert not approvals.covers(a, "codex", PROFILE.hash, dict(IDENT, extra=[["/usr/bin/node", "x"]]), BASE)
    assert not approvals.covers(a, "codex", PROFILE.hash, IDENT, (*BASE, "aws"))
    assert not approvals.covers(a, "pi", PROFILE.hash, IDENT, BASE)


def test_missing_says_why_in_human_words():
    assert approvals.missing([], PROFILE, IDENT, BASE) == ["no approval for Codex CLI"]
    upgraded = dict(IDENT, sha256="sha256:" + "c" * 64, version="0.172.0")
    msg = approvals.missing([approval()], PROFILE, upgraded, BASE)
    assert len(msg) == 1 and "executable changed" in msg[0] and "0.172.0" in msg[0]
    msg = approvals.missing([approval()], PROFILE, IDENT, (*BASE, "aws"))
    assert msg == ["capability not approved: Access the configured AWS account (aws)"]
    assert approvals.fix_command("codex", (*BASE, "aws"), BASE) == "tmuxjail approve codex --capability aws"


def test_describe_lists_labels_then_details():
    text = "\n".join(approvals.describe(PROFILE, IDENT, BASE, details=True))
    assert "Use your existing Codex login and conversation history" in text
    assert "rw dir ~/.codex" in text and IDENT["sha256"] in text


def test_restriction_parse_errors_name_the_field():
    with pytest.raises(UsageError, match=r"r\.toml: modes: not a restriction field"):
        restrict.parse('modes = ["verified"]', "r.toml")
    with pytest.raises(UsageError, match=r"r\.toml: capabilities: must be a list"):
        restrict.parse('capabilities = "aws"', "r.toml")


KW = dict(source="r.toml", home="/home/u", allowed_modes=("isolated", "verified"), mode="verified",
          optional_caps=PROFILE.optional, requested_caps=("aws",), workspaces=("/home/u/src/app",),
          env_names=("LANG", "OPENAI_API_KEY", "TERM"), realpath=lambda p: p)


def test_restriction_narrows():
    modes, names = restrict.apply({"allowed_modes": ["verified"], "capabilities": ["aws", "git-identity"],
                                   "workspaces": ["~/src"], "env_names": ["TERM"]}, **KW)
    assert modes == ("verified",) and names == ("TERM",)


@pytest.mark.parametrize("rules,field", [
    ({"allowed_modes": ["compatibility"]}, "allowed_modes"),
    ({"capabilities": ["root-access"]}, "capabilities"),
    ({"env_names": ["LD_PRELOAD"]}, "env_names"),
])
def test_restriction_that_would_widen_is_an_error_naming_the_field(rules, field):
    with pytest.raises(UsageError, match=f"r.toml: {field}:"):
        restrict.apply(rules, **KW)


@pytest.mark.parametrize("rules", [
    {"allowed_modes": ["isolated"]}, {"capabilities": ["git-identity"]}, {"workspaces": ["/srv"]},
])
def test_request_outside_a_restriction_is_not_approved(rules):
    with pytest.raises(NotApproved):
        restrict.apply(rules, **KW)


ALL_MODES = ["compatibility", "isolated", "verified"]
NAMES = ["LANG", "OPENAI_API_KEY", "TERM", "LD_PRELOAD", "AWS_SECRET_ACCESS_KEY", "HOME"]


@settings(max_examples=300, deadline=None)
@given(
    rules=st.fixed_dictionaries({}, optional={
        "allowed_modes": st.lists(st.sampled_from(ALL_MODES), unique=True),
        "capabilities": st.lists(st.sampled_from([*PROFILE.optional, "root", "codex.cli"]), unique=True),
        "workspaces": st.lists(st.sampled_from(["/home/u", "/home/u/src", "/srv", "~/src/app", "/"]), unique=True),
        "env_names": st.lists(st.sampled_from(NAMES), unique=True),
    }),
    mode=st.sampled_from(ALL_MODES),
    base_modes=st.lists(st.sampled_from(ALL_MODES), min_size=1, unique=True),
)
def test_no_restriction_ever_widens(rules, mode, base_modes):
    kw = dict(KW, mode=mode, allowed_modes=tuple(base_modes))
    try:
        modes, names = restrict.apply(rules, **kw)
    except (UsageError, NotApproved):
        return
    assert set(modes) <= set(base_modes) and mode in modes
    assert set(names) <= set(KW["env_names"])
    assert set(KW["requested_caps"]) <= set(rules.get("capabilities", KW["requested_caps"]))


def test_profile_check_catches_content_change_without_version_bump():
    files = {"x.toml": b'profile_version = "1"\n'}
    recorded = profiles.hash_list(files)
    assert profiles.check(files, recorded) == []
    changed = {"x.toml": b'profile_version = "1"\nbaseline = []\n'}
    assert "content changed but its version (1) did not" in profiles.check(changed, recorded)[0]
    bumped = {"x.toml": b'profile_version = "2"\nbaseline = []\n'}
    assert "update hashes.json" in profiles.check(bumped, recorded)[0]
    assert "not in hashes.json" in profiles.check({**files, "y.toml": b""}, recorded)[0]


def test_shipped_profiles_match_the_hash_list():
    assert profiles.check(profiles.shipped(), profiles.recorded_hashes()) == []


def test_profile_hash_covers_the_shared_catalogue():
    """What a shared capability the profile uses grants is part of its hash; the rest of the
    catalogue is not."""
    data = b'provider="x"\nprofile_version="1"\ndisplay_name="X"\nexecutables=["x"]\nbaseline=["git-identity"]\n'
    shared = profiles.shared_capabilities()
    a = profiles.parse_profile("x.toml", data, shared)
    git = shared["git-identity"]
    wider = {**shared, "git-identity": git.model_copy(update={"paths": (*git.paths, PathGrant(path="~/.ssh"))})}
    assert profiles.parse_profile("x.toml", data, wider).hash != a.hash
    other = next(c for c in shared if c != "git-identity")
    unrelated = {**shared, other: shared[other].model_copy(update={"env": ("SOMETHING_ELSE",)})}
    assert profiles.parse_profile("x.toml", data, unrelated).hash == a.hash
