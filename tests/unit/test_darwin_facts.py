"""macOS facts that the seam cannot reach on Linux, checked as pure functions: the proxy's view
of the host's own addresses from `ifconfig -a` (macOS has no /proc)."""

from __future__ import annotations

import ipaddress

import pytest

from tmuxjail.net.proxy import ifconfig_addresses

# `ifconfig -a` on macOS 14 (abridged): loopback, Wi-Fi with a link-local and a global IPv6.
IFCONFIG = """lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu 16384
\toptions=1203<RXCSUM,TXCSUM,TXSTATUS,SW_TIMESTAMP>
\tinet 127.0.0.1 netmask 0xff000000
\tinet6 ::1 prefixlen 128
\tinet6 fe80::1%lo0 prefixlen 64 scopeid 0x1
\tnd6 options=201<PERFORMNUD,DAD>
en0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500
\tether 3c:22:fb:00:00:01
\tinet6 fe80::1c2b:aaaa:bbbb:cccc%en0 prefixlen 64 secured scopeid 0xb
\tinet 192.168.1.23 netmask 0xffffff00 broadcast 192.168.1.255
\tinet6 2001:db8::1234 prefixlen 64 autoconf secured
\tstatus: active
"""


def test_ifconfig_addresses_lists_every_inet_and_inet6_without_scope():
    got = ifconfig_addresses(IFCONFIG)
    assert got == {ipaddress.ip_address(a) for a in
                   ("127.0.0.1", "::1", "fe80::1", "fe80::1c2b:aaaa:bbbb:cccc", "192.168.1.23", "2001:db8::1234")}


def test_an_ifconfig_without_addresses_is_an_error_not_an_empty_set():
    # An empty set would make the proxy think no address is the host's own: it must refuse instead.
    with pytest.raises(ValueError, match="no address"):
        ifconfig_addresses("lo0: flags=8049<UP,LOOPBACK> mtu 16384\n")


def test_the_relay_without_splice_carries_both_directions_and_the_half_close():
    """macOS has no splice: the proxy's relay copies through a buffer there (net/proxy._copy),
    byte exact, and passes the half-close on."""
    import os
    import socket
    import threading

    from tmuxjail.net.proxy import BUF, _copy

    a, a_far = socket.socketpair()
    b, b_far = socket.socketpair()
    data = os.urandom(3 * BUF + 17)
    done: list[int] = []
    t = threading.Thread(target=_copy, args=(a_far, b, done))
    t.start()

    def send() -> None:  # beside the reader below: the socket buffers hold less than the data
        a.sendall(data)
        a.shutdown(socket.SHUT_WR)
    sender = threading.Thread(target=send)
    sender.start()
    for s in (a, a_far, b, b_far):
        s.settimeout(30)
    got = bytearray()
    while chunk := b_far.recv(1 << 16):
        got += chunk
    t.join(10)
    sender.join(10)
    assert bytes(got) == data and done == [len(data)]
    for s in (a, a_far, b, b_far):
        s.close()
