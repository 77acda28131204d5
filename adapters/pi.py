from __future__ import annotations

from dataclasses import dataclass

from .base import Adapter


@dataclass(frozen=True)
class Pi(Adapter):
    def resume_argv(self, exe, native_id, extra):
        # Pi keys sessions by cwd (sessions/--<cwd>--/); the jail keeps the same workspace path.
        return [*exe, *(["--session", native_id] if native_id else ["--continue"])]


ADAPTER = Pi(provider="pi", home_env={"PI_CODING_AGENT_DIR": ".pi/agent"}, home_dirs=(".pi/agent",))
