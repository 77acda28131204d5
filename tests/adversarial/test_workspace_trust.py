"""Issue 26: the workspace is a seam. For every entry of the trust catalogue
(tmuxjail/trust-catalogue.json), from inside a real jailed pane in isolated and verified mode: a
`guard` entry present at start cannot be written, moved or removed; a path that did not exist at
start (every entry, guard or audit) is named by `tmuxjail audit` with exit 6. Then the routes of
the issue's "Why" (1-5), each followed by what the user does next on the host (git status, git
commit with husky / pre-commit / lefthook, hg status, direnv, the project's Python): the host runs
nothing of the jail's, or the audit named it first. The cases come from the catalogue itself, so
an entry added there is tested here without a line more."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_audit import FINDINGS, audit
from test_escapes import Jail
from test_seams import host_git

from tmuxjail import trust

pytestmark = pytest.mark.adversarial
STRICT = ("isolated", "verified")
ENTRIES = trust.raw()["entries"]
BY_ID = {e["id"]: e for e in ENTRIES}
# The git-config entries have no name of their own: what the test repository's config names.
GUARD_CONFIG = {"git-include": ".gitconfig-shared", "git-hooks-path": ".githooks/pre-commit",
                "git-command-path": "tools/clean-filter.sh"}
LATER_CONFIG = {"git-include": ".gitconfig-later", "git-hooks-path": ".githooks-later/pre-commit",
                "git-command-path": "tools/later-filter.sh"}
# Repositories that existed at start under names the walk does not list in full (issue 26 route 3).
HEAVY_REPOS = ("node_modules/dep/.git/config", ".venv/src/pkg/.git/config", "target/x/.hg/hgrc",
               "venv/src/other/.git/config")


def _example(e: dict, config_paths: dict) -> str:
    return config_paths.get(e["id"], e["example"])


def _write(path: Path, text: str = "orig\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _config_repo(env, ws: Path, targets: dict) -> None:
    """A repository whose config names a file to include, a hooks directory and a filter
    program, all by worktree paths."""
    ws.mkdir(parents=True, exist_ok=True)
    host_git(env, ws, "init", "-q", check=True)
    host_git(env, ws, "config", "include.path", "../" + targets["git-include"], check=True)
    host_git(env, ws, "config", "core.hooksPath", os.path.dirname(targets["git-hooks-path"]), check=True)
    host_git(env, ws, "config", "filter.x.clean", targets["git-command-path"] + " %f", check=True)


def _guard_cases() -> list[tuple[str, str, bool]]:
    """(entry id, example path, the entry is a directory) of every guard entry."""
    cases = [(e["id"], _example(e, GUARD_CONFIG), e["path"].endswith("/"))
             for e in ENTRIES if e["treatment"] == "guard"]
    return cases + [(f"heavy:{p}", p, False) for p in HEAVY_REPOS]


@pytest.mark.parametrize("mode", STRICT)
def test_every_guard_entry_present_at_start_is_read_only(world, mode):
    """Each guard entry's example exists on the host at start; from inside, appending to it,
    replacing, moving or removing it (or its directory) fails, and the host's copy is unchanged."""
    env = world
    ws = env.ws
    _config_repo(env, ws, GUARD_CONFIG)
    cases = _guard_cases()
    for _, rel, _ in cases:
        if not (ws / rel).exists():
            _write(ws / rel)
    before = {rel: (ws / rel).read_bytes() for _, rel, _ in cases}
    jail = Jail(env, mode)
    lines = ["set +e"]
    for ident, rel, is_dir in cases:
        q = f"'{rel}'"
        lines += [f"(echo x >> {q}) 2>/dev/null && echo 'W {ident}'",
                  f"(printf y > {q}.new && mv -f {q}.new {q}) 2>/dev/null && echo 'R {ident}'",
                  f"rm -f {q}.new 2>/dev/null",
                  f"mv {q} {q}.moved 2>/dev/null && echo 'M {ident}'"]
        if is_dir or ident in ("git", "git-hooks-path") or ident.startswith("heavy:"):
            top = os.path.dirname(rel) if ident.startswith("heavy:") else rel.split("/")[0]
            lines += [f"touch '{top}/planted' 2>/dev/null && echo 'N {ident}'",
                      f"mv '{top}' '{top}.moved' 2>/dev/null && echo 'D {ident}'"]
        elif "/" in rel:  # the directories above a guard are pinned (a mount point cannot move)
            lines.append(f"mv '{os.path.dirname(rel)}' '{os.path.dirname(rel)}.moved' 2>/dev/null && echo 'D {ident}'")
    lines.append("echo end")
    out = jail.sh("\n".join(lines), timeout=60)
    assert out.split("\n")[:-1] == ["end"], out
    changed = [rel for rel, data in before.items() if (ws / rel).read_bytes() != data]
    assert not changed, changed


