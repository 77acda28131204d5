"""The macOS start path, run on this machine through its seam (`python -m tmuxjail.testing.darwin
--sandbox-exec STAND-IN ...`): the same CLI, launcher and proxy code a Mac runs, with a Mac's
platform facts (platformdirs' macOS layout, the Seatbelt backend, the proxy on loopback TCP) and a
stand-in sandbox-exec (tests/standins/sandbox_exec.py) that evaluates the profile it is given
with the project's SBPL evaluator, records its decisions for the requests in table.json, and runs
the command. It enforces nothing: what these tests prove is that every step a Mac takes happens,
in order, with the profile and parameters that decide the table as expected. Whether Seatbelt
itself enforces the profile is for a real Mac (.github/workflows/macos.yml, docs/macos.md).

Real tmux (a private server per test), real SQLite; the HOME lives outside /tmp, as a Mac's does
(the profile shares /tmp, which macOS does not make private)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Env, wait_until

from tmuxjail.pane.darwin import PROBE

pytestmark = [pytest.mark.integration, pytest.mark.macos_seam]
REPO = Path(__file__).resolve().parents[2]
STAND_IN = REPO / "tests" / "standins" / "sandbox_exec.py"
CONF = REPO / "tmux.conf.example"
PRESS = REPO / "scripts" / "press-every-key.py"


class Mac(Env):
    """An Env whose tmuxjail runs through the macOS seam."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.seam = root / "seam"
        self.seam.mkdir()
        self.sandbox_exec = self.seam / "sandbox-exec"
        self.sandbox_exec.write_text(f'#!/bin/sh\nexec {sys.executable} {STAND_IN} {self.seam} "$@"\n')
        self.sandbox_exec.chmod(0o755)
        self.support = self.home / "Library" / "Application Support" / "tmuxjail"
        # platformdirs' macOS layout honours XDG_* when set: a Mac usually has none.
        self.vars = {k: v for k, v in self.vars.items() if not k.startswith("XDG_")}
        self.tmpdir = root / "T"  # the user's temp dir (a Mac's is under /var/folders)
        self.tmpdir.mkdir()
        self.vars["TMPDIR"] = str(self.tmpdir)

    def run(self, *args, check=False, cwd=None, env_extra=None, timeout=60) -> subprocess.CompletedProcess:
        env = self.environ(PWD=str(cwd or self.ws), **(env_extra or {}))
        proc = subprocess.run([sys.executable, "-P", "-m", "tmuxjail.testing.darwin", "--sandbox-exec",
                               str(self.sandbox_exec), *self.flags, *args],
                              cwd=cwd or self.ws, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"tmuxjail {args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def table(self, requests: list[dict]) -> None:
        (self.seam / "table.json").write_text(json.dumps(requests))

    def runs(self) -> list[dict]:
        """What the stand-in sandbox-exec saw, one entry per run."""
        path = self.seam / "decisions.jsonl"
        runs = [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []
        probes = [r for r in runs if r["command"] == [PROBE]]
        # Each run is preceded by the launcher's probe of its profile (pane/darwin.py preflight).
        assert len(probes) >= len(runs) - len(probes), runs
        return [r for r in runs if r["command"] != [PROBE]]

    def decided(self, run: dict) -> dict[tuple, str]:
        return {(d["op"], d.get("path") or d.get("ip") or d.get("unix")): d["decision"] for d in run["decisions"]}


@pytest.fixture
def mac(home_root):
    # Outside /tmp: a Mac's home is /Users/NAME, and the profile shares /tmp (no private /tmp there).
    m = Mac(home_root)
    yield m
    m.kill()


def start(mac: Mac, mode: str, *extra: str, name: str = "app") -> dict:
    return mac.json("start", "codex", "--mode", mode, "--workspace", str(mac.ws), "--name", name, "--detach", *extra)


def secrets(mac: Mac) -> list[dict]:
    ssh = mac.home / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text("secret\n")
    return [
        {"op": "file-read-data", "path": str(ssh / "id_ed25519")},
        {"op": "file-write-data", "path": str(mac.ws / "new.txt")},
        {"op": "file-write-data", "path": str(mac.outside / "x")},
        {"op": "file-read-data", "path": str(mac.support / "store.db")},
        {"op": "file-write-data", "path": str(mac.support / "store.db")},
        {"op": "network-outbound", "unix": f"/private/tmp/tmux-{os.getuid()}/{mac.socket}"},
    ]


def test_isolated_start_runs_the_cli_under_sandbox_exec_with_the_profile_that_keeps_it_in(mac):
    mac.table(secrets(mac))
    info = start(mac, "isolated", "--network", "none")
    assert info["mode"] == "isolated" and info["status"] == "running"
    r = mac.report()  # the stand-in CLI ran (in the workspace, where it reports), after sandbox-exec
    [run] = mac.runs()
    # sandbox-exec ran the CLI: through env with HOME re-pointed to the private home (macOS
    # cannot mount over $HOME), the CLI last.
    assert run["command"][0] == "/usr/bin/env" and str(mac.bin / "codex") in run["command"], run["command"]
    home = next(a.split("=", 1)[1] for a in run["command"] if a.startswith("HOME="))
    assert home.startswith(str(mac.support / "homes" / "codex"))  # platformdirs' macOS layout
    assert r["home"] == home
    # Its own temp dir, made new and 0700 by the launcher, is its TMPDIR and writable.
    tmp = next(a.split("=", 1)[1] for a in run["command"] if a.startswith("TMPDIR="))
    assert Path(tmp).parent == mac.tmpdir and Path(tmp).name.startswith("tmuxjail-")
    assert Path(tmp).stat().st_mode & 0o777 == 0o700
    assert run["params"]["SESSION_TMP"] == tmp if "SESSION_TMP" in run["params"] else tmp in run["params"].values()
    d = mac.decided(run)
    assert d[("file-read-data", str(mac.home / ".ssh" / "id_ed25519"))] == "deny"
    assert d[("file-write-data", str(mac.ws / "new.txt"))] == "allow"
    assert d[("file-write-data", str(mac.outside / "x"))] == "deny"
    assert d[("file-read-data", str(mac.support / "store.db"))] == "deny"
    assert d[("file-write-data", str(mac.support / "store.db"))] == "deny"
    assert d[("network-outbound", f"/private/tmp/tmux-{os.getuid()}/{mac.socket}")] == "deny"
    # Its state is where a Mac keeps it, not in XDG's places.
    assert (mac.support / "store.db").exists() and not (mac.home / ".local" / "state" / "tmuxjail").exists()


def test_compatibility_shares_the_home_but_not_tmuxjails_own_state(mac):
    mac.table(secrets(mac))
    info = start(mac, "compatibility")
    assert info["mode"] == "compatibility"
    mac.report()
    [run] = mac.runs()
    d = mac.decided(run)
    assert d[("file-read-data", str(mac.home / ".ssh" / "id_ed25519"))] == "allow"
    assert d[("file-write-data", str(mac.outside / "x"))] == "allow"
    assert d[("file-write-data", str(mac.support / "store.db"))] == "deny"


def test_verified_needs_its_approval_and_then_runs_under_sandbox_exec(mac):
    mac.table(secrets(mac))
    proc = mac.run("start", "codex", "--mode", "verified", "--workspace", str(mac.ws), "--detach")
    assert proc.returncode == 4 and "approve" in proc.stderr and mac.runs() == []
    mac.run("approve", "codex", "--yes", check=True)
    info = start(mac, "verified")
    assert info["mode"] == "verified"
    mac.report()
    d = mac.decided(mac.runs()[-1])
    assert d[("file-read-data", str(mac.home / ".ssh" / "id_ed25519"))] == "deny"
    assert d[("file-write-data", str(mac.ws / "new.txt"))] == "allow"


def test_the_proxy_listens_on_the_one_loopback_port_the_profile_allows(mac):
    """network proxy on macOS: no bridge and no namespace; the session's proxy listens on a
    loopback port, the CLI's proxy variables name it, and the profile lets the jail connect to it
    and to nothing else."""
    start(mac, "isolated")  # the default network: proxy
    mac.report()
    [run] = mac.runs()
    url = run["env"]["HTTPS_PROXY"]
    assert url.startswith("http://127.0.0.1:")
    port = int(url.rsplit(":", 1)[1])
    assert all(run["env"][k] == url for k in ("HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"))
    mac.table([{"op": "network-outbound", "ip": f"localhost:{port}"},
               {"op": "network-outbound", "ip": f"localhost:{port + 1}"},
               {"op": "network-outbound", "ip": "*:443"}])
    # The proxy listens there (outside the jail; only this test's loopback is touched).
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    # A second start evaluates the new table with its own profile (its own proxy, its own port).
    start(mac, "isolated", name="two")
    wait_until(lambda: len(mac.runs()) == 2, 10, "the second start's sandbox-exec")
    run2 = mac.runs()[1]
    port2 = int(run2["env"]["HTTPS_PROXY"].rsplit(":", 1)[1])
    d = mac.decided(run2)
    assert d[("network-outbound", "*:443")] == "deny"
    if port2 == port + 1:  # the table named the first proxy's neighbour: it is this one's
        pytest.skip("the two proxies took adjacent ports; the table cannot tell them apart")
    assert d[("network-outbound", f"localhost:{port + 1}")] == "deny"
    # The first session's port is not the second's: only its own proxy is reachable.
    assert d[("network-outbound", f"localhost:{port}")] == "deny"
    mac.table([{"op": "network-outbound", "ip": f"localhost:{port2}"}])
    start(mac, "isolated", "--network", "none", name="three")
    wait_until(lambda: len(mac.runs()) == 3, 10, "the third start's sandbox-exec")
    assert mac.decided(mac.runs()[2])[("network-outbound", f"localhost:{port2}")] == "deny"  # none: no proxy at all


def test_list_show_and_resume_refused_on_a_changed_policy(mac):
    start(mac, "isolated", "--network", "none")
    mac.report()
    row = next(r for r in mac.json("list") if r["name"] == "app")
    assert row["mode"] == "isolated" and row["status"] == "running"
    shown = mac.json("show", "app")
    assert shown["policy"]["backend"] == "seatbelt"
    mac.kill()  # the pane is gone: a resume relaunches
    (mac.support / "config.toml").write_text('allowed_modes = ["verified"]\n')
    proc = mac.run("resume", "app", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["mode"], proc.stdout + proc.stderr
    assert len(mac.runs()) == 1  # nothing ran
    (mac.support / "config.toml").unlink()
    resumed = mac.json("resume", "app", "--detach")
    assert resumed["status"] == "running" and resumed["fingerprint"] == shown["fingerprint"]
    wait_until(lambda: len(mac.runs()) == 2, 10, "the resumed jail's sandbox-exec")


def test_a_new_window_of_the_session_opens_in_the_same_profile(mac):
    start(mac, "isolated", "--network", "none")
    mac.report()
    mac.tmux("new-window", "-t", "=app:")  # the owned session's default-command: `_pane`, through the seam
    wait_until(lambda: len(mac.runs()) == 2, 15, "the new window's sandbox-exec")
    first, second = mac.runs()
    # The same profile but for the pane's own tty and temp dir (each pane gets a new one).
    own = ("PANE_TTY", "SESSION_TMP")
    assert {k: v for k, v in second["params"].items() if not k.startswith(own)} == \
        {k: v for k, v in first["params"].items() if not k.startswith(own)}
    assert second["params"]["SESSION_TMP_0"] != first["params"]["SESSION_TMP_0"]


def test_the_audit_runs_on_a_macos_session(mac):
    start(mac, "isolated", "--network", "none")
    mac.report()
    (mac.ws / ".envrc").write_text("echo planted\n")  # what the agent could have written
    proc = mac.run("audit", "app", "--json")
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert ".envrc" in proc.stdout


def test_every_key_works_through_the_macos_path(mac):
    b = mac.bin / "tmuxjail"
    b.write_text(f'#!/bin/sh\nexec {sys.executable} -P -m tmuxjail.testing.darwin --sandbox-exec {mac.sandbox_exec} "$@"\n')
    b.chmod(0o755)
    proc = subprocess.run([sys.executable, str(PRESS), *mac.flags, "--conf", str(CONF), "--bin", str(b),
                           "--darwin-seam", str(mac.sandbox_exec),
                           "--workspace", str(mac.ws), "--mode", "isolated"],
                          capture_output=True, text=True, env=mac.environ(), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all worked" in proc.stdout
    assert mac.runs(), "no key went through sandbox-exec"


def test_the_dry_run_on_macos_shows_the_profile_it_would_run(mac):
    out = mac.json("start", "codex", "--mode", "isolated", "--workspace", str(mac.ws), "--dry-run")
    assert out["policy"]["backend"] == "seatbelt" and "(deny default)" in out["seatbelt_profile"]
    assert out["sandbox_argv"][0] == str(mac.sandbox_exec) and out["sandbox_call"] is None
    assert mac.runs() == [] and mac.json("list") == []
    proc = mac.run("start", "codex", "--backend", "bwrap", "--detach")
    assert proc.returncode == 2 and "only with --dry-run" in proc.stderr and mac.runs() == []


# -- bad input: one clear line each, and no start ---------------------------------------------------

def test_a_profile_sandbox_exec_refuses_is_a_failed_start_and_nothing_runs(mac):
    (mac.seam / "refuse").write_text("unbalanced parentheses")
    proc = mac.run("start", "codex", "--mode", "isolated", "--network", "none", "--workspace", str(mac.ws),
                   "--name", "app", "--detach")
    assert proc.returncode == 5 and "Traceback" not in proc.stderr, proc.stderr
    assert "sandbox-exec refused this session's Seatbelt profile" in proc.stderr.splitlines()[0], proc.stderr
    assert mac.runs() == [] and not (mac.ws / ".standin-codex.report").exists()
    assert next(r for r in mac.json("list") if r["name"] == "app")["status"] == "failed"


def test_a_mac_without_tmux_is_told_how_to_get_it(mac):
    proc = mac.run("start", "codex", "--mode", "isolated", "--workspace", str(mac.ws), "--detach",
                   env_extra={"PATH": str(mac.bin)})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == ["tmuxjail: tmux is not installed", "  brew install tmux"], proc.stderr
    assert mac.runs() == []


# -- the Linux adversarial tier's attacks, as the profile a real start hands sandbox-exec decides them

def attacks(mac: Mac) -> dict[str, dict]:
    uid = os.getuid()
    (mac.home / ".ssh").mkdir(exist_ok=True)
    (mac.home / ".ssh" / "id_ed25519").write_text("secret\n")
    return {
        "home secret": {"op": "file-read-data", "path": str(mac.home / ".ssh" / "id_ed25519")},
        "home secret written": {"op": "file-write-data", "path": str(mac.home / ".aws" / "credentials")},
        "tmux socket": {"op": "network-outbound", "unix": f"/private/tmp/tmux-{uid}/default"},
        "tmux socket, /tmp spelling": {"op": "network-outbound", "unix": f"/tmp/tmux-{uid}/{mac.socket}"},
        "tmux dir squatted": {"op": "file-write-create", "path": f"/private/tmp/tmux-{uid}"},
        "tmuxjail's store": {"op": "file-read-data", "path": str(mac.support / "store.db")},
        "tmuxjail's dir squatted": {"op": "file-write-create", "path": str(mac.support / "spool" / "x.json")},
        "another terminal": {"op": "file-write-data", "path": "/dev/ttys009"},
        "kern.procargs2": {"op": "sysctl-read", "sysctl": "kern.procargs2"},
        "a /tmp socket bound": {"op": "network-bind", "unix": "/private/tmp/agent.sock"},
        "a /tmp socket reached": {"op": "network-outbound", "unix": "/private/tmp/other.sock"},
        "straggler: another process": {"op": "process-info-pidinfo", "target": "other"},
        "straggler: nvram": {"op": "nvram-get"},
        "straggler: iokit": {"op": "iokit-get-properties"},
        "the workspace": {"op": "file-write-data", "path": str(mac.ws / "src.py")},
    }


ALL_DENY = {"tmux socket", "tmux socket, /tmp spelling", "tmux dir squatted", "tmuxjail's store",
            "tmuxjail's dir squatted", "another terminal"}
STRICT_DENY = ALL_DENY | {"home secret", "home secret written", "kern.procargs2", "a /tmp socket bound",
                          "a /tmp socket reached", "straggler: another process", "straggler: nvram",
                          "straggler: iokit"}


@pytest.mark.parametrize("mode", ["compatibility", "isolated", "verified"])
def test_the_adversarial_tiers_attacks_per_mode(mac, mode):
    named = attacks(mac)
    mac.table(list(named.values()))
    if mode == "verified":
        mac.run("approve", "codex", "--yes", check=True)
    start(mac, mode, "--network", "none")
    mac.report()
    [run] = mac.runs()
    got = {name: d["decision"] for name, d in zip(named, run["decisions"], strict=True)}
    denied = STRICT_DENY if mode != "compatibility" else ALL_DENY
    assert {n for n, d in got.items() if d == "deny"} == denied, got
