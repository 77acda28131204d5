"""Provider adapters, installed as tmuxjail.adapters."""

from __future__ import annotations

from importlib import import_module

from .base import Adapter

PROVIDERS = {
    "codex": "codex",
    "claude-code": "claude_code",
    "cursor": "cursor",
    "pi": "pi",
    "shell": "shell",
}


def get(provider: str) -> Adapter:
    if provider not in PROVIDERS:
        from tmuxjail.errors import UsageError

        raise UsageError(
            f"unknown provider {provider!r}", hint="choose one of: " + ", ".join(PROVIDERS)
        )
    return import_module(f".{PROVIDERS[provider]}", __name__).ADAPTER