def _plant_script(cases: list[tuple[str, str]]) -> str:
    lines = ["set -e"]
    for ident, rel in cases:
        d = os.path.dirname(rel)
        text = '{"name": "x", "husky": {"hooks": {"pre-commit": "touch /tmp/tj-husky"}}}' \
            if BY_ID.get(ident, {}).get("keys") else f"planted {ident}"
        if d:
            lines.append(f"mkdir -p '{d}'")
        lines.append(f"printf '%s\\n' '{text}' > '{rel}'")
    lines.append("echo ok")
    return "\n".join(lines)


@pytest.mark.parametrize("mode", STRICT)
def test_every_entry_that_appears_during_the_session_is_named_by_the_audit(world, mode):
    """Nothing of the catalogue exists at start (but a repository whose config names files that
    are not there yet); the jail makes every entry's example, and the audit names each one with
    its entry's kind and exits 6. Guard entries included: what did not exist at start cannot be
    bound read-only, so the audit is what names it (issue 26 item 2)."""
    env = world
    ws = env.ws
    _config_repo(env, ws, LATER_CONFIG)
    cases = [(e["id"], _example(e, LATER_CONFIG)) for e in ENTRIES if e["id"] != "git"]
    cases += [(f"heavy:{p}", p) for p in HEAVY_REPOS]
    jail = Jail(env, mode)
    assert audit(env)["count"] == 0
    assert jail.sh(_plant_script(cases), timeout=60).split() == ["ok"]
    proc = env.run("audit", "j", "--json", timeout=120)
    assert proc.returncode == FINDINGS, proc.stderr
    found: dict[str, set[str]] = {}
    for f in json.loads(proc.stdout)["findings"]:
        found.setdefault(os.path.relpath(f["path"], jail.ws), set()).add(f["kind"])
    missing = []
    for ident, rel in cases:
        if ident.startswith("heavy:"):
            repo = rel.split("/.")[0] + "/." + rel.split("/.")[1].split("/")[0]
            if not found.get(repo):
                missing.append((ident, repo))
        elif BY_ID[ident]["kind"] not in found.get(rel, set()):
            missing.append((ident, rel, found.get(rel)))
    assert not missing, missing


# -- the routes of the "Why" ------------------------------------------------------------

