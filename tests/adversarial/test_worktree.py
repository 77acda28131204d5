"""Issue 32: worktree sessions. The agent commits on its own branch in a git directory only its
jail has; from inside real jailed panes it tries every bypass that broke the earlier git guard on
that git directory, and the host then runs what a user runs (git status and git commit in the
repository, `tmuxjail diff`, `tmuxjail land`) and must run nothing of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_escapes import STRICT, Jail
from test_seams import host_git

pytestmark = pytest.mark.adversarial

G = "/run/tmuxjail/worktree/git"


def _main(env) -> Path:
    repo = env.ws
    host_git(env, repo, "init", "-q", check=True)
    host_git(env, repo, "config", "user.name", "u", check=True)
    host_git(env, repo, "config", "user.email", "u@x.test", check=True)
    (repo / "README").write_text("x\n")
    host_git(env, repo, "add", "README", check=True)
    host_git(env, repo, "commit", "-qm", "init", check=True)
    return repo.resolve()


def _start(env, mode, name="one", jail="j") -> Jail:
    return Jail(env, mode, name=jail, workspace=env.ws, extra=("--worktree", name))


def _branch(env, repo, ref="tmuxjail/one") -> str:
    return host_git(env, repo, "rev-parse", "--verify", "-q", ref).stdout.strip()


def _asks_trust(env, *named: str) -> None:
    """land refuses, names each path, and says --trust-files."""
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "--trust-files" in bad.stderr and all(n in bad.stderr for n in named), bad.stderr


@pytest.mark.parametrize("mode", STRICT)
def test_the_agent_commits_on_its_branch_and_the_host_lands_it(world, mode):
    env = world
    repo = _main(env)
    jail = _start(env, mode)
    assert jail.ws == repo.parent / (repo.name + ".worktrees") / "one"
    out = jail.sh("""
        echo one > f1 && git add f1 && git commit -qm one && echo COMMIT
        echo two > f2 && git add f2 && git commit -qm two && echo COMMIT
        echo wip >> f1 && git stash -q && test "$(cat f1)" = one && git stash pop -q && echo STASH
        git commit -qam three && echo COMMIT
        git rebase -q -f HEAD~2 && echo REBASE
        test "$(git log --format=%s | tr '\\n' ' ')" = "three two one init " && echo LOG
        git diff --stat HEAD~1 | grep -q f1 && echo DIFF
        test "$(git branch --show-current)" = tmuxjail/one && echo BRANCH
        echo end
    """, timeout=30)
    assert out.split() == ["COMMIT", "COMMIT", "STASH", "COMMIT", "REBASE", "LOG", "DIFF", "BRANCH", "end"], out
    # On the host the worktree is no repository: its .git names a path only the jail has.
    assert host_git(env, jail.ws, "status").returncode == 128
    shown = env.json("diff", "j")
    assert [c["subject"] for c in shown["commits"]] == ["three", "two", "one"]
    assert sorted(f["path"] for f in shown["files"]) == ["f1", "f2"]
    assert env.run("list").stdout.count("[tmuxjail/one +3, ") == 1  # (+ the attack scripts, uncommitted)
    landed = env.json("land", "j")
    assert landed["method"] == "fast-forward" and landed["commits"] == 3
    assert (repo / "f2").read_text() == "two\n" and (repo / "f1").read_text() == "one\nwip\n"
    assert host_git(env, repo, "status", "--porcelain").stdout == ""


@pytest.mark.parametrize("mode", STRICT)
def test_git_bypasses_from_the_worktree_run_nothing_on_the_host(world, mode):
    """commondir, core.fsmonitor (also through an include and a worktree config), hooks and
    core.hooksPath, a gitlink with a .gitmodules, .gitattributes drivers that the user's config
    defines, alternates, packed-refs, `mv .git`, a .git file: all written on the agent's side,
    then git status / git commit in the repository, `tmuxjail diff` and `tmuxjail land`."""
    env = world
    repo = _main(env)
    ran = env.outside / "ran"
    for key in ("filter.evil.clean", "filter.evil.smudge", "filter.evil.process", "diff.evil.textconv",
                "diff.evil.command", "merge.evil.driver"):  # the user's own drivers, for the agent to route files to
        host_git(env, repo, "config", key, f"touch {ran}.{key}; cat", check=True)
    jail = _start(env, mode)
    evil = f"""printf '[core]\\n\\tfsmonitor = touch {ran}.$1\\n\\thooksPath = {jail.ws}/hooks\\n' > "$2" """
    out = jail.sh(f"""
        evil() {{ {evil}; }}
        run() {{ sh -c "$2" >/dev/null 2>&1 && echo "$1"; }}
        mkdir -p hooks evil && for h in pre-commit post-commit post-merge post-checkout reference-transaction \\
            pre-auto-gc fsmonitor-watchman post-rewrite; do
          printf '#!/bin/sh\\ntouch {ran}.hook-%s\\n' $h > hooks/$h; chmod +x hooks/$h; done
        evil commondir evil/config
        run OWN_CONFIG 'git config core.fsmonitor "touch {ran}.fsmonitor" && git config core.hooksPath {jail.ws}/hooks'
        run OWN_HOOKS 'mkdir -p {G}/hooks && cp hooks/* {G}/hooks/'
        run INCLUDE 'git config include.path {jail.ws}/evil/config'
        git config extensions.worktreeConfig true && evil wtconfig {G}/config.worktree && echo WT_CONFIG
        run COMMONDIR 'echo {jail.ws}/evil > {G}/commondir.x && mv {G}/commondir.x {G}/commondir'
        run INFO 'mkdir -p {G}/info && echo "* filter=evil" > {G}/info/attributes'
        echo '* filter=evil diff=evil merge=evil' > .gitattributes
        echo x > data.txt
        git init -q fresh && evil fresh fresh/.git/config && \\
          git -C fresh -c user.name=a -c user.email=a@b -c core.hooksPath=/dev/null commit -q --allow-empty -m x
        printf '[submodule "fresh"]\\n\\tpath = fresh\\n\\turl = ./fresh\\n' > .gitmodules
        (rm -f {G}/commondir; git -c core.fsmonitor=false -c core.hooksPath=/dev/null add .gitattributes data.txt .gitmodules \\
          && git -c core.hooksPath=/dev/null update-index --add --cacheinfo 160000,$(git -C fresh rev-parse HEAD),fresh \\
          && git -c core.fsmonitor=false -c core.hooksPath=/dev/null commit -qm attack) >/dev/null 2>&1 && echo COMMITTED
        run COMMONDIR 'echo {jail.ws}/evil > {G}/commondir'
        run PACKED 'printf "# pack-refs with: peeled\\n%s refs/heads/master\\n" $(git rev-parse HEAD) >> {G}/packed-refs'
        run ALTERNATES 'echo {jail.ws}/evil > {G}/objects/info/alternates'
        run MV_GIT 'mv .git .git-old'
        run DOT_GIT 'echo "gitdir: {jail.ws}/evil" > .git'
        run OBJECTS 'touch /run/tmuxjail/worktree/objects/x'
        echo end
    """, timeout=30)
    # The agent owns its git directory (all of it, even what git would read as configuration):
    # what it cannot do is write the repository's objects, or the .git file the host reads.
    assert out.split() == ["OWN_CONFIG", "OWN_HOOKS", "INCLUDE", "WT_CONFIG", "COMMONDIR", "INFO", "COMMITTED",
                           "COMMONDIR", "PACKED", "ALTERNATES", "end"], out
    before = _branch(env, repo, "master")
    # The user's git in the repository, and in the worktree (no repository on the host). A
    # repository the agent made inside its worktree (fresh/) is its own, as in any workspace: the
    # audit names it (docs/workspace-trust.md), and the host's git must simply not reach into it.
    for cwd in (repo, jail.ws):
        host_git(env, cwd, "status")
        host_git(env, cwd, "commit", "-q", "--allow-empty", "-m", "host")
    shown = env.run("diff", "j")
    assert shown.returncode == 0, shown.stderr
    assert "data.txt" in shown.stdout and ".gitattributes: " in shown.stdout
    refused = env.run("land", "j")
    assert refused.returncode != 0 and "--trust-files" in refused.stderr and "Traceback" not in refused.stderr
    master = _branch(env, repo, "master")
    assert master != before  # the host's own commit above
    done = env.run("land", "j", "--trust-files", "--merge")
    assert done.returncode == 0, done.stderr
    assert (repo / "data.txt").read_text() == "x\n"
    ran_files = sorted(p.name for p in ran.parent.glob(ran.name + "*"))
    assert ran_files == [], ran_files


@pytest.mark.parametrize("mode", ["isolated"])
def test_objects_and_refs_that_look_wrong_are_refused(world, mode):
    """A tree with a `.git` entry (fsck), a branch that is a link, an object directory that is a
    link: each stops diff and land in one line, and the repository's branch stays as it was."""
    env = world
    repo = _main(env)
    jail = _start(env, mode)
    out = jail.sh("""
        echo a > a && git add a && git commit -qm ok && echo OK
        blob=$(echo evil | git hash-object -w --stdin)
        tree=$(printf '100644 blob %s\\t.git\\n' $blob | git mktree)
        c=$(git commit-tree $tree -p HEAD -m dotgit) && git update-ref refs/heads/tmuxjail/one $c && echo DOTGIT
        echo end
    """)
    assert out.split() == ["OK", "DOTGIT", "end"], out
    base = _branch(env, repo)
    for verb in ("diff", "land"):
        bad = env.run(verb, "j")
        assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
        assert "dotgit" in bad.stderr.lower() or "fsck" in bad.stderr.lower() or ".git" in bad.stderr, bad.stderr
        assert _branch(env, repo) == base and not (repo / ".git" / "config").read_text().count("evil")
    # A .gitmodules whose update runs a command (fsck's gitmodulesUpdate).
    out = jail.sh(f"""
        git update-ref refs/heads/tmuxjail/one HEAD~1 && git reset -q --hard
        printf '[submodule "s"]\\n\\tpath = s\\n\\turl = ./s\\n\\tupdate = !touch {env.outside}/ran\\n' > .gitmodules
        git add .gitmodules && git commit -qm bang && echo BANG
        echo end
    """)
    assert out.split() == ["BANG", "end"], out
    bad = env.run("land", "j", "--trust-files")
    assert bad.returncode == 1 and "gitmodulesUpdate" in bad.stderr and _branch(env, repo) == base, bad.stderr
    out = jail.sh(f"""
        git update-ref refs/heads/tmuxjail/one HEAD~1 && rm -f {G}/refs/heads/tmuxjail/one && \\
          ln -s /etc/hostname {G}/refs/heads/tmuxjail/one && echo LINK
        echo end
    """)
    assert out.split() == ["LINK", "end"], out
    bad = env.run("diff", "j")
    assert bad.returncode == 1 and "not a plain file" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def _agent_edits_readme(env) -> Path:
    """A worktree session whose agent committed a new README; the repository."""
    repo = _main(env)
    jail = _start(env, "isolated")
    assert jail.sh("echo agent > README && git commit -qam agent && echo OK").split() == ["OK"]
    return repo


