from __future__ import annotations

from .base import Adapter, Certification


class Cursor(Adapter):
    def resume_argv(self, exe, native_id, extra, home="", cwd=""):
        # Never --continue (the latest chat, maybe another session's): no id known, a new chat.
        return [*exe, *(["--resume", native_id] if native_id else [])]

    def certify_child_args(self, probe, out):
        return ["-p", f"!/bin/sh {probe} {out}"]


# ~/.local/bin/cursor-agent links into ~/.local/share/cursor-agent/versions/<ver>/, a bash wrapper
# beside its bundled node and index.js: the whole version directory is the install root.
ADAPTER = Cursor(
    provider="cursor",
    home_env={"CURSOR_CONFIG_DIR": ".cursor"},
    home_dirs=(".cursor",),
    install_root_is_dir=True,
    # mcp.json: MCP servers; sandbox.json: what its own sandbox lets commands do (documented only).
    state_guards=(".cursor/mcp.json", ".cursor/sandbox.json"),
    # cli-config.json: permissions.allow (commands run without asking), rewritten by the CLI with
    # its login and settings: a private copy.
    state_copies=(".cursor/cli-config.json",),
    seatbelt_args=("--sandbox", "disabled"),
    # Its bundled Node's fetch ignores HTTPS_PROXY unless told (documented, not run here).
    proxy_env=(("NODE_USE_ENV_PROXY", "1"),),
    certify=Certification(
        first_screen=(r"Cursor Agent",), state_dir=".cursor", token_files=(".cursor/cli-config.json",),
        resume_syntax=r"--resume \S+",
        child_note="stand-in `cursor-agent -p '!sh PROBE'` (spawns bash from its bundled node)"),
)