def _clean_env(env) -> dict[str, str]:
    return {"HOME": str(env.home), "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x",
            "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}


def _commit_all(env, ws: Path) -> None:
    host_git(env, ws, "add", "-A", check=True)
    host_git(env, ws, "commit", "-qm", "setup", check=True)


@pytest.mark.parametrize("mode", STRICT)
def test_route1_include_husky_and_hook_managers_run_nothing_on_the_host(world, mode):
    """Route 1: `include.path = ../.gitconfig-shared` (the jail appends core.fsmonitor), husky
    (`core.hooksPath = .husky/_`: the jail rewrites .husky/pre-commit), the pre-commit framework
    (the jail adds a `repo: local` hook) and lefthook (the jail adds a command). Afterwards the
    host's git status and git commit run nothing of the jail's."""
    env = world
    ws = env.ws
    ran = env.outside / "ran"
    host_git(env, ws, "init", "-q", check=True)
    _write(ws / ".gitconfig-shared", "[user]\n\tname = shared\n")
    host_git(env, ws, "config", "include.path", "../.gitconfig-shared", check=True)
    # husky 9's layout: core.hooksPath = .husky/_, whose stubs run .husky/<hook>.
    _write(ws / ".husky/_/pre-commit", '#!/bin/sh\n[ -f "$(dirname "$0")/../pre-commit" ] && '
                                       'sh "$(dirname "$0")/../pre-commit"\nexit 0\n')
    (ws / ".husky/_/pre-commit").chmod(0o755)
    _write(ws / ".husky/pre-commit", "true\n")
    host_git(env, ws, "config", "core.hooksPath", ".husky/_", check=True)
    _write(ws / ".pre-commit-config.yaml", "repos: []\n")
    _write(ws / "lefthook.yml", "pre-commit:\n  commands: {}\n")
    _commit_all(env, ws)
    jail = Jail(env, mode)
    out = jail.sh(f"""
        set +e
        printf '[core]\\n\\tfsmonitor = touch {ran}.include\\n' >> .gitconfig-shared 2>/dev/null && echo INCLUDE
        echo 'touch {ran}.husky' > .husky/pre-commit 2>/dev/null && echo HUSKY
        printf 'repos:\\n- repo: local\\n  hooks:\\n  - id: x\\n    name: x\\n    entry: touch {ran}.precommit\\n    language: system\\n    always_run: true\\n    pass_filenames: false\\n' > .pre-commit-config.yaml 2>/dev/null && echo PRECOMMIT
        printf 'pre-commit:\\n  commands:\\n    x:\\n      run: touch {ran}.lefthook\\n' > lefthook.yml 2>/dev/null && echo LEFTHOOK
        echo end
    """)
    assert out.split() == ["end"], out
    host_git(env, ws, "status")
    host_git(env, ws, "commit", "-q", "--allow-empty", "-m", "host")
    clean = _clean_env(env)
    for tool, setup in (("pre-commit", ["pre-commit", "install", "-f"]), ("lefthook", ["lefthook", "install", "-f"])):
        exe = shutil.which(tool, path=clean["PATH"])
        if exe is None:
            continue  # the guard test above covers the write; CI installs both (scripts/test.sh)
        host_git(env, ws, "config", "--unset", "core.hooksPath")
        subprocess.run([exe, *setup[1:]], cwd=ws, env=clean, capture_output=True, text=True, timeout=120)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", tool], cwd=ws, env=clean,
                       capture_output=True, text=True, timeout=120)
        host_git(env, ws, "config", "core.hooksPath", ".husky/_")
    assert not list(env.outside.glob("ran*")), sorted(p.name for p in env.outside.glob("ran*"))


def test_route1_host_tools_are_installed():
    """The host half of route 1 runs where CI installs the tools (scripts/test.sh); say so
    rather than pass quietly without them."""
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    missing = [t for t in ("pre-commit", "lefthook", "hg", "direnv") if shutil.which(t, path=path) is None]
    if missing:
        pytest.skip(f"not installed here, their host actions are skipped: {', '.join(missing)} "
                    "(scripts/test.sh installs them)")


