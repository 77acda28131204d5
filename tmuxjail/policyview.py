"""A resolved policy in its JSON form (what the store, the spec and the sandbox builders hold),
read through the attribute names of model.Policy: what a start does once its policy exists runs
on this, so a warm start (warm.py) never loads pydantic. Stdlib only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .registry import Mode

if TYPE_CHECKING:
    from .model import Policy

GIT_WRITE = "git-metadata-write"


def never_passed(name: str) -> bool:
    """Names no jail ever receives, in any mode: they point back at tmux or at tmuxjail."""
    return name.startswith("TMUX")


class PolicyView:
    """Read-only attributes over policy.as_data(policy). Made only from data a full resolution
    produced (now, or cached by warm.py under its inputs' digest)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]):
        self.data = data

    @property
    def mode(self) -> Mode:
        return Mode(self.data["mode"])

    @property
    def provider(self) -> str:
        return str(self.data["provider"])

    @property
    def backend(self) -> str:
        return str(self.data["backend"])

    @property
    def home(self) -> str:
        return str(self.data["home"])

    @property
    def private_home(self) -> str | None:
        return self.data.get("private_home")

    @property
    def host_write(self) -> tuple[str, ...]:
        return tuple(self.data["host_write"])

    @property
    def env_inherit(self) -> bool:
        return bool(self.data["env_inherit"])

    @property
    def env_names(self) -> tuple[str, ...]:
        return tuple(self.data["env_names"])

    @property
    def env_set(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, v in self.data["env_set"])

    @property
    def capabilities(self) -> tuple[str, ...]:
        return tuple(self.data["capabilities"])

    @property
    def network(self) -> str:
        return str(self.data.get("network", "host"))


def as_data(pol: Policy | PolicyView) -> dict[str, Any]:
    """The policy's JSON form (policy.as_data for a model.Policy)."""
    if isinstance(pol, PolicyView):
        return pol.data
    return pol.model_dump(mode="json")
