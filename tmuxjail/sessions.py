"""Use cases: start, resume, list, show, stop, doctor. Everything outside (tmux, SQLite, the
filesystem) is reached through its one module; policy and argv come from pure functions."""

from __future__ import annotations

import json
import os
import pwd
import re
import stat
import sys
import time
from collections import namedtuple
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from . import log
from . import paths as paths_mod
from .errors import (
    ConfigError,
    NotApproved,
    ResumeRefused,
    SandboxUnavailable,
    TmuxjailError,
    UsageError,
)
from .tmux import Tmux, check_name

if TYPE_CHECKING:
    from .store import Store

ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
READY_TIMEOUT = 10.0
PANE_GONE = "the tmux server exited, or the pane was closed, before the jail started"
# A launcher reads its spec within a second of the pane's start; nothing in the spool is needed
# for longer than the start wait.
SPEC_MAX_AGE = 4 * READY_TIMEOUT


class Context:
    """What a use case runs against: one tmux server, the caller's environment, the paths.
    (Plain classes here and in store/tmux/paths: dataclasses costs `list` ~15 ms of imports.)"""

    def __init__(self, tmux: Tmux, env: dict | None = None, paths: paths_mod.Paths | None = None):
        self.tmux = tmux
        self.env = dict(os.environ) if env is None else env
        self.paths = paths or paths_mod.get()
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            from .store import Store

            self._store = Store(self.paths.store)
        return self._store

    def readonly_store(self):
        from .store import Store

        return self._store or Store(self.paths.store, readonly=True)

    def on(self, tmux: Tmux) -> Context:
        """The same caller, against another tmux server."""
        if tmux is self.tmux:
            return self
        other = Context(tmux, self.env, self.paths)
        other._store = self._store
        return other


def server_of(ctx: Context, row) -> Tmux:
    """The tmux server a session was started on, whatever -L/-S/TMUX say today."""
    if not row.tmux_socket or row.tmux_socket == ctx.tmux.socket:
        return ctx.tmux
    return Tmux.at(row.tmux_socket, ctx.env)


def where_it_runs(ctx: Context, row, action: str) -> Context:
    """The context to act on a session in: on its own server. A server that is gone is fine
    (nothing of the session runs any more); one that exists but cannot be reached is refused
    with the command that reaches it, so nothing is started twice or recorded as stopped while
    it still runs."""
    server = server_of(ctx, row)
    why = server.unreachable()
    if why:
        raise TmuxjailError(
            f"{row.name} runs on the tmux server at {row.tmux_socket}, which cannot be reached: {why}",
            hint=f"from a tmux that can reach it: tmux -S {row.tmux_socket} attach -t ={row.tmux_session}"
                 f"   (then: tmuxjail {action} {row.name})")
    return ctx.on(server)


StartOptions = namedtuple(
    "StartOptions",
    "provider mode workspaces name env_name capabilities detach non_interactive dry_run args backend restriction "
    "network trace candidate allow_domains",
    defaults=(None, (), None, "default", (), False, False, False, (), None, None, None, None, None, None),
)


# -- resolution ------------------------------------------------------------------------------

def _canonical_workspaces(raw: tuple[str, ...], cwd: str) -> tuple[str, ...]:
    out = []
    for ws in raw or (cwd,):
        if not ws.isprintable():
            raise UsageError(f"workspace {ws!r}: control characters are not accepted in paths")
        p = Path(ws).expanduser()
        if not p.is_absolute():
            p = Path(cwd, p)
        if not p.exists():
            raise UsageError(f"workspace {p} does not exist")
        if not p.is_dir():
            raise UsageError(f"workspace {p} is not a directory")
        real = os.path.realpath(p)
        if not real.isprintable():  # a link to such a name
            raise UsageError(f"workspace {real!r}: control characters are not accepted in paths")
        out.append(real)
    return tuple(dict.fromkeys(out))


