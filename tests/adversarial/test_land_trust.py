"""Issue 32, red team round six (on round five's fixes): what a landing brings that the host
then runs or trusts, found through config your git reads but tmuxjail did not see (your
environment's GIT_CONFIG*, a global config that is a file of the repository, an include whose
condition is off at land time, a linked worktree's own config, a quoted path's spaces, keys that
run or trust a file only when asked) and through your PATH (relative entries from any directory,
`.`, a literal `~`, `..` after a host link, links in your PATH's directories, the linked worktree
a landing writes into), and Python's start-up files. From inside real jails: each landing must
refuse without --trust-files (and where it once landed, the host ran the agent's file)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_seams import host_git
from test_worktree import _main, _start

pytestmark = pytest.mark.adversarial


def _plant(env, jail, rel):
    out = jail.sh(f"mkdir -p \"$(dirname {rel})\" && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > {rel} "
                  f"&& chmod +x {rel} && git add {rel} && git commit -qm tool && echo OK")
    assert out.split() == ["OK"], out


def _user_git(env, cwd, *args, extra=None):
    e = {"HOME": str(env.home), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C",
         "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    e.update(extra or {})
    return subprocess.run(["git", *args], cwd=cwd, env=e, capture_output=True, text=True)


@pytest.mark.parametrize("how", ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_COUNT"])
def test_config_from_the_users_environment(world, how):
    """The user's git reads GIT_CONFIG_GLOBAL / GIT_CONFIG_COUNT from their shell; tmuxjail's
    listing (gitrun.env drops GIT_*) does not, so core.hooksPath set there protects nothing."""
    env = world
    repo = _main(env)
    if how == "GIT_CONFIG_GLOBAL":
        g = env.outside / "gitconfig"
        g.write_text("[core]\n\thooksPath = tools/hooks\n")
        extra = {"GIT_CONFIG_GLOBAL": str(g)}
    else:
        extra = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "tools/hooks"}
    jail = _start(env, "isolated")
    _plant(env, jail, "tools/hooks/pre-commit")
    done = env.run("land", "j", env_extra=extra)
    if done.returncode == 0:
        (repo / "x").write_text("x\n")
        _user_git(env, repo, "add", "x", extra=extra)
        _user_git(env, repo, "commit", "-qm", "x", extra=extra)
    assert done.returncode == 1, f"bypass ({how}): landed tools/hooks/pre-commit; ran={(env.outside / 'ran').exists()}"


@pytest.mark.parametrize("where", [".gitconfig", ".config/git/config"])
def test_a_global_config_linked_into_the_repository(world, where):
    """A dotfiles repository: ~/.gitconfig -> ~/dotfiles/gitconfig (or ~/.config/git/config). git
    reads it (`--show-origin` names it), the agent rewrites it: an fsmonitor your git runs in every
    repository. Only include targets of the listing are protected, not the files it came from."""
    env = world
    repo = _main(env)
    (repo / "gitconfig").write_text("[user]\n\tname = u\n")
    host_git(env, repo, "add", "gitconfig", check=True)
    host_git(env, repo, "commit", "-qm", "dotfiles", check=True)
    link = env.home / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(repo / "gitconfig")
    jail = _start(env, "isolated")
    out = jail.sh(f"printf '[core]\\n\\tfsmonitor = touch {env.outside}/ran\\n' >> gitconfig "
                  "&& git commit -qam cfg && echo OK")
    assert out.split() == ["OK"], out
    done = env.run("land", "j")
    if done.returncode == 0:
        _user_git(env, env.outside, "init", "-q", "other")
        _user_git(env, env.outside / "other", "status")
    assert done.returncode == 1, f"bypass: landed gitconfig ({where}); ran={(env.outside / 'ran').exists()}"


def test_a_conditional_include_not_active_at_land_time(world):
    """[includeIf "onbranch:feature/**"] path = ~/team.cfg, whose core.hooksPath = tools/hooks: at
    land time HEAD is master, so the listing has no hooksPath; the next feature branch runs the hook."""
    env = world
    repo = _main(env)
    (env.home / "team.cfg").write_text("[core]\n\thooksPath = tools/hooks\n")
    (env.home / ".gitconfig").write_text("[includeIf \"onbranch:feature/**\"]\n\tpath = team.cfg\n")
    jail = _start(env, "isolated")
    _plant(env, jail, "tools/hooks/pre-commit")
    done = env.run("land", "j")
    if done.returncode == 0:
        _user_git(env, repo, "checkout", "-qb", "feature/x")
        (repo / "x").write_text("x\n")
        _user_git(env, repo, "add", "x")
        _user_git(env, repo, "commit", "-qm", "x")
    assert done.returncode == 1, f"bypass: landed tools/hooks/pre-commit; ran={(env.outside / 'ran').exists()}"


SHAPES = {  # (key, value, the agent's file); {repo}, {home}, {link}
    "mixed-case": ("core.AttributesFile", "meta/attributes", "meta/attributes"),
    "tilde": ("core.attributesFile", "~/../ws/attrs", "attrs"),
    "absolute": ("core.attributesFile", "{repo}/attrs", "attrs"),
    "through-link": ("gpg.ssh.allowedSignersFile", "{link}/sig/signers", "sig/signers"),
    "hook-shell": ("hook.lint.command", "cd tools && ./lint", "tools/lint"),
    "hook-mixed": ("Hook.Lint.Command", "tools/lint.sh", "tools/lint.sh"),
    "attrs-dot-slash": ("core.attributesFile", "./x/../attrs", "attrs"),
    "include-tilde": ("include.path", "~/../ws/inc.cfg", "inc.cfg"),
    "includeif-gitdir": ("includeIf.gitdir:{repo}/.path", "../inc.cfg", "inc.cfg"),
    # keys that run or trust a file by path only when you ask (git imap-send, a fetch, send-email)
    "imap-tunnel": ("imap.tunnel", "tools/tunnel.sh", "tools/tunnel.sh"),
    "sendemail-identity": ("sendemail.work.toCmd", "tools/to.sh", "tools/to.sh"),
    "ssl-ca": ("http.sslCAInfo", "certs/ca.pem", "certs/ca.pem"),
    "revocation": ("gpg.ssh.revocationFile", "keys/revoked", "keys/revoked"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_key_spellings_and_keys_run_when_asked_ask_for_trust_files(world, shape):
    env = world
    repo = _main(env)
    (env.outside / "lnk").symlink_to(repo)
    key, value, added = SHAPES[shape]
    fmt = {"repo": repo, "link": env.outside / "lnk", "home": env.home}
    host_git(env, repo, "config", key.format(**fmt), value.format(**fmt), check=True)
    jail = _start(env, "isolated")
    _plant(env, jail, added)
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "--trust-files" in bad.stderr and added in bad.stderr, bad.stderr


def test_home_include_relative_with_odd_names(world):
    """~/.gitconfig includes a file whose name has a newline and a colon, which includes team.cfg
    of the repository relative to itself."""
    env = world
    repo = _main(env)
    odd = env.home / "a:b\nc"
    odd.mkdir()
    (odd / "x.cfg").write_text(f"[include]\n\tpath = {os.path.relpath(repo, odd)}/team.cfg\n")
    (env.home / ".gitconfig").write_text('[include]\n\tpath = "a:b\\nc/x.cfg"\n')
    assert "team.cfg" in host_git(env, repo, "config", "--list", "--show-origin").stdout
    jail = _start(env, "isolated")
    _plant(env, jail, "team.cfg")
    bad = env.run("land", "j")
    assert bad.returncode == 1 and "team.cfg" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_a_linked_worktrees_own_config(world):
    """extensions.worktreeConfig: the user's linked worktree (feat) has core.hooksPath in its
    config.worktree; `land --into feat` lists only the main worktree's config."""
    env = world
    repo = _main(env)
    feat = env.root / "feat"
    host_git(env, repo, "worktree", "add", "-q", str(feat), "-b", "feat", check=True)
    host_git(env, repo, "config", "extensions.worktreeConfig", "true", check=True)
    host_git(env, feat, "config", "--worktree", "core.hooksPath", "tools/hooks", check=True)
    jail = _start(env, "isolated")
    _plant(env, jail, "tools/hooks/pre-commit")
    done = env.run("land", "j", "--into", "feat")
    if done.returncode == 0:
        (feat / "x").write_text("x\n")
        _user_git(env, feat, "add", "x")
        _user_git(env, feat, "commit", "-qm", "x")
    assert done.returncode == 1, f"bypass: {done.stdout}{done.stderr}; ran={(env.outside / 'ran').exists()}"