@pytest.mark.parametrize("mode", STRICT)
def test_route2_mercurial_hooks_cannot_be_planted(world, mode):
    """Route 2: .hg/hgrc is read-only from inside; the host's hg status runs nothing."""
    env = world
    hg = shutil.which("hg")
    ws = env.ws
    ran = env.outside / "ran"
    if hg:
        subprocess.run([hg, "init", str(ws)], env=_clean_env(env), check=True, capture_output=True)
    else:
        _write(ws / ".hg/requires", "store\n")
    _write(ws / ".hg/hgrc", "[ui]\nusername = u\n")
    for d in (".jj/repo", ".sl"):
        (ws / d).mkdir(parents=True)
    jail = Jail(env, mode)
    out = jail.sh(f"""
        set +e
        printf '[hooks]\\npre-status = touch {ran}.hg\\n' >> .hg/hgrc 2>/dev/null && echo HGRC
        printf '[hooks]\\npre-status = touch {ran}.sl\\n' > .sl/config 2>/dev/null && echo SL
        printf '[fsmonitor]\\nbackend = "watchman"\\n' > .jj/repo/config.toml 2>/dev/null && echo JJ
        mv .hg .hg-old 2>/dev/null && echo MOVED
        echo end
    """)
    assert out.split() == ["end"], out
    if hg:
        subprocess.run([hg, "status"], cwd=ws, env=_clean_env(env), capture_output=True, timeout=60)
    assert not list(env.outside.glob("ran*"))


@pytest.mark.parametrize("mode", STRICT)
def test_route3_repositories_under_skipped_names_are_guarded(world, mode):
    """Route 3: a repository that existed at start under node_modules/, .venv/src/ (what
    `pip install -e git+...` makes) or target/ is read-only; the host's git status there runs
    nothing."""
    env = world
    ws = env.ws
    ran = env.outside / "ran"
    repos = ("node_modules/dep", ".venv/src/pkg", "target/debug/x", "node_modules/@scope/pkg")
    for r in repos:
        (ws / r).mkdir(parents=True)
        host_git(env, ws / r, "init", "-q", check=True)
    jail = Jail(env, mode)
    out = jail.sh("set +e\n" + "\n".join(
        f"git -C {r} config core.fsmonitor 'touch {ran}.{i}' 2>/dev/null && echo CONFIG{i}\n"
        f"mv {r}/.git {r}/.git-old 2>/dev/null && echo MOVED{i}" for i, r in enumerate(repos)) + "\necho end")
    assert out.split() == ["end"], out
    for r in repos:
        host_git(env, ws / r, "status")
    assert not list(env.outside.glob("ran*"))


@pytest.mark.parametrize("mode", STRICT)
def test_route4_direnv_sources_are_named_before_the_next_cd(world, mode):
    """Route 4: an allowed .envrc that does `source_env_if_exists .envrc.local`, `dotenv_if_exists`
    and `use flake`: direnv hashes only .envrc, so what the jail writes would run at the next
    `cd` with no prompt. The .envrc itself is read-only; the files it sources that did not exist
    are named by the audit (exit 6), with direnv's trigger, before the host's next direnv run."""
    env = world
    ws = env.ws
    _write(ws / ".envrc", "source_env_if_exists .envrc.local\ndotenv_if_exists .env.local\n")
    direnv = shutil.which("direnv")
    clean = _clean_env(env)
    if direnv:
        subprocess.run([direnv, "allow", str(ws)], cwd=ws, env=clean, check=True, capture_output=True)
    jail = Jail(env, mode)
    ran = env.outside / "ran"
    out = jail.sh(f"""
        set +e
        echo 'touch {ran}.envrc' >> .envrc 2>/dev/null && echo ENVRC
        echo 'touch {ran}.local' > .envrc.local && echo LOCAL
        echo 'PATH=.:/usr/bin' > .env.local && echo DOTENV
        echo '{{ outputs = _: {{}}; }}' > flake.nix && echo FLAKE
        echo end
    """)
    assert out.split() == ["LOCAL", "DOTENV", "FLAKE", "end"], out
    proc = env.run("audit", "j", "--json")
    assert proc.returncode == FINDINGS, proc.stderr
    named = {os.path.relpath(f["path"], jail.ws): f["kind"] for f in json.loads(proc.stdout)["findings"]}
    assert {".envrc.local": "direnv-source", ".env.local": "direnv", "flake.nix": "direnv-source"}.items() \
        <= named.items(), named
    if direnv:  # what the audit warned of is real: the next direnv run sources it, no prompt
        subprocess.run([direnv, "exec", str(ws), "true"], cwd=ws, env=clean, capture_output=True, timeout=60)
        assert (env.outside / "ran.local").exists()
        assert not (env.outside / "ran.envrc").exists()