def _resolve(ctx: Context, provider: str, mode_name: str | None, workspaces: tuple[str, ...],
             env_name: str, capabilities: tuple[str, ...], restriction: dict | None = None,
             gate: bool = True, network: str | None = None, candidate: str | None = None,
             allow_domains: tuple[str, ...] | None = None):
    """Everything a start or resume needs, from today's inputs: (request, policy, fp, bits).
    Verified mode also needs an approval that covers exactly this profile, executable and
    capability set; without one this raises NotApproved before anything runs."""
    from . import config as config_mod
    from . import host, identity, policy
    from .adapters import get as get_adapter
    from .model import Mode
    from .sandbox import bwrap

    adapter = get_adapter(provider)
    if not ENV_NAME_RE.match(env_name):
        raise UsageError(f"invalid --env {env_name!r}", hint="use letters, digits, '-' or '_'")
    cfg = config_mod.load(ctx.paths.config_file)
    mode_name = mode_name or cfg.default_mode
    try:
        mode = Mode(mode_name)
    except ValueError:
        raise UsageError(f"unknown mode {mode_name!r}") from None
    if network is not None:
        config_mod.check_network(network, "--network", UsageError)
    profile = profile_for(ctx, provider, candidate)
    backend = bwrap.find()
    unguarded = False
    if (why := backend.available()) is not None:
        if mode is Mode.compatibility and cfg.allow_unguarded_compatibility:
            unguarded = True
        else:
            raise SandboxUnavailable(
                f"{mode.value} mode cannot be enforced: {why}",
                hint="sudo apt-get install -y bubblewrap   (then: tmuxjail doctor)",
            )
    import platform

    from .sandbox.seccomp import supported

    if not unguarded and not supported(platform.machine()):
        raise SandboxUnavailable(f"no seccomp filter for {platform.machine()}; the jail cannot block TIOCSTI here")
    from .sandbox import landlock

    if mode.strict and landlock.abi() < landlock.MIN_ABI and landlock.GUARD not in cfg.accept_missing_guards:
        raise SandboxUnavailable(
            f"this kernel's Landlock (ABI {landlock.abi()}) cannot keep the jail off the host's abstract unix sockets",
            hint=f'upgrade to Linux 6.12+, or accept the gap: accept_missing_guards = ["{landlock.GUARD}"] in the config',
        )

    if not unguarded:
        _check_root_process_limit(cfg)
    store = ctx.store
    path_env = ctx.env.get("PATH", os.defpath)
    if provider == "shell":
        found = Path(identity.login_shell())
    else:
        found = identity.find(profile.executables, path_env, cfg.executables.get(provider), provider)
    resolved = identity.resolve(adapter, found, path_env, store)

    p = ctx.paths
    home = str(p.home)
    pw = pwd.getpwuid(os.getuid())
    req = policy.Request(provider=provider, mode=mode, workspaces=workspaces, env_name=env_name,
                         capabilities=tuple(capabilities), network=network, allow_domains=tuple(allow_domains or ()))
    declared = [
        g.path.replace("~", home, 1) for c in profile.capabilities.values() for g in c.paths
    ]
    facts = policy.Facts(
        home=home, uid=os.getuid(), user=pw.pw_name, login_shell=identity.login_shell(),
        own_dirs=tuple(str(d) for d in p.own_dirs()), config_dir=str(p.config_dir),
        private_home=str(p.private_home(provider, env_name, workspaces[0] if workspaces else None)),
        backend="none" if unguarded else backend.name, executable=resolved,
        allowed_modes=cfg.allowed_modes, git_paths=_git_paths(workspaces) if mode.strict else (),
        realpaths=host.realpaths(declared), limits=cfg.limits, network=cfg.network[mode.value], resolve=cfg.resolve,
        allow_ceiling=cfg.allow_domains[mode.value],
        own_install=() if mode.strict else host.own_install(),
    )
    if restriction is not None:
        from . import restrict

        base = policy.resolve(req, profile, adapter, facts)  # refuses what the config refuses
        modes, names = restrict.apply(
            restriction["rules"], source=restriction["source"], home=home, allowed_modes=cfg.allowed_modes,
            mode=mode.value, optional_caps=profile.optional, requested_caps=tuple(capabilities),
            workspaces=workspaces, env_names=base.env_names)
        from dataclasses import replace

        facts = replace(facts, allowed_modes=modes)
        pol = policy.resolve(req, profile, adapter, facts).model_copy(update={"env_names": names})
    else:
        pol = policy.resolve(req, profile, adapter, facts)
    data = policy.as_data(pol)
    if unguarded and data["network"] != "host":
        raise SandboxUnavailable(f"network {data['network']} cannot be enforced: {why}",
                                 hint="sudo apt-get install -y bubblewrap   (then: tmuxjail doctor)")
    approval = None
    if mode is Mode.verified and gate:
        approval = _approval_for(store, profile, data)
    return req, data, policy.fingerprint(data), adapter, resolved, backend, unguarded, approval


