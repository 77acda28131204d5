"""The launch spec: read once and deleted (it holds credential values), then verified: everything
the launcher executes must follow from the fingerprinted policy."""

from __future__ import annotations

import os

from .. import hostos
from .refuse import EXIT_REFUSED, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from ..sandbox.bwrap import Call


WAIT = 30.0  # an early pane's wait for its spec (below SPEC_MAX_AGE: jail.py sweeps the spool)
POLL = 0.0005
FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC  # never through a link


def open_spec(path: str, wait: float = WAIT, meanwhile: Callable[[], object] | None = None) -> int:
    """The spec's fd. An early pane (sessions/early.py) starts before its spec is written: while
    the start that opened it keeps `SPEC.pending`, the spec is waited for (at most `wait` s), and
    `meanwhile` runs once first; the start writes the spec, then removes the marker, or kills the
    pane, then removes the marker."""
    deadline = None
    while True:
        try:
            return os.open(path, FLAGS)
        except FileNotFoundError as exc:
            if not os.path.lexists(path + ".pending"):
                try:  # written just before its marker went
                    return os.open(path, FLAGS)
                except OSError:
                    why = exc.strerror
                    break
        except OSError as exc:
            why = exc.strerror
            break
        import time

        if deadline is None:
            deadline = time.monotonic() + wait
            if meanwhile is not None:
                meanwhile()
        elif time.monotonic() > deadline:
            die(f"launch spec {path} never came: the start that opened this pane did not finish; "
                "refusing to run anything", EXIT_REFUSED)
        time.sleep(POLL)
    die(f"launch spec {path} is gone ({why}); this pane was not started by tmuxjail "
        "start/resume, refusing to run anything", EXIT_REFUSED)


def read_spec(path: str, meanwhile: Callable[[], object] | None = None) -> dict[str, Any]:
    fd = open_spec(path, meanwhile=meanwhile)
    try:
        os.unlink(path)  # read once, and first: it holds credential values
    except OSError:
        pass
    if os.fstat(fd).st_uid != os.getuid():
        die("launch spec is not owned by you; refusing", EXIT_REFUSED)
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    from ..canon import loads

    try:
        spec = loads(data)
    except (ValueError, RecursionError):
        die("launch spec is not valid JSON; refusing", EXIT_REFUSED)
    if not isinstance(spec, dict):
        die("launch spec is not a JSON object; refusing", EXIT_REFUSED)
    return spec


def login_shell() -> str:
    """identity.login_shell(), without its imports (this runs on every start)."""
    import pwd

    shell = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK) or shell.endswith("nologin"):
        shell = "/bin/sh"
    return shell


def cli_prefix(policy: dict[str, Any]) -> list[str]:
    """How the policy's executable is started: its interpreter first, for scripts."""
    exe = policy["executable"]
    return [*[p for p, _ in exe["extra"]][:1], exe["path"]]


def verify(spec: dict[str, Any], policy: dict[str, Any], spec_path: str) -> Call | None:
    """Everything this launcher executes must follow from the fingerprinted policy: the spec's
    call, command, environment and side settings are not fingerprinted, and whoever could rewrite
    the spec would otherwise choose them. The bwrap call this launch runs (None: no sandbox):
    derived here from the policy and the spec's host layout, and refused unless the spec's call
    is that very one."""
    def refuse(what: str) -> NoReturn:
        die(f"the launch spec's {what} does not follow from this pane's policy (tampered); refusing",
            EXIT_REFUSED)

    cli = spec.get("argv")
    if not isinstance(cli, list) or not cli or not all(isinstance(a, str) for a in cli):
        refuse("argv")
    sandboxed = policy.get("backend") != "none"
    if spec.get("sandboxed", True) is not sandboxed:
        refuse("sandbox setting")
    call = None
    seatbelt = policy.get("backend") == "seatbelt"  # macOS: pane/darwin.py builds the profile
    if sandboxed and not seatbelt and hostos.darwin():  # (and Linux refuses Seatbelt's: pane/darwin.py)
        die("this pane's policy is for Linux (bubblewrap), and this host is macOS; refusing", EXIT_REFUSED)
    if seatbelt and (spec.get("call") is not None or not isinstance(spec.get("layout"), dict)):
        refuse("host layout")
    if sandboxed and not seatbelt:
        from ..sandbox import HostLayout
        from ..sandbox.bwrap import FIXED_PATHS, Bwrap

        given = spec.get("call")
        if not isinstance(given, dict) or given.get("bwrap") not in FIXED_PATHS:
            refuse("bubblewrap path")
        try:
            fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                      for k, v in spec["layout"].items()}
            layout = HostLayout(**fields)
            derived = Bwrap(given["bwrap"]).call(policy, cli, layout)
        except (KeyError, TypeError, AttributeError, ValueError):
            refuse("host layout")
        if derived.asdict() != given:
            refuse("bubblewrap call")
        call = derived
    # An extra pane of the session runs your login shell in the same jail.
    if cli[:len(cli_prefix(policy))] != cli_prefix(policy) and cli != [login_shell(), "-l"]:
        refuse("executable")
    env = spec.get("env")
    if not isinstance(env, dict):
        refuse("environment")
    fixed = dict(policy["env_set"])
    if any(env.get(k) != v for k, v in fixed.items()):
        refuse("environment")
    allowed = None if policy["env_inherit"] else {*policy["env_names"], *fixed}
    if any(k.startswith("TMUX") or (allowed is not None and k not in allowed) for k in env):
        refuse("environment")
    if policy["mode"] != "compatibility" and sandboxed and not seatbelt and not spec.get("landlock_scope"):
        from ..sandbox import landlock

        if landlock.abi() >= landlock.MIN_ABI:  # start would have asked for it: someone turned it off
            refuse("Landlock setting")
    # (The machine needs no check: a filter for another architecture denies every system call.)
    # An extra pane of a session sends its status to /dev/null: nobody waits on it.
    if sandboxed and spec.get("status_file") not in (spec_path[:-len(".json")] + ".status", os.devnull):
        refuse("status file")
    return call
