"""The egress proxy (issue 15), attacked from inside real jailed panes.

A jail with `--network proxy` has a network namespace of its own whose only way out is the
session's CONNECT proxy. Test upstreams listen on this machine's loopback and are reached only
through names the operator config maps to them ([network.resolve], marked test_upstream); every
other name used here is mapped too, to an address in a refused range, or is a literal form. No
name is ever looked up in DNS, and nothing is sent to an address that is not loopback or in a
namespace the test made."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import descendants, wait_until
from test_escapes import Jail

from tmuxjail.net import inside

pytestmark = pytest.mark.adversarial
STRICT = ("isolated", "verified")
WAIT = 5.0

# name -> (address, rule the proxy must name). Unmarked entries are range-checked like DNS answers.
# Only addresses of this machine's loopback: if a guard were gone, the proxy would connect to them,
# and nothing may leave the machine (the other ranges: tests/unit/test_netproxy.py, and the LAN
# test below, whose address lives behind a veth the test makes).
REFUSED_NAMES = {
    "self.test": ("127.0.0.1", "own-address"),
    "mapped.test": ("::ffff:127.0.0.1", "own-address"),
    "loop.test": ("127.0.0.2", "loopback"),
    "loop6.test": ("::ffff:127.0.0.3", "loopback"),
    "zero.test": ("0.0.0.0", "unspecified"),
}
# Literal forms of this machine's loopback: refused before any lookup.
LITERALS = ["127.0.0.1", "2130706433", "0x7f.1", "127.1", "0177.0.0.1", "0x7f000001", "[::1]",
            "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "0.0.0.0", "[::]"]


class Upstream:
    """A TCP service on this machine's loopback that answers with a token and counts contacts."""

    def __init__(self, family=socket.AF_INET, addr="127.0.0.1", netns: str | None = None):
        self.token = secrets.token_hex(8)
        self.contacts = 0
        self.sock = socket.socket(family)
        self.sock.bind((addr, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while self.sock.fileno() != -1:
            try:
                c, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.contacts += 1
            try:
                c.sendall(self.token.encode())
            except OSError:
                pass
            c.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.close()


def configure(env, extra: dict | None = None) -> None:
    lines = ["[network.resolve]",
             '"up.test" = { address = "127.0.0.1", test_upstream = true }',
             '"api.github.com" = { address = "127.0.0.1", test_upstream = true }']
    lines += [f'"{n}" = "{a}"' for n, (a, _) in {**REFUSED_NAMES, **(extra or {})}.items()]
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("\n".join(lines) + "\n")


def start(env, mode, name="j", extra=(), default=False) -> Jail:
    """A proxied jail: `--network proxy`, or (default=True) the mode's default network."""
    caps = ("--capability", "github-cli") if mode == "verified" else ()
    if mode == "verified":
        env.run("approve", "shell", "--yes", *caps, check=True)
    jail = Jail(env, mode, name=name, extra=(*(() if default else ("--network", "proxy")), *caps, *extra))
    assert jail.info["network"] == "proxy"
    return jail


CONNECT = """\
python3 - <<'PY'
import json, os, socket
out = {"env": {k: os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy")}}
def connect(target):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=%(wait)s)
    try:
        s.sendall(("CONNECT %%s HTTP/1.1\\r\\nHost: %%s\\r\\n\\r\\n" %% (target, target)).encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
            if data.startswith(b"HTTP/1.1 200") and b"\\r\\n\\r\\n" in data and len(data.split(b"\\r\\n\\r\\n", 1)[1]) >= 16:
                break
        head, _, body = data.partition(b"\\r\\n\\r\\n")
        return [head.split(b"\\r\\n")[0].decode(), body.decode(errors="replace").strip()]
    except OSError as e:
        return ["error", type(e).__name__]
    finally:
        s.close()
for t in %(targets)r:
    out[t] = connect(t)
print(json.dumps(out))
PY
"""


def attack(jail: Jail, targets: list[str]) -> dict:
    return json.loads(jail.sh(CONNECT % dict(wait=WAIT, targets=targets), timeout=60))


def log_rows(env, jail: Jail) -> list[dict]:
    sid = jail.info["id"]
    path = env.state_dir / "net" / sid / "network.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("mode", STRICT)
def test_only_allowed_names_reach_an_upstream(jail_env, upstream, mode):
    """The allowed name reaches its upstream through the proxy (the control: the path works);
    a name outside the session's allowlist is refused before any lookup, with a 403 that names
    the rule and the flag that would allow it; every decision is in the session's log."""
    env = jail_env
    configure(env)
    jail = start(env, mode)
    allowed = "api.github.com" if mode == "verified" else "up.test"
    outside = "up.test" if mode == "verified" else None
    targets = [f"{allowed}:{upstream.port}"] + ([f"{outside}:{upstream.port}"] if outside else [])
    out = attack(jail, targets)
    assert out["env"]["HTTPS_PROXY"] == out["env"]["https_proxy"] == "http://127.0.0.1:3128", out
    assert out["env"]["NO_PROXY"] == out["env"]["no_proxy"] == inside.LOOPBACK, out  # the jail's own loopback
    assert out[targets[0]] == ["HTTP/1.1 200 Connection established", upstream.token], out
    if outside:
        status, body = out[targets[1]]
        assert status == "HTTP/1.1 403 Forbidden" and "rule allowlist" in body and "--allow-domain" in body, out
    assert upstream.contacts == 1
    rows = log_rows(env, jail)
    assert {(r["host"], r["decision"], r["rule"]) for r in rows} >= {(allowed, "allowed", allowed if mode == "verified" else "*")}
    if outside:
        assert ("up.test", "denied", "allowlist") in {(r["host"], r["decision"], r["rule"]) for r in rows}
    assert all(set(r) == {"time", "host", "port", "address", "decision", "rule"} for r in rows), rows
    shown = env.json("show", "j", "--network")
    assert shown["network"] == "proxy" and shown["destinations"] == rows, shown
    text = env.run("show", "j", "--network", check=True).stdout
    assert f"allowed  {allowed}:{upstream.port}  127.0.0.1" in text, text


@pytest.mark.parametrize("mode", STRICT)
def test_refused_names_and_literal_forms(jail_env, upstream, mode):
    """CONNECT to every literal spelling of this machine's loopback, to localhost, and to names
    that resolve into each refused range: all 403, each naming its rule; the upstream listening
    on 127.0.0.1 is never contacted."""
    env = jail_env
    configure(env)
    jail = start(env, mode)
    names = list(REFUSED_NAMES) if mode == "isolated" else []  # verified: the allowlist refuses them first
    targets = [f"{t}:{upstream.port}" for t in (*LITERALS, "localhost", "LocalHost.", "x.localhost", "nomap.test", *names)]
    out = attack(jail, targets)
    for t in targets:
        assert out[t][0] == "HTTP/1.1 403 Forbidden", (t, out[t])
    for lit in LITERALS:
        assert "rule literal-address" in out[f"{lit}:{upstream.port}"][1], (lit, out)
    for n in ("localhost", "LocalHost.", "x.localhost"):
        assert "rule localhost" in out[f"{n}:{upstream.port}"][1], (n, out)
    for n in names:
        assert f"rule {REFUSED_NAMES[n][1]}" in out[f"{n}:{upstream.port}"][1], (n, out)
    if mode == "isolated":  # a .test name nobody mapped is never looked up (tests make no DNS query)
        assert "rule special-use" in out[f"nomap.test:{upstream.port}"][1], out
    assert upstream.contacts == 0
    assert len([r for r in log_rows(env, jail) if r["decision"] == "denied"]) == len(targets)


BAD_REQUESTS = """\
python3 - <<'PY'
import json, socket
out = {}
def send(key, data, close=False):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=15)
    try:
        s.sendall(data)
        if close:
            s.shutdown(socket.SHUT_WR)
        out[key] = s.recv(200).split(b"\\r\\n")[0].decode(errors="replace")
    except OSError as e:
        out[key] = type(e).__name__
    finally:
        s.close()
send("get", b"GET / HTTP/1.1\\r\\nHost: up.test:%(port)d\\r\\n\\r\\n")
send("https", b"GET https://up.test:%(port)d/ HTTP/1.1\\r\\nHost: up.test\\r\\n\\r\\n")
send("method", b"g3t http://up.test:%(port)d/ HTTP/1.1\\r\\nHost: up.test\\r\\n\\r\\n")
send("huge", b"CONNECT up.test:%(port)d HTTP/1.1\\r\\n" + b"X: " + b"a" * 20000 + b"\\r\\n\\r\\n")
send("binary", b"CONNECT up.test:%(port)d HTTP/1.1\\r\\nX: \\x00\\xff\\r\\n\\r\\n")
send("noport", b"CONNECT up.test HTTP/1.1\\r\\n\\r\\n")
send("http2", b"CONNECT up.test:%(port)d HTTP/2.0\\r\\n\\r\\n")
send("userinfo", b"CONNECT a@up.test:%(port)d HTTP/1.1\\r\\n\\r\\n")
send("port0", b"CONNECT up.test:0 HTTP/1.1\\r\\n\\r\\n")
print(json.dumps(out))
PY
"""


def test_requests_other_than_a_plain_connect_are_refused(jail_env, upstream):
    """The proxy parses bytes from the jail outside it: only `CONNECT host:port HTTP/1.x`, or a
    plain-HTTP request in absolute form (test_proxy_records.py), with a bounded, printable head;
    nothing is followed, and the upstream is never contacted."""
    env = jail_env
    configure(env)
    jail = start(env, "isolated")
    out = json.loads(jail.sh(BAD_REQUESTS % dict(port=upstream.port), timeout=60))
    assert out["get"].startswith("HTTP/1.1 400") and out["https"].startswith("HTTP/1.1 400"), out
    assert out["method"].startswith("HTTP/1.1 405"), out
    assert out["huge"].startswith("HTTP/1.1 431"), out
    for k in ("binary", "noport", "http2"):
        assert out[k].startswith("HTTP/1.1 400"), (k, out)
    assert out["userinfo"].startswith("HTTP/1.1 403") and out["port0"].startswith("HTTP/1.1 403"), out
    assert upstream.contacts == 0


NO_WAY_OUT = """\
python3 - <<'PY'
import json, socket
out = {}
def tcp(addr, fam):
    s = socket.socket(fam)
    s.settimeout(%(wait)s)
    try:
        s.connect(addr)
        return "ok"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
def udp_route(addr, fam):
    # A UDP connect sends nothing: it only asks for a route (so no packet leaves, even when the
    # guard is gone).
    s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.connect(addr)
        return "route"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
out["direct_upstream"] = tcp(("127.0.0.1", %(port)d), socket.AF_INET)
out["dns_udp"] = udp_route(("203.0.113.53", 53), socket.AF_INET)
out["dns_udp6"] = udp_route(("2001:db8::53", 53), socket.AF_INET6)
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")] if __import__("os").path.exists("/etc/resolv.conf") else []
out["resolv"] = [udp_route((a, 53), socket.AF_INET6 if ":" in a else socket.AF_INET) for a in ns if not a.startswith("127.")]
print(json.dumps(out))
PY
"""


@pytest.mark.parametrize("mode", STRICT)
def test_no_way_out_but_the_proxy(jail_env, upstream, mode):
    """A client that ignores the proxy variables fails closed: the host's loopback upstream is
    not the jail's loopback, there is no route anywhere (no DNS server, no UDP), and names do not
    resolve inside (no resolver is reachable)."""
    env = jail_env
    configure(env)
    jail = start(env, mode)
    out = json.loads(jail.sh(NO_WAY_OUT % dict(wait=WAIT, port=upstream.port), timeout=60))
    assert out["direct_upstream"] != "ok", out
    assert out["dns_udp"] != "route" and out["dns_udp6"] != "route", out
    assert "route" not in out["resolv"], out
    assert upstream.contacts == 0


def _launched(env, jail_name: str, marker: bytes, python: bool = False) -> list[int]:
    pane_pid = int(env.tmux("display-message", "-p", "-t", f"={jail_name}:", "#{pane_pid}").strip())
    out = []
    for pid in descendants(pane_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmd and (not python or b"python" in os.path.basename(cmd.split(b"\0")[0])):
            out.append(pid)
    return out


def _proxies(env, jail_name: str) -> list[int]:
    """Pids of the session's proxy processes: the pane's children that run the launcher's code."""
    return _launched(env, jail_name, b"tmuxjail.pane.launch")


def _alive(pids) -> list[int]:
    out = []
    for p in pids:
        try:
            if Path(f"/proc/{p}/stat").read_text().split(") ", 1)[1][0] != "Z":
                out.append(p)
        except OSError:
            pass
    return out


@pytest.mark.parametrize("end", ["stop", "kill-server", "cli-exit"])
@pytest.mark.parametrize("mode", STRICT)
def test_the_proxy_lives_exactly_as_long_as_the_jail(jail_env, upstream, mode, end):
    """Nothing is left running and nothing is left behind: a strict jail with its mode's default
    network (proxy) has one proxy, outside (listening on the jail's own loopback; nothing of it
    runs inside), and it dies with its pane on stop, on kill-server, and when the CLI exits by
    itself; the proxy's socket goes with it."""
    env = jail_env
    configure(env)
    jail = start(env, mode, default=True)
    assert jail.info["network"] == "proxy"
    proxies = _proxies(env, "j")
    assert len(proxies) == 1, proxies
    net = env.state_dir / "net" / jail.info["id"]
    assert len(list(net.glob("proxy-*.sock"))) == 1, list(net.iterdir())
    target = f"{'api.github.com' if mode == 'verified' else 'up.test'}:{upstream.port}"
    assert attack(jail, [target])[target][1] == upstream.token
    if end == "stop":
        env.run("stop", "j", check=True)
    elif end == "kill-server":
        env.tmux("kill-server", check=False)
    else:
        env.tmux("send-keys", "-t", "=j:", "exit", "Enter")
    everything = proxies
    assert wait_until(lambda: not _alive(everything), timeout=20), (end, everything, [Path(f"/proc/{p}/status").read_text()[:300] for p in _alive(everything)])
    if end == "stop":  # stop returns once the socket is gone
        assert not list(net.glob("proxy-*.sock"))
    assert wait_until(lambda: not list(net.glob("proxy-*.sock")), timeout=10), list(net.iterdir())


def test_a_killed_proxys_socket_is_removed_on_stop_prune_and_next_start(jail_env):
    """A proxy killed outright (SIGKILL: no chance to clean up) leaves its socket in state/net/;
    stop removes it, and so do prune and the session's next proxy (here: a dead pid's socket
    planted in place)."""
    env = jail_env
    jail = start(env, "isolated", default=True)
    net = env.state_dir / "net" / jail.info["id"]
    (proxy,) = _proxies(env, "j")
    (sock,) = net.glob("proxy-*.sock")  # named after the jail's bwrap, the proxy's parent
    os.kill(proxy, 9)
    assert wait_until(lambda: not _alive([proxy]), timeout=10)
    assert sock.exists()  # SIGKILL: nothing removed it
    env.run("stop", "j", check=True)
    assert not list(net.glob("proxy-*.sock")), list(net.iterdir())
    for then in ("resume", "prune"):
        probe = subprocess.Popen(["true"])
        probe.wait()
        dead = probe.pid  # a pid that no longer runs
        (net / f"proxy-{dead}.sock").write_bytes(b"")
        if then == "resume":
            env.run("resume", "j", "--detach", check=True)
            assert _proxies(env, "j") and not (net / f"proxy-{dead}.sock").exists(), list(net.iterdir())
            env.run("stop", "j", check=True)
        else:
            env.run("prune", check=True)
    assert not (net / f"proxy-{dead}.sock").exists()


OTHER = """\
python3 - <<'PY'
import json, os, socket
out = {}
for p in %(paths)r:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p)
        out[p] = "connected"
    except OSError as e:
        out[p] = type(e).__name__
    finally:
        s.close()
out["own"] = sorted(os.listdir("/run/tmuxjail")) if os.path.isdir("/run/tmuxjail") else None
print(json.dumps(out))
PY
"""


@pytest.mark.parametrize("mode", ("compatibility", *STRICT))
def test_another_sessions_proxy_is_out_of_reach(jail_env, upstream, mode):
    """Each pane's proxy socket is bound into its own jail only; another session's socket (in
    tmuxjail's state, hidden from every jail) cannot be reached, neither by its host path nor
    through the session directory."""
    env = jail_env
    configure(env)
    other = start(env, "isolated", name="other")
    mine = start(env, mode, name="j")
    their_dir = env.state_dir / "net" / other.info["id"]
    socks = [str(p) for p in their_dir.glob("proxy-*.sock")]
    assert socks, list(their_dir.iterdir())
    out = json.loads(mine.sh(OTHER % dict(paths=socks), timeout=60))
    assert all(out[p] != "connected" for p in socks), out
    if mode != "compatibility":
        assert out["own"] is None, out  # nothing of the proxy is bound into the jail


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def lan():
    """A LAN-like host: a network namespace this test creates, joined to this machine by a veth
    pair on a /30 of 10.213.x (root only: unprivileged users cannot add links to the host)."""
    if os.getuid() != 0:
        pytest.skip("making a network namespace reachable from the host needs root (ip netns, veth)")
    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) is not installed")
    tag = secrets.token_hex(3)
    ns, a, b = f"tjp-{tag}", f"tjpa{tag}", f"tjpb{tag}"
    octet = 1 + int(tag, 16) % 250
    host_ip, lan_ip = f"10.213.{octet}.1", f"10.213.{octet}.2"
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        _ip("link", "set", b, "netns", ns)
        _ip("addr", "add", f"{host_ip}/30", "dev", a)
        _ip("link", "set", a, "up")
        _ip("-n", ns, "addr", "add", f"{lan_ip}/30", "dev", b)
        _ip("-n", ns, "link", "set", b, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        token = secrets.token_hex(8)
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, "python3", "-c",
             "import socket,sys\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             f"s.bind(('{lan_ip}', 8080)); s.listen(8); print('up', flush=True)\n"
             f"while True:\n c,_=s.accept(); c.sendall(b'{token}'); c.close()\n"],
            stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "up"
        # The control: from this machine the LAN host answers directly (so a refusal means something).
        with socket.create_connection((lan_ip, 8080), timeout=5) as s:
            assert s.recv(64).decode() == token
        yield dict(ip=lan_ip, port=8080, token=token)
        server.kill()
        server.wait()
    finally:
        _ip("link", "del", a, check=False)
        _ip("netns", "del", ns, check=False)


@pytest.mark.parametrize("mode", STRICT)
def test_a_lan_host_is_out_of_reach(jail_env, lan, mode):
    """A private address that this machine can reach (a namespace behind a veth): refused by the
    proxy by name (rule private) and as a literal, and unreachable directly from the jail."""
    env = jail_env
    configure(env, extra={"lan.test": (lan["ip"], "private")})
    jail = start(env, mode)
    out = attack(jail, [f"lan.test:{lan['port']}", f"{lan['ip']}:{lan['port']}"])
    if mode == "isolated":
        assert out[f"lan.test:{lan['port']}"][0] == "HTTP/1.1 403 Forbidden", out
        assert "rule private" in out[f"lan.test:{lan['port']}"][1], out
    assert "rule literal-address" in out[f"{lan['ip']}:{lan['port']}"][1], out
    direct = jail.sh(f"python3 -c \"import socket; s=socket.socket(); s.settimeout(3); "
                     f"print(s.connect_ex(('{lan['ip']}', {lan['port']})))\"").strip()
    assert direct not in ("", "0"), direct
    assert lan["token"] not in json.dumps(out)


def test_a_proxy_that_cannot_start_refuses_the_launch(jail_env):
    """Fail closed: when the proxy cannot listen (here state/net is a file, not a directory), the
    launcher refuses to run the jail, with the reason, instead of running it without its proxy."""
    env = jail_env
    env.state_dir.mkdir(parents=True, exist_ok=True)
    (env.state_dir / "net").write_text("not a directory")
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--detach")
    assert proc.returncode != 0, proc.stdout
    assert "cannot start the session's network proxy" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


FIRST = """#!/bin/sh
python3 - > "$PWD/.first.tmp" 2>&1 <<'PY'
import json, socket
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=%(wait)s)
    s.sendall(b"CONNECT %(target)s HTTP/1.1\\r\\nHost: %(target)s\\r\\n\\r\\n")
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    head, _, body = data.partition(b"\\r\\n\\r\\n")
    print(json.dumps([head.split(b"\\r\\n")[0].decode(), body.decode(errors="replace")]))
except OSError as e:
    print(json.dumps(["error", repr(e)]))
PY
mv "$PWD/.first.tmp" "$PWD/.first.out"
exec sleep 600
"""


@pytest.mark.parametrize("mode", STRICT)
def test_a_clis_first_action_goes_out_through_the_proxy(jail_env, upstream, mode):
    """bubblewrap runs the CLI only once the proxy listens on the jail's own loopback
    (--block-fd): a CLI whose very first action is a CONNECT through the proxy, once and without
    a retry, reaches its upstream and reads its answer to the end (both directions and the
    close)."""
    env = jail_env
    configure(env)
    target = f"{'api.github.com' if mode == 'verified' else 'up.test'}:{upstream.port}"
    (env.bin / "codex").write_text(FIRST % dict(wait=WAIT, target=target))
    caps = ("--capability", "github-cli") if mode == "verified" else ()
    if mode == "verified":
        env.run("approve", "codex", "--yes", *caps, check=True)
    info = env.json("start", "codex", "--mode", mode, "--workspace", str(env.ws), "--name", "j", "--detach",
                    "--network", "proxy", *caps)
    out = Path(info["workspace"]) / ".first.out"
    wait_until(out.exists, timeout=20, what="the CLI's first connection")
    assert json.loads(out.read_text()) == ["HTTP/1.1 200 Connection established", upstream.token]
    assert upstream.contacts == 1
