"""The one start request (tmuxjail.request.StartRequest): built once with its workspaces canonical,
stored as its own JSON and read back as that type (rows written before it still read, or are
refused in one line); and api.start takes every option `tmuxjail start --help` lists."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys

import pytest

from tmuxjail import api
from tmuxjail.errors import ResumeRefused, UsageError
from tmuxjail.request import StartRequest
from tmuxjail.store import COLUMNS, SessionRow


def start_help_options() -> set[str]:
    """Every option `tmuxjail start --help` lists, as a keyword: the long name, else (-L, -S) the
    metavar; `-` as `_`."""
    out = subprocess.run([sys.executable, "-P", "-m", "tmuxjail", "start", "--help"], capture_output=True,
                         text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        m = re.match(r"^  (-\S.*?)(?:  |$)", line)
        if not m:
            continue
        spellings = [s.strip() for s in m.group(1).split(", ")]
        long = [s.split()[0] for s in spellings if s.startswith("--")]
        if long:
            names.add(long[0][2:].replace("-", "_"))
        else:
            names.add(spellings[0].split()[1].lower())  # "-L SOCKET_NAME"
    names.discard("help")
    return names


KEYWORDS = {"from": "from_ref"}  # an option named as a Python keyword: its argparse dest


def test_api_start_takes_every_option_of_start():
    options = start_help_options()
    assert {"mode", "workspace", "allow_domain", "restrict", "candidate", "socket_name"} <= options  # parsed
    params = inspect.signature(api.start).parameters
    options = {KEYWORDS.get(o, o) for o in options}
    missing = sorted(o for o in options if o not in params or params[o].kind is not inspect.Parameter.KEYWORD_ONLY)
    assert not missing, f"api.start has no keyword parameter for: {', '.join(missing)}"
    doc = inspect.getdoc(api.start) or ""
    assert not [o for o in options - {"socket_name", "socket_path"} if f"`{o}`" not in doc], "document each in its docstring"


def test_building_canonicalises_the_workspaces(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    req = StartRequest.build(str(tmp_path), "codex", workspaces=("link", str(tmp_path / "a")), mode="isolated")
    assert req.workspaces == (str((tmp_path / "a").resolve()),)  # one path, once
    assert StartRequest.build(str(tmp_path / "a"), "pi").workspaces == (str((tmp_path / "a").resolve()),)
    with pytest.raises(UsageError, match="does not exist"):
        StartRequest.build(str(tmp_path), "pi", workspaces=("nowhere",))


# What `tmuxjail start` wrote into the request column before the request had a type of its own
# (commands/start.py built this dict by hand): byte for byte the same today.
TODAYS_ROW = ('{"provider": "codex", "mode": "verified", "workspaces": ["/src/app", "/src/lib"], '
              '"env_name": "work", "capabilities": ["git-metadata-write"], "args": ["--model", "o4"], '
              '"restriction": null, "network": "proxy", "allow_domains": ["a.test"], "candidate": "d1", '
              '"placement": "split"}')


def test_the_stored_request_is_the_format_rows_already_hold():
    req = StartRequest.from_json(TODAYS_ROW)
    assert req == StartRequest(provider="codex", mode="verified", workspaces=("/src/app", "/src/lib"),
                               env_name="work", capabilities=("git-metadata-write",), args=("--model", "o4"),
                               network="proxy", allow_domains=("a.test",), candidate="d1", placement="split")
    assert req.to_json() == TODAYS_ROW
    plain = StartRequest(provider="pi", mode="isolated", workspaces=("/w",), restriction={"source": "/r", "rules": {}})
    assert json.loads(plain.to_json()) == {  # no candidate, no placement: the keys are left out, as before
        "provider": "pi", "mode": "isolated", "workspaces": ["/w"], "env_name": "default", "capabilities": [],
        "args": [], "restriction": {"source": "/r", "rules": {}}, "network": None, "allow_domains": None}
    assert StartRequest.from_json(plain.to_json()) == plain


def test_an_older_row_reads_with_what_its_missing_keys_meant():
    """A row from before --network, --allow-domain, --restrict and the args were recorded."""
    old = StartRequest.from_json('{"provider": "codex", "mode": "isolated", "workspaces": ["/w"], "env_name": "default"}')
    assert old == StartRequest(provider="codex", mode="isolated", workspaces=("/w",))
    assert old.network is None and old.allow_domains is None and old.capabilities == () and old.placement is None


UNREADABLE = {
    "empty": "", "a list": "[]", "not JSON": "not json", "no mode": '{"provider": "codex"}',
    "no workspace": '{"provider": "codex", "mode": "isolated", "workspaces": [], "env_name": "default"}',
    "a workspace string": '{"provider": "codex", "mode": "isolated", "workspaces": "/w", "env_name": "default"}',
    "a workspace number": '{"provider": "codex", "mode": "isolated", "workspaces": ["/w", 3], "env_name": "default"}',
    "args a string": '{"provider": "codex", "mode": "isolated", "workspaces": ["/w"], "env_name": "default", "args": "--x"}',
    "provider a number": '{"provider": 1, "mode": "isolated", "workspaces": ["/w"], "env_name": "default"}',
}


@pytest.mark.parametrize("text", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_a_request_that_cannot_be_read_is_refused_in_one_line(text):
    with pytest.raises(ValueError, match=r"^(not JSON|not a JSON object|.* is missing|.* is empty|.* is not what a request holds there .*)$"):
        StartRequest.from_json(text)
    row = SessionRow(**{**dict.fromkeys(COLUMNS), "name": "app", "request": text})
    with pytest.raises(ResumeRefused) as got:
        row.start_request  # noqa: B018  (the property is what readers use)
    assert got.value.code == 3 and got.value.data["reasons"] == ["tampered"]
    assert got.value.message.startswith("app: its stored request cannot be read (") and "\n" not in got.value.message