def profile_for(ctx: Context, provider: str, candidate: str | None = None):
    """The shipped profile, or an approved discovery candidate (tmuxjail.discover.candidate)."""
    from . import profiles

    if candidate is None:
        return profiles.load(provider)
    from .discover import candidate as cand

    return cand.load(ctx.paths.config_dir, provider, candidate)


def _git_paths(workspaces) -> tuple[str, ...]:
    from . import host

    found, capped = host.git_guards(workspaces)
    if capped:
        # Fail closed: a .git the walk did not reach would be writable, and a jail decides how
        # large its workspace grows between two starts.
        raise SandboxUnavailable(
            f"the workspace is too large to find every .git in it (more than {host.MAX_DIRS} "
            f"directories or {host.MAX_DEPTH} levels, outside {', '.join(sorted(host.HEAVY_DIRS))})",
            hint="start on a narrower --workspace, or let the agent write git metadata with "
                 "--capability git-metadata-write (README, \"Git metadata\")")
    return found


def _warn_git_write(pol: dict) -> None:
    from .policy import GIT_WRITE

    if pol["mode"] != "compatibility" and GIT_WRITE in pol["capabilities"]:
        sys.stderr.write(f"tmuxjail: warning: {GIT_WRITE}: the agent may change .git in the workspaces; "
                         "hooks and config it writes there will run on the host at your next git command\n")


def _check_root_process_limit(cfg) -> None:
    """A root-run jail's process limit needs a pids cgroup (the kernel ignores RLIMIT_NPROC for
    uid 0): refuse when there is none, unless the operator accepted the gap."""
    from .sandbox import pids

    if os.getuid() == 0 and pids.hierarchy() is None and pids.GUARD not in cfg.accept_missing_guards:
        raise SandboxUnavailable(
            "a root-run jail needs a pids cgroup for its process limit, and this host has none",
            hint=f'run tmuxjail as an ordinary user, or accept the gap: accept_missing_guards = ["{pids.GUARD}"] in the config',
        )


def _approval_for(store, profile, pol: dict) -> dict:
    from . import approvals
    from .netpolicy import approval_items

    items = approval_items(profile, pol)  # capabilities, plus domain:X for each domain added
    granted = store.approvals(profile.provider)
    found = approvals.find(granted, profile.provider, profile.hash, pol["executable"], items)
    if found is None:
        missing = approvals.missing(granted, profile, pol["executable"], items)
        fix = approvals.fix_command(profile.provider, items, profile.baseline)
        if "+" in profile.profile_version:  # a discovery candidate (tmuxjail.discover.candidate)
            fix = f"tmuxjail approve {profile.provider} --candidate {profile.profile_version.split('+', 1)[1]}"
        raise NotApproved(
            f"verified mode needs an approval: {'; '.join(missing)}",
            hint=f"review and approve with: {fix}",
            data={"missing": missing, "fix": fix, "provider": profile.provider},
        )
    return found


def policy_fingerprint(pol: dict) -> str:
    from .policy import fingerprint

    return fingerprint(pol)


def _jail_env(ctx: Context, pol: dict) -> dict[str, str]:
    from .policy import never_passed

    if pol["env_inherit"]:
        env = {k: v for k, v in ctx.env.items() if not never_passed(k)}
    else:
        env = {k: ctx.env[k] for k in pol["env_names"] if k in ctx.env}
    env.update(dict(pol["env_set"]))
    return env


def _pane_argv(ctx: Context, fp: str, spec: Path) -> list[str]:
    from .launch import pane_command

    return pane_command(sys.executable, fp, str(spec))


def _host_layout(ctx: Context, unguarded: bool):
    from . import host

    return None if unguarded else host.layout(ctx.tmux.socket, ctx.env)


