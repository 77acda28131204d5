"""Sandbox backends: one seam (Backend), pure argv/profile builders behind it."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported: the launcher imports this package on every start
if TYPE_CHECKING:
    from typing import Any, Protocol


class HostLayout:
    """Facts about the host that shape the argv but not the policy (so they are not
    fingerprinted): how / is laid out, and where the tmux sockets are. A frozen record. Written
    out rather than a dataclass: the launcher rebuilds one on every start, and importing
    dataclasses (inspect, re, enum, typing) would cost it more than everything else it does."""

    # /bin, /lib, ...: "dir", a symlink target, or absent.
    top: dict[str, str]
    # Directories holding tmux sockets (hidden with an empty tmpfs) and single socket files
    # (covered with /dev/null) that exist on the host.
    tmux_dirs: tuple[str, ...]
    tmux_files: tuple[str, ...]
    # Secret files in /etc that exist (masked in strict modes: root in the jail could read them);
    # when tmuxjail runs as root, also every file under /etc and the /opt trees the jail gets
    # (bwrap.opt_trees) that others cannot read.
    etc_secrets: tuple[str, ...]
    # Directories there that others cannot enter or list (root-run only).
    root_only_dirs: tuple[str, ...]
    # Directory that /etc/resolv.conf points into, when it is a symlink out of /etc.
    resolv_dir: str | None
    # Seatbelt only (path rules need no existing target; bwrap ignores these):
    # every directory tmux may put sockets in for this uid, whether or not it exists yet;
    tmux_dir_candidates: tuple[str, ...]
    # the pane's own terminal (the launcher fills it from ttyname(0));
    tty: str | None
    # a per-session temp dir (TMPDIR inside the jail, the one temp place for unix sockets);
    session_tmp: str | None
    # lexical path -> canonical path, for every path the policy names (host.mac_layout).
    realpaths: dict[str, str]
    # The caller's ssh-agent socket, checked (a socket of the user's, no symlink on the way, in a
    # directory only the user can write): bound when the policy grants the ssh-agent capability.
    agent_socket: str | None
    # Seatbelt only: the loopback port of the session's proxy (outside the jail), the one
    # outbound address a `proxy` profile allows.
    proxy_port: int | None

    FIELDS = ("top", "tmux_dirs", "tmux_files", "etc_secrets", "root_only_dirs", "resolv_dir",
              "tmux_dir_candidates", "tty", "session_tmp", "realpaths", "agent_socket", "proxy_port")
    __slots__ = FIELDS

    def __init__(self, top: dict[str, str] | None = None, tmux_dirs: tuple[str, ...] = (),
                 tmux_files: tuple[str, ...] = (), etc_secrets: tuple[str, ...] = (),
                 root_only_dirs: tuple[str, ...] = (), resolv_dir: str | None = None,
                 tmux_dir_candidates: tuple[str, ...] = (), tty: str | None = None,
                 session_tmp: str | None = None, realpaths: dict[str, str] | None = None,
                 agent_socket: str | None = None, proxy_port: int | None = None) -> None:
        values = (top if top is not None else {}, tmux_dirs, tmux_files, etc_secrets, root_only_dirs,
                  resolv_dir, tmux_dir_candidates, tty, session_tmp,
                  realpaths if realpaths is not None else {}, agent_socket, proxy_port)
        for name, value in zip(self.FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: HostLayout is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: HostLayout is frozen")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is HostLayout and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "HostLayout(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.FIELDS) + ")"

    def asdict(self) -> dict[str, object]:
        """The fields, for JSON (the launch spec): dicts copied, as dataclasses.asdict did."""
        return {n: dict(v) if isinstance(v, dict) else v for n, v in zip(self.FIELDS, self._values(), strict=True)}


if TYPE_CHECKING:
    class Backend(Protocol):
        name: str

        def available(self) -> str | None:
            """None when usable here, else the reason it is not."""

        def wrap(self, policy: dict[str, Any], argv: list[str], host: HostLayout) -> list[str]:
            """Pure: the full argv that runs `argv` under `policy`."""
