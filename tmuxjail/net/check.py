"""Pure checks of the egress proxy (issue 15): domain patterns, destination names, and the address
ranges no jail may reach. Stdlib only: the proxy runs in the launcher's process tree.

Patterns (a session's allow_domains): "*" is every public destination; "example.com" is exactly
that name; "*.example.com" is any name below it, not the apex. Lower case, IDNA ascii."""

from __future__ import annotations

import ipaddress
import re

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_NUMERIC = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")  # what inet_aton would read as a number

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _ascii(value: str) -> str:
    try:
        return value.encode("idna").decode("ascii").lower() if not value.isascii() else value.lower()
    except UnicodeError:
        raise ValueError("not a valid internationalised name") from None


def check_name(value: object) -> str:
    """A DNS name (no wildcard), normalised; ValueError with a one-line reason otherwise. Literal
    addresses in any form (1.2.3.4, 2130706433, 0x7f.1, 127.1, ::1) are not names."""
    if not isinstance(value, str) or not value or len(value) > 253 or not value.isprintable():
        raise ValueError("must be a DNS name")
    name = _ascii(value.strip().rstrip(".") if value.strip() != "." else "")
    if ":" in name or name.startswith("["):
        raise ValueError("is an IPv6 address, not a name")
    labels = name.split(".")
    if not name or not all(_LABEL.match(label) for label in labels):
        raise ValueError("must be a DNS name (letters, digits, '-', dots)")
    if _NUMERIC.match(labels[-1]):
        # WHATWG and inet_aton read a numeric last label as an IPv4 address (127.1, 0x7f.1, 2130706433).
        raise ValueError("is an IPv4 address form, not a name")
    return name


def check_pattern(value: object, where: str = "domain pattern", error: type[Exception] = ValueError) -> str:
    """A domain pattern, normalised; `error` with a one-line message otherwise."""
    if value == "*":
        return "*"
    text = value if isinstance(value, str) else ""
    wild = text.startswith("*.")
    try:
        name = check_name(text[2:] if wild else text)
    except ValueError as exc:
        raise error(f"{where}: {value!r} {exc}; use a name such as example.com, *.example.com or *") from None
    if "*" in name:
        raise error(f"{where}: {value!r}: '*' only as the whole pattern or as its first label ('*.example.com')")
    if name == "localhost" or name.endswith(".localhost"):
        raise error(f"{where}: {value!r}: localhost is never reachable through the proxy")
    return f"*.{name}" if wild else name


def check_patterns(values, where: str = "domain pattern", error: type[Exception] = ValueError) -> tuple[str, ...]:
    """Normalised, de-duplicated and sorted: the order of a list must not change a fingerprint."""
    return tuple(sorted({check_pattern(v, where, error) for v in values}))


def allowed_by(name: str, patterns) -> str | None:
    """The first pattern that allows name (already check_name'd), else None."""
    for p in patterns:
        if p == "*" or p == name or (p.startswith("*.") and name.endswith(p[1:])):
            return p
    return None


# -- addresses -----------------------------------------------------------------------------------
# (rule, networks), checked in this order after the host's own addresses; anything else that is
# not globally routable is refused as "reserved".
_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
RANGES: tuple[tuple[str, tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]], ...] = (
    ("unspecified", (_V4("0.0.0.0/8"), _V6("::/128"))),
    ("loopback", (_V4("127.0.0.0/8"), _V6("::1/128"))),
    ("private", (_V4("10.0.0.0/8"), _V4("172.16.0.0/12"), _V4("192.168.0.0/16"), _V4("100.64.0.0/10"),
                 _V6("fc00::/7"))),
    ("link-local", (_V4("169.254.0.0/16"), _V6("fe80::/10"))),
    ("multicast", (_V4("224.0.0.0/4"), _V6("ff00::/8"))),
    ("broadcast", (_V4("255.255.255.255/32"),)),
    # IPv6 forms that carry an IPv4 address a gateway would reach (NAT64, 6to4, Teredo), and the
    # deprecated site-local and IPv4-compatible ranges.
    ("ipv6-transition", (_V6("64:ff9b::/96"), _V6("64:ff9b:1::/48"), _V6("2002::/16"), _V6("2001::/32"),
                         _V6("fec0::/10"), _V6("::/96"))),
)


def unmapped(addr: Address) -> Address:
    """::ffff:a.b.c.d is a.b.c.d on the wire."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def refused_address(addr: Address, own: frozenset = frozenset()) -> str | None:
    """The rule that refuses connecting to addr, or None for a public address."""
    addr = unmapped(addr)
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id:
        return "link-local"
    if addr in own:
        return "own-address"
    for rule, nets in RANGES:
        if any(addr.version == n.version and addr in n for n in nets):
            return rule
    if not addr.is_global:
        return "reserved"
    return None


def literal(host: str) -> Address | None:
    """host as an address when it is one in any spelling a client or resolver accepts: dotted,
    short (127.1), numeric (2130706433), octal/hex (0177.0.0.1, 0x7f.1), IPv6 (bracketed or not,
    with a zone), else None. Callers refuse every literal: the allowlist is about names."""
    import socket

    h = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(h.split("%", 1)[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(h))
    except (OSError, ValueError):
        return None


REFUSED_HOSTS = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
# Special-use and local-only top-level names (RFC 6761, 6762, 8375, ICANN's .internal): never
# looked up (an override may still map one). .local is mDNS (LAN devices); .internal names cloud
# metadata services; .test is what tests use, so a test can never cause a real DNS query.
SPECIAL_USE = ("test", "invalid", "example", "local", "localhost", "internal", "home.arpa", "lan", "intranet")


def special_use(name: str) -> bool:
    return any(name == t or name.endswith("." + t) for t in SPECIAL_USE)


def why_refused(rule: str, host: str) -> str:
    """The one-line body of a 403: the rule, and what (if anything) would allow it."""
    fixed = "the proxy never connects to this machine or to private networks; no flag allows it"
    return {
        "literal-address": f"{host}: literal addresses are refused (rule literal-address); connect by name",
        "localhost": f"{host}: refused (rule localhost); {fixed}",
        "bad-name": f"{host}: not a DNS name (rule bad-name)",
        "allowlist": f"{host}: not in this session's allowlist (rule allowlist); allow it with "
                     f"--allow-domain {host} (verified mode: a capability that declares it, approved)",
        "no-address": f"{host}: does not resolve (rule no-address)",
        "special-use": f"{host}: a special-use or local-only name, never looked up (rule special-use)",
        "port": f"{host}: port refused (rule port)",
    }.get(rule, f"{host}: resolves to a refused address (rule {rule}); {fixed}")
