"""Pure network policy (issue 15): which network a jail gets, and which domains its proxy lets
it reach. No I/O. The proxy (netproxy) enforces whatever `allow_domains` says; this computes it.

Patterns: "*" is every public destination, "example.com" that name only, "*.example.com" its
subdomains only (not example.com itself).

- compatibility: host. isolated: proxy, allowing "*". verified: proxy, allowing exactly the
  domains of the profile's baseline capabilities plus those of the approved optional ones.
- --allow-domain in isolated (and compatibility with --network proxy) REPLACES "*" with the list:
  it narrows. In verified it ADDS to the profile's list: a widening, so each added domain is an
  approval item ("domain:PATTERN") that `tmuxjail approve PROVIDER --allow-domain PATTERN` grants.
- The operator config's [network.allow_domains] MODE = [...] is a ceiling: whatever a session
  gets is cut down to it; a request outside it is refused (exit 4), never widened."""

from __future__ import annotations

from ..errors import NotApproved, UsageError
from .check import check_pattern as check

ANY = "*"
DOMAIN_ITEM = "domain:"  # prefix of an approval item that grants one extra domain (verified)
# Variables that point a client at a proxy. Under `proxy` the jail's own values are the only ones
# (the mechanism sets them); the host's are never passed in, in any spelling.
PROXY_ENV = frozenset({
    "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
    "NO_PROXY", "no_proxy", "FTP_PROXY", "ftp_proxy",
})

def check_pattern(pattern: object, where: str = "--allow-domain", error: type[UsageError] = UsageError) -> str:
    """A domain pattern, normalised, or a one-line `error` (netcheck's rules: addresses in any
    form and localhost are never a pattern)."""
    return check(pattern, where, error)


def covers(wide: str, narrow: str) -> bool:
    """Every name `narrow` matches is matched by `wide`."""
    if wide in (ANY, narrow):
        return True
    if narrow == ANY or not wide.startswith("*."):
        return False
    return narrow.endswith(wide[1:])  # "*.a.com" covers "x.a.com" and "*.x.a.com"


def intersect(a: str, b: str) -> str | None:
    """The names both patterns match, as one pattern (for these three forms it is always one of
    them), or None."""
    if covers(a, b):
        return b
    if covers(b, a):
        return a
    return None


def normalize(patterns) -> tuple[str, ...]:
    """Sorted, without duplicates or patterns another one already covers."""
    ps = set(patterns)
    return tuple(sorted(p for p in ps if not any(q != p and covers(q, p) for q in ps)))


def declared(profile, caps) -> tuple[str, ...]:
    """The domains the capabilities declare (the profile's baseline ones and approved optional)."""
    return normalize(d for cid in caps for d in profile.capabilities[cid].network)


def allowlist(mode: str, network: str, requested: tuple[str, ...] | None, profile_domains: tuple[str, ...],
              ceiling: tuple[str, ...] = (ANY,)) -> tuple[str, ...]:
    """The domains a proxied jail may reach; () unless the network is proxy."""
    asked = tuple(check_pattern(p) for p in requested or ())
    if network != "proxy":
        if asked:
            raise UsageError(f"--allow-domain applies to --network proxy only (this session's network is {network})",
                             hint="add --network proxy")
        return ()
    outside = [p for p in asked if not any(covers(c, p) for c in ceiling)]
    if outside:
        raise NotApproved(
            f"domain {outside[0]} is outside the operator's allow list for {mode} mode",
            hint=f"the config's [network.allow_domains] {mode} allows: {', '.join(ceiling) or 'nothing'}",
            data={"reason": "network"},
        )
    want = (*profile_domains, *asked) if mode == "verified" else (asked or (ANY,))
    return normalize(x for p in want for c in ceiling if (x := intersect(p, c)) is not None)


def extra_domains(allow: tuple[str, ...], profile_domains: tuple[str, ...]) -> tuple[str, ...]:
    """The allowed domains no capability declares: in verified mode each needs its own approval."""
    return tuple(d for d in allow if not any(covers(p, d) for p in profile_domains))


def approval_items(profile, policy: dict) -> tuple[str, ...]:
    """What an approval must cover for this policy: its capabilities, plus one `domain:PATTERN`
    per domain added beyond what they declare (verified mode)."""
    caps = tuple(policy["capabilities"])
    extra = extra_domains(tuple(policy.get("allow_domains", ())), declared(profile, caps))
    return (*caps, *(DOMAIN_ITEM + d for d in extra), *(mcp_item(s["name"], s["sha256"]) for s in policy.get("mcp", ())),
            *([CREDENTIALS_ITEM] if policy.get("credentials") else []))


CREDENTIALS_ITEM = "credentials"  # the login `tmuxjail login` kept, given to the session (verified mode)


MCP_ITEM = "mcp:"  # an attached MCP server, bound to its executable's digest (verified mode)


def mcp_item(name: str, sha256: str) -> str:
    return f"{MCP_ITEM}{name}@{sha256}"


def is_domain_item(item: str) -> bool:
    return item.startswith(DOMAIN_ITEM)


def strip_proxy_env(names) -> tuple[str, ...]:
    return tuple(n for n in names if n not in PROXY_ENV)
