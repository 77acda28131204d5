"""A Python API for programs that drive agents with libtmux: start a jailed CLI, resume it, list
and stop jails, and get libtmux `Session` and `Pane` objects back to keep going with.

    import libtmux
    from tmuxjail import api

    server = libtmux.Server(socket_name="agents")
    jail = api.start("codex", workspace="/src/app", mode="isolated", server=server)
    jail.pane.send_keys("explain this repository")

Every call runs what the CLI command of the same name runs (tmuxjail.commands and
tmuxjail.status), never attaches a terminal and never asks a question. Refusals and errors are
the CLI's exceptions, re-exported here, each with a one-line `message`, a `hint` and the exit
`code` the CLI would use (UsageError 2, ResumeRefused 3, NotApproved 4, SandboxUnavailable 5,
TmuxjailError 1).

The libtmux objects in a result belong to tmuxjail's own Server for that socket, which runs each
tmux command with os.environ narrowed to the tmux client variables (no credential reaches the
tmux server); meanwhile other threads see the narrowed environment too.
"""

from __future__ import annotations

import builtins
import os
import types
import typing as t
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import listing, log, status
from . import paths as paths_mod
from . import worktree as worktrees
from .context import Context
from .errors import (
    ConfigError,
    NotApproved,
    ResumeRefused,
    SandboxUnavailable,
    TmuxjailError,
    UsageError,
)
from .request import StartRequest, canonical_workspaces
from .restrict import from_file
from .sessions.place import cwd
from .sessions.place import here as placed
from .sessions.resume import resume as resume_command
from .sessions.start import start as start_command
from .sessions.stop import stop as stop_command
from .tmux import Tmux

if t.TYPE_CHECKING:
    import libtmux

__all__ = ["ConfigError", "Jail", "NotApproved", "ResumeRefused", "SandboxUnavailable", "TmuxjailError",
           "UsageError", "list", "resume", "start", "stop"]


@dataclass(frozen=True)
class Jail:
    """One jailed session as `tmuxjail list --json` describes it, with its libtmux objects."""

    name: str
    id: str
    provider: str
    mode: str | None
    status: str | None
    fingerprint: str | None
    workspace: str
    tmux_socket: str | None
    tmux_session: str | None
    pane_id: str | None
    session: libtmux.Session | None = field(repr=False, compare=False)
    pane: libtmux.Pane | None = field(repr=False, compare=False)
    record: Mapping[str, t.Any] = field(repr=False, compare=False)  # the whole JSON row


def _context(server: libtmux.Server | None, socket_name: str | None, socket_path: str | None,
             verbose: bool = False) -> Context:
    if server is not None:
        if socket_name or socket_path:
            raise UsageError("give either a libtmux server or a socket, not both")
        socket_name = getattr(server, "socket_name", None)
        socket_path = getattr(server, "socket_path", None)
        socket_path = str(socket_path) if socket_path else None
    if why := paths_mod.home_problem(os.environ):
        raise TmuxjailError(f"{why}: tmuxjail keeps its state under HOME and mounts private homes there",
                            hint=paths_mod.HOME_FIX)
    ctx = Context(tmux=Tmux(socket_name, socket_path))
    log.setup(ctx.paths.log_file, verbose)
    return ctx


def _jail(ctx: Context, row: Mapping[str, t.Any]) -> Jail:
    socket = row.get("tmux_socket")
    tmux = Tmux.at(socket, ctx.env) if socket and socket != ctx.tmux.socket else ctx.tmux
    live = row.get("status") not in ("stopped", "gone")
    session, pane = tmux.objects(row.get("tmux_session"), row.get("tmux_pane")) if live else (None, None)
    return Jail(name=row["name"], id=row["id"], provider=row["provider"], mode=row.get("mode"),
                status=row.get("status"), fingerprint=row.get("fingerprint"), workspace=row["workspace"],
                tmux_socket=socket, tmux_session=row.get("tmux_session"), pane_id=row.get("tmux_pane"),
                session=session, pane=pane, record=types.MappingProxyType(dict(row)))


