"""A jail's share of the per-user kernel counts (docs/resources.md). The kernel charges what a
jail makes to the same uid at every user-namespace level, so a jail could otherwise take all of
the user's processes, inotify instances, ptys, ... and the user's own shells would fail. A jail
gets `share` (a fraction) of each of the user's real limits, read at start (host.user_limits());
the user keeps the rest. Pure: the numbers in, the jail's limits out."""

from __future__ import annotations

from .errors import ConfigError

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

    from .effective import Limits

UNLIMITED = -1
# /proc/sys/user/*: per-uid counts each user namespace may lower for itself (and its children).
USER_COUNTS = (
    "max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks",
    "max_user_namespaces", "max_mnt_namespaces", "max_pid_namespaces", "max_ipc_namespaces",
    "max_uts_namespaces", "max_net_namespaces", "max_cgroup_namespaces", "max_time_namespaces",
)
# bubblewrap itself makes a few namespaces of each kind inside the jail's own user namespace.
NAMESPACE_FLOOR = 4
RLIMITS = ("sigpending", "msgqueue", "memlock")  # per-user rlimits the kernel counts per namespace
# The launcher's own user and mount namespace for the jail (pane/narrow.py own_namespace), which holds the
# /proc/sys/user/* shares and the pty share. A host that refuses it (e.g. AppArmor's
# restrict_unprivileged_userns for anything but bwrap) refuses starts unless the config accepts
# the gap; the policy then records no such shares.
GUARD = "jail-namespace-limits"


def part(limit: int, share: float, floor: int = 1) -> int:
    """share of limit, at least floor (but never more than limit); UNLIMITED stays unlimited."""
    if limit < 0:
        return UNLIMITED
    return min(limit, max(floor, int(limit * share)))


def jail_limits(caps: Limits, host: dict[str, Any], asked: dict[str, Any], source: str,
                namespace: bool = True) -> Limits:
    """The jail's limits: caps (defaults and the config's [limits]) bounded by `share` of the
    user's real limits in host (host.user_limits()). A count the config asks for that the
    user's own limit cannot give is a ConfigError."""
    user_nproc = host["nproc"] if host["nproc"] >= 0 else host["threads_max"]
    user_nofile = host["nofile"] if host["nofile"] >= 0 else host["nr_open"]
    for key, have, what in (("nproc", user_nproc, "process limit (RLIMIT_NPROC)"),
                            ("nofile", user_nofile, "open-file limit (RLIMIT_NOFILE)")):
        if key in asked and asked[key] > have:
            raise ConfigError(f"{source}: limits.{key} = {asked[key]} is more than your {what}, {have}; "
                              f"a jail gets at most limits.share ({caps.share}) of it")
    share = caps.share
    nproc = min(caps.nproc, part(user_nproc, share))
    # Each of nproc processes may hold nofile files: together within the share of the system's
    # file table (fs.file-max), which every user shares.
    nofile = min(caps.nofile, user_nofile, max(1, part(host["file_max"], share) // nproc))
    ptys = part(max(0, host["pty_max"] - host["pty_reserve"]), share) if namespace else UNLIMITED
    user = tuple((name, part(host["user"][name], share, NAMESPACE_FLOOR if name.endswith("namespaces") else 1))
                 for name in USER_COUNTS if namespace and host["user"].get(name, -1) >= 0)
    sigpending, msgqueue, memlock = (part(host[k], share) for k in RLIMITS)
    return caps._replace(nproc=nproc, nofile=nofile, ptys=ptys, user=user, sigpending=sigpending,
                         msgqueue=msgqueue, memlock=memlock)
