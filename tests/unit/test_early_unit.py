"""The early pane's two halves that need no tmux: the hint it reads (sessions/early.read_hint,
which only ever yields a well-formed fingerprint and a mode it opens for) and the launcher's wait
for a spec written after its pane started (pane/spec.open_spec, bounded, and only while the start
that opened the pane keeps its marker)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from tmuxjail.pane import spec as pane_spec
from tmuxjail.sessions import early

FP = "sha256:" + "ab" * 32
GOOD = {"fp": FP, "shown": "isolated", "mode": "isolated"}


def write(path, data) -> None:
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def test_a_good_hint_is_read(tmp_path):
    p = tmp_path / "h.json"
    write(p, GOOD)
    assert early.read_hint(p) == early.Hint(FP, "isolated", "isolated")
    write(p, {**GOOD, "shown": "compatibility-unguarded", "mode": "compatibility"})
    assert early.read_hint(p) == early.Hint(FP, "compatibility-unguarded", "compatibility")


@pytest.mark.parametrize("data", [
    "", "[]", "not json", json.dumps({**GOOD, "fp": FP + "\n"}), json.dumps({**GOOD, "fp": FP.upper()}),
    json.dumps({**GOOD, "fp": "sha256:" + "a" * 63}), json.dumps({**GOOD, "mode": "verified"}),
    json.dumps({**GOOD, "shown": "verified"}), json.dumps({**GOOD, "shown": "isolated; kill-server"}),
    json.dumps({**GOOD, "mode": 1}), json.dumps({k: v for k, v in GOOD.items() if k != "shown"}),
    json.dumps({**GOOD, "pad": "x" * early.MAX_HINT}),
])
def test_anything_else_is_no_hint(tmp_path, data):
    p = tmp_path / "h.json"
    write(p, data)
    assert early.read_hint(p) is None


def test_a_hint_through_a_link_or_not_a_file_is_no_hint(tmp_path):
    real = tmp_path / "real.json"
    write(real, GOOD)
    (tmp_path / "link.json").symlink_to(real)
    assert early.read_hint(tmp_path / "link.json") is None
    (tmp_path / "dir.json").mkdir()
    assert early.read_hint(tmp_path / "dir.json") is None
    assert early.read_hint(tmp_path / "missing.json") is None


def test_no_spec_and_no_marker_is_refused_at_once(tmp_path, capsys):
    t0 = time.monotonic()
    with pytest.raises(SystemExit):
        pane_spec.open_spec(str(tmp_path / "s.json"))
    assert time.monotonic() - t0 < 1 and "is gone" in capsys.readouterr().err


def test_a_spec_written_while_the_marker_is_there_is_read(tmp_path):
    path = tmp_path / "s.json"
    (tmp_path / "s.json.pending").touch()

    def later() -> None:  # as jail.write_spec does: written aside, then linked in whole
        time.sleep(0.1)
        (tmp_path / "aside").write_text("{}")
        os.link(tmp_path / "aside", path)
        os.unlink(tmp_path / "s.json.pending")

    threading.Thread(target=later).start()
    fd = pane_spec.open_spec(str(path))
    assert os.read(fd, 10) == b"{}"
    os.close(fd)


def test_a_marker_that_goes_without_a_spec_ends_the_wait(tmp_path, capsys):
    (tmp_path / "s.json.pending").touch()
    threading.Timer(0.1, os.unlink, [tmp_path / "s.json.pending"]).start()
    with pytest.raises(SystemExit):
        pane_spec.open_spec(str(tmp_path / "s.json"))
    assert "is gone" in capsys.readouterr().err


def test_the_wait_is_bounded(tmp_path, capsys):
    (tmp_path / "s.json.pending").touch()
    t0 = time.monotonic()
    with pytest.raises(SystemExit):
        pane_spec.open_spec(str(tmp_path / "s.json"), wait=0.2)
    assert 0.2 <= time.monotonic() - t0 < 2 and "never came" in capsys.readouterr().err


def test_a_symlinked_spec_is_never_opened_even_while_waited_for(tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("{}")
    (tmp_path / "s.json.pending").touch()
    (tmp_path / "s.json").symlink_to(secret)
    with pytest.raises(SystemExit):
        pane_spec.open_spec(str(tmp_path / "s.json"), wait=0.2)
    assert "is gone" in capsys.readouterr().err
