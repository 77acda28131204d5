"""Every location tmuxjail uses, from platformdirs (so HOME and XDG_* relocate everything)."""

from __future__ import annotations

import os
import pwd
import re
from collections import namedtuple
from functools import cache
from pathlib import Path

from platformdirs import PlatformDirs, PlatformDirsABC

from . import hostos
from .canon import sha256
from .errors import SandboxUnavailable
from .subpath import inside

APP = "tmuxjail"


class Paths(namedtuple("_Paths", "home config_dir state_dir data_dir")):
    __slots__ = ()

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def store(self) -> Path:
        return self.state_dir / "store.db"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "tmuxjail.log"

    @property
    def spool(self) -> Path:
        """Launch specs (0600, read and deleted by the in-pane launcher)."""
        return self.state_dir / "spool"

    @property
    def homes(self) -> Path:
        return self.data_dir / "homes"

    def private_home(self, provider: str, env_name: str, workspace: str | None = None) -> Path:
        """One home per provider and workspace by default: what one project's agent plants there
        (shell rc files, CLI plugins and settings, caches) must not follow the user into the next
        project. `--env NAME` names a home shared on purpose by every workspace that names it."""
        if env_name != "default" or workspace is None:
            return self.homes / provider / env_name
        base = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(workspace)).strip("-_")[:24] or "ws"
        return self.homes / provider / f"ws-{base}-{sha256(workspace.encode()).hexdigest()[:12]}"

    def state_copies(self, provider: str, env_name: str, workspace: str | None = None) -> Path:
        """Where a verified jail's private copies of its CLI's command files live (jail.seed_copies),
        one set per private-home key: what the jail writes there never reaches the host's CLI."""
        return self.data_dir / "state-copies" / self.private_home(provider, env_name, workspace).relative_to(self.homes)

    def credentials(self, provider: str) -> Path:
        """The credentials store of one provider (`tmuxjail login`): its credential files, under
        the state directory, which no jail sees; a session gets only the files, bound one by one."""
        return self.state_dir / "credentials" / provider

    def own_dirs(self) -> tuple[Path, ...]:
        return (self.config_dir, self.state_dir, self.data_dir)


@cache
def get() -> Paths:
    if hostos.darwin():  # under the macOS seam too: the layout a Mac has (~/Library/...)
        from platformdirs.macos import MacOS

        dirs: PlatformDirsABC = MacOS(APP)
    else:
        dirs = PlatformDirs(APP)
    return Paths(
        home=Path(os.path.expanduser("~")),
        config_dir=Path(dirs.user_config_dir),
        state_dir=Path(dirs.user_state_dir),
        data_dir=Path(dirs.user_data_dir),
    )


def ensure_private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


# A descriptor of a directory to work beneath: O_PATH on Linux; macOS has none (O_RDONLY there).
DIR_FD = getattr(os, "O_PATH", 0) or os.O_RDONLY


def make_dirs_beneath(root: str, path: str, mode: int = 0o700) -> None:
    os.close(dir_beneath(root, path, mode))


def dir_beneath(root: str, path: str, mode: int = 0o700) -> int:
    """mkdir -p of path below root inside a tree a jail can write (a private home, an approved
    host path), one component at a time and never through a link: a `~/.pi -> ~/.ssh` the agent
    left must not make tmuxjail create ~/.ssh/agent on the host. Refuses (exit 5) on a link or a
    non-directory."""
    rel = [c for c in path[len(root.rstrip("/")):].split("/") if c]
    if not inside(path, root) or any(c in (".", "..") for c in rel):
        raise SandboxUnavailable(f"{path} is not a canonical path below {root}; refusing to create it")
    flags = DIR_FD | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
    where = root
    fd = os.open(root, flags)
    try:
        for name in rel:
            where = os.path.join(where, name)
            try:
                os.mkdir(name, mode, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError:
                raise SandboxUnavailable(
                    f"{where} is a symbolic link or not a directory, in a tree the jail can write; "
                    "refusing to follow it", hint=f"look at it, remove it (rm {where}), then try again") from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd  # a DIR_FD fd of path (the caller closes it)


def home_problem(env) -> str | None:
    """Why $HOME cannot be used (tmuxjail keeps its state under it, and isolated mode mounts the
    private home at that path), or None. An unset HOME means the password database's."""
    home = env.get("HOME")
    if home is None:
        home = pwd.getpwuid(os.getuid()).pw_dir
    if not home:
        return "HOME is empty"
    if not os.path.isabs(home):
        return f"HOME={home} is not an absolute path"
    if os.path.realpath(home) == "/":
        return f"HOME={home} is the root directory"
    if not os.path.exists(home):
        return f"HOME={home} does not exist"
    if not os.path.isdir(home):
        return f"HOME={home} is not a directory"
    return None


HOME_FIX = "export HOME=/a/directory/you/own   (e.g. the home in your passwd entry), then rerun"


def remove_tree(path: str) -> None:
    """rmtree that also removes what a jail left unwritable or unreadable (a directory mode 0555
    or 000): the tree is ours, its modes are the jail's. Each directory is opened up before it is
    entered (os.walk goes top down); links are removed, never followed."""
    import shutil
    import stat

    def open_up(p: str) -> None:
        try:
            if not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
        except OSError:
            pass

    open_up(path)
    for root, dirs, _files in os.walk(path, onerror=lambda e: None):
        for d in dirs:
            open_up(os.path.join(root, d))
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        shutil.rmtree(path)  # what is still there says why, once
