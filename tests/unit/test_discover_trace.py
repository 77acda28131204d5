"""The discovery trace parser is a seam: every name in a trace was chosen by the jail."""

from __future__ import annotations

import pytest

from tmuxjail.discover import evidence, trace


def hx(s: str | bytes) -> str:
    b = s.encode() if isinstance(s, str) else s
    return "".join(f"\\x{c:02x}" for c in b)


def q(s: str | bytes) -> str:
    return f'"{hx(s)}"'


BWRAP = f'100 1.000 execve({q("/usr/bin/bwrap")}, [{q("bwrap")}], 0x7ff /* 3 vars */) = 0'


def run(*lines: str) -> trace.Trace:
    return trace.parse([BWRAP, *lines])


def test_a_path_that_holds_a_syscall_line_stays_one_odd_path():
    crafted = b'/tmp/x") = 0\n200 2.0 openat(AT_FDCWD, "/root/.ssh/id_rsa", O_RDONLY) = 3\n'
    t = run(f"100 1.1 openat(AT_FDCWD<{hx('/ws')}>, {q(crafted)}, O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{hx(crafted)}>")
    assert t.rejected == 0 and len(t.calls) == 2
    (a,) = trace.accesses(t.calls[1])
    assert a.kind == "create" and a.odd and a.path.startswith("/tmp/x\") = 0\\x0a200")
    assert "\n" not in a.path


def test_a_raw_quoted_string_is_never_interpreted():
    """strace -xx prints every string escaped: a raw one is not strace's output."""
    t = run('100 1.1 openat(AT_FDCWD, "/etc/shadow", O_RDONLY) = 3')
    assert t.rejected == 1 and len(t.calls) == 1


def test_control_characters_and_non_ascii_lines_are_rejected():
    t = run(f"100 1.1 openat(AT_FDCWD, {q('/etc/passwd')}, O_RDONLY\x1b[2J) = 3",
            f"100 1.1 openat(AT_FDCWD, {q('/etc/passwd')}, O_RDONLY\u00e9) = 3",
            f"100 1.1 openat(AT_FDCWD, {q('/x' * 40000)}, O_RDONLY) = 3")
    assert t.rejected == 3 and len(t.calls) == 1


def test_unfinished_and_resumed_calls_are_stitched_per_process():
    t = run("100 1.1 vfork( <unfinished ...>",
            f"101 1.2 execve({q('/usr/bin/git')}, [{q('git')}], 0x1 /* 1 vars */ <unfinished ...>",
            "100 1.3 <... vfork resumed>) = 2 /* 101 in strace's PID NS */",
            "101 1.4 <... execve resumed>) = 0",
            "101 1.5 +++ exited with 0 +++")
    assert t.rejected == 0
    fork = next(c for c in t.calls if c.name == "vfork")
    assert fork.child == 101 and fork.ret == "2"
    ex = next(c for c in t.calls if c.name == "execve" and c.pid == 101)
    assert ex.ok and ex.string(0) == (b"/usr/bin/git", False)
    assert t.exits[0].pid == 101 and t.exits[0].status == 0


def test_a_file_that_is_unlinked_keeps_its_decoration():
    """strace -y marks an fd whose file is gone, e.g. the proxy bridge's code, bound from a memfd."""
    t = run(f"100 1.1 openat(AT_FDCWD<{hx('/w')}>, {q('/run/tmuxjail/bridge.py')}, O_RDONLY) = 3<{hx('/run/tmuxjail/bridge.py')}>(deleted)",
            f"100 1.2 read(3<{hx('/run/tmuxjail/bridge.py')}>(deleted), {q('x')}, 4096) = 1")
    assert t.rejected == 0 and [c.name for c in t.calls[1:]] == ["openat", "read"]
    (a,) = trace.accesses(t.calls[1])
    assert (a.path, a.kind, a.ok) == ("/run/tmuxjail/bridge.py", "read", True)


def test_a_resumed_line_without_its_start_is_rejected():
    t = run("100 1.3 <... openat resumed>) = 3")
    assert t.rejected == 1


def test_relative_paths_resolve_against_the_decorated_directory():
    t = run(f"100 1.1 openat(3<{hx('/home/u')}>, {q('.aws/config')}, O_RDONLY) = -1 ENOENT (No such file or directory)",
            f"100 1.2 mkdir({q('../y')}, 0700) = 0")
    (a,) = trace.accesses(t.calls[1])
    assert (a.path, a.kind, a.ok, a.errno) == ("/home/u/.aws/config", "read", False, "ENOENT")
    (b,) = trace.accesses(t.calls[2], cwd=b"/home/u/ws")
    assert (b.path, b.kind) == ("/home/u/y", "mkdir")
    (c,) = trace.accesses(t.calls[2])
    assert c.odd and c.path.startswith("?/")


