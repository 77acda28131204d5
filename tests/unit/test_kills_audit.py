"""audit, what its mutation run left alive, in process on a real tree and a real store: an audit
reports what the jail added or changed since the start and nothing it left alone, says when it did
not see everything, stores what `list` and `show` read, and prints it without losing a finding."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time

import pytest

from tmuxjail import audit, paths
from tmuxjail.pane import command as pane_command
from tmuxjail.store import Store

SID = "0123abcd-0000-4000-8000-0123456789ab"


def _session(store, ws, sid=SID, name="j", request=None):
    return store.insert_session(id=sid, name=name, provider="codex", mode="isolated", env_name="default",
                                workspace=str(ws), status="running", tmux_session=name,
                                request=json.dumps({"workspaces": [str(ws)]}) if request is None else request)


def _w(p, text="x\n", mode=None):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    if mode is not None:
        p.chmod(mode)


def _changes(result, ws):
    return {(os.path.relpath(f["path"], ws), f["kind"]): f["change"] for f in result["findings"]}


@pytest.fixture
def started(tmp_path):
    """A workspace with a repository, direnv files, a setuid file and a hard link from before the
    start, the start's snapshot taken, and a store."""
    ws = tmp_path / "ws"
    _w(ws / "r/.git/HEAD", "ref: refs/heads/main\n")
    (ws / "r/.git/objects").mkdir()
    _w(ws / "r/.git/config", "[core]\n\tfsmonitor = watchman\n")
    _w(ws / ".envrc", "use nix\n")
    _w(ws / "sub/.envrc", "use flake\n")
    _w(ws / "old-suid", mode=0o4755)
    _w(ws / "blob")
    os.link(ws / "blob", ws / "blob-again")
    store = Store(tmp_path / "store.db")
    row = _session(store, ws)
    audit.baseline(store, SID, [str(ws)])
    time.sleep(0.05)  # past the file system's coarse clock: what follows has a later ctime
    return ws, store, row


def test_an_audit_reports_what_changed_since_the_start_and_nothing_left_alone(started):
    ws, store, row = started
    _w(ws / ".envrc", "export PATH=.:$PATH\n")  # changed
    _w(ws / ".exrc", "!id\n")  # added
    _w(ws / "new-suid", mode=0o4755)
    _w(ws / "new-a")
    os.link(ws / "new-a", ws / "new-b")
    result = audit.run(store, row)
    assert _changes(result, ws) == {
        (".envrc", "direnv"): "changed", (".exrc", "editor"): "added",
        ("new-suid", "setuid"): "added", ("old-suid", "setuid"): "present",  # set-id files: always
        ("new-a", "hardlink"): "added", ("new-b", "hardlink"): "added",  # old hard links: not news
    }
    assert result["since"] == "start" and result["baseline"] is True and "note" not in result
    assert result["complete"] is True and result["incomplete"] == [] and audit.code(result) == audit.FINDINGS
    # Stored for `list` and `show`: the count, the findings, complete.
    assert audit.counts(store) == {SID: {"count": 6, "complete": True}}
    last = audit.latest(store)[SID]
    assert last["count"] == 6 and last["complete"] is True and len(last["findings"]) == 6
    assert audit.latest(store, {"someone-else"}) == {}
    text = audit.render(result)
    assert "6 findings since the session started:" in text and "~ direnv  .envrc: " in text
    assert "+ editor  .exrc: " in text and "  old-suid: " in text


def test_all_shows_everything_present_and_stores_nothing(started):
    ws, store, row = started
    _w(ws / ".envrc", "export A=1\n")
    result = audit.run(store, row, show_all=True)
    got = _changes(result, ws)
    assert {("r/.git", "git-repo"), ("r/.git/config", "git-config"), (".envrc", "direnv"),
            ("sub/.envrc", "direnv"), ("blob", "hardlink"), ("old-suid", "setuid")} <= set(got)
    assert set(got.values()) == {"present"}
    assert result["since"] == "everything present" and result["baseline"] is False and result["all"] is True
    assert "note" not in result and audit.latest(store) == {}
    assert audit.render(result).splitlines()[1].endswith(" present:")


