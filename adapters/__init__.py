"""Provider adapters, installed as tmuxjail.adapters."""

from __future__ import annotations

from importlib import import_module

from tmuxjail.errors import UsageError
from tmuxjail.registry import PROVIDERS

from .base import Adapter


def get(provider: str) -> Adapter:
    if provider not in PROVIDERS:
        raise UsageError(
            f"unknown provider {provider!r}", hint="choose one of: " + ", ".join(PROVIDERS)
        )
    return import_module(f".{PROVIDERS[provider]}", __name__).ADAPTER
