"""The profile's policy is hashed, not its certification record (issue 17.7): recording a newly
certified CLI version changes no fingerprint and needs no re-approval; changing what a capability
grants still changes the hash, refuses a resume and asks for a new approval."""

from __future__ import annotations

import json
import tomllib
from importlib import resources

import pytest
from test_policy import facts

from tmuxjail import approvals, policy, profiles
from tmuxjail.adapters import get as adapter
from tmuxjail.errors import UsageError
from tmuxjail.model import CertificationRecord, Mode

IDENT = {"path": "/opt/codex/codex", "sha256": "sha256:" + "a" * 64, "version": "unknown", "extra": []}
CERTIFIED = CertificationRecord(certification="certified", certified_versions=("0.171.0",),
                                evidence=("certify 2026-11-30: codex 0.171.0",))
RECERTIFIED = CertificationRecord(certification="certified", certified_versions=("0.171.0", "0.172.0"),
                                  evidence=(*CERTIFIED.evidence, "certify 2026-12-01: codex 0.172.0"))


def _shipped(name: str) -> bytes:
    return resources.files("tmuxjail.profile_data").joinpath(name).read_bytes()


def _codex(data: bytes | None = None, record: CertificationRecord | None = None):
    return profiles.parse_profile("codex.toml", data or _shipped("codex.toml"), profiles.shared_capabilities(),
                                  record)


def _verified(profile) -> dict:
    req = policy.Request(provider="codex", mode=Mode.verified, workspaces=("/home/u/src/app",))
    return policy.resolve(req, profile, adapter("codex"), facts()).to_data()


def _approval_for(profile, caps) -> dict:
    return {"id": "a1", "provider": "codex", "profile_hash": profile.hash,
            "executable": approvals.identity_key(IDENT), "capabilities": list(caps)}


def test_recording_a_certified_version_changes_no_fingerprint_and_needs_no_reapproval():
    before, after = _codex(record=CERTIFIED), _codex(record=RECERTIFIED)
    assert after.certified_versions == ("0.171.0", "0.172.0")  # the record is read...
    assert after.hash == before.hash  # ...and left out of what policies pin
    old, new = _verified(before), _verified(after)
    assert policy.fingerprint(new) == policy.fingerprint(old) and policy.diff(old, new) == []
    caps = tuple(after.baseline)
    approved = [_approval_for(before, caps)]
    assert approvals.find(approved, "codex", after.hash, IDENT, caps) is not None
    assert approvals.missing(approved, after, IDENT, caps) == []


def test_changing_a_capability_refuses_resume_and_needs_a_new_approval():
    raw = _shipped("codex.toml")
    assert b'path = "~/.codex", access = "rw"' in raw
    changed = _codex(raw.replace(b'path = "~/.codex", access = "rw"', b'path = "~/.codex2", access = "rw"'),
                     CERTIFIED)
    before = _codex(record=CERTIFIED)
    assert changed.hash != before.hash
    # (~/.codex2 is not where the adapter's command files are: they are no longer guarded)
    assert policy.diff(_verified(before), _verified(changed)) == ["profile", "capabilities", "provider-state"]
    caps = tuple(changed.baseline)
    approved = [_approval_for(before, caps)]
    assert approvals.find(approved, "codex", changed.hash, IDENT, caps) is None
    assert "the Codex CLI profile changed" in approvals.missing(approved, changed, IDENT, caps)[0]


def test_a_wider_profile_with_the_same_version_still_changes_the_hash():
    """The hash is of the content, not of profile_version: forgetting to bump it does not let a
    changed capability ride on old approvals."""
    raw = _shipped("codex.toml")
    wider = _codex(raw.replace(b'env = ["OPENAI_API_KEY"', b'env = ["AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"'))
    assert wider.profile_version == _codex().profile_version and wider.hash != _codex().hash


RECORD_IN_TOML = {"certification": '"certified"', "certified_versions": '["1.0"]', "evidence": '["x"]'}


def test_a_capabilitys_network_domains_are_policy():
    """The domains a capability may reach through the proxy are in the hash: adding one asks for a
    new approval (netpolicy's `network` lists)."""
    raw = _shipped("codex.toml")
    assert b'network = ["api.openai.com"' in raw
    wider = _codex(raw.replace(b'network = ["api.openai.com"', b'network = ["example.org", "api.openai.com"'))
    assert wider.hash != _codex().hash


@pytest.mark.parametrize("field", sorted(RECORD_IN_TOML))
def test_a_certification_field_inside_the_profile_is_refused(field):
    value = RECORD_IN_TOML[field]
    data = f"{field} = {value}\n".encode() + _shipped("codex.toml")  # top-level keys come first
    with pytest.raises(UsageError, match=r"codex\.toml: .*certified\.json"):
        _codex(data)


def test_a_generated_profile_may_carry_its_record_inline_outside_the_hash():
    """A discovery candidate writes its evidence into the TOML it generates: read as the record."""
    inline = b'certification = "uncertified"\nevidence = ["discovery d1: trace"]\n' + _shipped("codex.toml")
    cand = profiles.parse_profile("candidate d1", inline, profiles.shared_capabilities(), inline_record=True)
    assert cand.evidence == ("discovery d1: trace",) and cand.hash == _codex().hash
    with pytest.raises(UsageError, match=r"^candidate d1: certification: "):
        profiles.parse_profile("candidate d1", b'certification = "trust me"\n' + _shipped("codex.toml"),
                               profiles.shared_capabilities(), inline_record=True)


def test_shipped_records_are_read_but_not_hashed():
    for name in profiles.available():
        loaded = profiles.load(name)
        bare = profiles.parse_profile(profiles.file_name(name), _shipped(profiles.file_name(name)),
                                      profiles.shared_capabilities())
        record = json.loads(_shipped(profiles.record_name(name)))
        assert loaded.hash == bare.hash, name
        assert loaded.certification == record["certification"], name
        assert list(loaded.certified_versions) == record["certified_versions"], name
        assert not profiles.RECORD_FIELDS & set(tomllib.loads(_shipped(profiles.file_name(name)).decode())), name


def test_a_bad_certification_record_is_one_line():
    with pytest.raises(UsageError, match=r"^x\.certified\.json: not valid JSON"):
        profiles.parse_record("x.certified.json", b"{")
    with pytest.raises(UsageError, match=r"^x\.certified\.json: certification: "):
        profiles.parse_record("x.certified.json", b'{"certification": "trust me"}')