def start(provider: str, *, workspace: str | os.PathLike[str] | None = None,
          workspaces: Sequence[str | os.PathLike[str]] = (), mode: str | None = None, name: str | None = None,
          args: Sequence[str] = (), env: str | None = None, env_name: str = "default", capability: Sequence[str] = (),
          capabilities: Sequence[str] = (), network: str | None = None, allow_domain: Sequence[str] | None = None,
          detach: bool = True, here: bool = False, split: str | None = None, client: str | None = None,
          non_interactive: bool = True, dry_run: bool = False, restrict: str | os.PathLike[str] | None = None,
          backend: str | None = None, candidate: str | None = None, json: bool = False, verbose: bool = False,
          server: libtmux.Server | None = None, socket_name: str | None = None,
          socket_path: str | None = None, worktree: str | bool | None = None,
          from_ref: str | None = None, mcp: Sequence[str] = ()) -> t.Any:
    """Start `provider` in a new jailed tmux session and return its Jail once the jail runs (as
    `tmuxjail start --detach --non-interactive`). Every option of `tmuxjail start` is a keyword
    here, named as the option (`-` as `_`):

    - `workspace` (and `workspaces`, more of them; default: the current directory), `mode`,
      `name`, `env` (`env_name` is the same, its older name), `network`, `allow_domain`
      (patterns, as --allow-domain), `capability` (`capabilities` too), `restrict` (a
      restriction file), `candidate` (an approved discovery candidate, verified mode), `backend`;
    - `worktree` (a name, or True for a generated one) and `from_ref` (--worktree, --from): a new
      git worktree of the repository at the workspace, on a branch of its own (docs/worktrees.md);
    - `mcp` (names of the config's [mcp.NAME] servers, as --mcp; docs/mcp.md);
    - `here` (True) or `split` ("h" or "v"): join the tmux session this process runs in
      (inside tmux); `detach` (default True) False then selects the new window, and with
      `client` a tmux client is switched to the jail (the API itself never attaches a terminal);
    - `dry_run` (True): run nothing and return the dict `tmuxjail start --dry-run --json` prints;
    - `non_interactive` and `json` are accepted for the same command line: the API never asks
      (a missing approval raises NotApproved) and always returns the Jail, whose `record` is
      the `--json` row; `verbose` also writes log lines to stderr.
    The server: `server`, or -L `socket_name` / -S `socket_path`, else the one this process is
    in, else the default. `args` go to the CLI."""
    if env is not None and env_name not in ("default", env):
        raise UsageError("give env or env_name, not both")
    if here and split is not None:
        raise UsageError("give here or split, not both")
    ctx = _context(server, socket_name, socket_path, verbose)
    spaces = tuple(os.fspath(w) for w in ([workspace] if workspace is not None else []) + builtins.list(workspaces))
    made = None
    if worktree is not None and worktree is not False:
        if dry_run or len(spaces) > 1:
            raise UsageError("worktree: no dry run, and one repository (at most one workspace)")
        made = worktrees.for_start(ctx.paths, canonical_workspaces(spaces, cwd(ctx))[0], provider,
                                   None if worktree is True else str(worktree), from_ref, mode)
        spaces = (made["path"],)
    elif from_ref is not None:
        raise UsageError("from_ref goes with worktree")
    with worktrees.discarded_on_failure(made):
        return _start(ctx, provider, spaces, made, mode=mode, name=name, args=args, env=env, env_name=env_name,
                      capability=capability, capabilities=capabilities, network=network, allow_domain=allow_domain,
                      detach=detach, here=here, split=split, client=client, dry_run=dry_run, restrict=restrict,
                      backend=backend, candidate=candidate, mcp=mcp)


def _start(ctx, provider, spaces, made, *, mode, name, args, env, env_name, capability, capabilities, network,
           allow_domain, detach, here, split, client, dry_run, restrict, backend, candidate, mcp) -> t.Any:
    request = StartRequest.build(
        cwd(ctx), provider, mode=mode, workspaces=spaces, name=name, env_name=env if env is not None else env_name,
        capabilities=(*capability, *capabilities), detach=detach, non_interactive=True, dry_run=dry_run,
        args=tuple(args), backend=backend, restriction=from_file(os.fspath(restrict) if restrict else None),
        network=network, candidate=candidate, allow_domains=None if allow_domain is None else tuple(allow_domain),
        worktree=made, mcp=tuple(mcp))
    place = None
    if (here or split) and not dry_run:
        place = placed(ctx.tmux, ctx.env, "window" if here else "split", split)
    result = start_command(ctx, request, place)
    if dry_run:
        return result
    if client and not detach:
        ctx.tmux.switch_client(client, result.get("tmux_pane") or f"={result['tmux_session']}")
    return _jail(ctx, result)


def resume(name: str, *, accept_changes: bool = False, server: libtmux.Server | None = None,
           socket_name: str | None = None, socket_path: str | None = None) -> Jail:
    """Resume a session on the server it runs on, if its policy fingerprint still matches
    (else ResumeRefused with `data["reasons"]`), as `tmuxjail resume --detach`."""
    ctx = _context(server, socket_name, socket_path)
    return _jail(ctx, resume_command(ctx, name, detach=True, accept_changes=accept_changes))


def stop(name: str, *, server: libtmux.Server | None = None, socket_name: str | None = None,
         socket_path: str | None = None) -> Jail:
    """Stop a session (kill its jail's tmux session or panes), as `tmuxjail stop`."""
    ctx = _context(server, socket_name, socket_path)
    return _jail(ctx, stop_command(ctx, name))


def list(*, all: bool = False, server: libtmux.Server | None = None, socket_name: str | None = None,
         socket_path: str | None = None) -> builtins.list[Jail]:
    """The jails tmuxjail knows (stopped ones too with all=True), one per session, as
    `tmuxjail list --json` shows their own rows; with a server or socket, only those on it."""
    ctx = _context(server, socket_name, socket_path)
    only = ctx.tmux.socket if (server is not None or socket_name or socket_path) else None
    out, seen = [], set()
    for row in listing.public(status.rows(ctx, include_stopped=all, activity=False, server=only)):
        if row["id"] not in seen:  # the session's own row comes first; then its other panes
            seen.add(row["id"])
            out.append(_jail(ctx, row))
    return out
