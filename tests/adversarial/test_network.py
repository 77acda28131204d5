"""The network setting, attacked from inside real jailed panes (issue 15, first step).

`--network none` and `proxy` give the jail a network namespace of its own: its loopback is not the host's.
Every attack runs with `none` (must fail) and with `host` (must succeed: the positive control
that shows the attack works, so the test can go red). `host` in a strict mode needs the operator's
config line (proxy is their default and widest): the control writes it. Only loopback addresses and abstract unix
names are used; nothing here resolves a name or leaves the machine."""

from __future__ import annotations

import json
import secrets
import socket
import sqlite3
import threading
import time

import pytest
from test_escapes import ALL, Jail

pytestmark = pytest.mark.adversarial
NETWORKS = ("none", "proxy", "host")
DEFAULTS = {"compatibility": "host", "isolated": "proxy", "verified": "proxy"}
WAIT = 3.0  # bound on every connect and receive


class Listeners:
    """Host-side services on loopback that record every contact; all closed on exit."""

    def __init__(self):
        self.token = secrets.token_hex(8)
        self.contacts: list[str] = []
        self.socks: list[socket.socket] = []
        self.ports: dict[str, int] = {}
        for kind, fam, addr in (("tcp4", socket.AF_INET, "127.0.0.1"), ("tcp6", socket.AF_INET6, "::1")):
            s = self._sock(fam, socket.SOCK_STREAM)
            s.bind((addr, 0))
            s.listen(4)
            self.ports[kind] = s.getsockname()[1]
            threading.Thread(target=self._accept, args=(kind, s), daemon=True).start()
        for kind, fam, addr in (("udp4", socket.AF_INET, "127.0.0.1"), ("udp6", socket.AF_INET6, "::1")):
            s = self._sock(fam, socket.SOCK_DGRAM)
            s.bind((addr, 0))
            self.ports[kind] = s.getsockname()[1]
            threading.Thread(target=self._recv, args=(kind, s), daemon=True).start()
        s = self._sock(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract = f"tj-net-host-{self.token}"
        s.bind("\0" + self.abstract)
        s.listen(4)
        threading.Thread(target=self._accept, args=("abstract", s), daemon=True).start()

    def _sock(self, *a) -> socket.socket:
        s = socket.socket(*a)
        s.settimeout(0.2)
        self.socks.append(s)
        return s

    def _accept(self, kind, s):
        while s.fileno() != -1:
            try:
                c, _ = s.accept()
            except (TimeoutError, OSError):
                continue
            self.contacts.append(kind)
            c.close()

    def _recv(self, kind, s):
        while s.fileno() != -1:
            try:
                data = s.recv(64)
            except (TimeoutError, OSError):
                continue
            if data == self.token.encode():
                self.contacts.append(kind)

    def close(self):
        for s in self.socks:
            s.close()


@pytest.fixture
def listeners():
    ls = Listeners()
    yield ls
    ls.close()


def allow_host(env, mode) -> None:
    """The operator's line that lets a strict jail have the host's network."""
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(f'[network]\n{mode} = "host"\n')


def start(env, mode, network, name="j") -> Jail:
    """network: none, proxy, host, or default (no --network: the mode's default)."""
    if mode == "verified":
        env.run("approve", "shell", "--yes", check=True)
    if network == "host" and mode != "compatibility":
        allow_host(env, mode)
    jail = Jail(env, mode, name=name, extra=() if network == "default" else ("--network", network))
    assert jail.info["network"] == (DEFAULTS[mode] if network == "default" else network)
    return jail


OUTBOUND = """\
python3 - <<'PY'
import json, socket
out = {}
def attempt(kind, fam, typ, addr):
    s = socket.socket(fam, typ)
    s.settimeout(%(wait)s)
    try:
        if typ == socket.SOCK_DGRAM:
            s.sendto(%(token)r.encode(), addr)
        else:
            s.connect(addr)
        out[kind] = "ok"
    except OSError as e:
        out[kind] = type(e).__name__
    finally:
        s.close()
attempt("tcp4", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", %(tcp4)d))
attempt("tcp6", socket.AF_INET6, socket.SOCK_STREAM, ("::1", %(tcp6)d))
attempt("udp4", socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", %(udp4)d))
attempt("udp6", socket.AF_INET6, socket.SOCK_DGRAM, ("::1", %(udp6)d))
attempt("abstract", socket.AF_UNIX, socket.SOCK_STREAM, "\\0" + %(abstract)r)
# /proc/net lists the sockets of the reader's network namespace: the host's listeners, or only
# the jail's own (one it opens now, so that an empty or unreadable table cannot pass).
own = socket.socket(); own.bind(("127.0.0.1", 0)); own.listen(1)
def ports(name):
    try:
        rows = open("/proc/net/" + name).read().splitlines()[1:]
    except OSError as e:
        return type(e).__name__
    return sorted({int(r.split()[1].rsplit(":", 1)[1], 16) for r in rows})
out["proc_tcp"], out["proc_tcp6"], out["proc_udp"] = ports("tcp"), ports("tcp6"), ports("udp")
out["own"] = own.getsockname()[1]
print(json.dumps(out))
PY
"""


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("mode", ALL)
def test_host_loopback_services_are_out_of_reach(jail_env, listeners, mode, network):
    check_outbound(jail_env, listeners, mode, network)


@pytest.mark.parametrize("mode", ("isolated", "verified"))
def test_strict_modes_keep_host_services_out_by_default(jail_env, listeners, mode):
    """With no --network and no config, a strict jail is proxied: the host's loopback services
    (TCP, UDP, v4 and v6) are out of reach, and so is anything it listens on for host clients."""
    check_outbound(jail_env, listeners, mode, "default")
    jail_env.run("stop", "j", check=True)
    for f in jail_env.ws.glob(".attack*"):  # the next jail numbers its attacks from 1 again
        f.unlink()
    check_inbound(jail_env, mode, "default", name="k")


def check_outbound(jail_env, listeners, mode, network):
    """A database, dev server or control plane on the host's 127.0.0.1 / ::1 (TCP and UDP) and an
    abstract unix name: neither none nor proxy reaches them; host does (the control). /proc/net shows only
    the jail's sockets under none and proxy."""
    jail = start(jail_env, mode, network)
    network = jail.info["network"]
    out = json.loads(jail.sh(OUTBOUND % dict(listeners.ports, token=listeners.token, wait=WAIT,
                                             abstract=listeners.abstract), timeout=30))
    time.sleep(0.3)  # let a datagram that did arrive be recorded
    host = listeners.ports
    assert out["own"] in out["proc_tcp"], out  # the table is readable and shows the jail's own socket
    if network != "host":
        for kind in ("tcp4", "tcp6", "abstract"):
            assert out[kind] != "ok", (kind, out)
        assert listeners.contacts == [], listeners.contacts
        assert host["tcp4"] not in out["proc_tcp"] and host["tcp6"] not in out["proc_tcp6"], out
        assert host["udp4"] not in out["proc_udp"], out
    else:
        assert out["tcp4"] == out["tcp6"] == "ok", out
        assert {"tcp4", "tcp6", "udp4", "udp6"} <= set(listeners.contacts), listeners.contacts
        assert host["tcp4"] in out["proc_tcp"] and host["tcp6"] in out["proc_tcp6"], out
        if mode == "compatibility":  # strict modes: Landlock scoping keeps abstract names out anyway
            assert out["abstract"] == "ok" and "abstract" in listeners.contacts, out


INBOUND = """\
python3 - <<'PY' &
import os, socket
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(4)
u = socket.socket(socket.AF_UNIX); u.bind("\\0" + %(abstract)r); u.listen(4)
for s in (t, u):
    s.settimeout(0.2)
open(".jail-port.tmp", "w").write(str(t.getsockname()[1]))
os.rename(".jail-port.tmp", ".jail-port")
import time
end = time.monotonic() + 15
while time.monotonic() < end:
    for s in (t, u):
        try:
            c, _ = s.accept()
        except OSError:
            continue
        c.sendall(%(token)r.encode()); c.close()
PY
while [ ! -e .jail-port ]; do sleep 0.05; done
echo started
"""


def _hello(fam, addr, token: str) -> bool:
    """True when what answers at addr is the jail's listener (it sends the token): another host
    service on the same port number does not count."""
    s = socket.socket(fam)
    s.settimeout(WAIT)
    try:
        s.connect(addr)
        return s.recv(64) == token.encode()
    except OSError:
        return False
    finally:
        s.close()


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("mode", ALL)
def test_jail_listeners_are_not_host_services(jail_env, mode, network):
    """The jail cannot listen where host clients connect: a loopback port or an abstract unix
    name it binds is its own under none and proxy; under host a host client reaches it (the control)."""
    check_inbound(jail_env, mode, network)


def check_inbound(jail_env, mode, network, name="j"):
    token, abstract = secrets.token_hex(8), f"tj-net-jail-{secrets.token_hex(8)}"
    jail = start(jail_env, mode, network, name=name)
    network = jail.info["network"]
    assert jail.sh(INBOUND % dict(token=token, abstract=abstract), timeout=30).strip() == "started"
    port = int((jail.ws / ".jail-port").read_text())
    reached = {
        "tcp4": _hello(socket.AF_INET, ("127.0.0.1", port), token),
        "abstract": _hello(socket.AF_UNIX, "\0" + abstract, token),
    }
    assert reached == dict.fromkeys(reached, network == "host"), reached


def test_resume_refuses_a_changed_network(jail_env):
    """The network is part of the policy: a jail started with none is never resumed with host
    (config, environment or stored request changed), and resumes with none when nothing changed."""
    env = jail_env
    start(env, "isolated", "none")
    env.kill()  # the pane is gone; resume relaunches it
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('[network]\nisolated = "none"\n')
    # A start cannot ask for more than the operator allows.
    proc = env.run("start", "shell", "--mode", "isolated", "--network", "host", "--name", "w", "--detach")
    assert proc.returncode == 4 and "network host is not allowed" in proc.stderr, proc.stderr
    assert f'`isolated = "host"` under [network] in {env.config_dir / "config.toml"}' in proc.stderr, proc.stderr
    # The stored request now asks for host (wider than the none the session runs with).
    db = sqlite3.connect(env.store)
    req = json.loads(db.execute("SELECT request FROM sessions WHERE name='j'").fetchone()[0])
    db.execute("UPDATE sessions SET request=? WHERE name='j'", (json.dumps(dict(req, network="host")),))
    db.commit()
    proc = env.run("resume", "j", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["network"], proc.stderr
    assert "network" in proc.stderr and "Traceback" not in proc.stderr
    db.execute("UPDATE sessions SET request=? WHERE name='j'", (json.dumps(req),))
    db.commit()
    # Unchanged: it resumes, and the relaunched jail still has no host loopback.
    (env.config_dir / "config.toml").unlink()
    info = env.json("resume", "j", "--detach")
    assert info["network"] == "none"
    jail = Jail.__new__(Jail)  # the resumed pane, attacked as Jail does
    jail.env, jail.name, jail.ws, jail.n = env, "j", env.ws.resolve(), 10
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        got = jail.sh(f"python3 -c \"import socket; s=socket.socket(); s.settimeout(2); "
                      f"print(s.connect_ex(('127.0.0.1', {port})))\"").strip()
    assert got != "0", got


def test_a_strict_session_of_the_host_default_refuses_resume_and_says_what_to_do(jail_env):
    """A strict session started while its mode's network was host (the old default; here: the
    config line) is never resumed under another network silently: refused (3, reason network),
    and the message names the config line that keeps host and the flag that moves it to proxy.
    With the line back, it resumes as it was."""
    env = jail_env
    allow_host(env, "isolated")
    jail = Jail(env, "isolated")  # no --network: the mode's default, host then
    assert jail.info["network"] == "host"
    env.kill()
    (env.config_dir / "config.toml").unlink()  # today's default: proxy
    proc = env.run("resume", "j", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["network"], proc.stderr
    assert "it ran with network host; today it would get network proxy" in proc.stderr, proc.stderr
    assert f'`isolated = "host"` under [network] in {env.config_dir / "config.toml"}' in proc.stderr, proc.stderr
    assert "tmuxjail resume j --accept-changes" in proc.stderr and "Traceback" not in proc.stderr
    allow_host(env, "isolated")
    assert env.json("resume", "j", "--detach")["network"] == "host"


@pytest.mark.parametrize("change", ["config", "environment"])
def test_resume_refuses_a_narrowed_network(jail_env, change):
    """Started with host; the operator config or TMUXJAIL_NETWORK now says none: refused (3)."""
    env = jail_env
    start(env, "compatibility", "host")
    env.kill()
    extra = None
    if change == "config":
        env.config_dir.mkdir(parents=True, exist_ok=True)
        (env.config_dir / "config.toml").write_text('[network]\ncompatibility = "none"\n')
    else:
        extra = {"TMUXJAIL_NETWORK": "none"}
    proc = env.run("resume", "j", "--detach", "--json", env_extra=extra)
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["network"], proc.stderr


def test_show_and_list_name_the_network(jail_env):
    env = jail_env
    start(env, "isolated", "none")
    assert env.json("show", "j")["policy"]["network"] == "none"
    assert "network: none" in env.run("show", "j", check=True).stdout
    assert [r["network"] for r in env.json("list")] == ["none"]
    proc = env.run("start", "shell", "--mode", "isolated", "--network", "bogus", "--name", "p", "--detach")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_each_pane_of_a_none_session_has_its_own_loopback(jail_env):
    """`tmuxjail shell` opens a new bwrap from the same policy: under none it gets a network
    namespace of its own too, so it does not share the agent pane's loopback (README says so)."""
    env = jail_env
    token, abstract = secrets.token_hex(8), f"tj-net-jail-{secrets.token_hex(8)}"
    jail = start(env, "isolated", "none")
    assert jail.sh(INBOUND % dict(token=token, abstract=abstract), timeout=30).strip() == "started"
    port = int((jail.ws / ".jail-port").read_text())
    shell = env.json("shell", "j", "--detach")["shell_pane"]
    other = Jail.__new__(Jail)
    other.env, other.name, other.ws, other.n, other.target = env, "j", jail.ws, 20, shell
    time.sleep(0.5)  # the login shell is ready for keys
    got = other.sh(f"python3 -c \"import socket; s=socket.socket(); s.settimeout(2); "
                   f"print(s.connect_ex(('127.0.0.1', {port})))\"").strip()
    assert got not in ("", "0"), got