def test_a_conflict_stops_the_landing_and_changes_nothing(world):
    env = world
    repo = _agent_edits_readme(env)
    (repo / "README").write_text("user\n")
    host_git(env, repo, "commit", "-qam", "user", check=True)
    master = _branch(env, repo, "master")
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "conflicts in 1 file(s): README" in bad.stderr and "nothing changed" in bad.stderr
    assert _branch(env, repo, "master") == master and (repo / "README").read_text() == "user\n"
    assert host_git(env, repo, "status", "--porcelain").stdout == ""
    assert env.run("land", "j", "--ff-only").returncode == 1
    squash = env.run("land", "j", "--squash")
    assert squash.returncode == 1 and _branch(env, repo, "master") == master


def test_local_changes_in_the_way_stop_the_landing(world):
    env = world
    repo = _agent_edits_readme(env)
    (repo / "README").write_text("unsaved work\n")
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "nothing changed" in bad.stderr, bad.stderr
    assert (repo / "README").read_text() == "unsaved work\n"
    other = env.run("land", "j", "--into", "side")
    assert other.returncode == 2 and "no such branch" in other.stderr
    host_git(env, repo, "branch", "side", check=True)
    done = env.json("land", "j", "--into", "side")
    assert done["into"] == "side" and done["checkout"] is None
    assert host_git(env, repo, "show", "side:README").stdout == "agent\n"
    assert (repo / "README").read_text() == "unsaved work\n"


