"""The warm start's key and host facts (tmuxjail.warm) track what the resolution really read, and a
file that cannot be read turns a start into a full resolution, never an error: the survivors of
its mutation run (issue 29). The cases that need a whole resolution and a filled cache:
tests/integration/test_kills_warm_start.py."""

from __future__ import annotations

import os
import sys
from importlib import import_module
from types import SimpleNamespace

import pytest

from tmuxjail import warm
from tmuxjail.effective import ExecutableIdentity
from tmuxjail.errors import ConfigError


@pytest.fixture
def package(tmp_path, monkeypatch):
    """warm.installed() pointed at a package of our own, `tjfake`, laid out as an editable
    install lays tmuxjail's profiles out: its data directory a link to a checkout elsewhere."""
    site, checkout = tmp_path / "site", tmp_path / "checkout" / "profiles"
    (site / "tjfake").mkdir(parents=True)
    (site / "tjfake" / "__init__.py").write_text("")
    checkout.mkdir(parents=True)
    (checkout / "pi.toml").write_text("a = 1\n")
    (site / "tjfake" / "profile_data").symlink_to(checkout)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(warm, "PACKAGES", ("tjfake",))
    yield site / "tjfake", checkout
    sys.modules.pop("tjfake", None)


def test_an_edit_to_a_profile_in_a_linked_directory_changes_the_key(package):
    """An editable install keeps profiles and adapters in the checkout, linked into the package:
    the key must name the files behind the link by their own identity, so editing one misses."""
    pkg, checkout = package
    before = warm.installed()
    assert [str(pkg / "profile_data" / "pi.toml")] == [f for f, *_ in before if f.endswith(".toml")]
    (checkout / "pi.toml").write_text("a = 22\n")  # another size: another identity
    assert warm.installed() != before


def test_a_package_file_that_cannot_be_read_makes_starts_uncached_not_broken(package):
    """A dangling link in the install (a half-done upgrade): its identity cannot be taken, so
    nothing may be remembered (loaded_is_installed is False), and nothing raises."""
    pkg, _ = package
    (pkg / "gone.py").symlink_to(pkg / "nowhere.py")
    with pytest.raises(FileNotFoundError):
        warm.installed()
    assert warm._identity_now() is None
    assert warm.loaded_is_installed() is False


def test_the_key_names_the_pydantic_files_this_interpreter_imports(monkeypatch):
    """A pydantic upgrade must miss: dependencies() finds each file where the import system would,
    the first sys.path entry that has it, past entries that do not (the tests' own dir comes first
    here, as a script's dir does), an empty entry being the current directory."""
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    want = {"pydantic/__init__.py": "pydantic", "pydantic/version.py": "pydantic.version",
            "pydantic_core/__init__.py": "pydantic_core"}
    got = warm.dependencies()
    assert [r[0] for r in got] == [import_module(m).__file__ for m in want.values()]
    assert all(len(r) == 1 + len(warm.stat_key(r[0])) and r[1:] == warm.stat_key(r[0]) for r in got)


def test_a_config_that_cannot_be_read_is_one_line_naming_why(tmp_path):
    where = tmp_path / "config.toml"
    where.mkdir()
    with pytest.raises(ConfigError) as err:
        warm.load_config(where)
    assert str(err.value) == f"{where}: cannot read the config: Is a directory"
    where.rmdir()
    where.write_bytes(b"default_mode = \"isolated\"\n# caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ConfigError, match=r"cannot read the config: 'utf-8' codec can't decode byte 0xe9"):
        warm.load_config(where)


def test_an_executable_gone_after_the_resolution_is_not_remembered(tmp_path):
    """The CLI is removed (an upgrade under way) between the resolution and the record of what it
    hashed: nothing is remembered, and the start goes on with what it resolved."""
    ident = ExecutableIdentity(path=str(tmp_path / "codex"), sha256="0" * 64)
    p = SimpleNamespace(facts=None, policy=SimpleNamespace(executable=ident))
    assert warm.resolved_record(None, p) is None  # type: ignore[arg-type]
