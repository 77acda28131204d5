"""One `tmuxjail certify PROVIDER` run: check what it needs, certify each mode in the scratch
world, snapshot the real HOME around it, then write the evidence (file, then store event)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__, identity, profiles
from .. import config as config_mod
from .. import paths as paths_mod
from ..adapters import get as get_adapter
from ..errors import TmuxjailError, UsageError
from ..registry import MODES, PROVIDERS, Mode
from ..store import Store
from .report import suggest
from .scratch import Run, other_instances
from .snapshot import changed, snapshot
from .steps import certify_mode

if TYPE_CHECKING:
    from ..adapters.base import Adapter, Certification
    from ..paths import Paths


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def driven(provider: str, standin: bool, env: dict[str, str] | None) -> tuple[Adapter, Certification]:
    """The provider's adapter and its certify hooks, or a one-line UsageError."""

    adapter = get_adapter(provider)
    if adapter.certify is None:
        known = [p for p in PROVIDERS if get_adapter(p).certify is not None]
        raise UsageError(f"certify: no certification driver for {provider!r}", hint="choose one of: " + ", ".join(known))
    if provider == "cursor" and not standin:
        raise UsageError("certify cursor: the Cursor CLI is not on npm; certify its documented contract with --standin")
    if standin and provider != "cursor":
        raise UsageError("--standin applies to cursor only")
    for tool in ("tmux", "bwrap"):
        if not shutil.which(tool, path=(env or os.environ).get("PATH", os.defpath) + ":/usr/bin"):
            raise UsageError(f"certify needs {tool}", hint="run `tmuxjail doctor`")
    return adapter, adapter.certify


def certify_modes(run: Run, modes: tuple[Mode, ...], real_paths: Paths) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(what was found and how it is identified, one result per mode). Raises TmuxjailError when
    the CLI cannot be found at all."""
    profile = profiles.load(run.provider)
    if run.standin:
        run.install_cursor_standin()
    cfg = config_mod.load(real_paths.config_file)
    exe = None
    if run.provider in cfg.executables:  # the user's own choice of executable, re-anchored
        exe = cfg.executables[run.provider].replace("~", str(real_paths.home), 1)
        cfgdir = run.home / ".config/tmuxjail"
        cfgdir.mkdir(parents=True, exist_ok=True)
        (cfgdir / "config.toml").write_text(f'[providers.{run.provider}]\nexecutable = {json.dumps(exe)}\n')
    path_env = run.env.get("PATH", os.defpath)
    found = identity.find(profile.executables, path_env, exe, run.provider)
    resolved = identity.resolve(run.adapter, found, path_env, None)
    ident = resolved.identity.to_data()
    executable = {"path": ident["path"], "sha256": ident["sha256"], "found": str(found), "extra": ident["extra"],
                  "install_roots": list(resolved.install_roots), "version": ident["version"]}
    results = []
    for mode in modes:
        try:
            results.append(certify_mode(run, mode))
        except TmuxjailError as exc:
            results.append({"mode": mode, "ok": False, "checks": [
                {"check": "certification ran", "ok": False, "observed": exc.message}]})
        finally:
            run.tmux("kill-server")
    return executable, results


def run_certify(provider: str, modes: tuple[str, ...], standin: bool = False, output: str | None = None,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    adapter, hooks = driven(provider, standin, env)
    real_env = dict(os.environ if env is None else env)
    trials = tuple(dict.fromkeys(Mode(m) for m in modes or MODES))  # argparse checked each name
    profile = profiles.load(provider)
    real_paths = paths_mod.get()
    started = _now()
    real_before = snapshot(real_paths.home, content="state")
    run = Run(adapter, hooks, standin, sys.executable, real_env)
    executable: dict[str, Any] | None = None
    results: list[dict[str, Any]] = []
    error = None
    try:
        executable, results = certify_modes(run, trials, real_paths)
    except TmuxjailError as exc:
        error = exc.message
    finally:
        run.close()
    real_after = snapshot(real_paths.home, content="state")
    real_changed = changed(real_before, real_after)
    version = executable.pop("version") if executable else None
    record: dict[str, Any] = {
        "provider": provider, "tmuxjail": __version__, "started_at": started, "finished_at": _now(),
        "cli_version": version, "executable": executable, "standin": standin,
        "profile": {"version": profile.profile_version, "hash": profile.hash,
                    "certification": profile.certification, "certified_versions": list(profile.certified_versions)},
        "uid": os.getuid(), "kernel": os.uname().release,
        "scratch": str(run.root), "tmux_server": run.sock,
        "real_home": {"path": str(real_paths.home), "entries": len(real_after), "unchanged": not real_changed,
                      "changed": real_changed[:50],
                      "method": "lstat of every entry (type, mode, owner, inode, mtime_ns, ctime_ns, size, "
                                "link target) + sha256 of small files at depth <= 2 and in agent state dirs"},
        "modes": {r["mode"]: r for r in results},
        "error": error,
    }
    record["ok"] = not error and not real_changed and bool(results) and all(r["ok"] for r in results)
    others = other_instances(executable["path"], str(run.root)) if executable else []
    record["hint"] = None if record["ok"] or not others else (
        f"{len(others)} other process(es) of this CLI run outside the certification (pid "
        f"{', '.join(map(str, others[:5]))}): they share its state and may have caused this; stop them and rerun")
    record["suggestion"] = suggest(profile, record)
    if not real_env.get("TMUXJAIL_CERTIFY_KEEP"):
        shutil.rmtree(run.root, ignore_errors=True)
    save(record, output, real_paths, started)
    return record


def save(record: dict[str, Any], output: str | None, real_paths: Paths, started: str) -> None:
    """Evidence, written after the last snapshot of the real home: a JSON file and a store event."""
    out = Path(output) if output else paths_mod.ensure_private_dir(real_paths.state_dir / "certify") / \
        f"{record['provider']}-{record['cli_version']}-{started.replace(':', '')}.json"
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    record["evidence_file"] = str(out)
    store = Store(real_paths.store)
    executable = record["executable"]
    store.event("certify", None, provider=record["provider"], cli_version=record["cli_version"], ok=record["ok"],
                sha256=executable and executable["sha256"], profile_version=record["profile"]["version"],
                standin=record["standin"], modes={m: r["ok"] for m, r in record["modes"].items()},
                evidence_file=str(out), real_home_unchanged=record["real_home"]["unchanged"])
    store.close()