def _sandbox_argv(ctx: Context, pol: dict, backend, cli_argv: list[str], unguarded: bool, layout=None) -> list[str]:
    if unguarded:
        return cli_argv
    return backend.wrap(pol, cli_argv, layout or _host_layout(ctx, unguarded))


def _display_mode(pol: dict) -> str:
    return pol["mode"] if pol["backend"] != "none" else "compatibility-unguarded"


def discard_spec(*files) -> None:
    """A spec holds credential values: it must not outlive a launch that did not happen."""
    for f in files:
        if f is not None:
            with suppress(OSError):
                os.unlink(f)


@contextmanager
def _spec_discarded_on_failure(spec, status):
    try:
        yield
    except BaseException:
        discard_spec(spec, status)
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


def _layout_data(layout) -> dict | None:
    return None if layout is None else layout.asdict()


def _write_spec(ctx: Context, sid: str, fp: str, pol: dict, argv: list[str], unguarded: bool,
                layout=None, trace: str | None = None) -> tuple[Path, Path]:
    spool = paths_mod.ensure_private_dir(ctx.paths.spool)
    sweep_spool(spool)
    import platform
    import secrets

    token = secrets.token_hex(8)
    spec, status = spool / f"{sid}-{token}.json", spool / f"{sid}-{token}.status"
    body = {
        "session_id": sid, "fingerprint": fp, "policy": pol, "argv": argv,
        "env": _jail_env(ctx, pol), "store": str(ctx.paths.store), "status_file": str(status),
        "machine": platform.machine(), "sandboxed": not unguarded,
        "landlock_scope": pol["mode"] != "compatibility" and _landlock_ok(),
        # The launcher rebuilds the bwrap argv from the policy and this layout and refuses any
        # other argv (launch.verify).
        "layout": _layout_data(layout),
    }
    if trace is not None:  # a discovery run: the launcher puts strace in front of bwrap
        body["trace"] = trace
    fd = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(body, f)
    return spec, status


def _landlock_ok() -> bool:
    from .sandbox import landlock

    return landlock.abi() >= landlock.MIN_ABI


def _prepare_dirs(ctx: Context, pol: dict, adapter) -> None:
    # Hidden and read-only binds apply to directories that exist: create them first, so the
    # jail cannot create (and so own) them instead.
    for d in ctx.paths.own_dirs():
        paths_mod.ensure_private_dir(d)
    if pol["mode"] == "verified":
        # The CLI's state dir under an approved rw path must exist before the launch: a missing
        # path is not bound, and the CLI would write into the throwaway tmpfs home (CODEX_HOME
        # must also exist before Codex starts).
        # Never through a link: the agent writes in there (make_dirs_beneath).
        for rel in adapter.home_dirs:
            p = os.path.join(pol["home"], rel)
            roots = [w for w in pol["host_write"] if p == w or p.startswith(w.rstrip("/") + "/")]
            if roots:
                paths_mod.make_dirs_beneath(os.path.dirname(min(roots, key=len)), p)
        shared = adapter.shared_config(pol["home"])
        if shared:
            host_file, shared_file = shared
            _seed_shared_config(host_file, shared_file, pol["host_write"])
    if pol["private_home"]:
        home = paths_mod.ensure_private_dir(Path(pol["private_home"]))
        for rel in adapter.home_dirs:
            paths_mod.make_dirs_beneath(str(home), os.path.join(home, rel))


def _seed_shared_config(host_file: str, shared: str, host_write) -> None:
    """Create the CLI's shared config file from the host's own (or `{}`), once. It lives in a
    directory the jail can write: opened beneath it without following links, never replaced
    (an existing file or link is left alone), and the host's file is read only if it is a
    regular file of ours."""
    parent = os.path.dirname(shared)
    if not any(parent == w or parent.startswith(w.rstrip("/") + "/") for w in host_write):
        return  # not an approved path: the jail would not see it
    try:
        dfd = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
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


