"""The proxy's records cannot be silenced (issue 27.3), and plain HTTP inside a proxied jail
(issue 28.5), attacked from inside real jailed panes.

Every name used is a `.test` name: mapped by the test config's [network.resolve] to a listener on
this machine's loopback that the test runs (test_upstream), or never looked up (special-use). No
DNS query is made and nothing leaves the machine."""

from __future__ import annotations

import http.server
import json
import secrets
import shutil
import threading

import pytest
from conftest import wait_until
from test_escapes import Jail
from test_proxy import WAIT, Upstream, attack, configure, start

from tmuxjail.net import record as netrecord

pytestmark = pytest.mark.adversarial
STRICT = ("isolated", "verified")
FLOOD = 14000  # junk CONNECTs of ~330-byte rows: more than twice ROTATE_AT (2 MiB), so rows are dropped

FLOOD_SCRIPT = """\
python3 - <<'PY'
import json, socket, threading
N, long = %(n)d, ".".join(["a" * 55] * 4)
out = {"refused": 0, "errors": 0}
def one(data):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    except OSError:
        out["errors"] += 1
        return
    try:
        s.sendall(data)
        if s.recv(64).startswith(b"HTTP/1.1 403"):
            out["refused"] += 1
    except OSError:
        out["errors"] += 1
    finally:
        s.close()
def worker(k):
    for i in range(k, N, 8):
        one(("CONNECT x%%d.%%s.test:443 HTTP/1.1\\r\\n\\r\\n" %% (i, long)).encode())
ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
for t in ts: t.start()
for t in ts: t.join()
for i in range(40):  # requests that do not parse
    one(b"GARBAGE\\r\\n\\r\\n")
idle = []  # more connections than the proxy has slots, held open without a request: straight to
for i in range(300):  # its listener on the jail's loopback
    try:
        idle.append(socket.create_connection(("127.0.0.1", 3128)))
    except OSError:
        pass
import time; time.sleep(2)
for s in idle: s.close()
time.sleep(1)
print(json.dumps(out))
PY
"""


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.close()


def show_net(env, name="j") -> tuple[dict, str]:
    rep = env.json("show", name, "--network")
    return rep, env.run("show", name, "--network", check=True).stdout


@pytest.mark.parametrize("mode", STRICT)
def test_after_a_flood_the_next_allowed_and_denied_connections_are_shown(jail_env, upstream, mode):
    """A jail floods its proxy (tens of thousands of denied CONNECTs, requests that do not parse,
    more connections than there are slots), then makes one allowed and one denied connection.
    From outside, as the same user: `show --network` has both (rows and per-destination
    counters), says that rows were dropped, counts the parse failures and the slot refusals; the
    log's files stay bounded; `list` marks the session denied(N)."""
    env = jail_env
    configure(env)
    jail = start(env, mode)
    out = json.loads(jail.sh(FLOOD_SCRIPT % dict(n=FLOOD), timeout=900))
    assert out["refused"] >= FLOOD - 100, out  # the flood was refused (the control)
    allowed = f"{'api.github.com' if mode == 'verified' else 'up.test'}:{upstream.port}"
    denied = "after-the-flood.test:443"
    got = attack(jail, [allowed, denied])
    assert got[allowed][1] == upstream.token and got[denied][0] == "HTTP/1.1 403 Forbidden", got
    net = env.state_dir / "net" / jail.info["id"]
    assert wait_until(lambda: any(json.loads(p.read_text().split("\n")[0]).get("allowed") for p in
                                  net.glob("counters-*.json")), timeout=20)
    wait_until(lambda: any(d["bytes"] for d in show_net(env)[0]["by_destination"]), timeout=10)
    rep, text = show_net(env)
    host_allowed, host_denied = allowed.split(":")[0], denied.split(":")[0]
    decisions = [(r["host"], r["decision"]) for r in rep["destinations"]]  # (aggregated rows may follow)
    assert decisions[-2:] == [(host_allowed, "allowed"), (host_denied, "denied")], decisions[-5:]
    assert rep["dropped"]["rotated"] > 0, rep["dropped"]
    first = rep["by_destination"][0]
    assert (first["host"], first["allowed"]) == (host_allowed, 1) and first["bytes"] > 0, first
    t = rep["totals"]
    assert t["denied"] >= FLOOD + 1 and t["allowed"] == 1 and t["malformed"] >= 40 and t["no-slot"] >= 1, t
    assert "older rows dropped" in text and f"{host_allowed}:{upstream.port}  1 allowed" in text, text
    assert f"denied   {host_denied}:443" in text, text
    malformed = [r for r in rep["rows"] if r["decision"] == "malformed"]
    assert sum(r["count"] for r in malformed) >= 40 and len(malformed) < 40, malformed  # aggregated
    assert any(r["decision"] == "no-slot" for r in rep["rows"]), [r for r in rep["rows"] if "count" in r]
    size = sum(p.stat().st_size for p in net.glob(netrecord.LOG_NAME + "*"))
    assert size <= 2 * netrecord.ROTATE_AT + 64 * 1024, size
    listed = env.run("list", check=True).stdout
    assert f"!denied({t['denied']})" in listed, listed


