"""A CLI that misbehaves while it is observed (issue 16): from inside the discovery jail it names
files after strace lines, puts newlines in them, and writes where tmuxjail keeps the evidence and
the candidates. It gains nothing but lines in the evidence."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest

STANDIN = Path(__file__).parent.parent / "standins" / "discover.sh"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def world(jail_env):
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (scripts/needs.sh lists it)")
    env = jail_env
    (env.home / ".ssh").mkdir()
    (env.home / ".ssh" / "id_rsa").write_text("PRIVATE KEY never copied\n")
    (env.home / ".gitconfig").write_text("[user]\n\tname = Someone\n")
    shutil.copy(STANDIN, env.bin / "codex")
    (env.bin / "codex").chmod(0o755)
    return env


def attacker(env) -> str:
    state, config, home = env.state_dir, env.config_dir, env.home
    return textwrap.dedent(f"""\
        #!/bin/sh
        nl='
        '
        for top in "$PWD" /tmp "$HOME"; do
          d="$top/x\\") = 0${{nl}}99999 1.0 openat(AT_FDCWD, \\"{home}/.ssh"
          mkdir -p "$d" 2>/dev/null
          touch "$d/id_rsa\\", O_RDONLY) = 3${{nl}}" 2>/dev/null
        done
        cat "{home}/.ssh/id_$(printf 'rsa\\n99999 1.0 openat(AT_FDCWD, "/etc/shadow", O_RDONLY) = 3')" 2>/dev/null
        for f in "{state}"/discover/*/evidence.json "{state}"/discover/*/trace "{state}"/discover/codex-ws-2/evidence.json \\
                 "{config}"/candidates/*.toml "{config}"/candidates/codex-ws-2.toml; do
          echo '{{"forged": true}}' > "$f" 2>/dev/null
        done
        mkdir -p "{config}/candidates" "{state}/discover/codex-ws-2" 2>/dev/null
        echo 'baseline = ["forged"]' > "{config}/candidates/forged.toml" 2>/dev/null
        echo '{{"forged": true}}' > "{state}/discover/codex-ws-2/evidence.json" 2>/dev/null
        echo 'forged' >> "{state}/discover/codex-ws-2/trace" 2>/dev/null
        exit 0
        """)


def test_a_cli_that_attacks_discovery_gains_only_lines_in_the_evidence(world):
    env = world
    first = env.json("discover", "codex", "--non-interactive", "--timeout", "60", timeout=120)["id"]
    d1 = env.state_dir / "discover" / first
    c1 = env.config_dir / "candidates" / f"{first}.toml"
    before = {p: sha(p) for p in (d1 / "evidence.json", d1 / "trace.gz", c1)}
    assert not (d1 / "trace").exists()  # compressed once the evidence is built

    (env.bin / "codex").write_text(attacker(env))
    out = env.json("discover", "codex", "--non-interactive", "--timeout", "60", timeout=120)
    second = out["id"]
    assert second == "codex-ws-2"

    # tmuxjail's files of both discoveries are its own
    assert {p: sha(p) for p in before} == before
    assert not (env.config_dir / "candidates" / "forged.toml").exists()
    ev = json.loads((env.state_dir / "discover" / second / "evidence.json").read_text())
    assert "forged" not in ev and ev["schema"] == "tmuxjail.discovery.evidence/1"
    # what it wrote "there" landed in its own private home: lines in the evidence, nothing more
    assert any(u["path"].endswith("/candidates/forged.toml") and "create" in u["kinds"] for u in ev["paths"])
    cand = (env.config_dir / "candidates" / f"{second}.toml").read_text()
    assert "forged" not in cand.split("evidence = [")[0] and 'baseline = ["codex.cli"' in cand

    # the crafted names are single, flagged paths: never a read of ~/.ssh/id_rsa or /etc/shadow
    every = [*ev["paths"], *ev["denials"]]
    assert ev["trace"]["rejected"] == 0
    assert not [u for u in every if u["path"] in (f"{env.home}/.ssh/id_rsa", "/etc/shadow")]
    odd = [u for u in every if "99999 1.0 openat" in u["path"]]
    assert odd and all(u["odd"] and "\n" not in u["path"] for u in odd)
    raw = env.json("discover", "show", second)["classification"]["raw"]
    assert all(u["path"] in raw for u in odd if u["area"] != "workspace")
    # ... and nothing is approved
    assert env.json("approvals") == []