def _wait_ready(ctx: Context, pane: str, status: Path, unguarded: bool) -> str | None:
    """None once the sandbox is up, else the reason it is not (read from the dead pane)."""
    from .host import foreign_pane_process, jail_exec_started

    deadline = time.monotonic() + READY_TIMEOUT
    foreign = None
    while time.monotonic() < deadline:
        if not unguarded:
            try:
                report = json.loads(status.read_text().split("\n", 1)[0] or "{}")
            except (FileNotFoundError, ValueError):
                report = {}
            if "child-pid" in report and jail_exec_started(int(report["child-pid"])):
                return None
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


def _options(row_id: str, pol: dict, fp: str) -> dict[str, str]:
    return {"@tmuxjail_id": row_id, "@tmuxjail_fp": fp, "@tmuxjail_mode": _display_mode(pol),
            "@tmuxjail_provider": pol["provider"]}


def _auto_name(provider: str, workspace: str, taken: set[str]) -> str:
    from secrets import token_hex

    base = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(workspace)).strip("-_")[:30] or "ws"
    while True:
        name = f"{provider}-{base}-{token_hex(2)}"
        if name not in taken:
            return name


def start(ctx: Context, opts: StartOptions, place=None) -> dict:
    """place: a panes.Placement for --here / --split (the jail joins the current session); else
    tmuxjail creates and owns a session, whose default-command opens new panes in the same jail."""
    if opts.name is not None:
        check_name(opts.name)
    workspaces = _canonical_workspaces(opts.workspaces, ctx.env.get("PWD") or os.getcwd())
    _req, pol, fp, adapter, resolved, backend, unguarded, approval = _resolve(
        ctx, opts.provider, opts.mode, workspaces, opts.env_name, opts.capabilities, opts.restriction,
        gate=not opts.dry_run, network=opts.network,  # a dry run shows what would need approving
        candidate=opts.candidate, allow_domains=opts.allow_domains)
    native_id = adapter.new_native_id()
    exe = adapter.own_sandbox_off(resolved.argv, pol["mode"], pol["backend"])
    cli_argv = adapter.start_argv(exe, native_id, list(opts.args))
    layout = _host_layout(ctx, unguarded)
    sandbox_argv = _sandbox_argv(ctx, pol, backend, cli_argv, unguarded, layout)
    if opts.backend == "seatbelt" and not opts.dry_run:
        raise UsageError("--backend seatbelt is the macOS backend: on Linux it is accepted only with --dry-run")
    if opts.dry_run:
        example = ctx.paths.spool / "<session-id>-<token>.json"
        out = {"dry_run": True, "provider": opts.provider, "mode": pol["mode"], "fingerprint": fp,
               "policy": pol, "pane_command": _pane_argv(ctx, fp, example), "sandbox_argv": sandbox_argv,
               "env_names": sorted(_jail_env(ctx, pol)),
               "host_layout": _layout_data(layout)}
        if pol["mode"] == "verified":
            from . import profiles

            try:
                out["approval"] = _approval_for(ctx.store, profiles.load(opts.provider), pol)["id"]
            except NotApproved as exc:
                out["approval"], out["approval_missing"] = None, exc.data["missing"]
        if opts.backend == "seatbelt":
            from . import host
            from .sandbox import seatbelt

            # Audit what macOS would run: the same policy, with the backend it would record.
            mac = dict(pol, backend=seatbelt.Seatbelt.name)
            tty = os.ttyname(0) if os.isatty(0) else None  # a real start: the pane's, from the launcher
            layout = host.mac_layout(mac, ctx.tmux.socket, ctx.env, tty=tty)
            text, params = seatbelt.profile(mac, layout)
            mac_cli = adapter.start_argv(resolved.argv, native_id, [*adapter.seatbelt_args, *opts.args])
            out.update(policy=mac, fingerprint=policy_fingerprint(mac),
                       sandbox_argv=seatbelt.Seatbelt().wrap(mac, mac_cli, layout),
                       seatbelt_profile=text, seatbelt_params=params)
        return out

    ctx.tmux.require()
    _warn_git_write(pol)
    store = ctx.store
    name = opts.name or _auto_name(opts.provider, workspaces[0], store.names())
    if place is None and ctx.tmux.has_session(name):
        raise UsageError(f"a tmux session named {name!r} already exists on this server")
    request = {"provider": opts.provider, "mode": pol["mode"], "workspaces": list(workspaces),
               "env_name": opts.env_name, "capabilities": list(opts.capabilities), "args": list(opts.args),
               "restriction": opts.restriction, "network": opts.network,
               "allow_domains": opts.allow_domains}
    if opts.candidate is not None:
        request["candidate"] = opts.candidate
    if place is not None:
        request["placement"] = place.kind
    row = store.insert_session(
        name=name, provider=opts.provider, mode=_display_mode(pol), env_name=opts.env_name,
        workspace=workspaces[0], fingerprint=fp, policy=json.dumps(pol, sort_keys=True),
        request=json.dumps(request), status="starting", native_id=native_id,
        private_home=pol["private_home"], tmux_socket=ctx.tmux.socket,
        tmux_session=place.session if place else name, approval_id=approval["id"] if approval else None,
    )
    spec: Path | None = None
    status: Path | None = None
    try:
        _prepare_dirs(ctx, pol, adapter)
        from . import audit

        audit.baseline(store, row.id, workspaces)  # before the jail can change anything
        spec, status = _write_spec(ctx, row.id, fp, pol, sandbox_argv, unguarded, layout, opts.trace)
        from . import panes

        if place is not None:
            pane = panes.open_here(ctx.tmux, place, _pane_argv(ctx, fp, spec), workspaces[0],
                                   _options(row.id, pol, fp), opts.detach)
        else:
            pane = ctx.tmux.new_session(name, _pane_argv(ctx, fp, spec), workspaces[0], _options(row.id, pol, fp),
                                        session_options=panes.session_options(row.id, fp),
                                        hooks=audit.session_hooks(row.id, pol["mode"]))
    except BaseException as exc:
        discard_spec(spec, status)
        store.update_session(row.id, status="failed", failure=str(exc)[:500])
        raise
    # Where the server really put its socket (tmux falls back from a TMUX_TMPDIR it cannot use).
    store.update_session(row.id, tmux_pane=pane, tmux_socket=ctx.tmux.refresh_socket())
    # Placed in the current session, the new window or split is already in front of the user.
    with _spec_discarded_on_failure(spec, status):
        return _after_launch(ctx, row.id, name, pane, status, unguarded, "start", pol, fp,
                             opts.detach or place is not None)


