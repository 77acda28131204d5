"""What start, resume, extra panes (`_pane`) and `shell` share, once: the jail's directories, its
one-shot spec, the sandbox argv, the pane's @tmuxjail_* options, and waiting until the sandbox
is up."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from . import hostos, log, mcpconf
from . import paths as paths_mod
from .context import Context
from .effective import Policy, never_passed
from .errors import SandboxUnavailable, TmuxjailError
from .host import foreign_pane_process, jail_exec_started, mac_layout
from .host import layout as host_layout
from .pane import command as pane_command
from .record import Record
from .registry import Mode
from .sandbox import HostLayout, bwrap, landlock
from .subpath import below, inside, inside_any

SEATBELT = "seatbelt"  # the macOS backend's name (sandbox/seatbelt.py NAME)
SANDBOX_EXEC_STATUS = "sandbox-exec"  # its launcher's status report (pane/darwin.py STATUS)
DARWIN_STEPS = ("sandbox-exec", "env")  # what a macOS pane runs before the command (pane/darwin.py)
READY_TIMEOUT = 10.0
PANE_GONE = "the tmux server exited, or the pane was closed, before the jail started"
# A launcher reads its spec within a second of the pane's start; nothing in the spool is needed
# for longer than the start wait.
SPEC_MAX_AGE = 4 * READY_TIMEOUT
STATUS_EVERY, PROBE_EVERY = 0.004, 0.1  # wait_ready's two checks


class Launch(Record):
    """One launch: the command the jail runs, the bwrap call around it (None: no sandbox) and the
    host layout it was built for (the launcher derives the call again from the policy and this
    layout, and refuses any other)."""

    command: list[str]
    call: bwrap.Call | None
    layout: HostLayout | None

    @property
    def sandbox_argv(self) -> list[str]:
        """The whole argv, flattened (what a dry run shows; the launcher flattens its own)."""
        return self.call.argv() if self.call is not None else self.command


class Spec(Record):
    path: Path
    status: Path


def unguarded(pol: Policy) -> bool:
    return pol.backend == "none"


def display_mode(pol: Policy) -> str:
    return pol.mode.value if not unguarded(pol) else "compatibility-unguarded"


def env(ctx: Context, pol: Policy) -> dict[str, str]:
    """The environment the jail gets (values: only in the spec)."""
    if pol.env_inherit:
        out = {k: v for k, v in ctx.env.items() if not never_passed(k)}
    else:
        out = {k: ctx.env[k] for k in pol.env_names if k in ctx.env}
    out.update(dict(pol.env_set))
    return out


def build(ctx: Context, pol: Policy, cli_argv: list[str]) -> Launch:
    """The sandbox's call around cli_argv (none when there is no sandbox)."""
    if unguarded(pol):
        return Launch(cli_argv, None, None)
    data = pol.to_data()
    if pol.backend == SEATBELT:
        # macOS: the launcher builds the profile from the policy and this layout (with the pane's
        # tty and the proxy's port, which only it knows) and execs sandbox-exec.
        return Launch(cli_argv, None, mac_layout(data, ctx.tmux.socket, ctx.env))
    layout = host_layout(ctx.tmux.socket, ctx.env, bwrap.opt_trees(data))
    return Launch(cli_argv, bwrap.find().call(data, cli_argv, layout), layout)


def pane_argv(fp: str, spec: Path) -> list[str]:
    """The pane's command: the in-pane launcher, with nothing secret in it."""
    return pane_command.launcher(sys.executable, fp, str(spec))


def options(sid: str, pol: Policy, fp: str, worktree: dict | None = None) -> dict[str, str]:
    return pane_command.pane_options(sid, fp, display_mode(pol), pol.provider, (worktree or {}).get("branch"))


def helper_argv(sid: str, fp: str) -> list[str]:
    """`tmuxjail _pane` with this interpreter: what a new pane of a jailed session runs."""
    return pane_command.extra_pane(sys.executable, sid, fp)


def session_options(sid: str, fp: str) -> dict[str, str]:
    return pane_command.session_options(sys.executable, sid, fp)


def session_hooks(sid: str, pol: Policy) -> dict[str, str]:
    return pane_command.session_hooks(sid, pol.mode.value)


# -- the spec ----------------------------------------------------------------------------------

def discard_spec(*files) -> None:
    """A spec holds credential values: it must not outlive a launch that did not happen."""
    for f in files:
        if f is not None:
            try:
                os.unlink(f)
            except OSError:
                pass


@contextmanager
def spec_discarded_on_failure(spec: Spec):
    try:
        yield
    except BaseException:
        discard_spec(spec.path, spec.status)
        raise


