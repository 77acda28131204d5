"""Log in once (issue 31.5): `tmuxjail login PROVIDER` runs the CLI's own login in an isolated jail
of its own (an empty workspace, a fresh private home, the network of its profile's domains only),
and once that CLI has ended, keeps only the provider's credential files (the adapter's
credential_files) in the credentials store, under tmuxjail's state, which no jail sees. Strict
sessions then get exactly those files, bound one by one where the CLI reads them, when the config
says `[providers.NAME] credentials = true` (verified mode: also approved, `approve --credentials`).

The first run starts the login session; the run after its CLI has ended keeps the files and removes
the session, its workspace and its private home. Each file is read from the login jail's home
without following a link, a regular file of at most MAX_FILE bytes, and written into the store
anew (a temporary file renamed over the old one)."""

from __future__ import annotations

import os
import stat
import tempfile

from .. import paths as paths_mod
from .. import profiles
from ..adapters import Adapter
from ..adapters import get as get_adapter
from ..context import Context
from ..errors import TmuxjailError, UsageError
from ..net import policy as netpolicy
from ..registry import Mode
from ..request import LOGIN_ENV, StartRequest
from ..status import describe
from .start import start
from .stop import stop

MAX_FILE = 1 << 20
PREFIX = "login-"


def name_of(provider: str) -> str:
    return PREFIX + provider


def login(ctx: Context, provider: str) -> dict:
    adapter = get_adapter(provider)
    if not adapter.credential_files:
        raise UsageError(f"{provider}: tmuxjail does not keep this CLI's login (it names no credential file)",
                         hint="use an isolated private home (--env NAME) and log in there once")
    row = ctx.store.find(name_of(provider))
    if row is None:
        return begin(ctx, provider, adapter)
    if row.provider != provider or row.start_request.env_name != LOGIN_ENV:
        raise UsageError(f"a session named {row.name} exists that `tmuxjail login` did not start; it is left alone",
                         hint=f"tmuxjail rename {row.name} NEW, then run `tmuxjail login {provider}` again")
    return finish(ctx, row, adapter)


def begin(ctx: Context, provider: str, adapter: Adapter) -> dict:
    profile = profiles.load(provider)
    domains = netpolicy.declared(profile, profile.baseline)
    ws = tempfile.mkdtemp(prefix=f"tmuxjail-login-{provider}-")  # nothing of yours in its view
    request = StartRequest.build(ws, provider, mode=Mode.isolated.value, workspaces=(ws,), name=name_of(provider),
                                 env_name=LOGIN_ENV,
                                 args=adapter.login_args, detach=True, non_interactive=True,
                                 allow_domains=tuple(domains) or None)
    try:
        result = start(ctx, request)
    except BaseException:
        paths_mod.remove_tree(ws)
        raise
    return {"provider": provider, "session": name_of(provider), "state": "started", "workspace": ws,
            "attach": result.get("attach"), "files": list(adapter.credential_files)}


def finish(ctx: Context, row, adapter: Adapter) -> dict:
    try:
        status = describe(ctx, row)["status"] if row.status != "stopped" else "stopped"
    except TmuxjailError:
        status = "gone"  # its tmux server is gone
    if status in ("running", "starting"):
        raise UsageError(f"the login session {row.name} is still running: sign in there and end the CLI, then run "
                         f"`tmuxjail login {row.provider}` again", hint=f"tmuxjail attach {row.name}")
    kept: list[str] = []
    home = row.private_home
    if home:
        for rel in adapter.credential_files:
            data = read_beneath(home, rel)
            if data is not None:
                keep(ctx.paths.credentials(row.provider), rel, data)
                kept.append(rel)
    forget(ctx, row)
    if not kept:
        raise UsageError(f"the login session of {row.provider} ended without a login ({', '.join(adapter.credential_files)} "
                         "not written); it is removed", hint=f"run `tmuxjail login {row.provider}` to try again")
    return {"provider": row.provider, "session": row.name, "state": "kept", "files": kept,
            "store": str(ctx.paths.credentials(row.provider))}


def logout(ctx: Context, provider: str) -> dict:
    get_adapter(provider)  # an unknown provider: exit 2
    store = ctx.paths.credentials(provider)
    had = store.exists()
    if had:
        paths_mod.remove_tree(str(store))
    return {"provider": provider, "removed": had, "store": str(store)}


def read_beneath(root: str, rel: str) -> bytes | None:
    """The file rel below root, opened one component at a time without following a link; None
    when it is absent, a link, not a regular file, or larger than MAX_FILE."""
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | flags)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        nxt = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | flags, dir_fd=fd)
        os.close(fd)
        fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
            return None
        return os.read(fd, MAX_FILE + 1)[:MAX_FILE]
    except OSError:
        return None
    finally:
        os.close(fd)


def keep(store, rel: str, data: bytes) -> None:
    """data as the store's file rel (0600, in 0700 directories), written aside and renamed in."""
    target = store / rel
    dirs, sub = [store.parent, store], store
    for part in target.relative_to(store).parts[:-1]:
        sub = sub / part
        dirs.append(sub)
    for d in dirs:
        paths_mod.ensure_private_dir(d)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".keep-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def forget(ctx: Context, row) -> None:
    """The login session gone: its tmux session, its record, its private home and workspace."""
    if row.status != "stopped":
        try:
            stop(ctx, row.name)
        except UsageError:
            pass
    ctx.store.forget_session(row.id)
    for path in (row.private_home, *row.start_request.workspaces):
        if path and os.path.basename(path).startswith((LOGIN_ENV, "tmuxjail-login-")):
            paths_mod.remove_tree(path)