def _after_launch(ctx, sid, name, pane, status, unguarded, kind, pol, fp, detach) -> dict:
    store = ctx.store
    failure = _wait_ready(ctx, pane, status, unguarded)
    with suppress(FileNotFoundError):
        status.unlink()
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
    store.event(kind, sid, fingerprint=fp, mode=pol["mode"], provider=pol["provider"],
                env_names=sorted(_jail_env(ctx, pol)))
    log.info(kind, session=name, fingerprint=fp, mode=pol["mode"], provider=pol["provider"])
    result = describe(ctx, store.find(name))
    result["attach"] = None if detach else ctx.tmux.attach_argv(name)
    return result


# -- resume ----------------------------------------------------------------------------------

def _refuse(row, reasons: list[str], message: str, hint: str) -> ResumeRefused:
    return ResumeRefused(message, hint=hint, data={"name": row.name, "reasons": reasons})


def recompute(ctx: Context, row) -> tuple[str, dict, list[str]]:
    """Today's policy for a stored session: (fp, policy, reason codes vs the stored one)."""
    r = row.request_data
    try:
        workspaces = _canonical_workspaces(tuple(r["workspaces"]), "/")
        if tuple(workspaces) != tuple(r["workspaces"]):
            return "", {}, ["workspace"]
        _, pol, fp, *_ = _resolve(ctx, r["provider"], r["mode"], workspaces, r["env_name"],
                                  tuple(r.get("capabilities", ())), r.get("restriction"), gate=False,
                                  network=r.get("network"), candidate=r.get("candidate"),
                                  allow_domains=r.get("allow_domains"))
    except NotApproved as exc:
        return "", {}, [exc.data.get("reason", "mode")]
    except ConfigError as exc:
        raise _refuse(row, ["config"], f"cannot recompute the policy of {row.name}: {exc.message}",
                      "fix the config (`tmuxjail doctor` shows its path), then retry") from None
    except UsageError as exc:
        raise _refuse(row, ["workspace"], f"cannot recompute the policy of {row.name}: {exc.message}",
                      "fix the cause, or start a new session") from None
    from .policy import diff

    return fp, pol, diff(row.policy_data or {}, pol)


