"""The egress proxy's first steps (issue 15), lean: the launcher's proxy child runs them before it
loads the proxy's own code (netproxy: sockets, threads, json, re), so the launcher, which waits
for the ready line before it execs bubblewrap, waits for a listening socket only (issue 18.3).
Imports only os, time and the interpreter's _socket and _signal."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal itself imports enum
import _socket
import os
import sys
import time

from .. import hostos

TYPE_CHECKING = False  # typing itself is not imported: the launcher's proxy child runs this first
if TYPE_CHECKING:
    from typing import NoReturn

# The listener and its bookkeeping, as begin() leaves them for netproxy.run().
Early = tuple[_socket.socket, str, int, str]  # (listener, socket path, pidfd of the launcher, directory)


def session_dir(store: str, session_id: str) -> str:
    """state/net/<session id>: under tmuxjail's state dir, which no jail sees."""
    sid = "".join(c for c in session_id if c.isalnum() or c in "-_")[:64] or "session"
    return os.path.join(os.path.dirname(store), "net", sid)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][:1] in ("Z", "X")
    except (OSError, IndexError):
        return True


def clear_stale(directory: str, wait: float = 0.0) -> list[str]:
    """Remove the sockets of this directory's jails that are gone (proxy-PID.sock: PID is the
    launcher that became the jail's bwrap, and no longer runs), waiting up to `wait` seconds for
    ones that are ending. A proxy removes its socket as it exits; this catches one that was
    killed. Never a live jail's: unlinking a socket bound into a jail would detach it there.
    Returns the names removed."""
    removed: list[str] = []
    deadline = time.monotonic() + wait
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        pid = name[len("proxy-"):-len(".sock")]
        if not (name.startswith("proxy-") and name.endswith(".sock") and pid.isdigit()):
            continue
        while not _gone(int(pid)) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _gone(int(pid)):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def _sockaddr_path(path: str) -> tuple[str, int | None]:
    """A unix socket path short enough for sun_path: long ones go through /proc/self/fd."""
    if len(path.encode()) < 100:
        return path, None
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{os.path.basename(path)}", fd


