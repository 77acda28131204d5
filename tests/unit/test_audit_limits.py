"""The audit's own bounds, in process: the walk's time limit is a reason the walk was incomplete,
and an incomplete walk alone makes `tmuxjail audit` exit 6."""

from __future__ import annotations

import time

from tmuxjail import audit, scan


def test_the_walk_stops_at_its_deadline_and_says_so(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / ".envrc").write_text("x\n")
    late = scan.scan([str(tmp_path)], deadline=time.monotonic() - 1)
    assert [c for c in late.capped if c.startswith("time limit")] and not late.findings, late.capped
    on_time = scan.scan([str(tmp_path)], deadline=time.monotonic() + 60)
    assert not on_time.capped and [f["kind"] for f in on_time.findings] == ["direnv"]


def test_an_incomplete_walk_alone_is_exit_6():
    assert audit.code({"count": 0, "complete": False}) == 6
    assert audit.code({"count": 0, "complete": True}) == 0
    assert audit.code({"count": 2, "complete": True}) == 6


def test_every_finding_text_is_bounded_and_has_a_trigger_and_fix():
    f = audit.finding({"kind": "something-new", "path": "/w/" + "p" * 9000, "detail": "d" * 10_000,
                       "trigger": "t" * 5000}, "added")
    assert len(f["detail"]) <= audit.DETAIL_MAX and len(f["trigger"]) <= audit.DETAIL_MAX
    assert len(f["path"]) <= audit.PATH_MAX and f["fix"] == audit.DEFAULT[1]
    many = [audit.finding({"kind": "direnv", "path": f"/w/{i}/.envrc", "detail": "x" * 400}, "added")
            for i in range(10_000)]
    ev = audit.stored(many, ["entry cap: stopped after 200000 entries"])
    import json

    assert len(json.dumps(ev)) <= audit.EVENT_MAX and ev["count"] == 10_000 and 0 < ev["stored"] < 10_000
    assert ev["complete"] is False and ev["incomplete"]


def test_the_start_snapshot_stays_under_the_event_bound(tmp_path):
    """A repository a former session left with 25,000 command aliases: the snapshot keeps what
    fits and says it is partial; what it left out is reported as added, never silently trusted."""
    import json
    import sqlite3

    from tmuxjail.store import Store

    for r in ("r1", "r2"):  # each config under scan.MAX_PARSE
        git = tmp_path / "ws" / r / ".git"
        (git / "objects").mkdir(parents=True)
        (git / "HEAD").write_text("ref: refs/heads/main\n")
        (git / "config").write_text("[alias]\n" + "".join(f"\ta{i}=!x\n" for i in range(12_500)))
    store = Store(tmp_path / "store.db")
    data = audit.baseline(store, "0123abcd-0000-4000-8000-0123456789ab", [str(tmp_path / "ws")])
    assert data["partial"] == 25_002 and len(data["ids"]) == audit.BASE_IDS
    size = sqlite3.connect(tmp_path / "store.db").execute(
        "SELECT length(data) FROM events WHERE kind='audit-base'").fetchone()[0]
    assert size <= audit.EVENT_MAX, size
    assert json.dumps(data)
