"""Canonical JSON and fingerprints: shared by policy (which makes them) and the launcher (which
re-checks them), so it stays stdlib-only and cheap to import."""

import hashlib
import json


def canonical_json(data: object) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(data: object) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
