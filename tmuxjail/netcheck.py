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
