"""The trust catalogue (issue 26): the data validates, fails closed in one line when malformed,
and both walks act on every entry: the start walk (host.guards) lists each guard entry present,
the audit walk (scan) names each entry with its trigger and fix; padding a directory with files
hides neither a repository nor a catalogue name; the docs table is the data's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tmuxjail import catalogue, host, scan, trust
from tmuxjail.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = trust.raw()["entries"]
CONFIG = {"git-include": ".gitconfig-shared", "git-hooks-path": ".githooks/pre-commit",
          "git-command-path": "tools/clean-filter.sh"}


def _tree(ws: Path) -> dict[str, str]:
    """Every entry's example in ws (a hand-written .git whose config names the git-config
    examples); returns example path -> entry id."""
    (ws / ".git" / "objects").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".git" / "config").write_text(
        "[include]\n\tpath = ../.gitconfig-shared\n[core]\n\thooksPath = .githooks\n"
        '[filter "x"]\n\tclean = tools/clean-filter.sh %f\n')
    out = {}
    for e in ENTRIES:
        rel = CONFIG.get(e["id"], e["example"])
        p = ws / rel
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text('{"husky": {"hooks": {}}}' if e.get("keys") else "x\n")
        out[".git" if e["id"] == "git" else rel] = e["id"]
    return out


def test_the_catalogue_validates_and_covers_the_issue():
    cat = catalogue.validate()
    paths = {e.path for e in cat.entries}
    for p in (".husky/", ".pre-commit-config.yaml", "lefthook.*", ".lefthook.*", ".lefthook/", ".overcommit.yml",
              "package.json", ".hg/", ".jj/", ".sl/", ".envrc", ".envrc.*", ".env", ".env.*", "flake.nix",
              "shell.nix", "default.nix", "mise.*", ".mise.*", ".mise/", ".tool-versions", "site-packages/*.pth",
              "sitecustomize.py", "usercustomize.py", "pyvenv.cfg", ".npmrc", ".yarnrc", ".yarnrc.yml",
              ".pnpmfile.cjs", ".cargo/config.toml", ".cargo/config", "rust-toolchain.toml", ".vscode/",
              "*.code-workspace", ".idea/", ".devcontainer/", ".dir-locals.el", ".exrc", ".nvim.lua", ".lvimrc",
              ".claude/", ".mcp.json", ".cursor/", ".codex/", ".gemini/", ".pi/", ".gitattributes"):
        assert p in paths, p
    assert {e.id for e in cat.entries if e.source == "git-config"} == set(CONFIG)


@pytest.mark.parametrize("text, says, both", [
    ("{", "not valid JSON", True),
    ('{"version": 1, "entries": [{"id": "x"}]}', "malformed", True),
    ('{"version": 1, "entries": [' + json.dumps({**ENTRIES[0], "treatment": "maybe"}) + "]}", "malformed", True),
    ('{"version": 1, "entries": [' + json.dumps({**ENTRIES[0], "path": "a/b/c*d"}) + "]}", "malformed", True),
    ('{"version": 1, "entries": [' + json.dumps({**ENTRIES[0], "reason": "two\nlines"}) + "]}", "malformed", False),
    ('{"version": 1, "entries": [' + json.dumps(ENTRIES[0]) + "," + json.dumps(ENTRIES[0]) + "]}", "duplicate", False),
])
def test_a_malformed_catalogue_fails_closed_in_one_line(text, says, both):
    with pytest.raises(ConfigError) as exc:
        catalogue.validate(text)
    assert says in exc.value.message and "\n" not in exc.value.message
    if both:  # the warm start's reader refuses the shapes it would misread, without pydantic
        with pytest.raises(ConfigError) as raw:
            trust.compile_catalogue(trust.raw(text))
        assert "\n" not in raw.value.message


def test_the_audit_walk_names_every_entry_with_its_trigger_and_fix(tmp_path):
    ws = tmp_path / "ws"
    examples = _tree(ws)
    found = {}
    for f in scan.scan([str(ws)]).findings:
        assert f.get("trigger") and f.get("fix"), f  # every finding, catalogue or not
        found.setdefault(os.path.relpath(f["path"], ws), []).append(f)
    cat = trust.catalogue()
    for rel, ident in examples.items():
        e = cat.by_id[ident]
        hits = [f for f in found.get(rel, []) if f["kind"] == e.kind]
        assert hits, (ident, rel, found.get(rel))
        if ident != "git":
            assert hits[0]["trigger"] == e.trigger and hits[0]["fix"] == e.fix, (ident, hits[0])


def test_the_start_walk_lists_every_guard_entry_and_no_audit_entry(tmp_path):
    ws = tmp_path / "ws"
    examples = _tree(ws)
    (ws / "node_modules" / "dep" / ".vscode").mkdir(parents=True)  # below a heavy name: audited only
    (ws / ".venv" / "src" / "pkg" / ".git").mkdir(parents=True)
    g = host.guards([str(ws)])
    assert g.capped is None
    listed = set(g.git) | set(g.trusted)
    cat = trust.catalogue()
    for rel, ident in examples.items():
        e = cat.by_id[ident]
        top = rel.split("/")[0] if e.is_dir or ident == "git-hooks-path" else rel
        if e.treatment == "guard":
            assert str(ws / top) in (g.git if e.vcs else g.trusted), (ident, top)
        else:
            assert str(ws / rel) not in listed, ident
    assert str(ws / ".venv/src/pkg/.git") in g.git
    assert str(ws / "node_modules/dep/.vscode") not in listed


def test_padding_hides_neither_a_repository_nor_a_catalogue_name(tmp_path):
    """Route 6's walk half: 200,001 files at the top, a nested repository and an .envrc.local
    below: both walks still see them (names and directories come before the per-file lstat)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(200_001):
            os.close(os.open(f"p{i}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    (ws / "zz" / "nested" / ".git").mkdir(parents=True)
    (ws / "zz" / ".envrc.local").write_text("x")
    s = scan.scan([str(ws)])
    got = {os.path.relpath(f["path"], ws) for f in s.findings}
    assert {"zz/nested/.git", "zz/.envrc.local"} <= got, got
    assert s.capped  # the lstat of 200,001 files is past the cap: the audit says it is incomplete
    g = host.guards([str(ws)])
    assert g.capped is None and str(ws / "zz/nested/.git") in g.git and str(ws / "zz/.envrc.local") in g.trusted


def test_docs_table_is_the_catalogues():
    doc = (ROOT / "docs" / "workspace-trust.md").read_text()
    begin, end = "<!-- catalogue:begin -->\n", "<!-- catalogue:end -->"
    assert begin in doc and end in doc
    table = doc.split(begin, 1)[1].split(end, 1)[0]
    assert table == catalogue.markdown(), "regenerate: python -c 'from tmuxjail import catalogue; print(catalogue.markdown(), end=\"\")'"


def test_strict_policies_bind_the_catalogue_guards_and_git_metadata_write_lifts_them():
    from test_policy import HOME, resolve

    ws = f"{HOME}/src/app"
    trusted = (f"{ws}/.husky", f"{ws}/.envrc", "/elsewhere/.vscode")
    for mode in ("isolated", "verified"):
        pol = resolve(mode, git_paths=(f"{ws}/.git",), trust_paths=trusted)
        assert pol["protected"] == [f"{ws}/.envrc", f"{ws}/.git", f"{ws}/.husky"]
        assert resolve(mode, trust_paths=trusted, caps=("git-metadata-write",))["protected"] == []
    assert resolve("compatibility", trust_paths=trusted)["protected"] == resolve("compatibility")["protected"]
    assert resolve(trust_paths=trusted) != resolve(trust_paths=trusted[:1])  # fingerprinted