def test_an_unchanged_workspace_shows_only_its_set_id_files_and_record_false_stores_nothing(started):
    ws, store, row = started
    result = audit.run(store, row, record=False)
    assert _changes(result, ws) == {("old-suid", "setuid"): "present"}  # a set-id file is always shown
    assert audit.latest(store) == {}


def test_without_a_start_snapshot_everything_is_shown_and_said(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / ".envrc")
    store = Store(tmp_path / "store.db")
    result = audit.run(store, _session(store, ws))
    assert _changes(result, ws) == {(".envrc", "direnv"): "present"}
    assert result["baseline"] is False and result["note"].startswith("no snapshot from the session's start")
    assert audit.render(result).splitlines()[1:3] == [f"note: {result['note']}", "1 finding present:"]
    assert audit.counts(store)[SID]["count"] == 1


def test_an_incomplete_walk_is_a_finding_stored_first_and_said(started, monkeypatch):
    ws, store, row = started
    monkeypatch.setattr(audit, "WALK_SECONDS", -1.0)  # the walk is past its time limit at once
    result = audit.run(store, row)
    assert len(result["incomplete"]) == 1 and result["incomplete"][0].startswith("time limit")
    assert [(f["kind"], f["path"], f["change"]) for f in result["findings"]] == [
        (audit.INCOMPLETE, str(ws), audit.INCOMPLETE)]
    assert result["complete"] is False and audit.code(result) == audit.FINDINGS
    assert audit.counts(store)[SID] == {"count": 1, "complete": False}
    assert audit.render(result).splitlines()[-2].startswith("NOT COMPLETE")
    monkeypatch.setattr(audit, "MAX_REASONS", 0)  # past the bound: a count of the rest
    assert audit.run(store, row)["incomplete"] == ["and 1 more reasons"]


def test_a_stored_audit_keeps_the_incomplete_findings_first():
    many = [audit.finding({"kind": "direnv", "path": f"/w/{i}/.envrc", "detail": "x" * 400}, "added")
            for i in range(5000)]
    gap = audit.finding({"kind": audit.INCOMPLETE, "path": "/w", "detail": "time limit"}, audit.INCOMPLETE)
    ev = audit.stored([*many, gap], ["time limit"])
    assert ev["findings"][0] == gap and ev["count"] == 5001 and ev["stored"] < 5001
    assert audit.stored(many[:3], [])["findings"] == many[:3]


def test_an_older_audit_event_without_complete_reads_its_capped_flag(tmp_path):
    store = Store(tmp_path / "store.db")
    store.event("audit", "a", count=2, capped=False, findings=[])
    store.event("audit", "b", count=0, capped=True, findings=[])
    store.event("audit", "c", count=1, complete=False, capped=False, findings=[])
    assert audit.counts(store) == {"a": {"count": 2, "complete": True}, "b": {"count": 0, "complete": False},
                                   "c": {"count": 1, "complete": False}}
    assert {k: v["complete"] for k, v in audit.latest(store).items()} == {"a": True, "b": False, "c": False}
    assert set(audit.latest(store, {"a", "c"})) == {"a", "c"}


def test_the_snapshot_says_partial_only_past_its_bound(started, monkeypatch):
    ws, store, _row = started
    n = len(audit.baseline(store, SID, [str(ws)])["ids"])
    monkeypatch.setattr(audit, "BASE_IDS", n)
    assert "partial" not in audit.baseline(store, SID, [str(ws)])
    monkeypatch.setattr(audit, "BASE_IDS", n - 1)
    data = audit.baseline(store, SID, [str(ws)])
    assert data["partial"] == n and len(data["ids"]) == n - 1