def sweep_spool(spool: Path, now: float | None = None) -> None:
    """Remove specs older than SPEC_MAX_AGE: a pane that never started (a killed tmuxjail, a
    crash) left them. Only our own regular files; never through a symlink."""
    now = time.time() if now is None else now
    try:
        names = os.listdir(spool)
    except OSError:
        return
    for n in names:
        p = spool / n
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and now - st.st_mtime > SPEC_MAX_AGE:
            discard_spec(p)


def layout_data(layout: HostLayout | None) -> dict | None:
    return None if layout is None else layout.asdict()


def landlock_ok() -> bool:
    return landlock.abi() >= landlock.MIN_ABI


def write_spec(ctx: Context, sid: str, fp: str, pol: Policy, launch: Launch, status_file: bool = True,
               trace: str | None = None, at: tuple[Path, Path] | None = None) -> Spec:
    """The one-shot spec the launcher reads and deletes (0600, in a private spool). status_file
    False: nobody waits on this launch (an extra pane), its status goes to /dev/null. at: the
    spec and status paths an early pane's launcher already waits on (sessions/early.py): the spec
    appears there whole (written aside, then linked in; never over an existing file)."""
    spool = paths_mod.ensure_private_dir(ctx.paths.spool)
    sweep_spool(spool)
    token = os.urandom(8).hex()
    spec, status = at or (spool / f"{sid}-{token}.json", spool / f"{sid}-{token}.status")
    body = {
        "session_id": sid, "fingerprint": fp, "policy": pol.to_data(), "argv": launch.command,
        "env": env(ctx, pol), "store": str(ctx.paths.store),
        "status_file": str(status) if status_file else os.devnull,
        "machine": os.uname().machine, "sandboxed": not unguarded(pol),
        "landlock_scope": pol.mode.strict and pol.backend != SEATBELT and landlock_ok(),
        # The launcher derives the bwrap call from the policy and this layout and refuses any
        # other call (pane/spec.py verify).
        "call": launch.call.asdict() if launch.call is not None else None,
        "layout": layout_data(launch.layout),
    }
    if pol.mcp:  # the servers' secrets, for the broker only (pane/mcp.py): never in the jail's env
        body["mcp_env"] = mcp_env(ctx, pol, strict=status_file)
    if pol.backend == SEATBELT:  # where the launcher makes the jail's own temp dir (pane/darwin.py)
        body["tmp_base"] = ctx.env.get("TMPDIR")
    if trace is not None:  # a discovery run: the launcher puts strace in front of bwrap
        body["trace"] = trace
    path = spec if at is None else spool / f".{token}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(body, f)
        if at is not None:
            os.link(path, spec)
    finally:
        if at is not None:
            discard_spec(path)
    return Spec(spec, status)


def mcp_env(ctx: Context, pol: Policy, strict: bool = True) -> dict[str, dict[str, str]]:
    """What each attached MCP server gets from the host's environment (mcpconf.secrets). strict
    False: an extra pane of the session, started from tmux's environment, which lacks them: its
    servers start without the names that are not set."""
    out = {}
    for server in pol.mcp:
        try:
            out[server.name] = mcpconf.secrets(server, ctx.env)
        except TmuxjailError:
            if strict:
                raise
            out[server.name] = {n: ctx.env[n] for n in server.env if n in ctx.env}
    return out


# -- directories -------------------------------------------------------------------------------

def prepare_dirs(ctx: Context, pol: Policy, adapter) -> None:
    # Hidden and read-only binds apply to directories that exist: create them first, so the
    # jail cannot create (and so own) them instead.
    for d in ctx.paths.own_dirs():
        paths_mod.ensure_private_dir(d)
    if pol.mode is Mode.verified:
        # The CLI's state dir under an approved rw path must exist before the launch: a missing
        # path is not bound, and the CLI would write into the throwaway tmpfs home (CODEX_HOME
        # must also exist before Codex starts).
        # Never through a link: the agent writes in there (make_dirs_beneath).
        for rel in adapter.home_dirs:
            p = os.path.join(pol.home, rel)
            roots = [w for w in pol.host_write if inside(p, w)]
            if roots:
                paths_mod.make_dirs_beneath(os.path.dirname(min(roots, key=len)), p)
        shared = adapter.shared_config(pol.home)
        if shared:
            host_file, copy = shared
            seed_shared_config(host_file, copy, pol.host_write)
        state_files(pol, adapter)
    if pol.private_home:
        home = paths_mod.ensure_private_dir(Path(pol.private_home))
        for rel in adapter.home_dirs:
            paths_mod.make_dirs_beneath(str(home), os.path.join(home, rel))


