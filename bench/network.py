#!/usr/bin/env python3
"""The egress proxy's costs (issue 15, item 9), side by side in one run:

    .venv/bin/python bench/network.py [--runs N] [--mb 100] [--json FILE]

- start: `tmuxjail start codex --mode isolated --network proxy --detach` until the stand-in CLI
  inside wrote its ready file, interleaved run by run with the same start under `--network host`
  (and `none`, info). Target: proxy ≤ 1.15× host.
- transfer: MB bytes from an upstream on this machine's loopback, read by the same client
  (256 KiB reads) directly, and through the real proxy (netproxy) on a loopback listener, as a
  jail reaches it on its own loopback (the proxy's listener is made in the jail's network
  namespace; the kernel's loopback is the same). Only the data phase is timed.
  Target: proxied throughput ≥ 0.8× direct.
- flood (issue 27.3): the same proxied transfer while a flooder hammers the same proxy (its
  records on: rotating log and counters) with junk CONNECTs to names it denies, from FLOOD_THREADS
  threads, as a jail would to blind the log. Target: flooded throughput >= 0.9x unflooded; the
  flood's rate and the log's size are printed.
- memory: VmRSS of each started session's proxy process.

HOME and XDG dirs point into a temporary directory; private tmux servers (-L) are killed at the
end. Nothing here leaves loopback. Prints PASS/MISS; a MISS never fails the process.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
TJ = Path(PY).parent / "tmuxjail"
READY = ".ready"
CHUNK = 1 << 18
FLOOD_THREADS = 4

FLOODER = r"""
import socket, sys, threading, time
path, stop = sys.argv[1], sys.argv[2]
import os
n = [0] * int(sys.argv[3])
def run(k):
    i = 0
    while not os.path.exists(stop):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.sendall(b"CONNECT junk%d-%d.%s.test:443 HTTP/1.1\r\n\r\n" % (k, i, b"a" * 60))
            s.recv(64)
        except OSError:
            pass
        finally:
            s.close()
        i += 1
        n[k] = i
ts = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(len(n))]
t0 = time.perf_counter()
for t in ts: t.start()
for t in ts: t.join()
print(sum(n) / (time.perf_counter() - t0))
"""

CLIENT = r"""
import socket, sys, time
mode, host, port, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if mode == "direct":
    s = socket.create_connection((host, port))
else:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[5])))
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
buf = bytearray(1 << 18)
view = memoryview(buf)
got = 0
t0 = time.perf_counter()
while True:
    n = s.recv_into(view)
    if not n:
        break
    got += n
