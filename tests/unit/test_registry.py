"""One Mode enum and one provider registry feed the parser, the config, the adapters, certify and
completion: a mode or a provider named anywhere else would drift from them."""

from __future__ import annotations

import argparse

import pytest

from tmuxjail import completion, config, profiles
from tmuxjail.adapters import get
from tmuxjail.cli.app import parser
from tmuxjail.commands import table
from tmuxjail.errors import ConfigError
from tmuxjail.model import Mode as ModelMode
from tmuxjail.registry import CERTIFIABLE, MODES, PROVIDERS, Mode


def _choices(p: argparse.ArgumentParser, command: str, dest: str):
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return next(a.choices for a in sub.choices[command]._actions if a.dest == dest)


def test_one_mode_enum():
    assert ModelMode is Mode
    assert MODES == tuple(m.value for m in Mode) == ("compatibility", "isolated", "verified")
    assert [m for m in Mode if m.strict] == [Mode.isolated, Mode.verified]


def test_the_parser_takes_modes_and_providers_from_the_registry():
    p = parser()
    for command in ("start", "preflight", "certify"):
        assert tuple(_choices(p, command, "mode")) == MODES
    assert tuple(_choices(p, "certify", "provider")) == CERTIFIABLE
    assert set(CERTIFIABLE) < set(PROVIDERS)


def test_every_provider_has_an_adapter_and_a_profile():
    assert sorted(profiles.available()) == sorted(PROVIDERS)
    for name in PROVIDERS:
        assert get(name).provider == name


def test_completion_offers_every_provider():
    words = completion.spec(table)["start"]["positional"][0].split()
    assert words == list(PROVIDERS)


def test_config_refuses_a_provider_the_registry_does_not_know():
    assert config.parse('[providers.codex]\nexecutable = "/usr/bin/codex"\n', "c").executables
    with pytest.raises(ConfigError, match=r"providers\.kodex: unknown provider"):
        config.parse('[providers.kodex]\nexecutable = "/usr/bin/codex"\n', "c")
    with pytest.raises(ConfigError, match="default_mode"):
        config.parse('default_mode = "strict"\n', "c")