@pytest.mark.parametrize("value", ["hooks ", " hooks"])
def test_whitespace_in_a_quoted_path(world, value):
    """git keeps a quoted value's spaces (hooksPath = "hooks "); targets() strips them."""
    env = world
    repo = _main(env)
    host_git(env, repo, "config", "core.hooksPath", value, check=True)
    jail = _start(env, "isolated")
    out = jail.sh(f"mkdir -p '{value}' && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > '{value}/pre-commit' "
                  f"&& chmod +x '{value}/pre-commit' && git add . && git reset -q *.sh *.out 2>/dev/null; "
                  "git commit -qm tool && echo OK")
    assert out.split() == ["OK"], out
    done = env.run("land", "j")
    if done.returncode == 0:
        (repo / "x").write_text("x\n")
        _user_git(env, repo, "add", "x")
        _user_git(env, repo, "commit", "-qm", "x")
    assert done.returncode == 1, f"bypass ({value!r}): ran={(env.outside / 'ran').exists()}"


def test_non_utf8_origins_and_path_no_traceback(world):
    import os as _os
    env = world
    repo = _main(env)
    odd = _os.fsencode(str(env.home)) + b"/d\xff\xfe"
    _os.mkdir(odd)
    with open(odd + b"/x.cfg", "wb") as f:
        f.write(b"[include]\n\tpath = " + _os.fsencode(_os.path.relpath(repo, _os.fsdecode(odd))) + b"/team.cfg\n"
                b"[user]\n\tnote = \xff\xfe\n")
    (env.home / ".gitconfig").write_bytes(b'[include]\n\tpath = "d\xff\xfe/x.cfg"\n')
    path = _os.fsdecode(b"/nonexistent/\xff") + f":{env.bin}:/usr/bin:/bin"
    jail = _start(env, "isolated")
    _plant(env, jail, "team.cfg")
    for args in (("diff", "j"), ("list",)):
        r = env.run(*args, env_extra={"PATH": path})
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    bad = env.run("land", "j", env_extra={"PATH": path})
    assert bad.returncode == 1 and "team.cfg" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def _bash(env, path, cmd, cwd):
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True,
                          env={"HOME": str(env.home), "PATH": path})


