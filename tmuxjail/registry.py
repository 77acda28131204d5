"""The names tmuxjail is built around, in one place: the security modes and the providers.
argparse choices, config validation, the menus, certify and shell completion all read them here.
Stdlib only (enum), so the fast paths can import it."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    compatibility = "compatibility"
    isolated = "isolated"
    verified = "verified"

    @property
    def strict(self) -> bool:
        return self is not Mode.compatibility


MODES: tuple[str, ...] = tuple(m.value for m in Mode)

# provider id -> its adapter module in tmuxjail.adapters (and profile_data/<id>.toml)
PROVIDERS: dict[str, str] = {
    "codex": "codex",
    "claude-code": "claude_code",
    "cursor": "cursor",
    "pi": "pi",
    "shell": "shell",
}
# Providers with a real CLI to certify (the login shell has none).
CERTIFIABLE: tuple[str, ...] = ("codex", "claude-code", "pi", "cursor")