def test_two_agents_in_one_repository_see_nothing_of_each_other(world):
    env = world
    repo = _main(env)
    a = _start(env, "isolated", name="a", jail="j")
    b = _start(env, "verified", name="b", jail="k")
    assert a.ws != b.ws
    assert a.sh("echo A > mine && echo ok").split() == ["ok"]
    look = f"ls {a.ws} >/dev/null 2>&1 && echo SEES_A; cat {a.ws}/mine 2>/dev/null; ls {repo} >/dev/null 2>&1 && " \
           f"echo SEES_REPO; echo B > theirs && git add theirs && git commit -qm b && echo COMMIT"
    assert b.sh(look).split() == ["COMMIT"]
    assert a.sh("git add mine && git commit -qm a && echo COMMIT").split() == ["COMMIT"]
    env.run("land", "j", check=True)
    env.run("land", "k", check=True)  # a merge commit: master moved on with a's commit
    assert (repo / "mine").read_text() == "A\n" and (repo / "theirs").read_text() == "B\n"


def test_stop_keeps_the_worktree_resume_reuses_it_and_prune_removes_it(world):
    env = world
    repo = _main(env)
    jail = _start(env, "isolated")
    assert jail.sh("echo a > a && git add a && git commit -qm a && echo OK").split() == ["OK"]
    env.run("stop", "j", check=True)
    assert (jail.ws / "a").exists()
    env.run("resume", "j", "--detach", check=True)
    assert jail.sh("git log --format=%s | head -1").split() == ["a"]
    env.run("stop", "j", check=True)
    dry = env.json("prune", "--worktrees", "--dry-run")
    assert dry["worktrees"] == []  # not landed
    forced = env.json("prune", "--worktrees", "--force", "--dry-run")
    assert [w["name"] for w in forced["worktrees"]] == ["one"] and jail.ws.exists()
    env.run("land", "j", check=True)
    gone = env.json("prune", "--worktrees")
    assert [w["why"] for w in gone["worktrees"]] == ["landed"]
    assert not jail.ws.exists() and not _branch(env, repo)
    assert not any((env.state_dir / "worktrees").iterdir())
    assert (repo / "a").read_text() == "a\n"


def test_bad_input_is_one_line_and_leaves_nothing_behind(world):
    env = world
    repo = _main(env)
    state = env.state_dir / "worktrees"
    wts = repo.parent / (repo.name + ".worktrees")

    def refused(*args, cwd=None, code=2, says=""):
        proc = env.run("start", "shell", "--mode", "isolated", "--detach", *args, cwd=cwd)
        assert proc.returncode == code and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert says in proc.stderr, (says, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) <= 2, proc.stderr
        assert not wts.exists() or not any(wts.iterdir())
        assert not state.exists() or not any(state.iterdir())
        assert host_git(env, repo, "branch", "--list", "tmuxjail/*").stdout == ""

    plain = env.outside / "plain"
    plain.mkdir()
    refused("--worktree", "x", cwd=plain, says="not in a git repository")
    refused("--worktree", "x/../y", says="invalid worktree name")
    refused("--worktree=-x", says="invalid worktree name")
    refused("--worktree", "a\x1bb", says="invalid worktree name")
    refused("--worktree", "x", "--from", "nope", says="no such commit")
    refused("--from", "HEAD", says="--from goes with --worktree")
    bad_rules = env.outside / "rules.toml"
    bad_rules.write_text("not [ toml")
    refused("--worktree", "x", "--restrict", str(bad_rules))  # refused before a worktree is made
    refused("--worktree", "x", "--mode", "compatibility", says="needs --mode isolated or --mode verified")
    blocker = env.outside / "a-file"
    blocker.write_text("x")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(f'[worktree]\nroot = "{blocker}/under"\n')
    refused("--worktree", "x", says="cannot make")
    (env.config_dir / "config.toml").unlink()
    host_git(env, repo, "branch", "tmuxjail/taken", check=True)
    proc = env.run("start", "shell", "--mode", "isolated", "--detach", "--worktree", "taken")
    assert proc.returncode == 2 and "already exists" in proc.stderr
    host_git(env, repo, "branch", "-D", "tmuxjail/taken", check=True)
    (repo / "README").write_text("dirty\n")
    refused("--worktree", "x", says="uncommitted changes")
    host_git(env, repo, "checkout", "README", check=True)
    # A worktree directory that vanished: resume says so in one line.
    jail = _start(env, "isolated")
    env.run("stop", "j", check=True)
    subprocess.run(["rm", "-rf", str(jail.ws)], check=True)
    gone = env.run("resume", "j", "--detach")
    assert gone.returncode != 0 and "Traceback" not in gone.stderr and str(jail.ws) in gone.stderr, gone.stderr
    assert env.run("diff", "j").returncode == 0  # the commits are in the git directory, still
    assert env.run("diff", "nosuch").returncode == 2


def test_a_jail_never_reaches_another_sessions_git_directory(world):
    env = world
    _main(env)
    a = _start(env, "isolated", name="a", jail="j")
    b = _start(env, "isolated", name="b", jail="k")
    state = env.state_dir / "worktrees"
    ids = sorted(p.name for p in state.iterdir())
    out = b.sh(f"""
        ls {state} 2>/dev/null && echo STATE
        for d in {' '.join(ids)}; do ls {state}/$d/git >/dev/null 2>&1 && echo SEES_$d; done
        cat {G}/HEAD
    """)
    assert out.split() == ["ref:", "refs/heads/tmuxjail/b"], out
    assert json.loads((state / ids[0] / "meta.json").read_text())["name"] == "a"
    assert a.sh("cat " + G + "/HEAD").split() == ["ref:", "refs/heads/tmuxjail/a"]


