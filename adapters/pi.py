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


ADAPTER = Pi(provider="pi", home_env={"PI_CODING_AGENT_DIR": ".pi/agent"}, home_dirs=(".pi/agent",),
             certify=Certification(
                 first_screen=(r"pi v\d+\.\d+", r"No models available"), state_dir=".pi/agent",
                 token_files=(".pi/agent/auth.json", ".pi/agent/settings.json"),
                 resume_syntax=r"--session \S+/tmuxjail-[0-9a-f-]{36}\.jsonl", child_by_keys=True,
                 child_note="`!sh PROBE` typed into Pi's editor: Pi's user bash command runs without a model "
                            "(its bash tool needs one)",
                 env={"PI_OFFLINE": "1"}))