def test_the_fix_shown_for_a_denied_destination_works(jail_env, upstream):
    """`show --network` prints, for a destination the allowlist refused, the command that allows
    it; run as printed, the new session reaches it. One outside the operator's ceiling is said to
    be refused by it."""
    env = jail_env
    configure(env, extra={"up2.test": ("127.0.0.1", "")})
    text = (env.config_dir / "config.toml").read_text()
    text = text.replace('"up2.test" = "127.0.0.1"', '"up2.test" = { address = "127.0.0.1", test_upstream = true }')
    (env.config_dir / "config.toml").write_text(
        '[network.allow_domains]\nisolated = ["up.test", "up2.test"]\n' + text)
    jail = start(env, "isolated", extra=("--allow-domain", "up.test"))
    got = attack(jail, [f"up2.test:{upstream.port}", "zzz.test:443"])
    assert all(v[0] == "HTTP/1.1 403 Forbidden" for k, v in got.items() if k != "env"), got
    assert wait_until(lambda: len(show_net(env)[0]["by_destination"]) == 2, timeout=20)
    rep, text = show_net(env)
    fixes = {d["host"]: d.get("fix", "") for d in rep["by_destination"]}
    assert "operator's ceiling refuses it" in fixes["zzz.test"], fixes
    listed = [r for r in env.json("list") if r["name"] == "j"]
    assert listed[0].get("denied") == 2 and "!denied(2)" in env.run("list", check=True).stdout, listed
    cmd = fixes["up2.test"].split(": ", 1)[1]
    assert cmd.startswith("tmuxjail start shell --mode isolated --network proxy") and f"to allow it: {fixes['up2.test']}" in text
    words = cmd.split()[1:]
    env.run(*words, "--name", "k", "--detach", check=True)
    k = Jail.__new__(Jail)
    k.env, k.mode, k.name, k.n = env, "isolated", "k", 100  # (its own script names in the shared workspace)
    k.info = env.json("show", "k")
    k.ws = jail.ws
    assert attack(k, [f"up2.test:{upstream.port}"])[f"up2.test:{upstream.port}"][1] == upstream.token


class WebUpstream:
    """An HTTP server on this machine's loopback: answers every request with a token, and keeps
    each request's line and Host header."""

    def __init__(self):
        self.token, self.seen = secrets.token_hex(8), []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.seen.append((self.requestline, self.headers.get("Host"), self.headers.get("Proxy-Authorization")))
                body = outer.token.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