dt = time.perf_counter() - t0
assert got == total, (got, total)
print(dt)
"""


def upstream(total: int) -> socket.socket:
    """Sends `total` bytes to each connection, then closes."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    block = memoryview(os.urandom(CHUNK))

    def one(c):
        with c:
            left = total
            while left:
                left -= c.send(block[:min(CHUNK, left)])

    def serve():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(c,), daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return s


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def vmrss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def children(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(k) for k in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
        out += kids
        todo += kids
    return out


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class World:
    def __init__(self, base: Path):
        self.home = base / "home"
        self.bin = base / "bin"
        for d in (self.home, self.bin):
            d.mkdir(parents=True)
        self.socket = f"bench-net-{secrets.token_hex(4)}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"),
                   XDG_STATE_HOME=str(self.home / ".local/state"), XDG_DATA_HOME=str(self.home / ".local/share"),
                   XDG_CACHE_HOME=str(self.home / ".cache"), PATH=f"{self.bin}:{env.get('PATH', os.defpath)}")
        self.env = env
        # Isolated mode defaults to proxy, which is also the widest it may ask: the host-network
        # baseline needs the operator's line.
        cfg = self.home / ".config" / "tmuxjail"
        cfg.mkdir(parents=True)
        (cfg / "config.toml").write_text('[network]\nisolated = "host"\n')
        codex = self.bin / "codex"
        codex.write_text(f"#!/bin/sh\n: > {READY}\nexec sleep 3600\n")
        codex.chmod(0o755)

    def tmux(self, *args) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True)

    def kill_server(self) -> None:
        """Kill the private server, and remove the socket file tmux 3.3 leaves behind."""
        self.tmux("kill-server")
        path = Path(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", self.socket)
        if path.is_socket() and self.tmux("list-sessions").returncode != 0:
            path.unlink(missing_ok=True)

    def start(self, network: str, name: str, ws: Path) -> float:
        ready = ws / READY
        ready.unlink(missing_ok=True)
        t0 = time.perf_counter()
        p = subprocess.run([str(TJ), "-L", self.socket, "start", "codex", "--mode", "isolated", "--network", network,
                            "--workspace", str(ws), "--name", name, "--detach"], env=self.env, capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise RuntimeError(f"start --network {network}: {p.stderr.strip()[-300:]}")
        while not ready.exists():
            if time.perf_counter() - t0 > 30:
                raise RuntimeError(f"start --network {network}: the stand-in never became ready")
            time.sleep(0.002)
        return time.perf_counter() - t0

    def pane_pid(self, name: str) -> int:
        return int(self.tmux("display-message", "-p", "-t", f"={name}:", "#{pane_pid}").stdout.strip())


def bench_start(base: Path, runs: int) -> dict:
    w = World(base / "start")
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    times: dict[str, list[float]] = {"proxy": [], "host": [], "none": []}
    proxy_rss = []
    try:
        for i in range(runs + 1):  # run 0 warms the identity and page caches: not counted
            for net in ("proxy", "host", "none"):
                ws = base / "start" / "ws" / net
                ws.mkdir(parents=True, exist_ok=True)
                name = f"{net}{i}"
                t = w.start(net, name, ws)
                if i:
                    times[net].append(t)
                if net == "proxy" and i:
                    pane = w.pane_pid(name)
                    for pid in children(pane):
                        cmd = cmdline(pid)
                        if b"tmuxjail.pane.launch" in cmd:
                            proxy_rss.append(vmrss_kb(pid))
                w.tmux("kill-session", "-t", f"={name}")
    finally:
        w.kill_server()
    return {"times": times, "proxy_rss_kb": [x for x in proxy_rss if x]}


def bench_transfer(base: Path, runs: int, mb: int) -> dict:
    total = mb << 20
    up = upstream(total)
    port = up.getsockname()[1]
    d = base / "transfer"
    (d / "net").mkdir(parents=True)
    (d / "client.py").write_text(CLIENT)
    code = ("import socket, sys; from tmuxjail.net import proxy as netproxy; "
            "l, p = netproxy.listen(sys.argv[1]); t = socket.create_server(('127.0.0.1', 0)); "
            "print(p, t.getsockname()[1], flush=True); "
            "netproxy.Proxy(('*',), (('up.test', '127.0.0.1', True),), sys.argv[1]).serve(t, l)")
    (d / "flooder.py").write_text(FLOODER)
    stop = d / "stop-flood"
    proxy = subprocess.Popen([PY, "-c", code, str(d / "net")], stdout=subprocess.PIPE, text=True)
    sock, proxy_port = proxy.stdout.readline().split()
    py3 = shutil.which("python3") or PY
    jailed = [py3, "-I", "-S", str(d / "client.py"), "proxy", "up.test", str(port), str(total), proxy_port]
    direct = [py3, "-I", "-S", str(d / "client.py"), "direct", "127.0.0.1", str(port), str(total)]
    out: dict[str, list[float]] = {"direct": [], "proxy": [], "flooded": [], "flood_rate": [], "proxy_cpu": [],
                                   "flooded_cpu": []}
    try:
        for i in range(runs + 1):
            # which of the proxied pair goes first alternates, so a drift in the machine's load
            # does not land on one side
            pair = [("proxy", jailed), ("flooded", jailed)][:: 1 if i % 2 else -1]
            for kind, argv in (("direct", direct), *pair):
                flood = None
                if kind == "flooded":
                    stop.unlink(missing_ok=True)
                    flood = subprocess.Popen([py3, "-I", "-S", str(d / "flooder.py"), sock, str(stop), str(FLOOD_THREADS)],
                                             stdout=subprocess.PIPE, text=True)
                    time.sleep(1.0)  # the flood is on before the stream starts
                c0, t0 = cpu_s(proxy.pid), time.perf_counter()
                p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
                if i and kind != "direct":  # the proxy's CPU, in cores, while the stream ran
                    out[f"{kind}_cpu" if kind == "flooded" else "proxy_cpu"].append(
                        (cpu_s(proxy.pid) - c0) / (time.perf_counter() - t0))
                if flood is not None:
                    stop.write_text("")
                    rate = float(flood.communicate(timeout=60)[0].strip() or "nan")
                    if i:
                        out["flood_rate"].append(rate)
                if p.returncode != 0:
                    raise RuntimeError(f"transfer {kind}: {p.stderr.strip()[-400:]}")
                if i:
                    out[kind].append(float(p.stdout.strip().splitlines()[-1]))
        # The flood alone, no stream: the proxy's CPU per refusal (what a flood costs it, free of
        # the stream's noise)
        stop.unlink(missing_ok=True)
        flood = subprocess.Popen([py3, "-I", "-S", str(d / "flooder.py"), sock, str(stop), str(FLOOD_THREADS)],
                                 stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)  # past the burst
        c0, t0 = cpu_s(proxy.pid), time.perf_counter()
        time.sleep(3.0)
        cpu, dt = cpu_s(proxy.pid) - c0, time.perf_counter() - t0
        stop.write_text("")
        rate = float(flood.communicate(timeout=60)[0].strip() or "nan")
        out["flood_only"] = [cpu / dt, rate]
        out["proxy_rss_after_kb"] = [vmrss_kb(proxy.pid)]
        out["log_bytes"] = [float(sum(f.stat().st_size for f in (d / "net").glob("network.jsonl*")))]
    finally:
        proxy.kill()
        proxy.wait()
        up.close()
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--transfer-only", action="store_true", help="skip the start bench (the flood is in the transfer's)")
    args = ap.parse_args()
    if not TJ.exists():
        sys.exit(f"bench: no tmuxjail next to {PY} (use the venv's python)")
    base = Path(tempfile.mkdtemp(prefix="tj-bench-net-"))
    try:
        s = {"times": {"proxy": [], "host": [], "none": []}, "proxy_rss_kb": []} \
            if args.transfer_only else bench_start(base, args.runs)
        t = bench_transfer(base, args.runs, args.mb)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    st = s["times"]
    start_ratio = med(st["proxy"]) / med(st["host"])
    thr = {k: args.mb / med(v) for k, v in t.items() if k in ("direct", "proxy", "flooded")}
    thr_ratio = thr["proxy"] / thr["direct"]
    rss = s["proxy_rss_kb"]
    verdict = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    print(f"start (median of {args.runs}): proxy {med(st['proxy']):.3f} s, host {med(st['host']):.3f} s, "
          f"none {med(st['none']):.3f} s (info)  ratio proxy/host {start_ratio:.2f}x  target <= 1.15x  "
          f"{verdict(start_ratio <= 1.15)}")
    print(f"transfer {args.mb} MB (median of {args.runs}): direct {thr['direct']:.0f} MB/s, through the proxy "
          f"{thr['proxy']:.0f} MB/s  ratio {thr_ratio:.2f}x  target >= 0.8x  {verdict(thr_ratio >= 0.8)}")
    flood_ratio = thr["flooded"] / thr["proxy"]
    print(f"under a flood of {med(t['flood_rate']):.0f} denied CONNECTs/s ({FLOOD_THREADS} threads; log on disk "
          f"{t['log_bytes'][0] / (1 << 20):.1f} MiB): proxied {thr['flooded']:.0f} MB/s vs {thr['proxy']:.0f} MB/s "
          f"unflooded  ratio {flood_ratio:.2f}x  target >= 0.9x  {verdict(flood_ratio >= 0.9)}")
    print(f"proxy CPU while the stream ran (median, cores): {med(t['proxy_cpu']):.2f} unflooded, "
          f"{med(t['flooded_cpu']):.2f} flooded (the flood's cost to the proxy: what it takes from the stream)")
    from tmuxjail.net.proxy import REFUSALS_PER_S

    cores, rate = t["flood_only"]
    print(f"the flood alone (no stream, 3 s past the burst): proxy CPU {cores:.3f} cores, about "
          f"{cores / REFUSALS_PER_S * 1e6:.0f} us per refusal at the paced {REFUSALS_PER_S:.0f}/s "
          f"(the flooder's average rate, burst included: {rate:.0f}/s)")
    best = {k: args.mb / min(v) for k, v in t.items() if k in ("direct", "proxy")}
    print(f"transfer {args.mb} MB (best of {args.runs}, info): direct {best['direct']:.0f} MB/s, proxied "
          f"{best['proxy']:.0f} MB/s  ratio {best['proxy'] / best['direct']:.2f}x")
    if rss:
        print(f"proxy RSS per session: median {med(rss) / 1024:.1f} MB, max {max(rss) / 1024:.1f} MB "
              "(one proxy per jailed pane)")
    if args.json:
        Path(args.json).write_text(json.dumps({"start": st, "start_ratio": start_ratio, "transfer_s": t,
                                               "throughput_MBps": thr, "throughput_ratio": thr_ratio,
                                               "flood_ratio": flood_ratio,
                                               "proxy_rss_kb": rss}, indent=1))


if __name__ == "__main__":
    main()
