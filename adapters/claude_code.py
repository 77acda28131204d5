from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from tmuxjail.net import stub
from tmuxjail.registry import Mode

from .base import Adapter, Certification, new_uuid

_PKGS = {"x86_64": "claude-code-linux-x64", "aarch64": "claude-code-linux-arm64", "arm64": "claude-code-darwin-arm64"}


class ClaudeCode(Adapter):
    def native_candidates(self, found: PurePosixPath, machine: str) -> list[PurePosixPath]:
        # bin/claude.exe is normally the native binary hard-linked by the postinstall; when the
        # postinstall did not run it is a shell stub, and the binary sits in the platform package.
        if found.name != "claude.exe" or machine not in _PKGS:
            return []
        root = found.parent.parent  # .../node_modules/@anthropic-ai/claude-code
        rel = PurePosixPath(_PKGS[machine], "claude")
        return [root / "node_modules" / "@anthropic-ai" / rel, root.parent / rel]

    def new_native_id(self) -> str | None:
        return new_uuid()

    def start_argv(self, exe, native_id, extra, home="", cwd=""):
        return [*exe, *(["--session-id", native_id] if native_id else []), *extra]

    def mcp_args(self, pol):
        # Strict modes: only tmuxjail's MCP configuration, read-only in the jail; never .mcp.json,
        # the project's settings or the private home's, all of which the agent can write. One word
        # with "=": --mcp-config takes several files, and would read a prompt right after it as one
        # (today start_argv puts --session-id between them; this does not lean on that).
        if not pol.mode.strict or pol.backend != "bwrap":
            return []
        return ["--strict-mcp-config", *([f"--mcp-config={stub.CONFIG}"] if pol.mcp else [])]

    def resume_argv(self, exe, native_id, extra, home="", cwd=""):
        # Never --continue ("the most recent conversation in the current directory"): another's.
        return [*exe, *(["--resume", native_id] if native_id else [])]

    def conversation_file(self, cwd: str, native_id: str) -> str | None:
        # projects/<cwd, every non-alphanumeric -> '-'>/<id>.jsonl (2.1.332); a longer name is
        # cut and hashed by Claude: unknown here. Written at the first message only, and
        # `--resume` of an id with none fails ("No conversation found").
        mangled = re.sub(r"[^a-zA-Z0-9]", "-", cwd)
        return None if len(mangled) > 200 else f".claude/projects/{mangled}/{native_id}.jsonl"

    def env(self, home: str, mode: Mode, uid: int) -> dict[str, str]:
        env = super().env(home, mode, uid)
        if mode == Mode.isolated:
            env["CLAUDE_CODE_TMPDIR"] = f"{home}/.claude/tmp"
        if mode == Mode.verified:
            # ~/.claude.json is rewritten by rename, which fails on a file bind (EBUSY) and is lost
            # in the tmpfs home when absent: keep it inside the approved ~/.claude directory.
            env["CLAUDE_CONFIG_DIR"] = f"{home}/.claude"
        if mode != Mode.compatibility and uid == 0:
            # Claude refuses bypass-permissions as uid 0 unless told it is sandboxed; it is.
            env["IS_SANDBOX"] = "1"
        return env


    def shared_config(self, home: str) -> tuple[str, str]:
        """(the host's ~/.claude.json, the one config file plain `claude` and a verified session
        both use). Claude reads `$CLAUDE_CONFIG_DIR/.config.json` when it exists, else
        `${CLAUDE_CONFIG_DIR:-$HOME}/.claude.json` (provider-facts 2.3); the config dir defaults to
        ~/.claude. With ~/.claude/.config.json present, `claude` on the host (no CLAUDE_CONFIG_DIR)
        and a verified session (CLAUDE_CONFIG_DIR=~/.claude) read and write the same file, instead
        of ~/.claude.json and ~/.claude/.claude.json drifting apart (issue 12.12)."""
        return f"{home}/.claude.json", f"{home}/.claude/.config.json"

    def certify_tokens(self, mode: Mode) -> tuple[str, ...]:
        if mode == Mode.compatibility:
            return (".claude.json",)  # compatibility does not relocate: Claude's default place
        if mode == Mode.verified:
            # A verified start seeds ~/.claude/.config.json from ~/.claude.json, and Claude reads
            # (and rewrites) that one first: one config shared with plain `claude` (issue 12.12).
            return (".claude/.config.json",)
        return super().certify_tokens(mode)

    def certify_child_args(self, probe, out):
        # apiKeyHelper is a shell command Claude runs before any login or API call.
        return ["-p", "tmuxjail certify probe", "--settings", json.dumps({"apiKeyHelper": f"/bin/sh {probe} {out}"})]


ADAPTER = ClaudeCode(
    provider="claude-code",
    takes_mcp=True,
    credential_files=(".claude/.credentials.json",),  # its first screen signs in
    home_env={"CLAUDE_CONFIG_DIR": ".claude"},
    home_dirs=(".claude", ".claude/tmp"),
    # settings.json: hooks, statusLine, apiKeyHelper, env, permissions, enabledPlugins; commands/
    # and agents/: slash commands (their !`cmd` lines run) and subagents (hooks, mcpServers);
    # hooks/: where hook scripts are kept; plugins/: installed plugins' hooks and MCP servers;
    # ~/.claude.json: mcpServers (a verified jail's Claude uses .claude/.config.json instead, see
    # shared_config). Claude writes these only when asked to: read-only.
    state_guards=(".claude/settings.json", ".claude/commands/", ".claude/agents/", ".claude/hooks/",
                  ".claude/plugins/", ".claude.json"),
    # The global config (mcpServers, per-project mcpServers) that Claude rewrites several times per
    # run (by rename, falling back to an in-place write on EBUSY: 2.1.332): a private copy.
    state_copies=(".claude/.config.json",),
    seatbelt_args=("--settings", '{"sandbox":{"enabled":false}}'),
    certify=Certification(
        first_screen=(r"Welcome to Claude Code", r"Unable to connect to Anthropic services", r"Select login method",
                      r"Choose the text style"),
        state_dir=".claude", token_files=(".claude/.claude.json",), resume_syntax=r"--resume [0-9a-f-]{36}",
        child_note="`claude -p --settings '{\"apiKeyHelper\": \"sh PROBE\"}'`: Claude runs the key helper as a "
                   "child before any API call",
        probe_env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}),
)
