"""A cold start's head start (issue 18.4): before the start code loads (pydantic, the profiles,
the policy: a few hundred ms), find the executable the start will run and, when the digest cache
does not hold its digest under today's stat identity (a new CLI version), hash it in a thread
meanwhile. Stdlib only.

A guess, never a decision: identity.sha256_file takes a digest over only for the very file it
opens then (same path, same stat identity, the digest cache's own trust), and hashes the file
itself otherwise. So whatever goes wrong here (a config or profile the start will refuse, an
executable that moves) costs at most a thread's work, never a different digest, and nothing runs
before the digest is known: the policy, and so its fingerprint, waits for it."""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path

from . import config as config_mod
from . import identity
from .adapters import get as get_adapter
from .context import Context


def start(ctx: Context, provider: str | None) -> None:
    if not provider or provider == "shell":
        return
    try:
        data = resources.files("tmuxjail.profile_data").joinpath(f"{provider}.toml").read_bytes()
        names = tuple(str(n) for n in tomllib.loads(data.decode("utf-8")).get("executables", ()))
        cfg = config_mod.load(ctx.paths.config_file)
        path_env = ctx.env.get("PATH", os.defpath)
        found = identity.find(names, path_env, cfg.executables.get(provider), provider)
        at = identity.locate(get_adapter(provider), found, path_env)
        files: list[Path] = [at.real, *([at.interpreter] if at.interpreter else [])]
        identity.hash_ahead(files, ctx.store)
    except Exception:  # noqa: BLE001 - a guess: the start itself finds anything wrong out, and says it
        return
