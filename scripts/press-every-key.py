#!/usr/bin/env python3
"""Press every key of tmux.conf.example's key table on a jailed pane whose session id begins
with `0`, through a real tmux client (issue 28: tmux 3.3a's `if-shell -F` reads a value that
begins with 0 as false, and ids are UUIDs, so the jailed-pane keys failed for one session in
sixteen). Run with the Python tmuxjail is installed in; the test suite and .ci/newcomer run it.

    press-every-key.py --conf tmux.conf.example --bin ~/.local/bin/tmuxjail [-L SOCKET] --workspace DIR

It starts the jailed shell itself (the id forced to begin with 0, as a test would: nothing in
tmuxjail can be told to pick an id), sources the file into that server, attaches a client in a
second tmux server's pane, presses prefix J and each key, reads the screen, and stops the jail
with `x` last. Exit 0 when every key did its job; else the key, what was expected, the screen."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# The start, with the store's id generator wrapped: the same uuid4, its first digit 0.
ZERO_ID_START = ("import sys, tmuxjail.store as s; f = s.new_id; s.new_id = lambda: '0' + f()[1:]; "
                 "from tmuxjail.cli import run; sys.exit(run(sys.argv[1:]))")
# --darwin-seam: the same start on the macOS path (tmuxjail.testing.darwin), its stand-in first.
ZERO_ID_SEAM_START = ("import sys, tmuxjail.store as s; f = s.new_id; s.new_id = lambda: '0' + f()[1:]; "
                      "from tmuxjail import hostos; hostos.as_darwin(sys.argv.pop(1)); "
                      "from tmuxjail.cli import run; sys.exit(run(sys.argv[1:]))")


class Keys:
    def __init__(self, flags: list[str], timeout: float):
        self.flags, self.timeout = flags, timeout
        self.outer = ["tmux", "-L", f"tjkeys-{os.getpid()}", "-f", "/dev/null"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        self.outer_socket = self.client = ""

    def tmux(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["tmux", "-u", *self.flags, *args], capture_output=True, text=True, env=self.env)
        if check and proc.returncode != 0:
            raise SystemExit(f"tmux {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def attach(self, session: str) -> None:
        cmd = " ".join(["exec", "env", "-u", "TMUX", "tmux", *self.flags, "attach", "-t", f"={session}"])
        self.outer_socket = subprocess.run(
            [*self.outer, "new-session", "-d", "-s", "term", "-x", "160", "-y", "45", "-P", "-F", "#{socket_path}", cmd],
            env=self.env, check=True, capture_output=True, text=True).stdout.strip()
        self.client = self.wait(lambda: self.tmux("list-clients", "-F", "#{client_name}").strip(), "a client")

    def screen(self) -> str:
        return subprocess.run([*self.outer, "capture-pane", "-p", "-t", "=term:"], capture_output=True,
                              text=True, env=self.env).stdout

    def press(self, *keys: str) -> None:
        for k in keys:
            subprocess.run([*self.outer, "send-keys", "-t", "=term:", k], check=True, env=self.env)
            time.sleep(0.1)

    def wait(self, pred, what: str):
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            got = pred()
            if got:
                return got
            if "this pane is not jailed" in self.screen():
                self.fail(what, "the key's guard said `this pane is not jailed`")
            time.sleep(0.2)
        self.fail(what, "timed out")

    def fail(self, what: str, why: str):
        screen = self.screen()
        self.close()
        raise SystemExit(f"press-every-key: {what}: {why}\n--- screen ---\n{screen}")

    def on_screen(self, *texts: str):
        return lambda: all(t in self.screen() for t in texts)

    def close(self) -> None:
        """The outer server, and its socket file (tmux leaves it behind, also when the server
        ended by itself: its one client went with the stopped jail)."""
        subprocess.run([*self.outer, "kill-server"], capture_output=True, env=self.env)
        if self.outer_socket.startswith("/"):
            try:
                os.unlink(self.outer_socket)
            except OSError:
                pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-L", dest="socket", help="tmux socket name (default: tmux's default server)")
    ap.add_argument("--conf", required=True, help="tmux.conf.example")
    ap.add_argument("--bin", required=True, help="the tmuxjail the keys run (@tmuxjail-bin)")
    ap.add_argument("--darwin-seam", metavar="SANDBOX_EXEC",
                    help="start on the macOS path through its test seam, with this stand-in sandbox-exec "
                         "(--bin must run tmuxjail.testing.darwin with it too)")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--mode", default="isolated")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds each step may take (a loaded machine)")
    a = ap.parse_args()
    flags = ["-L", a.socket] if a.socket else []
    k = Keys(flags, a.timeout)
    name = f"keys0-{os.getpid()}"
    head = ["-c", ZERO_ID_SEAM_START, a.darwin_seam] if a.darwin_seam else ["-c", ZERO_ID_START]
    proc = subprocess.run([sys.executable, "-P", *head, *flags, "start", "shell", "--mode", a.mode,
                           "--workspace", a.workspace, "--name", name, "--detach", "--json"],
                          capture_output=True, text=True, cwd=a.workspace, env={**k.env, "PWD": a.workspace})
    if proc.returncode != 0:
        raise SystemExit(f"press-every-key: the start failed: {proc.stderr.strip()}")
    sid = json.loads(proc.stdout)["id"]
    assert sid.startswith("0"), sid
    k.tmux("set", "-g", "@tmuxjail-bin", a.bin)
    k.tmux("source-file", a.conf)
    k.attach(name)
    try:
        k.wait(lambda: f"[{a.mode}:shell]" in k.screen().splitlines()[-1], "the status indicator")
        k.press("C-b", "J", "?")
        k.wait(k.on_screen("help: these keys", "stop: stop this pane's jail"), "? (the keys, described)")
        k.press("q")
        k.wait(lambda: "help: these keys" not in k.screen(), "? closing")
        for key, title in (("s", "tmuxjail: start in"), ("r", "tmuxjail: resume"), ("l", "tmuxjail list")):
            k.press("C-b", "J", key)
            k.wait(k.on_screen(title, *([name] if key != "s" else [])), f"{key} ({title})")
            k.press("Escape")
            k.wait(lambda t=title: t not in k.screen(), f"{key} closing")
        k.press("C-b", "J", "p")
        k.wait(k.on_screen("tmuxjail policy", f"name: {name}"), "p (the policy popup)")
        k.press("q")
        k.wait(lambda: "tmuxjail policy" not in k.screen(), "p closing")
        windows = lambda: k.tmux("list-windows", "-t", f"={name}", "-F", "#{window_id}").split()  # noqa: E731
        before = len(windows())
        k.press("C-b", "J", "S")
        k.wait(lambda: len(windows()) == before + 1, "S (a shell window in the jail)")
        # x goes to the client's current pane, the new shell: once it is the jail's, as tmux knows it.
        current = lambda: k.tmux("display-message", "-p", "-c", k.client, "#{@tmuxjail_id}").strip()  # noqa: E731
        k.wait(lambda: current() == sid, "S (the shell window's pane carries the jail's id)")
        # A prefix sent while the client is still switching to the new window can be lost (tmux
        # then types the keys into the shell): clear the line and press again, at most three times.
        for _ in range(3):
            k.press("C-b", "J", "x")
            end = time.monotonic() + 10
            while time.monotonic() < end and f"stop jail {name}" not in k.screen():
                time.sleep(0.2)
            if f"stop jail {name}" in k.screen():
                break
            k.press("C-u")
        k.wait(k.on_screen(f"stop jail {name}"), "x (the stop prompt)")
        k.press("y")
        k.wait(lambda: k.tmux("has-session", "-t", f"={name}", check=False) == "" and
               subprocess.run(["tmux", *flags, "has-session", "-t", f"={name}"], capture_output=True,
                              env=k.env).returncode != 0, "x (the jail stopped)")
    finally:
        k.close()
    print(f"press-every-key: ?, s, r, l, p, S, x all worked on {name} (id {sid})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