def listen(directory: str, owner: int | None = None) -> tuple[_socket.socket, str]:
    """A listening unix socket in directory, named after `owner` (default: this process; the
    launcher that becomes the jail's bwrap: each pane of a session has a proxy of its own);
    sockets of jails that are gone are removed first."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.lstat(directory)
    if not os.path.isdir(directory) or os.path.islink(directory) or st.st_uid != os.getuid():
        raise OSError(f"{directory} is not a directory of ours")
    clear_stale(directory)
    path = os.path.join(directory, f"proxy-{owner or os.getpid()}.sock")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    where, fd = _sockaddr_path(path)
    try:
        s.bind(where)
    finally:
        if fd is not None:
            os.close(fd)
    os.chmod(path, 0o600)
    s.listen(128)
    return s, path


def listen_tcp() -> tuple[_socket.socket, str]:
    """macOS: a listener on a free loopback port, "tcp:127.0.0.1:PORT". The jail has no network
    namespace of its own there, so no bridge: its Seatbelt profile lets it connect to this one
    port and nothing else (sandbox/seatbelt.py _proxy_network)."""
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM | getattr(_socket, "SOCK_CLOEXEC", 0))
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s, f"tcp:127.0.0.1:{s.getsockname()[1]}"


def watch_exit(pid: int) -> int:
    """An fd that turns readable when `pid` exits: a pidfd on Linux; on macOS (no pidfd) a kqueue
    with a process-exit filter on it."""
    if hasattr(os, "pidfd_open"):
        return os.pidfd_open(pid)
    import select

    kq = select.kqueue()  # type: ignore[attr-defined,unused-ignore]  # BSD and macOS only
    kq.control([select.kevent(pid, select.KQ_FILTER_PROC, select.KQ_EV_ADD,  # type: ignore[attr-defined,unused-ignore]
                              select.KQ_NOTE_EXIT)], 0, 0)  # type: ignore[attr-defined,unused-ignore]
    _KEEP.append(kq)  # its fd lives as long as the object (a kqueue does not survive fork: none follows)
    return int(kq.fileno())


_KEEP: list[object] = []


CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1)
IP_FREEBIND, IPV6_FREEBIND = 15, 78


def child_pid(info: int) -> int:
    """The pid of bubblewrap's child, from bwrap's --info-fd ({"child-pid": N}); OSError when
    bwrap ended before it said (the launch failed there)."""
    data = b""
    while b"}" not in data:
        chunk = os.read(info, 4096)
        if not chunk:
            raise OSError("bubblewrap exited before it started the jail")
        data += chunk
    os.close(info)
    _, _, rest = data.partition(b'"child-pid":')
    digits = rest.strip().split(b"}")[0].split(b",")[0].strip()
    if not digits.isdigit():
        raise OSError(f"bubblewrap's info is not a child pid: {data[:80]!r}")
    return int(digits)


def jail_listeners(pid: int, port: int) -> list[_socket.socket]:
    """Listening sockets on 127.0.0.1:port (and [::1]:port where the jail has IPv6) inside the
    network namespace of bubblewrap's child `pid`: the jail's own loopback, where its proxy
    variables point. A short-lived child joins that namespace (and the jail's user namespace
    first, when it is not ours: an unprivileged user owns it) and hands the sockets back over a
    socketpair; this process never leaves its own namespaces, so the proxy's upstream connections
    are the host's. IP_FREEBIND: the jail's loopback may not be up yet when they bind."""
    import fcntl

    from ..sandbox import libc

    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    if os.fstat(net).st_ino == os.stat("/proc/self/ns/net").st_ino:
        os.close(net)
        raise OSError("the jail has no network namespace of its own")
    # The user namespace that owns it (ioctl NS_GET_USERNS), which is not always the one the
    # child is in: a root-run bubblewrap makes its user namespace after the others.
    user = fcntl.ioctl(net, NS_GET_USERNS)
    join_user = os.fstat(user).st_ino != os.stat("/proc/self/ns/user").st_ino
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    kid = os.fork()
    if kid == 0:
        try:
            ours.close()
            if join_user and libc.setns(user, CLONE_NEWUSER) != 0:
                raise OSError(f"cannot join the jail's user namespace: {os.strerror(libc.get_errno())}")
            if libc.setns(net, CLONE_NEWNET) != 0:
                raise OSError(f"cannot join the jail's network namespace: {os.strerror(libc.get_errno())}")
            made = [_listen(_socket.AF_INET, "127.0.0.1", port, IP_FREEBIND)]
            try:
                made.append(_listen(_socket.AF_INET6, "::1", port, IPV6_FREEBIND))
            except OSError:
                pass  # no IPv6 in the jail: 127.0.0.1 only
            fds = b"".join(s.fileno().to_bytes(4, sys.byteorder) for s in made)
            theirs.sendmsg([b"="], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        except BaseException as exc:  # noqa: BLE001 - told to the proxy, which stops the jail
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            try:
                theirs.sendmsg([("!" + why).encode()[:200]])
            except OSError:
                pass
        finally:
            os._exit(0)
    theirs.close()
    for fd in (net, user):
        os.close(fd)
    msg, cmsgs, _, _ = ours.recvmsg(256, _socket.CMSG_SPACE(8))
    ours.close()
    os.waitpid(kid, 0)
    got = [int.from_bytes(data[i:i + 4], sys.byteorder)
           for level, kind, data in cmsgs if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
           for i in range(0, len(data) - len(data) % 4, 4)]
    if msg != b"=" or not got:
        for fd in got:
            os.close(fd)
        raise OSError(msg[1:].decode(errors="replace") or "the namespace helper exited")
    return [_socket.socket(fileno=fd) for fd in got]


def _listen(family: int, host: str, port: int, freebind: int) -> _socket.socket:
    s = _socket.socket(family, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    if family == _socket.AF_INET6:
        s.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
        s.setsockopt(_socket.IPPROTO_IPV6, freebind, 1)
    else:
        s.setsockopt(_socket.IPPROTO_IP, freebind, 1)
    s.bind((host, port))
    s.listen(128)
    return s


def exit_removing(path: str) -> NoReturn:
    """The proxy's only way out: its socket goes with it (nothing stale in state/net/)."""
    try:
        if path.startswith("/"):
            os.unlink(path)
    except OSError:
        pass
    os._exit(0)


def begin(store: str, session_id: str, parent: int, ready: int, detach: bool) -> Early:
    """In the launcher's proxy child: listen, and write the socket's path and a newline to
    `ready` (or "!" and why it cannot, and exit). The launcher goes on at once; the caller then
    loads and runs the proxy (netproxy.run), which serves what queued on the listener meanwhile.
    detach: fork once more and listen from the grandchild (a discovery run: strace -f waits for
    every child before it exits, and the proxy waits for it to exit)."""
    where = [""]
    try:
        # A pidfd of the parent, opened while it is alive (it waits for `ready`): the proxy ends
        # when it ends (netproxy.run watches it).
        watch = watch_exit(parent)
        if detach and os.fork():
            os._exit(0)  # the middle process; the launcher reaps it
        # SIGTERM, not SIGKILL: the handler removes the socket on the way out.
        _signal.signal(_signal.SIGTERM, lambda *_: exit_removing(where[0]))
        directory = session_dir(store, session_id)
        if hostos.darwin():
            listener, where[0] = listen_tcp()
        else:
            listener, where[0] = listen(directory, owner=parent)
        os.setsid()  # out of the pane's terminal: ^C to the CLI never reaches the proxy
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # nor does it hold the pane's terminal
            os.dup2(null, fd)
        os.close(null)
        os.write(ready, (where[0] + "\n").encode())
        os.close(ready)
        return listener, where[0], watch, directory
    except BaseException as exc:  # noqa: BLE001 - told to the launcher, which refuses the launch
        if not where[0]:
            try:
                why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                os.write(ready, ("!" + why.replace("\n", " ") + "\n").encode())
            except OSError:
                pass
        exit_removing(where[0])


def ended(watch: int, within: float) -> bool:
    """Whether the launcher (a pidfd of it) exits within `within` seconds: after it closed the
    proxy's go pipe, it either exec'd bwrap (serve) or refused and exited (nobody to serve)."""
    import select

    return bool(select.select([watch], [], [], within)[0])
