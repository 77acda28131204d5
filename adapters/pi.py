from __future__ import annotations

from .base import Adapter, Certification, new_uuid


def session_file(home: str, cwd: str, native_id: str) -> str:
    """The conversation file tmuxjail names up front, in the directory Pi itself uses for this cwd
    (`<agent dir>/sessions/--<cwd, '/' '\\' ':' -> '-'>--/`), so `pi -r` on the host lists it too.
    Pi opens a missing --session file as a new conversation written there (0.73.1, main.js)."""
    mangled = cwd.lstrip("/\\").replace("/", "-").replace("\\", "-").replace(":", "-")
    return f"{home}/.pi/agent/sessions/--{mangled}--/tmuxjail-{native_id}.jsonl"


class Pi(Adapter):
    def new_native_id(self) -> str | None:
        return new_uuid()

    def start_argv(self, exe, native_id, extra, home="", cwd=""):
        if native_id and home and cwd:
            return [*exe, "--session", session_file(home, cwd, native_id), *extra]
        return [*exe, *extra]

    def resume_argv(self, exe, native_id, extra, home="", cwd=""):
        # Never --continue (the latest conversation of this cwd, maybe another session's).
        return self.start_argv(exe, native_id, [], home, cwd)


ADAPTER = Pi(provider="pi", credential_files=(".pi/agent/auth.json",),  # /login in its first screen
             home_env={"PI_CODING_AGENT_DIR": ".pi/agent"}, home_dirs=(".pi/agent",),
             # models.json: an apiKey "!cmd" is run by the shell; extensions/: code pi loads; bin/:
             # the fd and rg pi runs; tools/: where older pis kept them (0.73.1 moves a tools/fd or
             # tools/rg into bin/). Pi does not write them: read-only. (Not the legacy hooks/ and
             # commands/: 0.73.1 no longer loads hooks, renames commands/ to prompts/, and warns
             # about both when they exist, so they are not created.)
             state_guards=(".pi/agent/models.json", ".pi/agent/extensions/", ".pi/agent/bin/",
                           ".pi/agent/tools/"),
             state_empty={"models.json": '{"providers": {}}\n'},  # 0.73.1 requires "providers"
             # settings.json (shellPath, shellCommandPrefix, packages, extensions) is rewritten by
             # pi in place (lastChangelogVersion, /settings): a private copy.
             state_copies=(".pi/agent/settings.json",),
             # auth.json: an api_key credential's "!command" is run by the shell, but Pi refreshes
             # OAuth tokens in it in place and the login is shared: audited.
             state_audit=(".pi/agent/auth.json",), plain="pi",
             certify=Certification(
                 first_screen=(r"pi v\d+\.\d+", r"No models available"), state_dir=".pi/agent",
                 token_files=(".pi/agent/auth.json", ".pi/agent/settings.json"),
                 resume_syntax=r"--session \S+/tmuxjail-[0-9a-f-]{36}\.jsonl", child_by_keys=True,
                 child_note="`!sh PROBE` typed into Pi's editor: Pi's user bash command runs without a model "
                            "(its bash tool needs one)",
                 env={"PI_OFFLINE": "1"}))