PLAIN = """\
python3 - <<'PY'
import http.server, json, os, subprocess, threading, urllib.error, urllib.request
out = {"env": [os.environ.get("NO_PROXY"), os.environ.get("no_proxy"), os.environ.get("http_proxy")]}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "5"); self.end_headers(); self.wfile.write(b"local")
    def log_message(self, *a): pass
local = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=local.serve_forever, daemon=True).start()
lp = local.server_address[1]
def py(url):
    try:
        with urllib.request.urlopen(url, timeout=%(wait)s) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode(errors="replace")[:200]]
    except OSError as e:
        return ["error", repr(e)[:200]]
def curl(url):
    p = subprocess.run(["curl", "-s", "-m", "%(wait)s", "-w", " %%{http_code}", url], capture_output=True, text=True)
    return p.stdout.rsplit(" ", 1) if p.returncode == 0 else ["error", str(p.returncode)]
for name in ("127.0.0.1", "localhost"):
    out["py-local-" + name] = py("http://%%s:%%d/" %% (name, lp))
    out["curl-local-" + name] = curl("http://%%s:%%d/" %% (name, lp))
out["py-allowed"] = py("http://web.test:%(port)d/py?x=1")
out["curl-allowed"] = curl("http://web.test:%(port)d/curl")
out["py-denied"] = py("http://other.test:%(port)d/")
out["curl-denied"] = curl("http://other.test:%(port)d/")
out["py-loop"] = py("http://self.test:%(port)d/")
print(json.dumps(out))
PY
"""


@pytest.mark.parametrize("mode", STRICT)
def test_plain_http_inside_a_proxied_jail(jail_env, mode):
    """Inside a proxied jail: urllib and curl reach a server on the jail's own loopback (NO_PROXY
    names it); a plain-HTTP request to an allowed name is forwarded to its upstream (origin form,
    Host the checked name) and logged; to a name outside the allowlist, or one that resolves to a
    refused address, it is refused with a 403 and logged, and its upstream is never contacted."""
    env = jail_env
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (scripts/test.sh installs it)")
    web = WebUpstream()
    try:
        configure(env, extra={"web.test": ("127.0.0.1", ""), "other.test": ("127.0.0.1", "")})
        cfg = (env.config_dir / "config.toml").read_text()
        for n in ("web.test", "other.test"):
            cfg = cfg.replace(f'"{n}" = "127.0.0.1"', f'"{n}" = {{ address = "127.0.0.1", test_upstream = true }}')
        (env.config_dir / "config.toml").write_text(cfg)
        domains = ("--allow-domain", "web.test", "--allow-domain", "self.test")
        if mode == "verified":
            env.run("approve", "shell", "--yes", "--capability", "github-cli", *domains, check=True)
        jail = Jail(env, mode, extra=("--network", "proxy", *domains,
                                      *(("--capability", "github-cli") if mode == "verified" else ())))
        out = json.loads(jail.sh(PLAIN % dict(wait=WAIT, port=web.port), timeout=90))
        assert out["env"][0] == out["env"][1] and "127.0.0.1" in out["env"][0] and "localhost" in out["env"][0], out
        for k in ("py-local-127.0.0.1", "py-local-localhost"):
            assert out[k] == [200, "local"], (k, out)
        for k in ("curl-local-127.0.0.1", "curl-local-localhost"):
            assert out[k] == ["local", "200"], (k, out)
        assert out["py-allowed"] == [200, web.token] and out["curl-allowed"] == [web.token, "200"], out
        assert out["py-denied"][0] == 403 and "rule allowlist" in out["py-denied"][1], out
        assert out["curl-denied"][1] == "403", out
        assert out["py-loop"][0] == 403 and "rule own-address" in out["py-loop"][1], out
        lines = sorted(s[0] for s in web.seen)
        assert lines == ["GET /curl HTTP/1.1", "GET /py?x=1 HTTP/1.1"], web.seen
        assert {s[1] for s in web.seen} == {f"web.test:{web.port}"} and {s[2] for s in web.seen} == {None}
        rep = env.json("show", "j", "--network")
        got = {(r["host"], r["decision"], r["rule"]) for r in rep["destinations"]}
        assert {("web.test", "allowed", "web.test"), ("other.test", "denied", "allowlist"),
                ("self.test", "denied", "own-address")} <= got, got
        assert not any(r["host"] in ("127.0.0.1", "localhost") for r in rep["destinations"]), rep["destinations"]
    finally:
        web.close()
