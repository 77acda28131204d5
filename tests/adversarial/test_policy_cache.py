"""The cache of resolved policies (tmuxjail.policycache) lives in tmuxjail's state dir, which no
jail reaches: from inside a real jail of every mode, an agent can neither read an entry or the
MAC key nor change, replace or add one, and the next start still takes the entry tmuxjail wrote."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import STANDIN, furnish
from test_escapes import ALL, Jail

from tmuxjail import policycache

pytestmark = pytest.mark.adversarial


@pytest.mark.parametrize("mode", ALL)
def test_a_jail_cannot_read_or_write_the_policy_cache(world, mode):
    env = world
    cache = policycache.PolicyCache(env.state_dir).dir
    Jail(env, mode, name="first")  # fills the cache for `start shell --mode MODE`
    entries = {p: p.read_bytes() for p in cache.iterdir()}
    inodes = {p: p.stat().st_ino for p in entries}
    assert len([p for p in entries if p.suffix == ".json"]) == 1 and cache / policycache.KEY_FILE in entries
    jail = Jail(env, mode)  # ... and this start takes its policy from there (a miss would rewrite it)
    assert {p: p.stat().st_ino for p in cache.iterdir()} == inodes
    out = jail.sh(f"""
        ls {cache} >/dev/null 2>&1 && echo SEE_CACHE
        cat {cache}/*.json 2>/dev/null | grep -q policy && echo READ_ENTRY
        test -s {cache}/{policycache.KEY_FILE} && echo READ_KEY
        # Writes may land in a tmpfs or the private home; what matters is the host copy below.
        for f in {cache}/*.json {cache}/{policycache.KEY_FILE}; do printf x > "$f"; done 2>/dev/null
        mkdir -p {cache} 2>/dev/null; printf x > {cache}/planted.json 2>/dev/null
        echo end
    """)
    assert out.split() == ["end"], out
    assert {p: p.read_bytes() for p in cache.iterdir()} == entries
    Jail(env, mode, name="after")  # still a hit on what tmuxjail wrote
    assert {p: p.stat().st_ino for p in cache.iterdir()} == inodes
    assert env.sentinel.read_text() == "untouched"


def _start(env, *args: str) -> dict:
    return env.json("start", *args, "--workspace", str(env.ws), "--detach")


def _full(env, *args: str) -> str:
    """The fingerprint a full resolution gives the same request now (a dry run never uses the cache)."""
    return env.json("start", *args, "--workspace", str(env.ws), "--dry-run")["fingerprint"]


def test_a_cli_rewritten_in_place_by_a_compatibility_jail_is_resolved_again(world):
    """Compatibility leaves the home writable, and the CLI may be installed there (~/.local/bin, an
    npm prefix). An agent rewrites it in place keeping its inode, size and mtime (only its ctime
    moves): the next start must hash it again and run under the policy naming the new file, not
    take the cached policy of the old one."""
    env = world
    local_bin = env.home / ".local" / "bin"
    local_bin.mkdir(parents=True)
    cli = local_bin / "codex"
    cli.write_bytes(STANDIN.read_bytes() + b"# aaaa\n")
    cli.chmod(0o755)
    env.vars["PATH"] = f"{local_bin}:{env.vars['PATH']}"
    req = ("codex", "--mode", "compatibility")
    first = _start(env, *req, "--name", "c1")
    assert first["fingerprint"] == _full(env, *req)
    before = os.stat(cli)
    jail = Jail(env, "compatibility")
    out = jail.sh(f"""
        python3 - <<'PY'
import os
p = {str(cli)!r}
st = os.stat(p)
data = open(p, "rb").read().replace(b"# aaaa", b"# bbbb")
with open(p, "r+b") as f:
    f.write(data)
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
print("REWRITTEN")
PY
    """)
    assert out.split() == ["REWRITTEN"], out
    after = os.stat(cli)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    second = _start(env, *req, "--name", "c2")
    assert second["fingerprint"] != first["fingerprint"], "the cached policy of the old executable was used"
    assert second["fingerprint"] == _full(env, *req)


def test_a_git_dir_made_by_an_isolated_jail_is_protected_at_the_next_start(world):
    """A strict jail protects every .git present at start. An agent makes one during a session
    (`git init` in a subdirectory): the next start of the same request must find it and bind it
    read-only, not take the cached policy that had none."""
    env = world
    first = Jail(env, "isolated", name="first")
    out = first.sh("mkdir -p sub/.git/hooks && echo MADE")
    assert out.split() == ["MADE"], out
    again = Jail(env, "isolated", name="again")
    assert again.info["fingerprint"] != first.info["fingerprint"], "the cached policy without the new .git was used"
    assert again.info["fingerprint"] == _full(env, "shell", "--mode", "isolated")
    again.n = first.n  # the first jail's scripts and outputs are still in the workspace
    out = again.sh("""
        printf 'touch /tmp/pwned' > sub/.git/hooks/pre-commit 2>/dev/null && echo HOOK_WRITTEN
        echo end
    """)
    assert out.split() == ["end"], out
    assert not (env.ws / "sub" / ".git" / "hooks" / "pre-commit").exists()


def test_compatibility_cannot_rewrite_profiles_or_adapters_kept_outside_the_package(jail_env):
    """An editable install (`pip install -e`, README "Development") keeps tmuxjail.adapters and
    tmuxjail.profile_data in the checkout's adapters/ and profiles/, outside tmuxjail/: the
    profiles and adapter code every start resolves its policy from, run outside every jail. A
    compatibility jail must get them read-only, as it gets the package itself. (Laid out here
    with the package copied onto PYTHONPATH and those two directories linked out of it.)"""
    import tmuxjail

    env = jail_env
    site, checkout = env.root / "site", env.root / "checkout"
    shutil.copytree(Path(tmuxjail.__file__).parent, site / "tmuxjail",
                    ignore=shutil.ignore_patterns("__pycache__"))
    checkout.mkdir()
    for sub, top in (("adapters", "adapters"), ("profile_data", "profiles")):
        shutil.move(site / "tmuxjail" / sub, checkout / top)
        (site / "tmuxjail" / sub).symlink_to(checkout / top)
    env.vars["PYTHONPATH"] = str(site)
    env = furnish(env)
    profile = checkout / "profiles" / "shell.toml"
    adapter = checkout / "adapters" / "shell.py"
    before = {p: p.read_bytes() for p in (profile, adapter)}
    jail = Jail(env, "compatibility")
    assert jail.info["fingerprint"] == _full(env, "shell", "--mode", "compatibility")
    out = jail.sh(f"""
        echo '# planted' >> {profile} 2>/dev/null && echo PROFILE_WRITTEN
        echo 'import os  # planted' >> {adapter} 2>/dev/null && echo ADAPTER_WRITTEN
        echo '# planted' >> {site}/tmuxjail/profile_data/shell.toml 2>/dev/null && echo LINKED_PROFILE_WRITTEN
        touch {checkout}/adapters/planted.py 2>/dev/null && echo ADAPTER_PLANTED
        echo end
    """)
    assert out.split() == ["end"], out
    assert {p: p.read_bytes() for p in before} == before
    assert not (checkout / "adapters" / "planted.py").exists()
    env.unchanged()


def test_a_fifo_planted_on_path_by_a_compatibility_jail_never_hangs_the_next_start(world):
    """Compatibility leaves ~/.local/bin writable, and login shells put it first on PATH. An
    agent plants an executable FIFO there under the CLI's name: the next start (warm or full)
    opened it to read a shebang and waited forever. It is not a program (execvp goes on past
    it): the start takes the CLI further down PATH, as a shell would."""
    env = world
    local_bin = env.home / ".local" / "bin"
    local_bin.mkdir(parents=True)
    env.vars["PATH"] = f"{local_bin}:{env.vars['PATH']}"
    req = ("codex", "--mode", "compatibility")
    first = _start(env, *req, "--name", "c1")
    jail = Jail(env, "compatibility")
    out = jail.sh(f"mkfifo -m 755 {local_bin}/codex && echo PLANTED")
    assert out.split() == ["PLANTED"], out
    proc = env.run("start", *req, "--workspace", str(env.ws), "--detach", "--name", "c2", "--json", timeout=20)
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)
    assert second["fingerprint"] == first["fingerprint"] == _full(env, *req)
