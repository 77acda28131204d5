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


def test_the_relay_without_splice_carries_both_directions_and_the_half_close(monkeypatch):
    """macOS has no splice: the proxy's relay copies through a buffer there (net/proxy._copy),
    byte exact, and passes the half-close on."""
    import os
    import socket
    import threading

    from tmuxjail.net import proxy
    from tmuxjail.net.proxy import BUF

    monkeypatch.delattr(proxy.os, "splice")
    pump = proxy._pump  # what the relay runs, here without splice

    a, a_far = socket.socketpair()
    b, b_far = socket.socketpair()
    data = os.urandom(3 * BUF + 17)
    done: list[int] = []
    t = threading.Thread(target=pump, args=(a_far, b, done))
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


def test_the_users_limits_read_without_linuxs_rlimits(monkeypatch):
    """macOS's resource module has no RLIMIT_SIGPENDING or RLIMIT_MSGQUEUE: those limits read as
    unlimited (-1) there instead of ending the start with an AttributeError."""
    import resource

    from tmuxjail import host

    for name in ("RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE"):
        monkeypatch.delattr(resource, name)
    got = host.user_limits()
    assert got["sigpending"] == got["msgqueue"] == -1 and got["nofile"] != 0


def test_directories_are_made_beneath_a_root_with_macos_descriptors(tmp_path, monkeypatch):
    """macOS has no O_PATH: the walk that makes a jail's directories without following a link
    opens each step O_RDONLY there, and still refuses a link on the way."""
    import os

    from tmuxjail import paths
    from tmuxjail.errors import SandboxUnavailable

    monkeypatch.setattr(paths, "DIR_FD", os.O_RDONLY)
    root = tmp_path / "home"
    root.mkdir()
    paths.make_dirs_beneath(str(root), str(root / "a" / "b"))
    assert (root / "a" / "b").is_dir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(SandboxUnavailable, match="symbolic link"):
        paths.make_dirs_beneath(str(root), str(root / "link" / "c"))
    assert not (tmp_path / "c").exists()