@pytest.mark.parametrize("mode", STRICT)
def test_route5_a_pth_in_the_projects_environment_is_named(world, mode):
    """Route 5: a `.pth` line in .venv's site-packages runs at the host's next
    `.venv/bin/python -c pass`; the audit names it (exit 6) with that trigger first."""
    env = world
    ws = env.ws
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True)
    site = next((ws / ".venv/lib").glob("python3*/site-packages"))
    rel = site.relative_to(ws)
    jail = Jail(env, mode)
    ran = env.outside / "ran"
    out = jail.sh(f"""
        echo "import os; open('{ran}.pth', 'w')" > '{rel}/evil.pth' && echo PTH
        echo 'import os' > '{rel}/sitecustomize.py' && echo SITE
    """)
    assert out.split() == ["PTH", "SITE"], out
    proc = env.run("audit", "j", "--json")
    assert proc.returncode == FINDINGS, proc.stderr
    named = {os.path.relpath(f["path"], jail.ws): f["kind"] for f in json.loads(proc.stdout)["findings"]}
    assert named.get(f"{rel}/evil.pth") == "python-pth" and named.get(f"{rel}/sitecustomize.py") == "python-site", named
    subprocess.run([str(ws / ".venv/bin/python"), "-c", "pass"], check=True, timeout=60)
    assert (env.outside / "ran.pth").exists()  # the route is real: the audit named it first


@pytest.mark.parametrize("mode", STRICT)
def test_files_the_repository_config_reads_by_path_are_read_only(world, mode):
    """Round five's trust-file leads in a plain workspace: core.attributesFile (routes files to
    your filters and drivers) and gpg.ssh.allowedSignersFile (whose keys your git trusts) named
    inside the work tree are as read-only in the jail as core.hooksPath is."""
    env = world
    ws = env.ws
    ws.mkdir(parents=True, exist_ok=True)
    host_git(env, ws, "init", "-q", check=True)
    host_git(env, ws, "config", "core.attributesFile", "meta/attributes", check=True)
    host_git(env, ws, "config", "gpg.ssh.allowedSignersFile", ".signers", check=True)
    for rel in ("meta/attributes", ".signers"):
        _write(ws / rel)
    jail = Jail(env, mode)
    out = jail.sh("set +e\n(echo '* filter=x' >> meta/attributes) 2>/dev/null && echo W1\n"
                  "(echo 'a ssh-ed25519 AAAA' >> .signers) 2>/dev/null && echo W2\n"
                  "mv .signers .s 2>/dev/null && echo M2\necho end", timeout=60)
    assert out.split() == ["end"], out
    assert (ws / "meta/attributes").read_text() == (ws / ".signers").read_text() == "orig\n"


@pytest.mark.parametrize("present", [True, False], ids=["present", "absent"])
@pytest.mark.parametrize("key,value,rel", [
    ("core.hooksPath", ".githooks", ".githooks/pre-commit"),
    ("core.attributesFile", ".gitattributes-local", ".gitattributes-local"),
])
def test_what_your_global_config_names_in_a_workspace_is_guarded(world, key, value, rel, present):
    """Red team round six: ~/.gitconfig's relative core.hooksPath (a known pattern) names a path of
    every repository's work tree. Present at start it is read-only in the jail; made by the jail,
    the audit names it. Before, it was writable and unnamed, and your next commit ran the hook."""
    from test_audit import audit

    env = world
    ws = env.ws
    host_git(env, ws, "init", "-q", check=True)
    section, name = key.split(".")
    (env.home / ".gitconfig").write_text(f"[{section}]\n\t{name} = {value}\n")
    if present:
        _write(ws / rel)
    jail = Jail(env, "isolated")
    out = jail.sh(f"set +e\n(mkdir -p $(dirname {rel}) && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > {rel} "
                  f"&& chmod +x {rel}) 2>/dev/null && echo W\necho end", timeout=60)
    if present:
        assert out.split() == ["end"], out
        assert (ws / rel).read_text() == "orig\n"
    else:
        assert out.split() == ["W", "end"], out
        assert str(ws / rel) in {f["path"] for f in audit(env)["findings"]}