def _land(env, path):
    return env.run("land", "j", env_extra={"PATH": path})


BASE = "/usr/local/bin:/usr/bin:/bin"


def test_tilde_literal_in_path(world):
    """PATH='~/../ws/bin:...' (a quoted `export PATH="~/x:$PATH"`): bash expands the ~ when it looks a command up."""
    env = world
    repo = _main(env)
    entry = "~/" + os.path.relpath(repo / "bin", env.home)
    path = f"{entry}:{env.bin}:{BASE}"
    jail = _start(env, "isolated")
    _plant(env, jail, "bin/gti")
    done = _land(env, path)
    assert (repo / "bin/gti").exists() or done.returncode == 1
    assert done.returncode == 1, f"bypass: landed bin/gti with PATH entry {entry!r}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("entry,planted,cwd", [(".", "src/gti", "src"), ("", "src/gti", "src"),
                                               ("bin", "pkg/bin/gti", "pkg")])
def test_a_relative_path_entry_asks_about_executables_anywhere(world, entry, planted, cwd):
    """PATH with `.`, an empty entry (a trailing colon) or a relative `bin`: the shell takes it
    from whatever directory you are in, so an executable under any directory is asked about
    (checked from the top only, src/gti landed and ran after `cd src; gti`)."""
    env = world
    repo = _main(env)
    path = f"{entry}:{env.bin}:{BASE}" if entry else f"{env.bin}:{BASE}:"
    jail = _start(env, "isolated")
    _plant(env, jail, planted)
    done = _land(env, path)
    if done.returncode == 0:
        _bash(env, path, "gti", repo / cwd)
    assert done.returncode == 1, f"landed {planted} with PATH entry {entry!r} (ran: {(env.outside / 'ran').exists()})"