MAX_COPY = 16 * 1024 * 1024
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def state_files(pol: Policy, adapter) -> None:
    """Before a verified launch (docs/provider-state.md): every guarded command file of the CLI's
    state that lies inside a directory bound back writable exists, so that its read-only bind has
    something to cover and the jail cannot create it instead (an empty file, `{}` for JSON, or a
    directory; the CLI reads these as "nothing configured"); and every private copy exists,
    made once from the host's file, over which it is bound (the host's file made first if absent:
    the bind needs it, and bwrap would leave an empty one that the host's CLI then reads).
    Everything in the state is opened beneath its bound root without following a link."""
    dirs = {os.path.basename(r.rstrip("/")) for r in adapter.state_guards if r.endswith("/")}
    for path in pol.state_guards:
        name = os.path.basename(path)
        empty = adapter.state_empty[name].encode() if name in adapter.state_empty else _empty(name)
        _ensure_beneath(pol.host_write, path, None if name in dirs else empty)
    for dest, copy in pol.state_copies:
        body = _ensure_beneath(pol.host_write, dest, _empty(dest), read=True)
        paths_mod.ensure_private_dir(Path(copy).parent)
        try:
            fd = os.open(copy, NEW_FILE, 0o600)
        except FileExistsError:
            continue  # the jail's own copy, from an earlier launch: it stays the jail's
        with os.fdopen(fd, "wb") as f:
            f.write(body or b"")


def _empty(name: str) -> bytes:
    return b"{}\n" if name.endswith(".json") else b""


def _ensure_beneath(roots, path: str, body: bytes | None, read: bool = False) -> bytes | None:
    """path, below the bound root that holds it, exists as a directory (body None) or a regular
    file (made with body when absent); with read, the file's content. A path that is a root itself
    (a file the profile binds, ~/.claude.json) is left as it is."""
    under = [r for r in roots if below(path, r)]
    if not under:
        return None
    root = min(under, key=len)
    if body is None:
        paths_mod.make_dirs_beneath(root, path)
        return None
    dfd = paths_mod.dir_beneath(root, os.path.dirname(path))
    name = os.path.basename(path)
    try:
        try:
            fd = os.open(name, NEW_FILE, 0o600, dir_fd=dfd)
            with os.fdopen(fd, "wb") as f:
                f.write(body)
        except FileExistsError:
            pass
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except OSError:
            fd = -1
        try:
            if fd < 0 or not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SandboxUnavailable(
                    f"{path} is a symbolic link or not a regular file, in your CLI's state that a jail "
                    "could write; refusing to start", hint=f"look at it, remove it (rm {path}), then try again")
            return os.read(fd, MAX_COPY) if read else None
        finally:
            if fd >= 0:
                os.close(fd)
    finally:
        os.close(dfd)


