from __future__ import annotations

import json
from pathlib import PurePosixPath

from tmuxjail.net import stub

from .base import UUID, Adapter, Certification, Conversation

_TRIPLES = {
    "x86_64": ("codex-linux-x64", "x86_64-unknown-linux-musl"),
    "aarch64": ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
    "arm64": ("codex-darwin-arm64", "aarch64-apple-darwin"),
}


class Codex(Adapter):
    def native_candidates(self, found: PurePosixPath, machine: str) -> list[PurePosixPath]:
        # npm installs bin/codex.js, a Node launcher that execve()s the native binary shipped in
        # the optional dependency @openai/codex-<platform>; run that binary directly.
        if found.name != "codex.js" or machine not in _TRIPLES:
            return []
        pkg, triple = _TRIPLES[machine]
        root = found.parent.parent  # .../node_modules/@openai/codex
        rel = PurePosixPath(pkg, "vendor", triple, "bin", "codex")
        return [root / "node_modules" / "@openai" / rel, root.parent / rel]

    def start_argv(self, exe, native_id, extra, home="", cwd=""):
        return [*exe, "--no-daemon", *extra]

    def resume_argv(self, exe, native_id, extra, home="", cwd=""):
        # Never `resume --last`: the latest conversation of this folder in a CODEX_HOME other
        # sessions share is as likely theirs. Codex takes no id up front: tmuxjail learns it.
        if not native_id:
            return [*exe, "--no-daemon"]
        return [*exe, "--no-daemon", "resume", native_id]

    def mcp_args(self, pol):
        # -c merges into the private home's config.toml (the agent can add servers there, which
        # then run inside the jail, with its limits): tmuxjail's servers hold no secret, only the stub.
        if not pol.mcp:
            return []
        def entry(s):
            command, *args = stub.command(pol.mcp_stub, s._asdict())
            return f"{s.name}={{command={json.dumps(command)},args=[{','.join(map(json.dumps, args))}]}}"

        return ["-c", f"mcp_servers={{{','.join(map(entry, pol.mcp))}}}"]

    def certify_child_args(self, probe, out):
        # Codex's own bubblewrap, nested inside ours; workspace-write so the probe can report.
        return ["sandbox", "-c", 'sandbox_mode="workspace-write"', "--", "/bin/sh", probe, out]


ADAPTER = Codex(provider="codex", takes_mcp=True, credential_files=(".codex/auth.json",), login_args=("login",),
                home_env={"CODEX_HOME": ".codex"}, home_dirs=(".codex",),
                # config.toml: notify, mcp_servers, hooks, profiles, model_providers, shell
                # environment; hooks.json: hooks; .env: loaded into codex's own environment, which
                # its tools inherit; rules/: commands it then runs without asking; plugins/: MCP
                # servers and hooks of the plugins config.toml enables. Codex rewrites none of
                # them on its own (only on /model, a trust answer or `codex mcp add`): read-only.
                state_guards=(".codex/config.toml", ".codex/hooks.json", ".codex/.env", ".codex/rules/",
                              ".codex/plugins/"),
                seatbelt_args=("--sandbox", "danger-full-access"),
                # $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<id>.jsonl, made at the first
                # message and held open while the CLI runs; on exit: "codex resume <id>".
                conversation=Conversation(state_dir=".codex/sessions", file=rf"rollout-[0-9T-]+-({UUID})\.jsonl",
                                          screen=rf"codex resume ({UUID})"),
                certify=Certification(
                    first_screen=(r"Welcome to Codex", r"Sign in with ChatGPT", r"OpenAI's command-line coding agent"),
                    state_dir=".codex", token_files=(".codex/installation_id",),
                    resume_syntax=r"--no-daemon resume [0-9a-f-]{36}",
                    child_note="`codex sandbox -c sandbox_mode=\"workspace-write\" -- sh PROBE`: Codex's own bwrap nested in ours"))