def test_connect_destinations():
    t = run(f"100 1.1 connect(3, {{sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr({q('10.0.0.1')})}}, 16)"
            " = -1 EINPROGRESS (Operation now in progress)")
    assert trace.connect_dest(t.calls[1]) == "10.0.0.1:443"


@pytest.mark.parametrize("name", ["a\nb", "\x1b[31mred", "caf\u00e9", "\udcff"])
def test_decoded_paths_are_printable(name):
    raw = name.encode("utf-8", "surrogateescape")
    text, odd = trace.decode_path(b"/tmp/" + raw)
    assert text.isprintable() and (odd or name == "caf\u00e9")


def _meta(**kw):
    return {"id": "codex-ws-1", "mode": "isolated", "provider": "codex", "workspaces": ["/ws"], "home": "/home/u",
            "own_dirs": ["/home/u/.config/tmuxjail"], "install_roots": [], "started_at": "now",
            "identity": {"path": "/usr/bin/codex", "sha256": "sha256:x"}, **kw}


def test_only_the_clis_processes_count_not_bubblewraps_setup():
    t = run(f"100 1.1 mkdir({q('/newroot/home/u/.ssh')}, 0755) = 0",  # bwrap's own setup
            "100 1.2 clone(child_stack=NULL, flags=CLONE_NEWPID|SIGCHLD) = 101",
            f"101 1.3 execve({q('/usr/bin/codex')}, [{q('codex')}], 0x1 /* 1 vars */) = 0",
            f"101 1.4 openat(AT_FDCWD<{hx('/ws')}>, {q('/home/u/.gitconfig')}, O_RDONLY) = -1 ENOENT (No such file)",
            "100 1.5 +++ exited with 0 +++")
    ev = evidence.build(_meta(), t, "sha256:t", lambda p: p == "/home/u/.gitconfig", None)
    assert [u.path for u in ev.denials] == ["/home/u/.gitconfig"]
    assert all(".ssh" not in u.path for u in ev.paths)
    assert ev.exit.status == 0 and ev.exit.finished


def test_short_pids_are_padded_by_strace():
    t = trace.parse([f"465   1.0 execve({q('/usr/bin/bwrap')}, [{q('bwrap')}], 0x1 /* 1 vars */) = 0",
                     "465   1.1 +++ exited with 0 +++"])
    assert t.rejected == 0 and t.calls[0].pid == 465 and t.exits[0].status == 0


def test_proxy_log_destinations_are_printable(tmp_path):
    """The proxy log's host names came from the jail (issue 15's log, read where it exists)."""
    from types import SimpleNamespace

    from tmuxjail.commands import discovery as run

    log = tmp_path / "net" / "abc-1" / "network.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"host": "ex\\u001b[2Jample.com", "port": 443, "decision": "denied"}\nnot json\n')
    ctx = SimpleNamespace(paths=SimpleNamespace(state_dir=tmp_path))
    assert run._proxy_log(ctx, {"session_id": "abc-1"}) == [
        {"host": "ex?[2Jample.com", "port": "443", "decision": "denied"}]
    assert run._proxy_log(ctx, {"session_id": "other"}) is None


def test_proxy_log_for_discovery_survives_a_flood(tmp_path):
    """Issue 27.3: discovery reads the log's older generation and every destination the proxy's
    counters hold, so flooding first cannot hide a probe the rotation dropped from the rows."""
    from types import SimpleNamespace

    from tmuxjail.commands import discovery as run
    from tmuxjail.net import record as netrecord

    d = tmp_path / "net" / "abc-1"
    d.mkdir(parents=True)
    rec = netrecord.Recorder(str(d), owner=5)
    rec.decision("probe.example.com", 443, "", "denied", "allowlist")
    rec.flush()
    (d / netrecord.LOG_NAME).write_text('{"host": "junk.test", "port": 443, "decision": "denied"}\n')
    (d / (netrecord.LOG_NAME + ".1")).write_text('{"host": "older.test", "port": 80, "decision": "allowed"}\n')
    ctx = SimpleNamespace(paths=SimpleNamespace(state_dir=tmp_path))
    got = run._proxy_log(ctx, {"session_id": "abc-1"})
    assert got == [{"host": "older.test", "port": "80", "decision": "allowed"},
                   {"host": "junk.test", "port": "443", "decision": "denied"},
                   {"host": "probe.example.com", "port": "443", "decision": "denied"}]