def test_dotdot_through_a_host_link(world):
    """PATH entry outside/lnk/../bin with outside/lnk -> repo/sub: the kernel resolves it to repo/bin,
    os.path.normpath to outside/bin."""
    env = world
    repo = _main(env)
    (repo / "sub").mkdir()
    (env.outside / "lnk").symlink_to(repo / "sub")
    entry = f"{env.outside}/lnk/../bin"
    path = f"{entry}:{env.bin}:{BASE}"
    jail = _start(env, "isolated")
    _plant(env, jail, "bin/gti")
    done = _land(env, path)
    if done.returncode == 0:
        _bash(env, path, "gti", env.outside)
        assert (env.outside / "ran").exists()
    assert done.returncode == 1, f"bypass: landed bin/gti with PATH entry {entry}"


@pytest.mark.parametrize("entry,planted", [
    *((e, "bin/gti") for e in ("{repo}/bin/", "{repo}//bin", "{repo}/./bin", "{repo}/x/../bin", "{link}/bin",
                               "{repo}/bin/sub/..")),
    ("{outside}/mybin", "tools/gti"),  # a host link to a directory the landing makes (dangling until then)
])
def test_path_entry_spellings_hold(world, entry, planted):
    env = world
    repo = _main(env)
    (env.outside / "lnk").symlink_to(repo)
    (env.outside / "mybin").symlink_to(repo / "tools")
    e = entry.format(repo=repo, link=env.outside / "lnk", outside=env.outside)
    jail = _start(env, "isolated")
    _plant(env, jail, planted)
    done = _land(env, f"{e}:{env.bin}:{BASE}")
    assert done.returncode == 1 and planted in done.stderr, done.stderr


def test_an_ordinary_landing_lands_with_dot_on_path(world):
    """A user's PATH with an empty entry and '.' in it: an ordinary landing of a file below the top still lands."""
    env = world
    repo = _main(env)
    jail = _start(env, "isolated")
    assert jail.sh("mkdir -p docs && echo hi > docs/a.md && git add docs && git commit -qm d && echo OK").split() == ["OK"]
    assert env.run("diff", "j", env_extra={"PATH": f":.:{env.bin}:{BASE}"}).returncode == 0
    assert env.run("list", env_extra={"PATH": f":.:{env.bin}:{BASE}"}).returncode == 0
    done = _land(env, f":.:{env.bin}:{BASE}:")
    assert done.returncode == 0, done.stderr
    assert (repo / "docs/a.md").exists()


def test_path_into_the_users_linked_worktree(world):
    """The user works in a linked worktree of the repository (git worktree add ../feat -b feat),
    with its bin/ on PATH. `land --into feat` writes the files there; tops are only the main one."""
    env = world
    repo = _main(env)
    feat = env.root / "feat"
    host_git(env, repo, "worktree", "add", "-q", str(feat), "-b", "feat", check=True)
    path = f"{feat}/bin:{env.bin}:{BASE}"
    jail = _start(env, "isolated")
    _plant(env, jail, "bin/gti")
    done = env.run("land", "j", "--into", "feat", env_extra={"PATH": path})
    if done.returncode == 0:
        assert (feat / "bin/gti").exists()
        _bash(env, path, "gti", env.outside)
        assert (env.outside / "ran").exists()
    assert done.returncode == 1, f"bypass: landed bin/gti into the linked worktree on PATH: {done.stdout}{done.stderr}"


def test_a_venvs_pth_file_asks_for_trust_files(world):
    """A .pth in the repository's ignored .venv (force-added) runs at the venv python's every start:
    an audit entry in a workspace, and a landing asks for --trust-files (worktree.LAND_ASKS)."""
    env = world
    repo = _main(env)
    (repo / ".gitignore").write_text(".venv/\n")
    host_git(env, repo, "add", ".gitignore", check=True)
    host_git(env, repo, "commit", "-qm", "ign", check=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True)
    sp = next((repo / ".venv/lib").glob("python*/site-packages"))
    rel = sp.relative_to(repo)
    jail = _start(env, "isolated")
    out = jail.sh(f"mkdir -p {rel} && echo 'import os; open(\"{env.outside}/ran\",\"w\")' > {rel}/zz.pth "
                  f"&& git add -f {rel}/zz.pth && git commit -qm pth && echo OK")
    assert out.split() == ["OK"], out
    done = env.run("land", "j")
    if done.returncode == 0:
        subprocess.run([str(repo / ".venv/bin/python"), "-c", "pass"], check=True)
        assert (env.outside / "ran").exists()
    assert done.returncode == 1, f"bypass: {rel}/zz.pth landed"


