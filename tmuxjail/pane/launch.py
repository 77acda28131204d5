"""The in-pane launcher: the pane's own process. It reads and deletes its spec, re-checks the
policy fingerprint against its argv and the store, then execs bubblewrap, which execs the CLI.
Stdlib only, and nothing it does not need: it runs on every start. It runs with -S (no site
processing, ~30 ms) and -I (no cwd on sys.path, no PYTHON* variables), with the directory that holds this very package put first on sys.path:

    python -I -S -c 'import sys; sys.path[:0] = [ROOT]; from tmuxjail.pane.launch import main; ...' --fp sha256:... SPEC

(pane/command.py builds that command line and recognises it.) Its steps, each in a module of
its own: the helper child (helper), the spec read and verified (spec), the executable checked
(executable), the launcher narrowed (narrow), the marked binds of the bwrap call (derived from
the policy by spec.verify, never parsed from an argv) made from fds (binds), refusals (refuse).
"""

from __future__ import annotations

import itertools
import os
import sys

from ..errors import INSIDE_JAIL
from .binds import fd_binds
from .executable import exe_binds, exe_checked, exe_unchanged, open_executables
from .helper import ask_helper, proxy_ready, start_helper, store_holds
from .narrow import own_namespace, own_session_keyring, root_process_limit, seccomp_fd
from .refuse import EXIT_REFUSED, EXIT_UNAVAILABLE, die
from .spec import read_spec, verify

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any, NoReturn

