"""Every location tmuxjail uses, from platformdirs (so HOME and XDG_* relocate everything)."""

from __future__ import annotations

import os
from collections import namedtuple
from functools import cache
from pathlib import Path

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

    def private_home(self, provider: str, env_name: str) -> Path:
        return self.homes / provider / env_name

    def own_dirs(self) -> tuple[Path, ...]:
        return (self.config_dir, self.state_dir, self.data_dir)


@cache
def get() -> Paths:
    from platformdirs import PlatformDirs

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
