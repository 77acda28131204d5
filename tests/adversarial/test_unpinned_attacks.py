"""Attacks on checks no registered guard pinned until a mutation run showed them removable
(issue 29), each from inside a real jailed pane. (The same checks at unit level:
tests/unit/test_mutation_kills.py.)"""

from __future__ import annotations

import pytest
from test_audit import audit
from test_escapes import Jail

pytestmark = pytest.mark.adversarial


def test_approved_host_config_stays_read_only_in_a_verified_jail(world):
    """git-identity and github-cli bind ~/.gitconfig, ~/.config/git and ~/.config/gh into a
    verified jail read-only: a writable bind would let the agent plant an fsmonitor or an alias
    in the user's git config, which the host's git then runs."""
    env = world
    ran = env.outside / "ran"
    (env.home / ".gitconfig").write_text("[user]\n\tname = u\n")
    gitdir, gh = env.home / ".config" / "git", env.home / ".config" / "gh"
    gitdir.mkdir(parents=True)
    gh.mkdir(parents=True)
    (gitdir / "config").write_text("")
    (gh / "hosts.yml").write_text("github.com: {}\n")
    caps = ("--capability", "git-identity", "--capability", "github-cli")
    env.run("approve", "shell", "--yes", *caps, check=True)
    jail = Jail(env, "verified", extra=caps)
    out = jail.sh(f"""
        grep -q 'name = u' {env.home}/.gitconfig && echo READ
        printf '[core]\\n\\tfsmonitor = touch {ran}\\n' >> {env.home}/.gitconfig 2>/dev/null && echo GITCONFIG
        git config --file {gitdir}/config alias.st '!touch {ran}' 2>/dev/null && echo GIT_DIR
        echo 'x' >> {gh}/hosts.yml 2>/dev/null && echo GH
        touch {gh}/planted 2>/dev/null && echo GH_NEW
        echo end
    """)
    assert out.split() == ["READ", "end"], out
    assert (env.home / ".gitconfig").read_text() == "[user]\n\tname = u\n"
    assert (gitdir / "config").read_text() == "" and not (gh / "planted").exists()
    assert (gh / "hosts.yml").read_text() == "github.com: {}\n"
    env.unchanged()


def test_audit_lists_a_worktree_config_planted_from_inside(world):
    """git 2.39 runs a core.fsmonitor set in .git/config.worktree once extensions.worktreeConfig
    is on: a repository the agent makes with one must be in the audit."""
    env = world
    jail = Jail(env, "isolated")
    out = jail.sh(r"""
        mkdir -p nested/.git/objects nested/.git/refs && echo 'ref: refs/heads/main' > nested/.git/HEAD
        printf '[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n' > nested/.git/config
        printf '[core]\n\tfsmonitor = "touch /tmp/tj-worktree-config"\n' > nested/.git/config.worktree
        echo ok
    """)
    assert out.split() == ["ok"], out
    found = [(f["kind"], f["detail"]) for f in audit(env)["findings"]
             if f["path"].endswith("nested/.git/config.worktree")]
    assert ("git-config", "core.fsmonitor = touch /tmp/tj-worktree-config") in found, found


def test_a_proxied_jail_gets_its_proxy_and_nothing_else(world):
    """--network proxy: the launcher starts the session's proxy and points the jail at it. Asked
    for a name outside the allowlist, the proxy answers 403; no proxy at all would leave the
    jail's port dead (and, on a jail given the host's network, no allowlist at all)."""
    env = world
    jail = Jail(env, "isolated", extra=("--network", "proxy", "--allow-domain", "allowed.test"))
    out = jail.sh(r"""
        python3 - <<'PY'
import os, socket
url = os.environ.get("HTTPS_PROXY", "")
print("PROXY" if url.startswith("http://127.0.0.1:") else "NOPROXY")
try:
    s = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10)
    s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
    print(s.recv(64).split(b"\r\n")[0].decode())
except Exception as exc:
    print("ERROR", type(exc).__name__)
PY
    """, timeout=30)
    assert out.splitlines()[:2] == ["PROXY", "HTTP/1.1 403 Forbidden"], out