def resume(ctx: Context, name: str, detach: bool = False, accept_changes: bool = False) -> dict:
    check_name(name)
    store = ctx.store
    row = store.find(name)
    if row is None:
        raise UsageError(f"no session named {name!r}", hint="see: tmuxjail list --all")
    if not row.fingerprint or not row.policy:
        raise _refuse(row, ["tampered"], f"{name} has no recorded fingerprint; refusing to resume it",
                      "start a new session")
    ctx = where_it_runs(ctx, row, "resume")
    fp, pol, reasons = recompute(ctx, row)
    if fp != row.fingerprint and accept_changes and reasons and "tampered" not in reasons:
        return _accept_changes(ctx, row, fp, pol, reasons, detach)
    if fp == row.fingerprint and pol.get("mode") == "verified":
        _still_approved(ctx, row, pol)
    if fp != row.fingerprint:
        reasons = reasons or ["tampered"]
        store.event("resume-refused", row.id, reasons=reasons, old=row.fingerprint, new=fp)
        log.warning("resume_refused", session=name, reasons=reasons)
        raise _refuse(row, reasons,
                      f"{name}: the policy changed since the session started ({', '.join(reasons)}); refusing to resume",
                      f"inspect with `tmuxjail show {name}`, then start a new session")
    in_session = [p for p in ctx.tmux.panes() if p.session_name == row.tmux_session]
    jail = [p for p in in_session if _is_jail_pane(p, row)]
    if in_session and not jail:
        raise _refuse(row, ["tampered"], f"{name}: the tmux session has no pane with this jail's fingerprint",
                      f"stop it with `tmuxjail stop {name}` and start a new one")
    for p in jail:
        if ctx.tmux.pane_option(p.pane_id, "@tmuxjail_fp") != row.fingerprint:
            raise _refuse(row, ["tampered"], f"{name}: the pane's @tmuxjail_fp does not match the store",
                          f"stop it with `tmuxjail stop {name}`")
    live = [p for p in jail if p.pane_dead != "1"]
    if live:
        store.event("reattach", row.id, fingerprint=fp)
        result = describe(ctx, row)
        result["attach"] = None if detach else ctx.tmux.attach_argv(row.tmux_session)
        return result
    # The pane is gone or dead: relaunch the CLI's own resume, in the same jail.
    from .adapters import get as get_adapter
    from .sandbox import bwrap

    adapter = get_adapter(row.provider)
    r = row.request_data
    resolved_argv = _cli_argv_from_policy(pol)
    exe = adapter.own_sandbox_off(resolved_argv, pol["mode"], pol["backend"])
    cli_argv = adapter.backend_resume_argv(pol["backend"], exe, row.native_id, list(r.get("args", ())))
    unguarded = pol["backend"] == "none"
    layout = _host_layout(ctx, unguarded)
    sandbox_argv = _sandbox_argv(ctx, pol, bwrap.find(), cli_argv, unguarded, layout)
    _prepare_dirs(ctx, pol, adapter)
    spec, status = _write_spec(ctx, row.id, fp, pol, sandbox_argv, unguarded, layout)
    with _spec_discarded_on_failure(spec, status):
        opts = _options(row.id, pol, fp)
        if jail:
            ctx.tmux.respawn(jail[0].pane_id, _pane_argv(ctx, fp, spec), r["workspaces"][0], opts)
            pane = jail[0].pane_id
        else:
            from . import audit, panes

            pane = ctx.tmux.new_session(row.tmux_session, _pane_argv(ctx, fp, spec), r["workspaces"][0], opts,
                                        session_options=panes.session_options(row.id, fp),
                                        hooks=audit.session_hooks(row.id, pol["mode"]))
        store.update_session(row.id, tmux_pane=pane, tmux_socket=ctx.tmux.refresh_socket(), status="starting")
        return _after_launch(ctx, row.id, row.tmux_session, pane, status, unguarded, "resume", pol, fp, detach)


