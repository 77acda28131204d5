"""The trust catalogue's schema (pydantic): trust.py reads the data on every start with the stdlib
only; a full resolution (plan.resolve) and the docs test validate it here, so a malformed entry
fails closed in one line before any start uses it."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import trust
from .errors import ConfigError

_PATTERN = re.compile(r"^(?:[^/*]+/)?(?:\*[^/*]+|[^/*]+\*|[^/*]+)/?$")
_ONE_LINE = r"^[^\n\r]+$"


class CatalogueEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    path: str = Field(min_length=1)
    where: Literal["workspace", "repository", "environment"]
    host: str = Field(pattern=_ONE_LINE)
    trigger: str = Field(pattern=_ONE_LINE)
    treatment: Literal["guard", "audit"]
    kind: str = Field(pattern=r"^[a-z0-9-]+$")
    reason: str = Field(pattern=_ONE_LINE, max_length=200)
    example: str = Field(min_length=1)
    fix: str | None = Field(default=None, pattern=_ONE_LINE)
    files: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    vcs: bool = False
    source: Literal["name", "git-config"] = "name"

    @field_validator("example")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in v.split("/"):
            raise ValueError("example must be a relative path inside the workspace")
        return v

    @model_validator(mode="after")
    def _shape(self) -> CatalogueEntry:
        if self.source == "name" and not _PATTERN.match(self.path):
            raise ValueError(f"path {self.path!r} is not [parent/]name[/] (name: exact, prefix* or *suffix)")
        if self.files and not self.path.endswith("/"):
            raise ValueError("files applies to a directory entry (a path ending in /)")
        return self


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    entries: tuple[CatalogueEntry, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Catalogue:
        ids = [e.id for e in self.entries]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate ids: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self


def validate(text: str | None = None) -> Catalogue:
    """The catalogue, checked; ConfigError (one line) when it is not what the schema says."""
    try:
        return Catalogue.model_validate(trust.raw(text))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"the trust catalogue ({trust.FILE}) is malformed: {where}: {first['msg']}") from None


@lru_cache(maxsize=1)
def validated() -> Catalogue:
    return validate()
