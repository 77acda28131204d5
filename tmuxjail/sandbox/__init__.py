"""Sandbox backends: one seam (Backend), pure argv/profile builders behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class HostLayout:
    """Facts about the host that shape the argv but not the policy (so they are not
    fingerprinted): how / is laid out, and where the tmux sockets are."""

    # /bin, /lib, ...: "dir", a symlink target, or absent.
    top: dict[str, str] = field(default_factory=dict)
    # Directories holding tmux sockets (hidden with an empty tmpfs) and single socket files
    # (covered with /dev/null) that exist on the host.
    tmux_dirs: tuple[str, ...] = ()
    tmux_files: tuple[str, ...] = ()
    # Secret files in /etc that exist (masked in strict modes: root in the jail could read them);
    # when tmuxjail runs as root, also every file under /etc and /opt that others cannot read.
    etc_secrets: tuple[str, ...] = ()
    # Directories under /etc and /opt that others cannot enter or list (root-run only).
    root_only_dirs: tuple[str, ...] = ()
    # Directory that /etc/resolv.conf points into, when it is a symlink out of /etc.
    resolv_dir: str | None = None
    # Seatbelt only (path rules need no existing target; bwrap ignores these):
    # every directory tmux may put sockets in for this uid, whether or not it exists yet;
    tmux_dir_candidates: tuple[str, ...] = ()
    # the pane's own terminal (the launcher fills it from ttyname(0));
    tty: str | None = None
    # a per-session temp dir (TMPDIR inside the jail, the one temp place for unix sockets);
    session_tmp: str | None = None
    # lexical path -> canonical path, for every path the policy names (host.mac_layout).
    realpaths: dict[str, str] = field(default_factory=dict)
    # The caller's ssh-agent socket, checked (a socket of the user's, no symlink on the way, in a
    # directory only the user can write): bound when the policy grants the ssh-agent capability.
    agent_socket: str | None = None


class Backend(Protocol):
    name: str

    def available(self) -> str | None:
        """None when usable here, else the reason it is not."""

    def wrap(self, policy: dict[str, Any], argv: list[str], host: HostLayout) -> list[str]:
        """Pure: the full argv that runs `argv` under `policy`."""
