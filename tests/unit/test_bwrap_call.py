"""The bwrap call, built once as options and fds together (sandbox/bwrap.py Call): its flat argv is
the one the argv-built builder gave, byte for byte, for every mode, network and layout below
(golden/bwrap_calls.json, written by that builder, each case with its policy and layout, so the
pin does not move with policy resolution), and the binds it marks beneath a jail-writable root
are exactly those the launcher's old re-parse of that argv made from an fd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tmuxjail.canon import loads
from tmuxjail.sandbox import HostLayout
from tmuxjail.sandbox.bwrap import BIND_FD, Bwrap, agent_roots
from tmuxjail.subpath import inside

CASES = json.loads((Path(__file__).parent / "golden" / "bwrap_calls.json").read_text())
CLI = ["/opt/codex/codex", "--flag", "x y"]


def _layout(data):
    return HostLayout(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def test_the_golden_cases_cover_every_mode_and_network():
    seen = {(c["policy"]["mode"], c["policy"].get("network", "host")) for c in CASES}
    assert seen == {(m, n) for m in ("compatibility", "isolated", "verified") for n in ("host", "none", "proxy")}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_the_flattened_call_is_the_argv_bwrap_always_got(case):
    call = Bwrap("/usr/bin/bwrap").call(case["policy"], CLI, _layout(case["layout"]))
    assert call.argv() == case["argv"]
    assert call.command == CLI and call.prefix[0] == "/usr/bin/prlimit" and call.prefix[-1] == "--"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_the_marked_binds_are_the_ones_the_launcher_reparsed_into_fds(case):
    """The old launcher walked the argv up to `--` and took every --bind/--ro-bind[-try] whose
    source lay in an agent root, opening it from the outermost such root."""
    pol = case["policy"]
    call = Bwrap("/usr/bin/bwrap").call(pol, CLI, _layout(case["layout"]))
    roots = agent_roots(pol)
    expected = {}
    for i, (op, *operands) in enumerate(call.setup):
        under = [r for r in roots if op in BIND_FD and inside(operands[0], r)]
        if under:
            expected[i] = min(under, key=len)
    assert call.beneath == expected
    assert all(op in ("--remount-ro", "--chdir") for op, *_ in call.seal) and call.seal[-1][0] == "--chdir"


@pytest.mark.parametrize("case", CASES[:6], ids=lambda c: c["name"])
def test_the_spec_form_is_json_and_compares_equal_after_the_round_trip(case):
    call = Bwrap("/usr/bin/bwrap").call(case["policy"], CLI, _layout(case["layout"]))
    data = call.asdict()
    assert loads(json.dumps(data)) == data and "command" not in data


# -- the launcher's steps on the call, against its old steps on the flat argv ---------------------
# The reference below is the launcher as it was before the call was structured (pane/binds.py's
# walk with its arity table, executable.exe_binds before `--`), kept here only to pin that the
# argv bubblewrap receives is the same, fds and executables' binds included.

_ARITY = {**dict.fromkeys(("--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                           "--unshare-cgroup-try", "--unshare-net", "--disable-userns"), 0),
          **dict.fromkeys(("--cap-drop", "--chdir", "--remount-ro", "--proc", "--dev", "--tmpfs", "--size"), 1),
          **dict.fromkeys(("--symlink", "--dev-bind", "--ro-bind-data", "--bind-fd", "--ro-bind-fd", *BIND_FD), 2)}


def _old_fd_binds(args, policy, open_beneath):
    roots, out, i = agent_roots(policy), [], 0
    while args[i] != "--":
        op, n = args[i], _ARITY[args[i]]
        src = args[i + 1] if n else ""
        under = [r for r in roots if inside(src, r)] if op in BIND_FD else []
        if under:
            fd = open_beneath(min(under, key=len), src, optional=op.endswith("-try"))
            if fd is not None:
                out += [BIND_FD[op], str(fd), args[i + 2]]
        else:
            out += args[i:i + 1 + n]
        i += 1 + n
    return out + args[i:]


def _fake_open():
    """Stands in for binds.open_beneath, the same for both: an fd number per call, and a missing
    file for every optional source of odd length (so -try binds are dropped too)."""
    fds = iter(range(100, 1000))
    return lambda root, path, optional: None if optional and len(path) % 2 else next(fds)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_the_launchers_argv_is_the_one_its_old_reparse_gave(case, monkeypatch):
    from tmuxjail.pane import binds, executable

    pol, layout = case["policy"], _layout(case["layout"])
    exe = [] if pol["mode"] == "compatibility" else [(pol["executable"]["path"], "sha256:x", 77, [])]

    old = Bwrap("/usr/bin/bwrap").wrap(pol, CLI, layout)
    bwrap, *rest = old
    rest = _old_fd_binds(rest, pol, _fake_open())
    at = rest.index("--")
    rest = [*rest[:at], *[a for path, _, fd, _ in exe for a in ("--ro-bind-fd", str(fd), path)], *rest[at:]]
    expected = [bwrap, "--seccomp", "5", "--json-status-fd", "6", *rest]

    monkeypatch.setattr(binds, "open_beneath", _fake_open())
    call = Bwrap("/usr/bin/bwrap").call(pol, CLI, layout)
    fds = binds.fd_binds(call)
    executable.exe_binds(call, exe)
    assert call.argv("--seccomp", "5", "--json-status-fd", "6") == expected
    assert fds == [int(a) for i, a in enumerate(expected) if expected[i - 1] in ("--bind-fd", "--ro-bind-fd") and a != "77"]
