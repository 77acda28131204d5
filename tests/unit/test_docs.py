"""The README and docs/ stay true: links resolve, every `tmuxjail VERB --option` they name exists
in that command's parser, the README's command list says what `--help` says in the same words,
the README's config example parses, and no doc says a shipped feature is missing."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tmuxjail.cli.app import COMMANDS, HIDDEN, parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
ALL = [README, *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(p: argparse.ArgumentParser) -> set[str]:
    """Every option string of a parser and of the subparsers below it (profiles show, discover
    show, ...)."""
    found = {s for a in p._actions for s in a.option_strings}
    for sub in _subparsers(p).values():
        found |= _options(sub)
    return found


WHOLE = parser()
VERBS = _subparsers(WHOLE)
TOP = {s for a in WHOLE._actions for s in a.option_strings}


def _fragments(text: str) -> list[str]:
    """Command lines a doc shows: code-block lines and code spans that name `tmuxjail`."""
    out = [line for block in FENCE.findall(text) for line in block.splitlines()]
    out += CODE_SPAN.findall(FENCE.sub("", text))
    return [f for f in out if re.search(r"(^|[\s(\"'])tmuxjail\s+[-_a-z]", f)]


def _named(fragment: str):
    """(verb, options) for each `tmuxjail VERB ...` in a fragment; a `|`, `&&`, `;` or `#` ends
    the command line it belongs to."""
    fragment = re.split(r"\s#\s", fragment)[0]  # a shell comment is prose
    for m in re.finditer(r"(?:^|[\s(\"'])(?<!from )(?<!import )tmuxjail((?:\s+\S+)+)", fragment):
        words = re.split(r"\s+", re.split(r"\s(?:\|\||&&|;|#|\|)\s|\s{3,}", m.group(1).strip())[0])
        i = 0
        while i < len(words) and words[i] in ("-L", "-S", "-v", "--verbose"):
            i += 1 if words[i] in ("-v", "--verbose") else 2
        if i >= len(words) or not re.fullmatch(r"_?[a-z][-a-z]*", words[i]):
            continue
        verb = words[i]
        opts = [re.split(r"[=\[\]|)`\"',.]", w.lstrip("[("))[0] for w in words[i + 1:]
                if w.lstrip("[(").startswith("--")]
        yield verb, [o for o in opts if len(o) > 2]


@pytest.mark.parametrize("doc", ALL, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{doc.name}: links to nothing: {broken}"


@pytest.mark.parametrize("doc", ALL, ids=lambda p: p.name)
def test_every_command_and_option_named_exists(doc):
    wrong = []
    for fragment in _fragments(doc.read_text()):
        for verb, opts in _named(fragment):
            if verb in HIDDEN:
                continue
            if verb not in VERBS:
                wrong.append(f"`tmuxjail {verb}` is no command ({fragment.strip()})")
                continue
            known = _options(VERBS[verb]) | TOP
            wrong += [f"`tmuxjail {verb} {o}` is no option ({fragment.strip()})" for o in opts if o not in known]
    assert not wrong, f"{doc.name}:\n" + "\n".join(wrong)


def _readme_commands() -> dict[str, str]:
    """The README's command list: `tmuxjail VERB ...   what it does`, per verb."""
    text = README.read_text()
    section = text.split("## Commands", 1)[1]
    block = FENCE.search(section)
    assert block, "README: the command list is gone"
    said = {}
    for line in block.group(1).splitlines():
        m = re.match(r"tmuxjail ([a-z]+)\b.*?\s{2,}(\S.*)$", line)
        if m and not re.match(r"tmuxjail [a-z]+ \| [a-z]+ \|", line):  # a group of verbs
            said[m.group(1)] = m.group(2).strip()
    return said


def test_the_readme_lists_every_command():
    text = README.read_text().split("## Commands", 1)[1]
    block = FENCE.search(text).group(1)
    named = set(re.findall(r"tmuxjail ([a-z]+)", block)) | set(re.findall(r"\| ([a-z]+)", block))
    missing = {v for v in COMMANDS if " " not in v} - named
    assert not missing, f"README's command list leaves out: {sorted(missing)}"


def test_the_readme_says_what_help_says():
    helps = {name: sub.description for name, sub in VERBS.items()}
    differ = {verb: (said, helps[verb]) for verb, said in _readme_commands().items()
              if verb in helps and said != helps[verb]}
    assert not differ, "README and --help differ (README, help): " + repr(differ)


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README has {len(lines)} lines"
    assert lines[2:6] == ["```sh", lines[3], lines[4], "```"]
    assert lines[3].startswith("./scripts/install.sh") and lines[4].startswith("./scripts/test.sh")
    assert not re.search(r"\bissue\s+\d+|\(#\d+\)", README.read_text(), re.IGNORECASE)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README.read_text()), "no dated measurements in the README"


def test_the_readmes_config_example_parses():
    from tmuxjail import config

    block = re.search(r"```toml\n# ~/.config/tmuxjail/config.toml\n(.*?)```", README.read_text(), re.DOTALL)
    assert block, "README: the config example is gone"
    # The example's MCP server is not installed here: the parse checks that its command is an
    # executable file, so an executable that exists stands in for it (every other key as written).
    text = block.group(1).replace('"/usr/local/bin/github-mcp-server"', '"/bin/sh"')
    assert config.parse(text, "README.md").mcp["github"].tools == ("search_issues",)


# A doc sentence that says a shipped feature is missing, with the code that ships it.
STALE = [
    (r"not covered yet:?\s+network", "the egress proxy (tmuxjail/net/proxy.py)"),
    (r"stand-in scripts only", "certification with the real CLIs (tmuxjail certify)"),
    (r"not yet: stand-ins only", "certification with the real CLIs (tmuxjail certify)"),
    (r"verified \(first cut\)", "verified mode with approvals"),
]


@pytest.mark.parametrize("doc", ALL, ids=lambda p: p.name)
def test_no_doc_says_a_shipped_feature_is_missing(doc):
    text = re.sub(r"\s+", " ", doc.read_text())
    said = [why for pattern, why in STALE if re.search(pattern, text, re.IGNORECASE)]
    assert not said, f"{doc.name} says these are missing, but they ship: {said}"