@pytest.mark.parametrize("link", [".gitconfig", ".config/git/attributes"])
def test_a_global_git_config_that_is_a_file_of_the_workspace_is_read_only(world, link):
    """A dotfiles workspace: ~/.gitconfig (or the default attributes file, which routes files to
    your drivers) -> ws/gitconfig. Your git reads it in every repository: the jail must not
    append to it."""
    env = world
    ws = env.ws
    host_git(env, ws, "init", "-q", check=True)
    _write(ws / "gitconfig", "[user]\n\tname = u\n")
    (env.home / link).parent.mkdir(parents=True, exist_ok=True)
    (env.home / link).symlink_to(ws / "gitconfig")
    jail = Jail(env, "isolated")
    out = jail.sh(f"set +e\n(printf '[core]\\n\\tfsmonitor = touch {env.outside}/ran\\n' >> gitconfig) 2>/dev/null "
                  "&& echo W\necho end", timeout=60)
    assert out.split() == ["end"], out
    assert (ws / "gitconfig").read_text() == "[user]\n\tname = u\n"


# Red team round seven: your global git config in a workspace that is not a repository, and the
# config your environment gives git.
def test_global_config_in_a_workspace_without_a_repository_is_read_only(world):
    """~/.gitconfig -> ws/gitconfig, the dotfiles workspace not (yet) a git repository: the jail
    must not append an fsmonitor to the config every git of the user reads."""
    env = world
    ws = env.ws
    _write(ws / "gitconfig", "[user]\n\tname = u\n")
    (env.home / ".gitconfig").symlink_to(ws / "gitconfig")
    jail = Jail(env, "isolated")
    out = jail.sh(f"set +e\n(printf '[core]\\n\\tfsmonitor = touch {env.outside}/ran\\n' >> gitconfig) 2>/dev/null "
                  "&& echo W\necho end", timeout=60)
    if out.split() != ["end"]:
        names = {f["path"] for f in audit(env)["findings"]}
        assert str(ws / "gitconfig") in names, (out, names)


@pytest.mark.parametrize("repository", [False, True], ids=["plain-directory", "repository"])
def test_a_global_include_the_jail_creates_in_a_workspace_is_named(world, repository):
    """~/.gitconfig includes ws/local.gitconfig (absent at start: an optional include). The jail
    can create it (nothing was there to guard); the audit must name it, repository or not."""
    env = world
    ws = env.ws
    ws.mkdir(parents=True, exist_ok=True)
    if repository:
        host_git(env, ws, "init", "-q", check=True)
    (env.home / ".gitconfig").write_text(f"[include]\n\tpath = {ws}/local.gitconfig\n")
    jail = Jail(env, "isolated")
    out = jail.sh(f"set +e\n(printf '[core]\\n\\tfsmonitor = touch {env.outside}/ran\\n' > local.gitconfig) 2>/dev/null "
                  "&& echo W\necho end", timeout=60)
    assert out.split() == ["W", "end"], out
    assert str(ws / "local.gitconfig") in {f["path"] for f in audit(env)["findings"]}


def test_git_config_count_env_hookspath_is_guarded(world):
    """GIT_CONFIG_COUNT/KEY/VALUE in the user's environment (git 2.31+): core.hooksPath=.githooks
    names a path of every work tree, as ~/.gitconfig's would."""
    env = world
    ws = env.ws
    host_git(env, ws, "init", "-q", check=True)
    _write(ws / ".githooks/pre-commit")
    env.vars.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": ".githooks"})
    jail = Jail(env, "isolated")
    out = jail.sh("set +e\n(printf '#!/bin/sh\\ntouch x\\n' > .githooks/pre-commit) 2>/dev/null && echo W\necho end",
                  timeout=60)
    assert out.split() == ["end"], out