def test_the_workspaces_are_the_requests_else_the_rows(tmp_path):
    store = Store(tmp_path / "store.db")
    two = store.insert_session(name="a", provider="codex", mode="isolated", env_name="default", workspace="/w",
                               request=json.dumps({"workspaces": ["/w", "/v"]}), status="running", tmux_session="a")
    assert audit.workspaces(two) == ["/w", "/v"]
    for i, request in enumerate(("{}", "not json")):
        row = store.insert_session(name=f"b{i}", provider="codex", mode="isolated", env_name="default",
                                   workspace="/w", request=request, status="running", tmux_session=f"b{i}")
        assert audit.workspaces(row) == ["/w"]


def test_texts_are_bounded_at_their_limit_not_before():
    assert audit.bounded("a" * 5, 5) == "a" * 5
    assert audit.bounded("a" * 6, 5) == "aaaa…"


def test_a_line_marks_its_change_and_shortens_paths_under_a_single_workspace():
    f = {"kind": "direnv", "path": "/w/x/.envrc", "detail": "d"}
    marks = [audit.line({**f, "change": c}, ["/w"])[0] for c in ("added", "changed", audit.INCOMPLETE, "present")]
    assert marks == ["+", "~", "!", " "]
    assert audit.line(f, ["/w/"]).startswith("  direnv  x/.envrc: d  [runs on: `cd` into")
    assert " /w/x/.envrc: " in audit.line(f, ["/w", "/v"])  # several workspaces: the whole path
    assert " /elsewhere/.envrc: " in audit.line({**f, "path": "/elsewhere/.envrc"}, ["/w"])
    assert " /wx/.envrc: " in audit.line({**f, "path": "/wx/.envrc"}, ["/w"])


def _result(n, skipped=(), **extra):
    fs = [{"kind": "direnv", "path": f"/w/{i}/.envrc", "detail": "", "change": "added"} for i in range(n)]
    return {"name": "j", "mode": "isolated", "workspaces": ["/w"], "count": n, "baseline": True, "all": False,
            "findings": fs, "skipped": list(skipped), **extra}


def test_the_text_report_counts_what_it_does_not_print():
    none = audit.render(_result(0)).splitlines()
    assert none[1] == "0 findings since the session started" and audit.code(_result(0)) == 0
    assert not any(line.startswith("review these") for line in none)
    one = audit.render(_result(1)).splitlines()
    assert one[1] == "1 finding since the session started:" and one[-1].startswith("review these")
    big = audit.render(_result(audit.TEXT_LIMIT + 3)).splitlines()
    assert len(big) == 2 + audit.TEXT_LIMIT + 2 and big[-2] == "  ... and 3 more (see --json)"
    assert "... and" not in audit.render(_result(audit.TEXT_LIMIT))
    five = audit.render(_result(0, [f"/w/s{i}" for i in range(5)])).splitlines()[-1]
    assert five == "not looked into: s0, s1, s2, s3, s4"
    six = audit.render(_result(0, [f"/w/s{i}" for i in range(5)], skipped_count=6)).splitlines()[-1]
    assert six == "not looked into: s0, s1, s2, s3, s4 and 1 more"


def test_the_hook_is_only_for_strict_sessions_and_names_only_a_session_id(monkeypatch):
    assert pane_command.session_hooks(SID, "compatibility") == {}
    assert pane_command.session_hooks(SID, "isolated") == {"pane-died": pane_command.hook_command(SID)}
    for bad in ("j", SID + "\n", "x; run-shell 'id'"):
        with pytest.raises(ValueError, match="not a session id"):
            pane_command.hook_command(bad)
    monkeypatch.setattr(sys, "executable", '/o d/a"b$c#d\\e')
    cmd = pane_command.hook_command(SID)
    inner = cmd.removeprefix('run-shell -b "').removesuffix('"')
    assert "##" in inner and '\\"' in inner and "\\$" in inner and "\\\\" in inner
    # tmux's double quotes undone, then run-shell's ## (what the shell is finally given):
    sh = inner.replace("\\\\", "\0").replace('\\"', '"').replace("\\$", "$").replace("\0", "\\").replace("##", "#")
    assert shlex.split(sh)[:9] == ["exec", '/o d/a"b$c#d\\e', "-E", "-P", "-m", "tmuxjail", "_audit", "--id", SID]