def test_a_file_of_a_path_dir_linked_into_the_repository(world):
    """~/.local/bin/gti -> ~/src/repo/tools/gti (a tool installed by a link): the PATH directory is
    outside the repository, its entry leads in; the agent's change to tools/gti lands."""
    env = world
    repo = _main(env)
    (repo / "tools").mkdir()
    (repo / "tools/gti").write_text("#!/bin/sh\necho hi\n")
    (repo / "tools/gti").chmod(0o755)
    host_git(env, repo, "add", "tools", check=True)
    host_git(env, repo, "commit", "-qm", "tool", check=True)
    lb = env.home / ".local/bin"
    lb.mkdir(parents=True)
    (lb / "gti").symlink_to(repo / "tools/gti")
    path = f"{lb}:{env.bin}:{BASE}"
    jail = _start(env, "isolated")
    out = jail.sh(f"printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > tools/gti && git commit -qam t && echo OK")
    assert out.split() == ["OK"], out
    done = _land(env, path)
    if done.returncode == 0:
        _bash(env, path, "gti", env.outside)
    assert done.returncode == 1, f"bypass: tools/gti landed; ran={(env.outside / 'ran').exists()}"


# Red team round seven.
def test_a_path_dir_with_more_links_than_are_followed_makes_every_file_count(world):
    """Red team round seven: links past a cap were never looked at, so one into the repository was
    missed. More links than tmuxjail follows in your PATH's directories: every file counts."""
    from tmuxjail import worktree

    env = world
    _main(env)
    lb = env.root / "profile-bin"
    lb.mkdir()
    for i in range(worktree.MAX_PATH_LINKS + 1):
        (lb / f"t{i:05d}").symlink_to("/usr/bin/true")
    jail = _start(env, "isolated")
    assert jail.sh("echo hi > notes.md && git add notes.md && git commit -qm n && echo OK").split() == ["OK"]
    done = _land(env, f"{lb}:{env.bin}:{BASE}")
    assert done.returncode == 1 and "notes.md" in done.stderr and "--trust-files" in done.stderr, done.stderr


def test_git_config_global_inside_the_repo(world):
    env = world
    repo = _main(env)
    (repo / "gc").write_text("[user]\n\tname = u\n")
    host_git(env, repo, "add", "gc", check=True)
    host_git(env, repo, "commit", "-qm", "gc", check=True)
    jail = _start(env, "isolated")
    out = jail.sh(f"printf '[core]\\n\\tfsmonitor = touch {env.outside}/ran\\n' >> gc && git commit -qam cfg && echo OK")
    assert out.split() == ["OK"], out
    done = env.run("land", "j", env_extra={"GIT_CONFIG_GLOBAL": str(repo / "gc")})
    assert done.returncode == 1 and "--trust-files" in done.stderr, done.stderr


def test_symlink_in_path_dir(world):
    env = world
    repo = _main(env)
    jail = _start(env, "isolated")
    out = jail.sh("mkdir -p bin && ln -s /bin/sh bin/gti && git add bin && git commit -qm l && echo OK")
    assert out.split() == ["OK"], out
    done = _land(env, f"{repo}/bin:{env.bin}:{BASE}")
    assert done.returncode == 1 and "--trust-files" in done.stderr, done.stderr


def test_mode_only_change_in_a_second_landing(world):
    env = world
    repo = _main(env)
    path = f"{repo}/bin:{env.bin}:{BASE}"
    jail = _start(env, "isolated")
    out = jail.sh(f"mkdir -p bin && printf '#!/bin/sh\\ntouch {env.outside}/ran\\n' > bin/gti && git add bin "
                  "&& git commit -qm a && echo OK")
    assert out.split() == ["OK"], out
    first = _land(env, path)
    assert first.returncode == 0, first.stderr
    out = jail.sh("chmod +x bin/gti && git commit -qam x && echo OK")
    assert out.split() == ["OK"], out
    done = _land(env, path)
    assert done.returncode == 1 and "--trust-files" in done.stderr, (done.stdout, done.stderr)


def test_non_utf8_path_entry_no_traceback(world):
    env = world
    repo = _main(env)
    jail = _start(env, "isolated")
    _plant(env, jail, "bin/gti")
    done = env.run("land", "j", env_extra={"PATH": f"{repo}/b\udcffin:{repo}/bin:{env.bin}:{BASE}"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