@pytest.mark.parametrize("how", ["auto", "--merge", "--squash"])
def test_diff_and_land_run_no_hook_or_command_key_of_the_repository(world, how):
    """tmuxjail's own git calls in the repository switch off its hooks, fsmonitor and every
    command-running key (a hook manager's hooks, a filter .gitattributes routes the agent's files
    to, a textconv, a merge driver): diff and land run none of them."""
    env = world
    repo = _main(env)
    ran = env.outside / "ran"
    jail = _start(env, "isolated")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for h in ("pre-commit", "post-commit", "post-merge", "post-checkout", "reference-transaction", "pre-merge-commit",
              "commit-msg", "prepare-commit-msg", "pre-auto-gc", "post-rewrite", "post-index-change"):
        (hooks / h).write_text(f"#!/bin/sh\ntouch {ran}.hook-{h}\n")
        (hooks / h).chmod(0o755)
    for key in ("filter.lfsish.clean", "filter.lfsish.smudge", "filter.lfsish.process", "diff.lfsish.textconv",
                "diff.lfsish.command", "merge.lfsish.driver", "core.fsmonitor"):
        host_git(env, repo, "config", key, f"touch {ran}.{key}; cat", check=True)
    (repo / "side.txt").write_text("user\n")
    (repo / ".gitattributes").write_text("*.txt filter=lfsish diff=lfsish merge=lfsish\n")
    host_git(env, repo, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "filter.lfsish.clean=",
             "add", ".gitattributes", "side.txt", check=True)
    host_git(env, repo, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "commit", "-qm", "user",
             check=True)
    out = jail.sh("echo agent > agent.txt && git add agent.txt && git commit -qm agent && echo OK")
    assert out.split() == ["OK"], out
    for p in ran.parent.glob(ran.name + "*"):
        p.unlink()
    assert env.run("diff", "j").returncode == 0
    args = [] if how == "auto" else [how]
    # These commands are shell syntax: any file could be what they run, so landing asks first.
    asks = env.run("land", "j", *args)
    assert asks.returncode == 1 and "--trust-files" in asks.stderr, asks.stderr
    done = env.run("land", "j", *args, "--trust-files")
    assert done.returncode == 0, done.stderr
    assert (repo / "agent.txt").read_text() == "agent\n"
    assert sorted(p.name for p in ran.parent.glob(ran.name + "*")) == []


def test_the_audit_and_the_status_line_cover_worktree_sessions(world):
    """The audit walks the worktree like any workspace (a new .envrc is named); the status line
    shows the session's branch."""
    env = world
    _main(env)
    conf = Path(__file__).resolve().parents[2] / "tmux.conf.example"
    env.tmux("-f", str(conf), "new-session", "-d", "-s", "home", "-c", str(env.ws))
    jail = _start(env, "isolated")
    status = env.tmux("display-message", "-p", "-t", "=j:", "#{E:@tmuxjail-status}")
    assert "[isolated:shell tmuxjail/one" in status, status
    assert jail.sh("echo 'export X=1' > .envrc && echo ok").split() == ["ok"]
    audit = env.run("audit", "j", "--json")
    assert audit.returncode == 6 and ".envrc" in audit.stdout, audit.stdout + audit.stderr


def test_list_reads_uncommitted_changes_without_running_the_agents_git(world):
    """list counts the checkout's uncommitted changes with git status on the host: the agent's
    gitlink to a repository it made (whose config runs fsmonitor and hooks), its .gitattributes
    routed to drivers the user's global config defines, its .gitignore: nothing of it runs."""
    env = world
    _main(env)
    ran = env.outside / "ran"
    (env.home / ".gitconfig").write_text("".join(
        f"[{sec} \"lfsish\"]\n\t{key} = touch {ran}.{sec}-{key}; cat\n"
        for sec, key in (("filter", "clean"), ("filter", "smudge"), ("diff", "textconv"), ("merge", "driver"))))
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        git init -q sub && printf '[core]\\n\\tfsmonitor = touch {ran}.sub\\n[filter "x"]\\n\\tclean = touch {ran}.subfilter; cat\\n' \\
          >> sub/.git/config && echo '* filter=x' > sub/.gitattributes && echo f > sub/f
        git -C sub -c core.fsmonitor=false -c filter.x.clean= add f .gitattributes
        git -C sub -c user.name=a -c user.email=a@b -c core.fsmonitor=false commit -qm x
        git -c core.fsmonitor=false update-index --add --cacheinfo 160000,$(git -C sub -c core.fsmonitor=false rev-parse HEAD),sub
        echo '*.txt filter=lfsish diff=lfsish merge=lfsish' > .gitattributes
        echo a > a.txt && git add .gitattributes a.txt && git -c core.fsmonitor=false commit -qm attrs && echo COMMIT
        echo changed > a.txt; echo new > b.txt; echo more > sub/file; echo changed > sub/f
        echo end
    """)
    assert out.split() == ["COMMIT", "end"], out
    row = next(d for d in env.json("list") if d["name"] == "j")
    # a.txt changed, b.txt new, and the attack scripts the test itself wrote (.attack*)
    assert row["worktree"]["uncommitted"] >= 2 and row["worktree"]["ahead"] == 1, row["worktree"]
    assert sorted(p.name for p in ran.parent.glob(ran.name + "*")) == []


def test_commits_the_agent_packed_or_left_unreachable_junk_beside_still_land(world):
    """After the agent's `git gc` its objects are in a pack (sent whole, checked as any); a
    malformed object it left unreachable is not sent at all."""
    env = world
    repo = _main(env)
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        echo a > a && git add a && git commit -qm a && git gc -q && ls {G}/objects/pack | grep -c '\\.pack$'
        blob=$(echo evil | git hash-object -w --stdin)
        printf '100644 blob %s\\t.git\\n' $blob | git mktree >/dev/null && echo JUNK
        echo b > b && git add b && git commit -qm b && echo OK
    """)
    assert out.split() == ["1", "JUNK", "OK"], out
    done = env.json("land", "j")
    assert done["commits"] == 2 and (repo / "a").exists() and (repo / "b").exists()


# -- the red team's findings (each reproduced from inside a jail, then closed) --------------------