TRACE_HEAD: list[str] = []  # a discovery run: strace in front of bubblewrap (traced())


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[0] != "--fp":
        die("usage: python -m tmuxjail.pane.launch --fp FINGERPRINT SPEC", 2)
    # SIGCHLD ignored (inherited from whoever started the pane) would stay ignored through the
    # execs: the kernel reaps bwrap's own child, whose exit bubblewrap then waits for forever.
    import _signal  # type: ignore[import-not-found]  # signal itself imports enum

    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    helper = start_helper()
    from ..canon import fingerprint

    expected, spec_path = argv[1], argv[2]
    spec = read_spec(spec_path, meanwhile=load_ahead)
    policy = spec.get("policy")
    if not isinstance(policy, dict) or fingerprint(policy) != expected or spec.get("fingerprint") != expected:
        die("the policy does not match the fingerprint of this pane (tampered); refusing", EXIT_REFUSED)
    if policy.get("backend") == "seatbelt":  # macOS: sandbox-exec, not bubblewrap
        from .darwin import run

        run(spec, policy, spec_path, expected, helper, exec_closing)
    # The helper child checks the store and, under the network proxy, becomes the proxy, while
    # this process checks and narrows itself; nothing runs before the store's answer
    # (store_holds). The proxy starts before it: it serves nobody until bwrap runs, and ends with
    # this process if the answer is no.
    proxied = policy.get("network") == "proxy" and policy.get("backend") != "none"
    # What the policy's identity names (the CLI, its interpreter) is opened now, once: the jail
    # runs these very files (exe_binds), checked against the fingerprinted digests (exe_checked).
    exe = open_executables(policy) if spec.get("sandboxed", True) and policy.get("mode") != "compatibility" else []
    ask_helper(helper, spec, policy, proxied, [[path, key] for path, _, _, key in exe])

    call = verify(spec, policy, spec_path)

    env = {k: str(v) for k, v in spec["env"].items()}
    if os.environ.get("TERM"):
        env["TERM"] = os.environ["TERM"]  # the pane's terminal, as tmux set it
    env[INSIDE_JAIL] = "1"
    if not spec.get("sandboxed", True) or call is None:
        store_holds(helper, expected)
        # compatibility-unguarded: the operator opted in to running without bubblewrap.
        exec_closing(spec["argv"], env, keep=())
    if proxied:
        from ..net import inside

        env = inside.env(env)
    # The MCP broker is forked now: before this process narrows itself (keyring, cgroup, Landlock,
    # namespaces), none of which is the broker's; it serves nobody until bwrap runs, and dies with
    # this process if the launch is refused.
    broker = None
    if policy.get("mcp"):
        from . import mcp

        broker = mcp.start(spec, policy, call.path) if mcp.on_host(policy) else None
    own_session_keyring()
    if os.getuid() == 0:
        root_process_limit(policy, str(spec["session_id"]))
    seccomp = seccomp_fd(spec["machine"], policy.get("mode") != "compatibility")
    if spec.get("landlock_scope"):
        from ..sandbox import landlock

        try:
            landlock.scope_self()
        except OSError as exc:
            die(f"cannot scope the jail away from abstract unix sockets: {exc}", EXIT_UNAVAILABLE)
    own_namespace(policy)
    bind_fds = fd_binds(call)
    if policy.get("mcp"):
        entries, fds = mcp.binds(broker, policy)
        call.late += entries
        bind_fds += fds
    exe_checked(exe, store_holds(helper, expected))
    exe_binds(call, exe)
    bind_fds += [fd for _, _, fd, _ in exe]
    # The proxy listens on the jail's own loopback once bubblewrap says its child's pid (--info-fd);
    # bubblewrap runs the command only after that (--block-fd): the CLI's first request finds it.
    proxy = ("--info-fd", str(helper.info), "--block-fd", str(helper.block)) if proxied else ()
    if proxied:
        proxy_ready(helper)  # refuses the launch if the proxy cannot start
        bind_fds += [helper.info, helper.block]
    keep: tuple[int, ...] = (seccomp, os.open(spec["status_file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
                             *bind_fds)
    if spec.get("trace") is not None:
        TRACE_HEAD[:] = traced(spec)
    exe_unchanged(exe)
    exec_closing(call.argv("--seccomp", str(keep[0]), "--json-status-fd", str(keep[1]), *proxy), env, keep)


def load_ahead() -> None:
    """An early pane waits for its spec: load now what the launch after it would load (the
    launch then takes only the checks themselves). Imports only: nothing runs, nothing opens."""
    from .. import canon  # noqa: F401
    from ..net import inside  # noqa: F401
    from ..sandbox import landlock, libc, pids, seccomp  # noqa: F401


def traced(spec: dict[str, Any]) -> list[str]:
    """A discovery run: strace, outside the jail, in front of bubblewrap (pane/strace.py).
    The trace file must be a new file named `trace` in a directory of its own under the state
    directory's discover/ (where the store lives, which no jail sees): created here with O_EXCL
    and without following a link, so a spec cannot point the tracer's output anywhere else."""
    from .strace import CAP_FILE, STRACE, argv

    path = spec["trace"]
    state = os.path.dirname(str(spec.get("store", "")))
    if not (isinstance(path, str) and state and os.path.isabs(path) and os.path.normpath(path) == path
            and os.path.basename(path) == "trace"
            and os.path.dirname(os.path.dirname(path)) == os.path.join(state, "discover")):
        die("the launch spec's trace file is not a discovery trace of this store (tampered); refusing", EXIT_REFUSED)
    if not os.access(STRACE, os.X_OK):
        die(f"discovery needs strace ({STRACE}): sudo apt-get install -y strace", EXIT_UNAVAILABLE)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError as exc:
        die(f"cannot create the discovery trace {path}: {exc.strerror}", EXIT_UNAVAILABLE)
    try:  # written by `discover` next to the trace, from the config's [discover] trace_cap
        fd = os.open(os.path.join(os.path.dirname(path), CAP_FILE), os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            cap = int(os.read(fd, 32))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        cap = 0
    if cap <= 0:
        die("the discovery's trace cap is missing or not a number (tampered); refusing", EXIT_REFUSED)
    return argv(path, cap, sys.executable)


def exec_closing(argv: list[str], env: dict[str, str], keep: tuple[int, ...]) -> NoReturn:
    """exec argv with only stdio and `keep` open: nothing else of ours leaks into the jail."""
    for fd in keep:
        os.set_inheritable(fd, True)
    bounds = [2, *sorted(keep), 65536]
    for lo, hi in itertools.pairwise(bounds):
        os.closerange(lo + 1, hi)
    argv = [*TRACE_HEAD, *argv]
    try:
        os.execve(argv[0], argv, env)
    except OSError as exc:
        die(f"cannot run {argv[0]}: {exc.strerror}", EXIT_UNAVAILABLE)

if __name__ == "__main__":
    main(sys.argv[1:])