def _still_approved(ctx: Context, row, pol: dict, store=None) -> dict:
    """The approval a verified session runs under, else refuse (resume, shell, and list --check)."""
    try:
        return _approval_for(store or ctx.store, profile_for(ctx, row.provider, row.request_data.get("candidate")),
                             pol)
    except NotApproved as exc:
        raise _refuse(row, ["capabilities"], f"{row.name}: {exc.message}", exc.hint or "") from None


def _accept_changes(ctx: Context, row, fp: str, pol: dict, reasons: list[str], detach: bool) -> dict:
    """Move a session to today's policy: only once a human approved it (verified mode), and
    recorded as an event linking the old fingerprint to the new one. The CLI is relaunched under
    the new policy; nothing keeps running under the old one."""
    approval = _still_approved(ctx, row, pol) if pol["mode"] == "verified" else None
    store = ctx.store
    store.event("accept-changes", row.id, old=row.fingerprint, new=fp, reasons=reasons,
                approval=approval["id"] if approval else None)
    log.info("accept_changes", session=row.name, old=row.fingerprint, new=fp, reasons=reasons)
    if ctx.tmux.has_session(row.tmux_session):  # ctx is the session's own server (resume)
        ctx.tmux.kill_session(row.tmux_session)
    store.update_session(row.id, fingerprint=fp, policy=json.dumps(pol, sort_keys=True),
                         approval_id=approval["id"] if approval else row.approval_id)
    return resume(ctx, row.name, detach=detach)


def _cli_argv_from_policy(pol: dict) -> list[str]:
    exe = pol["executable"]
    interp = [p for p, _ in exe["extra"]]
    return [*interp[:1], exe["path"]]


# -- list / show / stop ------------------------------------------------------------------------

def _is_jail_pane(pane, row) -> bool:
    from .panes import kind

    return kind(pane.start_command, row.fingerprint) == "agent"


def describe(ctx: Context, row) -> dict:
    """The session as `list` shows it (one source for statuses)."""
    from .listing import session_rows

    out = session_rows(ctx, row, server_of(ctx, row).panes())[0]
    out.pop("_foreground", None)
    return out


def show(ctx: Context, name: str) -> dict:
    check_name(name)
    row = ctx.readonly_store().find(name)
    if row is None:
        raise UsageError(f"no session named {name!r}", hint="see: tmuxjail list --all")
    out = describe(ctx, row)
    pol = out["policy"] = row.policy_data
    out["request"] = row.request_data
    if pol:
        labels = {}
        try:
            from . import profiles

            labels = {c: cap.label for c, cap in profiles.load(row.provider).capabilities.items()}
        except TmuxjailError:
            pass  # the profile is gone or broken today: still show what was recorded
        out["identity"] = pol["executable"]
        out["profile"] = {"provider": pol["provider"], "version": pol["profile_version"], "hash": pol["profile_hash"]}
        out["capabilities"] = [{"id": c, "label": labels.get(c)} for c in pol["capabilities"]]
    approvals = {a["id"]: a for a in ctx.readonly_store().approvals(row.provider, include_revoked=True)}
    out["approval"] = approvals.get(row.approval_id)
    from .audit import latest

    out["audit"] = latest(ctx.readonly_store(), {row.id}).get(row.id)
    return out


def stop(ctx: Context, name: str) -> dict:
    check_name(name)
    store = ctx.store
    row = store.find(name)
    if row is None or row.status == "stopped":
        raise UsageError(f"no live session named {name!r}", hint="see: tmuxjail list")
    from . import panes as panes_mod

    ctx = where_it_runs(ctx, row, "stop")
    if panes_mod.placement(row) != "session":  # a window or split in someone else's session
        panes_mod.kill(ctx.tmux, row)
    elif ctx.tmux.has_session(row.tmux_session):
        panes = [p for p in ctx.tmux.panes() if p.session_name == row.tmux_session]
        if panes and panes[0].tmuxjail_id != row.id:
            raise UsageError(f"tmux session {row.tmux_session!r} is not this tmuxjail session; not killing it")
        ctx.tmux.kill_session(row.tmux_session)
    store.update_session(row.id, status="stopped")
    store.event("stop", row.id)
    from . import audit

    audit.run(store, row)  # the session's last word: list --all and show keep it
    log.info("stop", session=name)
    return describe(ctx, store.find(name))
