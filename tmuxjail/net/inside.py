"""What a proxied jail sees of its proxy (issue 15). Pure and stdlib only: the launcher and its
helper import it.

The session's proxy runs outside the jail and listens on the jail's own loopback, 127.0.0.1:PORT
and [::1]:PORT in the jail's network namespace (net/listen.jail_listeners makes those sockets from
outside, before bubblewrap runs the command). The command gets HTTPS_PROXY & co pointing there
and NO_PROXY naming the jail's own loopback, which the proxy refuses."""

from __future__ import annotations

PORT = 3128
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")
# The jail's own loopback (its network namespace's: nothing of the host) is reached directly, not
# through the proxy, which refuses loopback: a dev server or MCP server inside the jail (issue 28.5).
# Names and addresses in the spellings curl, Python, Node and Rust's reqwest each match.
LOOPBACK = "localhost,127.0.0.1,::1,[::1],127.0.0.0/8,.localhost"


def env(base: dict, port: int = PORT) -> dict:
    """The proxy variables every client reads, and NO_PROXY for the jail's loopback only (the
    host's or the caller's values never pass). port: the jail's proxy port, or on macOS the
    session proxy's own loopback port (Seatbelt lets the jail reach that one port only)."""
    out = dict(base)
    out.update(dict.fromkeys(PROXY_VARS, f"http://127.0.0.1:{port}"))
    out.update(dict.fromkeys(NO_PROXY_VARS, LOOPBACK))
    return out
