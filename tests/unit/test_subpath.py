"""The one path-containment helper (tmuxjail/subpath.py): its hard cases, and that no hand-written
copy of it comes back into the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tmuxjail.subpath import below, inside, inside_any

ROOT = Path(__file__).resolve().parents[2]


def test_only_whole_components_count():
    assert inside("/a/b", "/a/b") and inside("/a/b/c", "/a/b")
    assert not inside("/a/bc", "/a/b") and not inside("/a/b-secrets/x", "/a/b")
    assert not inside("/a", "/a/b") and not inside("/ab", "/a")


def test_the_root_itself_is_inside_but_not_below():
    assert inside("/a", "/a") and not below("/a", "/a")
    assert below("/a/b", "/a") and below("/a/b/c", "/a")
    assert inside("/", "/") and not below("/", "/")


def test_slash_holds_every_absolute_path_and_an_empty_root_nothing():
    assert inside("/etc/passwd", "/") and below("/x", "/") and inside("/x", "//")
    assert not inside("relative", "/")
    assert not inside("/etc", "") and not inside("", "") and not inside("", "/")


def test_trailing_slashes_are_ignored_on_both_sides():
    assert inside("/a", "/a/") and inside("/a/", "/a") and inside("/a/b/", "/a/")
    assert not below("/a/", "/a") and not below("/a//", "/a/")
    assert not inside("/a/bc/", "/a/b/")


def test_a_dotdot_component_is_never_inside():
    assert not inside("/a/../etc", "/a") and not inside("/a/b/..", "/a") and not below("/a/..", "/a")
    assert not inside("/a/x/../../etc/passwd", "/a")
    # only a whole component: names that merely hold two dots are ordinary names
    assert inside("/a/..b", "/a") and inside("/a/b..", "/a") and inside("/a/.../x", "/a")


def test_relative_pairs_compare_as_text():
    assert inside("x/y", "x") and not inside("xy", "x") and not inside("/x/y", "x")


def test_inside_any():
    assert inside_any("/w/p/q", ["/v", "/w/p"]) and not inside_any("/w/pq", ["/v", "/w/p"])
    assert not inside_any("/w", []) and not inside_any("/w", [""])


# The hand-written forms the helper replaced: `p == r or p.startswith(r + "/")` and its kin.
OLD_FORMS = re.compile(r"""startswith\([^()]*(?:\([^()]*\))?[^()]*\+\s*(?:["']/["']|os\.sep)\s*\)"""
                       r"""|startswith\(f["'][^"']*/["']\)|\bcommonpath\(|\.is_relative_to\(""")


def old_forms(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if OLD_FORMS.search(line)]


def test_the_pattern_sees_the_old_forms():
    planted = ('    return path == root or path.startswith(root.rstrip("/") + "/")\n'
               '    if r.startswith(o + os.sep)\n'
               '    ok = p.resolve().is_relative_to(tmp)\n'
               '    if os.path.commonpath([a, b]) == b:\n'
               '    if p.startswith(f"{root}/"):\n'
               '    if p.startswith("/") or p.startswith("~/"):\n')
    assert len(old_forms(planted)) == 5


def test_no_hand_written_containment_in_the_package():
    pkg = ROOT / "tmuxjail"
    if not (pkg / "subpath.py").is_file():
        pytest.skip("not run from a source tree")
    found = [f"{p.relative_to(ROOT)}: {line}" for p in sorted(pkg.rglob("*.py")) if p.name != "subpath.py"
             for line in old_forms(p.read_text())]
    assert found == [], "use tmuxjail.subpath (inside, below, inside_any) instead"