def test_what_the_repositorys_config_runs_by_path_asks_for_trust_files(world):
    """core.hooksPath and a filter's program inside the work tree are files the host runs: a
    branch that changes them lands only with --trust-files."""
    env = world
    repo = _main(env)
    (repo / "tools" / "hooks").mkdir(parents=True)
    (repo / "tools" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (repo / "tools" / "clean.sh").write_text("#!/bin/sh\ncat\n")
    host_git(env, repo, "add", "tools", check=True)
    host_git(env, repo, "commit", "-qm", "tools", check=True)
    host_git(env, repo, "config", "core.hooksPath", "tools/hooks", check=True)
    host_git(env, repo, "config", "filter.x.clean", "./tools/clean.sh", check=True)
    jail = _start(env, "isolated")
    for path in ("tools/hooks/pre-commit", "tools/clean.sh"):
        out = jail.sh(f"echo 'touch /tmp/ran' >> {path} && git commit -qam edit && echo OK")
        assert out.split() == ["OK"], out
        shown = env.run("diff", "j", "--stat")
        assert f"{path}: a host tool runs it" in shown.stdout, shown.stdout
        bad = env.run("land", "j")
        assert bad.returncode == 1 and "--trust-files" in bad.stderr and path in bad.stderr, bad.stderr
        assert "/tmp/ran" not in (repo / path).read_text()
        assert jail.sh("git reset -q --hard HEAD~1 && echo OK").split() == ["OK"]


def test_a_branch_that_puts_back_what_the_user_changed_since_asks_for_trust_files(world):
    """The trust check reads what landing changes (the branch against its target now), not what
    the branch changed since its base: here the agent's commit on the user's newer tip restores
    the .envrc the user had removed, and adds only app.py of its own."""
    env = world
    repo = _main(env)
    (repo / ".envrc").write_text("layout python\n")
    host_git(env, repo, "add", ".envrc", check=True)
    host_git(env, repo, "commit", "-qm", "envrc", check=True)
    base = _branch(env, repo, "master")
    jail = _start(env, "isolated")
    (repo / ".envrc").write_text("# removed\n")
    host_git(env, repo, "commit", "-qam", "harden", check=True)
    newer = _branch(env, repo, "master")
    out = jail.sh(f"""
        export GIT_INDEX_FILE=/tmp/idx; git read-tree {newer}
        git update-index --cacheinfo 100644,$(git rev-parse {base}:.envrc),.envrc
        git update-index --add --cacheinfo 100644,$(echo 'print(1)' | git hash-object -w --stdin),app.py
        git update-ref refs/heads/tmuxjail/one $(git commit-tree $(git write-tree) -p {newer} -m 'add app') && echo OK
    """)
    assert out.split() == ["OK"], out
    _asks_trust(env, ".envrc")
    assert (repo / ".envrc").read_text() == "# removed\n" and _branch(env, repo, "master") == newer


def test_objects_that_are_no_files_or_many_parents_never_fail_or_stall_list(world):
    """A directory or a FIFO where the tip's object should be, or thousands of fake commits each
    naming a thousand missing parents: list, show and prune answer (the count reads "?")."""
    env = world
    _main(env)
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        o=deadbeefdeadbeefdeadbeefdeadbeefdeadbeef
        mkdir -p {G}/objects/de/${{o#??}} && echo $o > {G}/refs/heads/tmuxjail/one && echo DIR
    """)
    assert out.split() == ["DIR"], out
    for args in (("list",), ("show", "j"), ("prune", "--worktrees", "--dry-run")):
        done = env.run(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    assert "+?" in env.run("list").stdout
    script = f'''
import os, zlib, hashlib
g = "{G}"
def put(body):
    raw = b"commit %d\\0" % len(body) + body
    oid = hashlib.sha1(raw).hexdigest()
    os.makedirs(f"{{g}}/objects/{{oid[:2]}}", exist_ok=True)
    open(f"{{g}}/objects/{{oid[:2]}}/{{oid[2:]}}", "wb").write(zlib.compress(raw))
    return oid
first = None
for i in range(300):
    parents = b"".join(b"parent %s\\n" % hashlib.sha1(b"%d-%d" % (i, j)).hexdigest().encode() for j in range(1000))
    oid = put(b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\\n" + parents + b"author a <a> 0 +0000\\n\\nx\\n")
    first = first or oid
open(f"{{g}}/refs/heads/tmuxjail/one", "w").write(first + "\\n")
print("FAKE")
'''
    (jail.ws / "fake.py").write_text(script)
    assert jail.sh("python3 fake.py").split() == ["FAKE"]
    done = env.run("list", timeout=60)
    assert done.returncode == 0 and "[tmuxjail/one +?" in done.stdout, done.stdout + done.stderr


def test_diff_shows_the_agents_control_characters_instead_of_sending_them(world):
    env = world
    _main(env)
    jail = _start(env, "isolated")
    out = jail.sh("""
        printf 'ok\\033[H\\033[2Jfake\\n' > 'na\\033]2;tme' && git add -A . ':!.attack*' 2>/dev/null
        git commit -qm "$(printf 'subject\\033[2J\\037more')" && echo OK
    """)
    assert out.split() == ["OK"], out
    shown = env.run("diff", "j")
    assert shown.returncode == 0 and "\x1b" not in shown.stdout and "\x1f" not in shown.stdout, shown.stdout
    assert "\\x1b[2J" in shown.stdout
    data = env.json("diff", "j")
    assert data["commits"][0]["subject"] == "subject\x1b[2J\x1fmore"  # JSON keeps them, escaped


def test_untracked_or_ignored_files_in_the_way_stop_the_landing(world):
    """git would overwrite an ignored .env, or swap a data directory for a link: refused."""
    env = world
    repo = _main(env)
    (repo / ".gitignore").write_text(".env\ndata/\n")
    host_git(env, repo, "add", ".gitignore", check=True)
    host_git(env, repo, "commit", "-qm", "ignore", check=True)
    jail = _start(env, "isolated")
    (repo / ".env").write_text("SECRET=user\n")
    (repo / "data").mkdir()
    (repo / "data" / "big.csv").write_text("1,2\n")
    for plant, path in (("echo SECRET=agent > .env && git add -f .env", ".env"),
                        ("ln -s /etc data && git add -f data", "data")):
        assert jail.sh(f"{plant} && git commit -qm x && echo OK").split() == ["OK"]
        bad = env.run("land", "j", "--trust-files")  # (a link needs it anyway: past that check)
        assert bad.returncode == 1 and f"'{path}'" in bad.stderr and "nothing changed" in bad.stderr, bad.stderr
        assert (repo / ".env").read_text() == "SECRET=user\n" and (repo / "data" / "big.csv").exists()
        assert jail.sh("git reset -q --hard HEAD~1 && echo OK").split() == ["OK"]


def test_prune_never_deletes_a_branch_the_agent_pointed_at_the_users_commit(world):
    env = world
    repo = _main(env)
    jail = _start(env, "isolated")
    host_git(env, repo, "switch", "-q", "tmuxjail/one", check=True)
    (repo / "mine").write_text("user work\n")
    host_git(env, repo, "add", "mine", check=True)
    host_git(env, repo, "commit", "-qm", "user work", check=True)
    users = _branch(env, repo)
    host_git(env, repo, "switch", "-q", "master", check=True)
    assert jail.sh(f"git update-ref refs/heads/tmuxjail/one {users} && echo OK").split() == ["OK"]
    env.run("stop", "j", check=True)
    env.json("prune", "--worktrees", "--force")
    assert _branch(env, repo) == users  # the user's commit keeps its branch


def test_links_in_the_landing_ask_for_trust_files(world):
    """Round two of the red team: `scripts -> payload` makes the hooks directory the config names
    lead to the agent's hooks; and a tracked `.envrc -> tools/env.sh` makes tools/env.sh what
    direnv runs. Both land only with --trust-files."""
    env = world
    repo = _main(env)
    (repo / "tools").mkdir()
    (repo / "tools" / "env.sh").write_text("export A=1\n")
    (repo / ".envrc").symlink_to("tools/env.sh")
    host_git(env, repo, "add", "tools", ".envrc", check=True)
    host_git(env, repo, "commit", "-qm", "envrc link", check=True)
    host_git(env, repo, "config", "core.hooksPath", "scripts/hooks", check=True)
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        mkdir -p payload/hooks && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > payload/hooks/pre-commit
        chmod +x payload/hooks/pre-commit && ln -s payload scripts && git add payload scripts
        git commit -qm tooling && echo OK
    """)
    assert out.split() == ["OK"], out
    _asks_trust(env, "scripts")
    assert jail.sh("git reset -q --hard HEAD~1 && echo 'export A=2' > tools/env.sh && git commit -qam env "
                   "&& echo OK").split() == ["OK"]
    _asks_trust(env, "tools/env.sh")
    assert (repo / "tools" / "env.sh").read_text() == "export A=1\n"


def test_what_a_tracked_directory_link_leads_to_asks_for_trust_files(world):
    """The user's own tracked links, not the agent's: `.vscode -> editor` (a directory where a
    tool looks) and `scripts -> payload` on the way to the hooks directory the config names
    (scripts/hooks). The agent changes only files they lead to; each landing asks for
    --trust-files, and nothing changes without it."""
    env = world
    repo = _main(env)
    for d in ("editor", "payload/hooks"):
        (repo / d).mkdir(parents=True)
    (repo / "editor" / "tasks.json").write_text("{}\n")
    (repo / "payload" / "hooks" / "README").write_text("hooks\n")
    (repo / ".vscode").symlink_to("editor")
    (repo / "scripts").symlink_to("payload")
    host_git(env, repo, "add", "-A", check=True)
    host_git(env, repo, "commit", "-qm", "links", check=True)
    host_git(env, repo, "config", "core.hooksPath", "scripts/hooks", check=True)
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > payload/hooks/pre-commit && chmod +x payload/hooks/pre-commit
        git add payload && git commit -qm hook && echo OK
    """)
    assert out.split() == ["OK"], out
    _asks_trust(env, "payload/hooks/pre-commit")
    assert jail.sh("git reset -q --hard HEAD~1 && echo '{\"x\": 1}' > editor/tasks.json && git commit -qam tasks "
                   "&& echo OK").split() == ["OK"]
    _asks_trust(env, "editor/tasks.json")
    assert (repo / "editor" / "tasks.json").read_text() == "{}\n"
    assert not (repo / "payload" / "hooks" / "pre-commit").exists()
    host_git(env, repo, "commit", "--allow-empty", "-qm", "after")
    assert not (env.outside / "ran").exists()


LINK_SHAPES = {  # the user's tracked files and links; the agent then edits one file they lead to
    "cargo": ({"tools/cargo/config.toml": "[build]\n"}, {".cargo": "tools/cargo"}, "tools/cargo/config.toml"),
    "chain": ({"shared/editor/tasks.json": "{}\n"}, {"conf": "shared", ".vscode": "conf/editor"},
              "shared/editor/tasks.json"),
    "link-to-link": ({"tools/env.sh": "export A=1\n"}, {"env/current": "../tools/env.sh", ".envrc": "env/current"},
                     "tools/env.sh"),
    "out-and-back": ({"tools/env.sh": "export A=1\n"}, {".envrc": "../ws/tools/env.sh"}, "tools/env.sh"),
    "dot": ({"tasks.json": "{}\n"}, {".vscode": "."}, "tasks.json"),
    "link-inside-the-target": ({"payload/settings.json": "{}\n", "editor/README": "x\n"},
                               {"editor/settings.json": "../payload/settings.json", ".vscode": "editor"},
                               "payload/settings.json"),
}


def test_a_link_to_the_top_or_above_itself_is_followed_once(world):
    """Round five: the user's `sub/up -> ..` made every changed file's other paths nest without end
    (sub/up/sub/up/...): land ran for minutes. An ordinary change lands at once."""
    env = world
    repo = _main(env)
    (repo / "sub").mkdir()
    (repo / "sub" / "a.h").write_text("a\n")
    (repo / "sub" / "up").symlink_to("..")
    (repo / "loop").symlink_to("loop")
    host_git(env, repo, "add", "-A", check=True)
    host_git(env, repo, "commit", "-qm", "links", check=True)
    jail = _start(env, "isolated")
    assert jail.sh("echo b >> README && git commit -qam more && echo OK").split() == ["OK"]
    done = env.run("land", "j", timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("shape", sorted(LINK_SHAPES))
def test_links_of_the_user_are_followed_as_the_kernel_would(world, shape):
    """Round three of the red team: a link named like a directory the catalogue looks into
    (.cargo), chains of links, a way out of the repository and back in, and `.`: what each leads
    to is trusted, and the agent's change to it lands only with --trust-files."""
    env = world
    repo = _main(env)
    files, links, edit = LINK_SHAPES[shape]
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for rel, target in links.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).symlink_to(target)
    host_git(env, repo, "add", "-A", check=True)
    host_git(env, repo, "commit", "-qm", "links", check=True)
    jail = _start(env, "isolated")
    assert jail.sh(f"echo changed >> {edit} && git commit -qam edit && echo OK").split() == ["OK"]
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "--trust-files" in bad.stderr, bad.stderr
    assert (repo / edit).read_text() == files[edit]
    assert env.run("land", "j", "--trust-files").returncode == 0


def test_a_link_the_landing_removes_or_replaces_asks_for_trust_files(world):
    """Round four of the red team: the user's `tools -> real` with `.envrc -> tools/env.sh`; the
    agent removes the link `tools` and makes a directory of its own there, so .envrc leads to
    its script. Removing a link is a link change: --trust-files, whichever branch it lands on."""
    env = world
    repo = _main(env)
    (repo / "real").mkdir()
    (repo / "real" / "env.sh").write_text("export A=1\n")
    (repo / "tools").symlink_to("real")
    (repo / ".envrc").symlink_to("tools/env.sh")
    host_git(env, repo, "add", "-A", check=True)
    host_git(env, repo, "commit", "-qm", "links", check=True)
    host_git(env, repo, "branch", "dev", check=True)
    jail = _start(env, "isolated")
    assert jail.sh(f"rm tools && mkdir tools && echo 'touch {env.outside}/ran' > tools/env.sh && git add -A "
                   "&& git commit -qm swap && echo OK").split() == ["OK"]
    for into in ([], ["--into", "dev"]):
        bad = env.run("land", "j", *into)
        assert bad.returncode == 1 and "--trust-files" in bad.stderr and "tools" in bad.stderr, bad.stderr
    assert host_git(env, repo, "rev-parse", "dev").stdout == host_git(env, repo, "rev-parse", "HEAD").stdout


def test_a_config_path_through_the_trees_links_asks_for_trust_files_on_a_branch_not_checked_out(world):
    """Round four: core.hooksPath=a/b/hooks with a -> x and x/b -> ../y in the branch landed on
    (not the one checked out, so nothing on disk says where a/b leads): the agent's change to
    y/hooks/pre-commit needs --trust-files."""
    env = world
    repo = _main(env)
    host_git(env, repo, "checkout", "-qb", "dev", check=True)
    (repo / "x").mkdir()
    (repo / "y" / "hooks").mkdir(parents=True)
    (repo / "y" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (repo / "a").symlink_to("x")
    (repo / "x" / "b").symlink_to("../y")
    host_git(env, repo, "add", "-A", check=True)
    host_git(env, repo, "commit", "-qm", "hooks", check=True)
    host_git(env, repo, "config", "core.hooksPath", "a/b/hooks", check=True)
    jail = Jail(env, "isolated", name="j", workspace=env.ws, extra=("--worktree", "one", "--from", "dev"))
    host_git(env, repo, "checkout", "-q", "--orphan", "other", check=True)
    host_git(env, repo, "rm", "-rqf", ".", check=True)
    assert jail.sh(f"printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > y/hooks/pre-commit && git commit -qam hook "
                   "&& echo OK").split() == ["OK"]
    bad = env.run("land", "j", "--into", "dev")
    assert bad.returncode == 1 and "y/hooks/pre-commit" in bad.stderr and "--trust-files" in bad.stderr, bad.stderr


def test_a_repository_with_an_include_if_starts_and_lands(world):
    """Round four of the red team: includeIf.onbranch:BRANCH.path made every git call of tmuxjail
    fatal (an emptied include on the command line), so `start --worktree` said "not in a git
    repository". Includes are kept (their files' command keys are switched off one by one); the
    included file is one land asks --trust-files for."""
    env = world
    repo = _main(env)
    branch = host_git(env, repo, "symbolic-ref", "--short", "HEAD").stdout.strip()
    (repo / "tools").mkdir()
    (repo / "tools" / "c.cfg").write_text(f"[core]\n\tfsmonitor = touch {env.outside}/ran\n")
    host_git(env, repo, "add", "tools", check=True)
    host_git(env, repo, "-c", "core.fsmonitor=false", "commit", "-qm", "cfg", check=True)
    host_git(env, repo, "config", f"includeIf.onbranch:{branch}.path", "../tools/c.cfg", check=True)
    jail = _start(env, "isolated")
    assert jail.sh("echo more >> README && git commit -qam more && echo OK").split() == ["OK"]
    done = env.run("land", "j")
    assert done.returncode == 0, done.stderr
    assert jail.sh("echo x >> tools/c.cfg && git commit -qam cfg && echo OK").split() == ["OK"]
    _asks_trust(env, "tools/c.cfg")
    assert not (env.outside / "ran").exists()


CONFIG_SHAPES = {  # (config key, value, what the agent adds); {repo} and {link}: see below
    "filter-through-sh": ("filter.x.clean", "sh tools/clean.sh", "tools/clean.sh"),
    "alias-through-bash": ("alias.rel", "!bash tools/rel.sh", "tools/rel.sh"),
    "hooks-from-home": ("core.hooksPath", "~/../ws/hooks", "hooks/pre-commit"),
    "hooks-through-a-host-link": ("core.hooksPath", "{link}/hooks", "hooks/pre-commit"),
    "hooks-at-the-top": ("core.hooksPath", ".", "pre-commit"),
    "filter-sh-bare-name": ("filter.x.clean", "sh clean.sh", "clean.sh"),
    "filter-bash-c": ("filter.x.clean", 'bash -c "tools/cl1 --quiet"', "tools/cl1"),
    "filter-cd-and": ("filter.x.clean", "cd tools && ./cl2", "tools/cl2"),
    "filter-python-m": ("filter.x.clean", "python3 -m tools.cl4", "tools/cl4.py"),
    # round five's trust-file leads: files git reads by path, and a config-based hook (git 2.36+)
    "attributes-file": ("core.attributesFile", "meta/attributes", "meta/attributes"),
    "attributes-file-bare-name": ("core.attributesFile", "attrs", "attrs"),
    "allowed-signers": ("gpg.ssh.allowedSignersFile", ".signers", ".signers"),
    "config-hook": ("hook.lint.command", "tools/lint.sh", "tools/lint.sh"),
    "include-in-an-include": ("include.path", "../tools/git.cfg", "tools/more.cfg",
                              {"tools/git.cfg": "[include]\n\tpath = more.cfg\n", "tools/more.cfg": "[user]\n\tx = 1\n"}),
}


@pytest.mark.parametrize("shape", sorted(CONFIG_SHAPES))
def test_every_path_the_config_runs_asks_for_trust_files(world, shape):
    """Round three of the red team: a program run through a shell word (`sh tools/clean.sh`, an
    alias), a hooks path from `~` or through a link on the host to the repository, and hooks at
    the top itself were not seen as paths the config runs: each landed without --trust-files."""
    env = world
    repo = _main(env)
    (env.outside / "lnk").symlink_to(repo)
    key, value, added, *user = CONFIG_SHAPES[shape]
    for rel, text in (user[0] if user else {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    if user:
        host_git(env, repo, "add", "-A", check=True)
        host_git(env, repo, "commit", "-qm", "config files", check=True)
    host_git(env, repo, "config", key, value.format(link=env.outside / "lnk"), check=True)
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        mkdir -p "$(dirname {added})" && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > {added}
        chmod +x {added} && git add {added} && git commit -qm tool && echo OK
    """)
    assert out.split() == ["OK"], out
    before = (repo / added).read_text() if user else None
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "--trust-files" in bad.stderr, bad.stderr
    assert (repo / added).read_text() == before if user else not (repo / added).exists()
    assert not (env.outside / "ran").exists()


def test_a_relative_include_of_your_home_config_is_read_from_home(world):
    """Round five: ~/.gitconfig including a file of the repository by a path relative to home
    (`path = work/repo/team.cfg`) was resolved from .git, so the agent's team.cfg (an fsmonitor)
    landed without --trust-files. Each include is now read from its own file's directory."""
    env = world
    repo = _main(env)
    rel = Path(os.path.relpath(repo, env.home))
    (env.home / ".gitconfig").write_text(f"[include]\n\tpath = {rel}/team.cfg\n")
    jail = _start(env, "isolated")
    out = jail.sh(f"printf '[core]\\n\\tfsmonitor = touch {env.outside}/ran\\n' > team.cfg "
                  "&& git add team.cfg && git commit -qm team && echo OK")
    assert out.split() == ["OK"], out
    _asks_trust(env, "team.cfg")
    assert not (repo / "team.cfg").exists() and not (env.outside / "ran").exists()


@pytest.mark.parametrize("entry", ["{repo}/bin", "bin"])
def test_a_directory_of_your_path_inside_the_repository_asks_for_trust_files(world, entry):
    """Round five: with the repository's bin/ on your PATH (as named, or relative: taken from
    the top, where git runs a filter's bare program name), the agent's bin/ls runs at your next
    `ls`. Its direct children need --trust-files; a file below them does not."""
    env = world
    repo = _main(env)
    path = {"PATH": entry.format(repo=repo) + ":" + env.environ()["PATH"]}
    jail = _start(env, "isolated")
    out = jail.sh(f"mkdir -p bin/docs && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > bin/ls && chmod +x bin/ls "
                  "&& echo notes > bin/docs/README && git add bin && git commit -qm tools && echo OK")
    assert out.split() == ["OK"], out
    bad = env.run("land", "j", env_extra=path)
    assert bad.returncode == 1 and "bin/ls" in bad.stderr and "bin/docs/README" not in bad.stderr, bad.stderr
    assert not (repo / "bin").exists()
    assert env.run("land", "j").returncode == 0  # (the same branch, without that PATH entry)


def test_a_huge_change_is_shown_in_pieces_and_its_control_characters_escaped(world):
    """An agent's 120 MB text file (a line of control characters at its end): `tmuxjail diff`
    streams git's patch, so its own peak memory stays far below the change's size, and the
    escapes still reach the terminal as \\xNN, never as themselves. (The import, done here by
    `list` first, holds one loose object at a time, at most MAX_LOOSE: docs/worktrees.md.)"""
    env = world
    _main(env)
    jail = _start(env, "isolated")
    out = jail.sh("""
        yes 'a line of the agent, long enough to weigh something in the patch' | head -c 120000000 > big
        printf 'tail \\033[2J\\033[H fake\\n' >> big && git add big && git commit -qm big && echo OK
    """, timeout=180)
    assert out.split() == ["OK"], out
    assert "[tmuxjail/one +1" in env.run("list", check=True, timeout=120).stdout
    probe = env.root / "peak.py"
    probe.write_text(
        "import resource, sys\n"
        "from tmuxjail.cli import run\n"
        "code = run(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
        "raise SystemExit(code)\n")
    shown = env.root / "shown.txt"

    def peak(*args: str) -> int:
        with open(shown, "wb") as sink:
            done = subprocess.run([sys.executable, "-P", str(probe), *env.flags, "diff", "j", *args], cwd=env.ws,
                                  env=env.environ(PWD=str(env.ws)), stdout=sink, stderr=subprocess.PIPE, text=False,
                                  timeout=300)
        assert done.returncode == 0, done.stderr
        return int(done.stderr.split()[-1])

    # Against the same command without the patch (its imports and queries): held whole, the
    # patch would add its bytes, its text and its escaped copy (over 240 MB).
    stat_kib = peak("--stat")
    peak_kib = peak()
    assert peak_kib < stat_kib + 48 * 1024, f"diff peaked at {peak_kib} KiB, diff --stat at {stat_kib} KiB"
    size = shown.stat().st_size
    assert size > 120_000_000, size
    with open(shown, "rb") as f:
        f.seek(size - 4096)
        end = f.read()
    assert b"\x1b" not in end and b"\\x1b[2J" in end, end[-200:]


def test_a_huge_sparse_file_or_pack_never_stalls_list(world):
    """A tracked file of 15 TiB of holes (git status would hash it for hours) and a sparse file
    named like a pack: list answers, with "?" where it cannot tell, and again at once after."""
    env = world
    _main(env)
    jail = _start(env, "isolated")
    out = jail.sh(f"""
        : > big && git add big && git commit -qm big && truncate -s 15T big && echo BIG
        truncate -s 4000M {G}/objects/pack/pack-{'a' * 40}.pack && echo PACK
    """)
    assert out.split() == ["BIG", "PACK"], out
    first = env.run("list", "--json", timeout=120)
    assert first.returncode == 0, first.stderr
    row = next(d for d in json.loads(first.stdout) if d["name"] == "j")
    assert row["worktree"]["uncommitted"] is None
    again = env.run("list", timeout=20)  # the failed tip is not tried again
    assert again.returncode == 0 and "[tmuxjail/one +1" in again.stdout, again.stdout


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_names_that_are_no_utf8_are_shown_not_a_traceback(world, locale):
    """The agent's file names, subjects and link targets are bytes: one that is no UTF-8 (here a
    file name and an .envrc link's target) is shown escaped by diff and refused by land in one
    line, in a UTF-8 locale and in LC_ALL=C."""
    env = world
    _main(env)
    jail = _start(env, "isolated")
    out = jail.sh(r"""
        name=$(printf 'bad\377name'); echo x > "$name"; ln -s "$(printf 'to\376x')" .envrc
        git add -A -- "$name" .envrc && git commit -qm "$(printf 'subj\377')" && echo OK
    """)
    assert out.split() == ["OK"], out
    lang = {"LC_ALL": locale, "LANG": locale}
    shown = env.run("diff", "j", env_extra=lang)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "bad\\x" in shown.stdout and ".envrc" in shown.stdout, shown.stdout
    data = env.run("diff", "j", "--json", env_extra=lang)
    assert data.returncode == 0 and len(json.loads(data.stdout)["files"]) == 2, data.stderr
    bad = env.run("land", "j", env_extra=lang)
    assert bad.returncode == 1 and "--trust-files" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert env.run("list", env_extra=lang).returncode == 0