def test_the_hidden_audit_runs_only_for_a_session_it_finds_by_id(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    paths.get.cache_clear()
    try:
        ws = tmp_path / "ws"
        _w(ws / ".envrc")
        store = Store(paths.get().store)
        _session(store, ws)
        _session(store, ws, sid="0123abcd-0000-4000-8000-0123456789ac", name=SID[:-1] + "0")
        store.close()
        for argv in ([], ["--id"], ["--id", "j"], ["-i", SID], ["--id", SID, "x"], ["--id", SID + "\n"]):
            assert audit.run_hidden(argv) == 2
        assert audit.run_hidden(["--id", "0123abcd-0000-4000-8000-000000000000"]) == 1
        assert audit.run_hidden(["--id", SID[:-1] + "0"]) == 1  # a session's *name* is not its id
        assert audit.run_hidden(["--id", SID]) == audit.FINDINGS
        assert audit.counts(Store(paths.get().store)) == {SID: {"count": 1, "complete": True}}
        assert "Traceback" not in capsys.readouterr().err
    finally:
        paths.get.cache_clear()


def test_a_hidden_audit_that_fails_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    paths.get.cache_clear()
    try:
        store = Store(paths.get().store)
        _session(store, tmp_path, request="[]")  # a request that is not an object
        store.close()
        assert audit.run_hidden(["--id", SID]) == 1
        err = capsys.readouterr().err
        assert "audit failed: AttributeError" in err and "Traceback" not in err
        paths.get().store.write_bytes(b"not a database" * 100)  # a damaged store: its own one line
        assert audit.run_hidden(["--id", SID]) == 1
        err = capsys.readouterr().err
        assert "is damaged" in err and "audit failed" not in err and "Traceback" not in err
    finally:
        paths.get.cache_clear()


def test_the_reasons_a_walk_was_incomplete_are_listed_up_to_their_bound_then_counted(tmp_path, monkeypatch):
    store = Store(tmp_path / "store.db")
    gone = [str(tmp_path / "gone-a"), str(tmp_path / "gone-b")]  # each workspace not there: a reason
    one = _session(store, gone[0], request=json.dumps({"workspaces": gone[:1]}))
    two = _session(store, gone[0], sid=SID[:-1] + "c", name="k", request=json.dumps({"workspaces": gone}))
    monkeypatch.setattr(audit, "MAX_REASONS", 1)
    only = audit.run(store, one)["incomplete"]
    assert len(only) == 1 and only[0].startswith(gone[0])  # at the bound: nothing counted
    both = audit.run(store, two)["incomplete"]
    assert len(both) == 2 and both[0].startswith(gone[0]) and both[1] == "and 1 more reasons"


def test_a_stored_audit_with_every_reason_at_full_length_stays_under_the_event_bound():
    reasons = [f"{i}:" + "r" * audit.DETAIL_MAX for i in range(audit.MAX_REASONS)]
    many = [audit.finding({"kind": "direnv", "path": f"/w/{i}/.envrc", "detail": "x" * 400}, "added")
            for i in range(5000)]
    ev = audit.stored(many, reasons)
    assert len(json.dumps(ev)) <= audit.EVENT_MAX and ev["incomplete"] == reasons


def test_a_set_id_file_changed_in_the_tick_the_session_started_counts_as_new(tmp_path):
    """The start's time and a file's ctime equal (a coarse clock): it may be the jail's, so added."""
    ws = tmp_path / "ws"
    _w(ws / "suid", mode=0o4755)
    store = Store(tmp_path / "store.db")
    row = _session(store, ws)
    store.event("audit-base", SID, ids={}, since_ns=(ws / "suid").lstat().st_ctime_ns)
    assert _changes(audit.run(store, row), ws) == {("suid", "setuid"): "added"}
    store.event("audit-base", SID, ids={}, since_ns=(ws / "suid").lstat().st_ctime_ns + 1)
    assert _changes(audit.run(store, row), ws) == {("suid", "setuid"): "present"}


def test_the_snapshot_records_how_long_its_walk_took(tmp_path):
    store = Store(tmp_path / "store.db")
    t0 = time.monotonic()
    ms = audit.baseline(store, SID, [str(tmp_path)])["ms"]
    assert 0 <= ms <= (time.monotonic() - t0) * 1000 + 0.1


def test_the_last_code_point_of_a_plane_is_escaped_in_its_short_form():
    assert audit.clean("\uffff\U0010ffff") == "\\uffff\\U0010ffff"


def test_findings_that_fill_the_event_exactly_are_all_stored():
    def f(n):
        return audit.finding({"kind": "direnv", "path": "/" + "p" * n, "detail": ""}, "added")

    def cost(n):
        return len(json.dumps(f(n))) + 2  # as stored() counts a finding

    left, sizes = audit.EVENT_MAX - 4096 - len(json.dumps([])), []
    while left > 2 * cost(3000):
        sizes.append(3000)
        left -= cost(3000)
    sizes += [left // 2 - cost(0), left - left // 2 - cost(0)]
    exact = [f(n) for n in sizes]
    assert sum(cost(n) for n in sizes) == audit.EVENT_MAX - 4096 - 2
    assert audit.stored(exact, [])["stored"] == len(exact)
    assert audit.stored([*exact, f(0)], [])["stored"] == len(exact)


def test_the_snapshot_holds_only_what_is_found_by_name(started):
    """Set-id files and hard links are dated by ctime, not by the snapshot: the start neither
    lstats every file for them nor spends the snapshot's bounded room on them (a workspace of hard
    links, such as a package store, would push a repository's config out of it)."""
    from tmuxjail import scan

    ws, store, _row = started
    ids = set(audit.baseline(store, SID, [str(ws)])["ids"])
    named = {f["id"] for f in scan.scan([str(ws)]).findings if f["kind"] not in scan.STAT_KINDS}
    assert ids == named and len(named) >= 4


def test_a_finding_keeps_the_walks_own_detail_trigger_and_fix_over_the_kinds_defaults():
    own = audit.finding({"kind": "direnv", "path": "/w/.envrc", "detail": "d", "trigger": "t", "fix": "f"}, "added")
    assert (own["detail"], own["trigger"], own["fix"]) == ("d", "t", "f")
    plain = audit.finding({"kind": "direnv", "path": "/w/.envrc"}, "added")
    assert (plain["detail"], plain["trigger"], plain["fix"]) == ("", *audit.DEFAULTS["direnv"])


def test_the_cli_state_the_jail_wrote_is_reported_added_or_changed(tmp_path):
    """A verified jail's writable provider state (stateaudit): a file that was not there at the start
    is added, one whose digest moved is changed."""
    home = tmp_path / "home"
    new, moved = home / ".pi/agent/auth.json", home / ".pi/agent/models.json"
    _w(moved, "{}")
    policy = {"state_audit": [str(new), str(moved)], "host_write": [str(home)]}
    store = Store(tmp_path / "store.db")
    ws = tmp_path / "ws"
    ws.mkdir()
    row = store.insert_session(id=SID, name="j", provider="pi", mode="verified", env_name="default",
                               workspace=str(ws), status="running", tmux_session="j", policy=json.dumps(policy),
                               request=json.dumps({"workspaces": [str(ws)]}))
    from tmuxjail import stateaudit

    stateaudit.baseline(store, SID, policy)
    _w(new, '{"k": "!id"}')
    _w(moved, '{"m": 1}')
    got = {f["path"]: f["change"] for f in audit.run(store, row)["findings"]}
    assert got == {str(new): "added", str(moved): "changed"}