def seed_shared_config(host_file: str, shared: str, host_write) -> None:
    """Create the CLI's shared config file from the host's own (or `{}`), once. It lives in a
    directory the jail can write: opened beneath it without following links, never replaced
    (an existing file or link is left alone), and the host's file is read only if it is a
    regular file of ours."""
    parent = os.path.dirname(shared)
    if not inside_any(parent, host_write):
        return  # not an approved path: the jail would not see it
    try:
        dfd = os.open(parent, paths_mod.DIR_FD | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        body = b"{}\n"
        try:
            sfd = os.open(host_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            with os.fdopen(sfd, "rb") as f:
                st = os.fstat(f.fileno())
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                    body = f.read(16 * 1024 * 1024)
        except OSError:
            pass
        try:
            fd = os.open(os.path.basename(shared), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=dfd)
        except FileExistsError:
            return
        with os.fdopen(fd, "wb") as f:
            f.write(body)
    finally:
        os.close(dfd)


def stage(ctx: Context, sid: str, fp: str, pol: Policy, adapter, launch: Launch, status_file: bool = True) -> Spec:
    """Directories, then the spec: everything a pane needs before tmux runs its launcher."""
    prepare_dirs(ctx, pol, adapter)
    return write_spec(ctx, sid, fp, pol, launch, status_file)


# -- waiting for the jail ----------------------------------------------------------------------

def wait_ready(ctx: Context, pane: str, status: Path, unguarded: bool) -> str | None:
    """None once the sandbox is up, else the reason it is not (read from the dead pane)."""
    deadline = time.monotonic() + READY_TIMEOUT
    foreign = None
    # The status file is read every few ms; tmux is asked about the pane only every PROBE_EVERY
    # (each ask runs a tmux client, on the CPU the starting jail needs).
    probe_at = time.monotonic() + (PROBE_EVERY if not unguarded else 0)
    while time.monotonic() < deadline:
        if not unguarded:
            try:
                report = json.loads(status.read_text().split("\n", 1)[0] or "{}")
            except (FileNotFoundError, ValueError):
                report = {}
            if "child-pid" in report and jail_exec_started(int(report["child-pid"])):
                return None
            if SANDBOX_EXEC_STATUS in report:  # macOS: the launcher's own, as it execs sandbox-exec
                return None
            if time.monotonic() < probe_at:
                time.sleep(STATUS_EVERY)
                continue
            probe_at = time.monotonic() + PROBE_EVERY
        probe = ctx.tmux.run("display-message", "-p", "-t", pane, "#{pane_dead} #{pane_pid}", check=False)
        dead, _, pid = probe.stdout.strip().partition(" ")
        if probe.returncode != 0 or not dead:
            err = (probe.stderr.strip().splitlines() or ["the pane is gone"])[-1]
            return f"{PANE_GONE} ({err})"
        if dead == "1":
            # tmux may mark the pane dead before it has drawn the last output: look again briefly.
            for _ in range(15):
                lines = [ln for ln in ctx.tmux.capture(pane).splitlines() if ln.strip()]
                reason = next((ln for ln in reversed(lines) if "bwrap" in ln or "tmuxjail:" in ln), None)
                if reason:
                    return reason
                time.sleep(0.02)
            return lines[-1] if lines else "the jail exited at once"
        # Seen twice: the pane's process is something else than the launcher (issue 18.6).
        other = foreign_pane_process(int(pid)) if not unguarded and pid.isdigit() else None
        if other is not None and other == foreign:
            return (f"the sandbox did not come up: the pane runs {other!r}, not tmuxjail's launcher "
                    "(something replaced it, such as a tmux hook)")
        foreign = other
        if unguarded and time.monotonic() > deadline - READY_TIMEOUT + 0.3:
            return None
        time.sleep(0.02)
    return f"the sandbox did not come up within {READY_TIMEOUT:.0f}s"


def wait_jailed(tmux, pane: str, unguarded: bool) -> str | None:
    """A shell pane (no status file): None once the pane's own process is bubblewrap with the
    shell running under it."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if hostos.darwin() and not unguarded:  # no /proc: tmux's name for the pane's foreground process
            comm = tmux.pane_option(pane, "pane_current_command")
            if comm and not comm.startswith("python") and comm not in DARWIN_STEPS:
                return None
        info = tmux.pane_option(pane, "pane_dead") + " " + tmux.pane_option(pane, "pane_pid")
        dead, _, pid = info.partition(" ")
        if dead == "1" or not pid:
            lines = [ln for ln in tmux.capture(pane).splitlines() if ln.strip()]
            return next((ln for ln in reversed(lines) if "tmuxjail:" in ln or "bwrap" in ln),
                        lines[-1] if lines else "the pane exited at once")
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            comm = ""
        if comm == "bwrap" and jail_exec_started(int(pid)):
            return None
        if unguarded and comm and comm not in ("python", "python3") and not comm.startswith("python3."):
            return None
        time.sleep(0.03)
    return f"the sandbox did not come up within {READY_TIMEOUT:.0f}s"


def settle(ctx: Context, sid: str, name: str, pane: str, spec: Spec, kind: str, pol: Policy, fp: str,
           detach: bool) -> dict:
    """Wait for the jail of a start or resume, record how it went, and describe the session."""
    store = ctx.store
    failure = wait_ready(ctx, pane, spec.status, unguarded(pol))
    try:
        spec.status.unlink()
    except FileNotFoundError:
        pass
    if failure:
        store.update_session(sid, status="failed", failure=failure)
        store.event(f"{kind}-failed", sid, reason=failure)
        log.warning(f"{kind}_failed", session=name, reason=failure)
        gone = failure.startswith(PANE_GONE)  # not the sandbox's fault: exit 1, not 5
        raise (TmuxjailError if gone else SandboxUnavailable)(
            f"the jail did not start: {failure}",
            hint="run `tmuxjail doctor`" + ("" if gone else "; the dead pane keeps the message"),
            data={"name": name, "status": "failed"},
        )
    store.update_session(sid, status="running", failure=None)
    store.event(kind, sid, fingerprint=fp, mode=pol.mode.value, provider=pol.provider,
                env_names=sorted(env(ctx, pol)))
    log.info(kind, session=name, fingerprint=fp, mode=pol.mode.value, provider=pol.provider)
    from .status import describe  # once the jail is up: its imports are not on the way to the pane

    row = store.find(name)  # name: the tmuxjail session's; its tmux session may be someone else's
    result = describe(ctx, row)
    result["attach"] = None if detach else ctx.tmux.attach_argv(row.tmux_session if row else name)
    return result
