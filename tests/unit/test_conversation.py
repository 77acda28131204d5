"""Learning a conversation id from a CLI's state, a tree the jail writes (issue 28.2): no link is
followed, sizes are bounded, the id's format is checked, and neither a claimed id nor a guess
between two sessions is ever taken."""

from __future__ import annotations

import json
import os
from collections import namedtuple
from pathlib import Path

from tmuxjail import conversation
from tmuxjail.adapters import get

CONV = get("codex").conversation
A, B, C = (f"01a23623-9cab-7733-85ba-8cdc4e0d4bc{i}" for i in range(3))
SINCE = "2026-12-02T09:00:00Z"
Row = namedtuple("Row", "id workspace status created_at updated_at")


def rollout(root: Path, cid: str, cwd="/w", ts="2026-12-02T09:44:03.289Z", name_id=None, pad=0) -> Path:
    d = root / "2026" / "12" / "02"
    d.mkdir(parents=True, exist_ok=True)
    f = d / f"rollout-2026-12-02T09-44-03-{name_id or cid}.jsonl"
    meta = {"type": "session_meta", "payload": {"id": cid, "timestamp": ts, "cwd": cwd, "pad": "x" * pad}}
    f.write_text(json.dumps(meta) + "\n{}\n")
    return f


def test_conversations_read_with_no_link_followed_and_bounded(tmp_path):
    root = tmp_path / "sessions"
    rollout(root, A)
    rollout(root, B, ts="2026-12-01T00:00:00.000Z")  # before the session began
    rollout(root, C, name_id=A.replace("0", "f", 1))  # the file name and its first line disagree
    assert conversations(root) == {A: ("2026-12-02T09:44:03.289Z", "/w")}
    # Another home's conversation, reached through links the jail planted: never read.
    other = tmp_path / "other"
    rollout(other, B)
    (root / "2025").symlink_to(other / "2026")
    os.symlink(next((other / "2026/12/02").iterdir()), root / "2026/12/02" / f"rollout-2026-12-02T10-00-00-{B}.jsonl")
    assert set(conversations(root)) == {A}
    # The whole state behind a link: nothing.
    linked = tmp_path / "linked"
    linked.symlink_to(root)
    assert conversations(linked) == {}
    # A first line longer than the bound is not parsed.
    big = tmp_path / "big"
    rollout(big, A, pad=conversation.MAX_FIRST_LINE)
    assert conversations(big) == {}


def conversations(root: Path) -> dict:
    return conversation.conversations(str(root), CONV.file, SINCE)


def test_choose_takes_what_the_cli_said_only_if_its_state_agrees_and_never_guesses():
    row = Row("r", "/w", "running", SINCE, SINCE)
    found = {A: ("2026-12-02T09:44:03Z", "/w"), B: ("2026-12-02T09:45:00Z", "/w"), C: ("2026-12-02T09:46:00Z", "/x")}
    assert conversation.choose(row, found, set(), [B], []) == B
    assert conversation.choose(row, found, {B}, [B], []) is None  # another session holds it: no guess against it
    assert conversation.choose(row, found, set(), [C], []) is None  # another workspace's
    assert conversation.choose(row, found, set(), ["not-an-id"], []) is None
    assert conversation.choose(row, found, set(), [], []) is None  # two of its workspace: which?
    assert conversation.choose(row, found, {B}, [], []) == A  # the only one left of its workspace
    rival = Row("o", "/w", "running", "2026-12-02T09:30:00Z", "2026-12-02T09:30:00Z")
    assert conversation.choose(row, found, {B}, [], [rival]) is None  # could be the rival's
    done = Row("o", "/w", "stopped", "2026-12-02T08:00:00Z", "2026-12-02T08:30:00Z")
    assert conversation.choose(row, found, {B}, [], [done]) == A  # it ended before row began


def test_never_began_only_when_surely_absent(tmp_path):
    home = tmp_path / "home"
    rel = ".claude/projects/-w/id.jsonl"
    home.mkdir()
    assert conversation.never_began(str(home), rel)  # no .claude yet
    (home / ".claude/projects/-w").mkdir(parents=True)
    assert conversation.never_began(str(home), rel)
    (home / rel).write_text("{}\n")
    assert not conversation.never_began(str(home), rel)
    # A link the jail planted on the way: not "surely absent", whatever it points at.
    (home / ".claude/projects/-w").rename(home / "elsewhere")
    (home / ".claude/projects/-w").symlink_to(tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    assert not conversation.never_began(str(home), rel)
