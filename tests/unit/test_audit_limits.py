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
