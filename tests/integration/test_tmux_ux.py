"""The tmux experience, as a person uses it: a real tmux client attached in a pseudo-terminal
(a pane of a second, outer tmux server, whose screen capture-pane reads back, menus and popups
included), tmux.conf.example loaded, keys pressed; plus `list` goldens for every status,
`shell`, `start --here/--split` and the status-line snippet."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import descendants, process_chain, wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "tmux.conf.example"
GOLDEN = Path(__file__).parent / "golden"
SNIPPET = "#{E:@tmuxjail-status}"

# A real terminal drives these tests: give each step 30 s before it counts as failed.
wait = functools.partial(wait_until, timeout=30.0)




def in_bwrap(pid: int) -> bool:
    """The pane's own process is bubblewrap and the command under it is running."""
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
            return False
    except FileNotFoundError:
        return False
    kids = [p for p in descendants(pid) if Path(f"/proc/{p}/comm").exists()
            and Path(f"/proc/{p}/comm").read_text().strip() != "bwrap"]
    return bool(kids) and all("bwrap" in process_chain(k) for k in kids)


class Terminal:
    """A real tmux client of the server under test, attached in a pseudo-terminal: the pane of an
    outer tmux server. send() types keys into it; screen() is what the user sees."""

    def __init__(self, env, session="home"):
        self.env = env
        self.outer = f"{env.socket}-term"
        self.environ = env.environ(PATH=f"{Path(sys.executable).parent}:{env.vars['PATH']}")
        cmd = f"exec env -u TMUX tmux -L {env.socket} -f {CONF} attach -t ={session}"
        subprocess.run(["tmux", "-L", self.outer, "-f", "/dev/null", "new-session", "-d", "-s", "term",
                        "-x", "150", "-y", "45", cmd], env=self.environ, check=True)
        self.client = wait(lambda: env.tmux("list-clients", "-F", "#{client_name}").strip(), what="client")

    def send(self, *keys: str) -> None:
        for k in keys:
            subprocess.run(["tmux", "-L", self.outer, "send-keys", "-t", "=term:", k], check=True)
            time.sleep(0.05)

    def screen(self) -> str:
        return subprocess.run(["tmux", "-L", self.outer, "capture-pane", "-p", "-t", "=term:"],
                              capture_output=True, text=True).stdout

    def session(self) -> str:
        return self.env.tmux("display-message", "-p", "-c", self.client, "#{session_name}").strip()

    def close(self):
        subprocess.run(["tmux", "-L", self.outer, "kill-server"], capture_output=True)


@pytest.fixture
def ui(jail_env):
    env = jail_env
    # The keys run `tmuxjail` from the server's PATH: this interpreter's, also where no console
    # script was installed (scripts/mutate.py runs the tests on a copy of the package).
    (env.bin / "tmuxjail").write_text(f"#!/bin/sh\nexec {sys.executable} -P -m tmuxjail \"$@\"\n")
    (env.bin / "tmuxjail").chmod(0o755)
    terminal_env = env.environ(PATH=f"{Path(sys.executable).parent}:{env.vars['PATH']}")
    subprocess.run(["tmux", "-L", env.socket, "-f", str(CONF), "new-session", "-d", "-s", "home",
                    "-c", str(env.ws), "-x", "150", "-y", "44"], env=terminal_env, check=True)
    term = Terminal(env)
    yield env, term
    term.close()


def test_keyboard_start_menu_then_split_stays_in_the_jail(ui):
    env, term = ui
    home_pane = env.tmux("display-message", "-p", "-t", "=home:", "#{pane_id}").strip()
    term.send("C-b", "J", "s")
    screen = wait(lambda: term.screen() if "tmuxjail: start in" in term.screen() else None, what="the start menu")
    line = next(ln for ln in screen.splitlines() if re.search(r"shell\s+isolated", ln))
    key = re.search(r"\((\w)\)", line).group(1)
    assert re.search(r"codex\s+compatibility \(default\)", screen)
    term.send(key)
    name = wait(lambda: term.session() if term.session() not in ("home", "") else None, what="the switch")
    fmt = "#{@tmuxjail_id}|#{@tmuxjail_mode}|#{@tmuxjail_provider}|#{@tmuxjail_fp}"
    sid, mode, provider, fp = env.tmux("display-message", "-p", "-t", f"={name}:", fmt).strip().split("|")
    query = "SELECT id, fingerprint, workspace, status FROM sessions"
    row = wait(lambda: (r := sqlite3.connect(env.store).execute(query).fetchone())[3] == "running" and r, what="running")
    assert (mode, provider) == ("isolated", "shell") and row == (sid, fp, str(env.ws), "running")
    first = env.tmux("display-message", "-p", "-t", f"={name}:", "#{pane_pid}").strip()
    assert in_bwrap(int(first))

    wait(lambda: "[isolated:shell]" in term.screen(), what="the jailed session on screen")
    term.send("C-b", "%")  # tmux's own split key, inside the jailed session
    listing = lambda: env.tmux("list-panes", "-t", f"={name}:", "-F", "#{pane_id} #{pane_pid}").split("\n")  # noqa: E731
    wait(lambda: len([x for x in listing() if x]) == 2, what=f"the split: {term.screen()}")
    split_id, split_pid = [x for x in listing() if x][1].split()
    wait(lambda: in_bwrap(int(split_pid)), what="the split's jail")
    start_cmd = env.tmux("display-message", "-p", "-t", split_id, "#{pane_start_command}")
    assert "_pane" in start_cmd and fp in start_cmd
    rows = env.json("list")
    assert [(r["kind"], r["status"]) for r in rows] == [("agent", "running"), ("shell", "running")]

    # The status line the user sees, and the snippet rendered per pane.
    wait(lambda: "[isolated:shell]" in term.screen().splitlines()[-1], what="the status line")
    assert env.tmux("display-message", "-p", "-t", split_id, SNIPPET) == " #[bold][isolated:shell]#[default]\n"
    assert env.tmux("display-message", "-p", "-t", home_pane, SNIPPET) == "\n"

    # The list popup, from the keyboard.
    term.send("C-b", "J", "l")
    wait(lambda: "tmuxjail list" in term.screen() and "FINGERPRINT" in term.screen(), what="the list popup")
    term.send("Escape")
    wait(lambda: "FINGERPRINT" not in term.screen(), what="the popup to close", timeout=5)

    # Bindings for jailed panes do nothing elsewhere.
    env.tmux("switch-client", "-c", term.client, "-t", "=home:")
    term.send("C-b", "J", "x")
    wait(lambda: "this pane is not jailed" in term.screen(), what="the guard message", timeout=5)
    assert env.tmux("has-session", "-t", f"={name}", check=False) == ""


def test_status_snippet_jailed_ordinary_and_unjailed(ui):
    env, _ = ui
    env.json("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "c", "--detach")
    jailed = env.tmux("display-message", "-p", "-t", "=c:", "#{pane_id}").strip()
    hand = env.tmux("split-window", "-t", "=c:", "-P", "-F", "#{pane_id}", "sleep 300").strip()
    ordinary = env.tmux("display-message", "-p", "-t", "=home:", "#{pane_id}").strip()
    render = lambda p: env.tmux("display-message", "-p", "-t", p, SNIPPET).rstrip("\n")  # noqa: E731
    assert render(jailed) == " #[bold][compatibility:shell]#[default]"
    assert render(hand) == " #[reverse][unjailed]#[default]"
    assert render(ordinary) == ""


def _norm(text: str, env) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.replace(str(env.root), "<root>")
        line = re.sub(r"sha256:[0-9a-f]{12}…", "sha256:<fp>…", line)
        line = re.sub(r"%\d+", "%N", line)
        out.append("  ".join(line.split()))
    return out


def test_list_golden_every_status(jail_env):
    env = jail_env
    root = os.geteuid() == 0
    for d in ("gone", "exited", "mm", "stop"):
        (env.root / d).mkdir()
    start = lambda name, ws, *a: env.json("start", *a, "--workspace", str(ws), "--name", name, "--detach")  # noqa: E731
    start("run", env.ws, "shell", "--mode", "isolated")
    env.run("shell", "run", "--detach", check=True)  # a shell inside the same jail
    env.tmux("split-window", "-d", "-t", "=run:0", "sleep 300")  # unjailed, on purpose
    # A non-interactive shell: an interactive dash (the login shell of CI's ordinary user) exits
    # 2, not 7, when it cannot hand the terminal back to a process group outside the jail.
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.root / "exited"), "--name", "exited",
             "--detach", "--", "-c", "sleep 1; exit 7")
    wait(lambda: env.tmux("display-message", "-p", "-t", "=exited:", "#{pane_dead}").strip() == "1", what="exit")
    start("gone", env.root / "gone", "shell", "--mode", "compatibility")
    env.tmux("kill-session", "-t", "=gone")
    start("mm", env.root / "mm", "codex", "--mode", "isolated")
    with open(env.bin / "codex", "a") as f:
        f.write("# upgraded\n")
    start("stopped", env.root / "stop", "shell", "--mode", "isolated")
    env.run("stop", "stopped", check=True)
    if root:  # the sandbox fails to set up: the workspace exists only for the caller
        env.tmux("new-session", "-d", "-s", "keep", "sleep 600")
        hidden = env.root / "hidden"
        hidden.mkdir()
        cmd = (f"mount -t tmpfs none {hidden} && mkdir {hidden}/ws && {sys.executable} -P -m tmuxjail -L {env.socket} "
               f"start shell --mode isolated --workspace {hidden}/ws --name failed --detach")
        subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd], env=env.environ(),
                       capture_output=True, timeout=60)
    got = _norm(env.run("list", "--all", "--check", "--color", "never", check=True).stdout, env)
    # The failed start's pane-died audit runs in the background: once it has, it says it could not
    # read the hidden workspace (`!audit(?)`); before, nothing. Either is right.
    got = [g.replace("failed!audit(?)", "failed") if g.startswith("failed") else g for g in got]
    want = (GOLDEN / "list_every_status.txt").read_text().splitlines()
    if not root:
        want = [w for w in want if not w.startswith("failed")]
    assert got[0] == want[0] and sorted(got[1:]) == sorted(want[1:]), "\n".join(got)

    # Aligned: every column starts at the header's offset on every line.
    text = env.run("list", "--all", "--color", "never", check=True).stdout.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", text[0])]
    for line in text[1:]:
        for s in starts[1:]:
            assert line[s - 2:s] == "  " and line[s] != " ", (line, s)
    rows = env.json("list", "--all", "--check")
    by = {(r["name"], r["kind"]): r for r in rows}
    assert by[("exited", "agent")]["exit_status"] == 7
    assert by[("mm", "agent")]["reasons"] == ["executable"] and by[("mm", "agent")]["pane_status"] == "running"
    assert by[("run", "unjailed")]["start_command"].strip('"') == "sleep 300"
    if root:
        assert "is gone since the policy was computed" in by[("failed", "agent")]["failure"]


def test_list_formats_and_colour(jail_env):
    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
    env.tmux("split-window", "-d", "-t", "=a:", "sleep 300")
    rows = env.json("list")
    nd = [json.loads(ln) for ln in env.run("list", "--ndjson", check=True).stdout.splitlines()]
    assert nd == rows and [r["status"] for r in rows] == ["running", "unjailed"]
    assert "\x1b[" not in env.run("list", check=True).stdout  # not a terminal: auto is off
    coloured = env.run("list", "--color", "always", check=True).stdout
    assert "\x1b[32mrunning\x1b[0m" in coloured and "\x1b[1;7;31munjailed\x1b[0m" in coloured
    assert "\x1b[" not in env.run("list", "--color", "never", check=True).stdout
    # Agent status: the shell's foreground process decides.
    assert rows[0]["agent"] == "waiting"
    env.tmux("send-keys", "-t", "=a:0.0", "sleep 30", "Enter")
    wait(lambda: env.json("list")[0]["agent"] == "working", what="working")
    assert env.run("list", "--json", "--ndjson").returncode == 2


def _inside(env, pane: str) -> dict:
    """The environment of a process running in tmux pane `pane`, as tmux gives it."""
    tmux_var = env.tmux("display-message", "-p", "-t", pane, "#{socket_path},#{pid},#{session_id}").strip()
    return {"TMUX": tmux_var.replace(",$", ","), "TMUX_PANE": pane}


def test_start_here_and_split_join_the_current_session(jail_env):
    env = jail_env
    env.tmux("new-session", "-d", "-s", "mine", "-c", str(env.ws))
    mine = env.tmux("display-message", "-p", "-t", "=mine:", "#{pane_id}").strip()
    proc = env.run("start", "shell", "--mode", "isolated", "--here", "--name", "w", "--json")
    assert proc.returncode == 2 and "only inside tmux" in proc.stderr
    inside = _inside(env, mine)
    here = json.loads(subprocess.run(
        [sys.executable, "-P", "-m", "tmuxjail", "start", "shell", "--mode", "isolated", "--here", "--name", "w",
         "--json"], env=env.environ(**inside), cwd=env.ws, capture_output=True, text=True, check=True).stdout)
    split = json.loads(subprocess.run(
        [sys.executable, "-P", "-m", "tmuxjail", "start", "shell", "--mode", "isolated", "--split", "h", "--name", "s",
         "--json"], env=env.environ(**inside), cwd=env.ws, capture_output=True, text=True, check=True).stdout)
    assert here["tmux_session"] == split["tmux_session"] == "mine"
    windows = env.tmux("list-windows", "-t", "=mine", "-F", "#{window_index}").split()
    assert len(windows) == 2
    assert env.tmux("list-panes", "-t", mine, "-F", "#{pane_id}").split() == [mine, split["tmux_pane"]]
    for info in (here, split):
        pid = int(env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_pid}").strip())
        wait(lambda pid=pid: in_bwrap(pid), what="the jail")
    # The session is the user's: its own panes stay ordinary, in list and in the status line.
    assert env.tmux("show-options", "-t", "=mine", "-v", "-q", "@tmuxjail_id").strip() == ""
    assert env.tmux("display-message", "-p", "-t", mine, "#{@tmuxjail_id}").strip() == ""
    rows = env.json("list")
    assert sorted((r["name"], r["status"], r["placement"]) for r in rows) == [
        ("s", "running", "split"), ("w", "running", "window")]
    env.run("stop", "w", check=True)
    assert env.tmux("has-session", "-t", "=mine", check=False) == ""  # still there
    assert here["tmux_pane"] not in env.tmux("list-panes", "-a", "-F", "#{pane_id}").split()
    assert mine in env.tmux("list-panes", "-a", "-F", "#{pane_id}").split()


def test_shell_opens_login_shell_in_the_same_jail_and_refuses_changes(jail_env):
    env = jail_env
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    env.report()
    out = env.json("shell", "app", "--detach")
    pane = out["shell_pane"]
    pid = int(env.tmux("display-message", "-p", "-t", pane, "#{pane_pid}").strip())
    assert in_bwrap(pid)
    probe = env.ws / "shell.out"
    env.tmux("send-keys", "-t", pane, f"echo \"$HOME $CODEX_HOME $(ls -A ~ | grep -c standin-persist)\" > {probe}",
             "Enter")
    wait(probe.exists, what="the shell")
    home, codex_home, persisted = wait(lambda: probe.read_text().split() or None, what="output")
    assert home == str(env.home) and codex_home == f"{env.home}/.codex" and persisted == "1"  # the agent's HOME view
    login = subprocess.run(["getent", "passwd", str(os.getuid())], capture_output=True, text=True).stdout
    shell_name = os.path.basename(login.strip().split(":")[-1])
    assert env.tmux("display-message", "-p", "-t", pane, "#{pane_current_command}").strip() == shell_name
    assert not list((env.state_dir / "spool").iterdir())
    # A changed executable: no shell, exit 3, with the reason.
    with open(env.bin / "codex", "a") as f:
        f.write("# upgraded\n")
    proc = env.run("shell", "app", "--detach")
    assert proc.returncode == 3 and "executable" in proc.stderr and "Traceback" not in proc.stderr
    # ... and tmux's own new-window in that session opens a dead pane with the reason, never a shell.
    new = env.tmux("new-window", "-t", "=app:", "-P", "-F", "#{pane_id}").strip()
    wait(lambda: env.tmux("display-message", "-p", "-t", new, "#{pane_dead}").strip() == "1", what="refusal")
    assert "executable" in env.tmux("capture-pane", "-p", "-J", "-S", "-100", "-t", new)
    assert env.run("shell", "nosuch").returncode == 2


def test_menu_print_follows_profiles_and_allowed_modes(env):
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('default_mode = "isolated"\nallowed_modes = ["isolated", "verified"]\n')
    (env.bin / "pi").unlink()
    env.tmux("-f", "/dev/null", "new-session", "-d", "-s", "x", "-c", str(env.ws))
    out = env.run("menu", "start", "-t", "%0", "--print", check=True).stdout
    import shlex

    argv = shlex.split(out)
    assert argv[:4] == ["tmux", "-S", argv[2], "display-menu"]
    labels = [a for a in argv if re.match(r"^-?(codex|claude-code|cursor|pi|shell)\s", a)]
    assert "codex        isolated (default)" in labels and "shell        verified" in labels
    assert not [ln for ln in labels if "compatibility" in ln]
    assert "-pi           isolated (default)   not on the tmux server's PATH" in labels  # shown, disabled
    item = argv[argv.index("codex        isolated (default)") + 2]
    # Ids only: the item reads the pane's directory itself when it runs.
    assert item.startswith('run-shell -b "') and item.endswith(' menu _start codex isolated -t %0"')
    assert "-E -P -m tmuxjail" in item and str(env.ws) not in out
    assert argv[argv.index("C", argv.index("-y")) + 1] == "--"  # then a greyed `-claude-code` is no option
    # The key table guards: the file loads on this tmux, and binds nothing outside its table but the entry key.
    keys = env.tmux("source-file", str(CONF)) or env.tmux("list-keys")
    assert "switch-client -T tmuxjail" in keys
    assert len([ln for ln in keys.splitlines() if "-T tmuxjail " in ln]) == 7


# -- hostile names: nothing a pane or a jail writes reaches a tmux command --------------------

def test_menu_refuses_what_tmux_would_expand(jail_env, tmp_path):
    """Behind the ids-only menus, three more guards, each pinned here: a pane argument that is not
    a pane id is refused; a session name tmux would expand (a store row written by anything but
    tmuxjail) never reaches a menu label as a format; and a server path tmux would expand is
    refused rather than put into a run-shell command."""
    env = jail_env
    for bad in ("x;y", "#(touch pwned)", "%1 ; kill-server"):
        proc = env.run("menu", "start", "-t", bad, "--print")
        assert proc.returncode == 2 and "invalid tmux pane id" in proc.stderr, (bad, proc.stderr)
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "r", "--detach")
    pane = env.tmux("display-message", "-p", "-t", "=r:", "#{pane_id}").strip()
    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET name = '#(touch pwned-label)'")
    db.commit()
    out = env.run("menu", "resume", "-t", pane, "--print", check=True).stdout
    assert "pwned-label" in out and "#(touch" not in out, out
    odd = tmp_path / "#(touch pwned-socket)"
    odd.mkdir()
    sock = odd / "s"
    subprocess.run(["tmux", "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "sleep 60"], check=True,
                   env=env.environ())
    try:
        other = subprocess.run(["tmux", "-S", str(sock), "display-message", "-p", "#{pane_id}"], env=env.environ(),
                               capture_output=True, text=True).stdout.strip()
        proc = subprocess.run([sys.executable, "-P", "-m", "tmuxjail", "-S", str(sock), "menu", "start", "-t", other,
                               "--print"], env=env.environ(PWD=str(env.ws)), cwd=env.ws, capture_output=True, text=True)
        assert proc.returncode == 1 and "refusing to put this" in proc.stderr, (proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
        sock.unlink(missing_ok=True)


def _hostile(tag: str) -> str:
    """A name tmux would act on if it ever expanded it: `#(...)` runs a command in the tmux
    server (cwd: its HOME), `#{...}` is a format, `;` ends a tmux command, quotes end words."""
    return f"#(cd;touch pwned-{tag}) #{{pane_id}};x\"q'z"


def _key_of(screen: str, pattern: str) -> str:
    line = next(ln for ln in screen.splitlines() if re.search(pattern, ln))
    return re.search(r"\((\w)\)", line).group(1)


def test_keys_pass_ids_only_with_hostile_names_from_a_jail(ui):
    env, term = ui
    env.tmux("set-option", "-g", "display-time", "4000")  # messages stay long enough to be read back
    home_id = env.tmux("display-message", "-p", "-t", "=home:", "#{session_id}").strip()
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--detach")
    jail = env.tmux("display-message", "-p", "-t", "=j:", "#{pane_id}").strip()
    wait(lambda: in_bwrap(int(env.tmux("display-message", "-p", "-t", jail, "#{pane_pid}").strip())), what="the jail")
    # From inside the jail: directories with hostile names, cd into one, and a hostile pane title.
    # The window and the user's own session get hostile names as well.
    cwd_name, nl_name = _hostile("cwd"), _hostile("nl") + "\nnl"
    title = _hostile("title") + "\nnl"
    (env.ws / "attack.sh").write_text(
        f"d=$PWD/$(printf '%s' {shlex.quote(cwd_name)}); n=$PWD/$(printf '%s' {shlex.quote(nl_name)})\n"
        "mkdir -p \"$d\" \"$n\" && cd \"$n\"\n"
        f"printf '\\033]2;%s\\033\\\\' {shlex.quote(title)}\n")
    env.tmux("send-keys", "-t", jail, ". ./attack.sh", "Enter")
    wait(lambda: env.tmux("display-message", "-p", "-t", jail, "#{pane_current_path}").startswith(str(env.ws / nl_name)),
         what="the jail's cwd")
    # rename-window and rename-session expand formats in their argument: `##` is a literal `#`.
    env.tmux("rename-window", "-t", jail, (_hostile("window") + "\nnl").replace("#", "##"))
    env.tmux("rename-session", "-t", home_id, (_hostile("session") + "\nnl").replace("#", "##"))
    assert env.tmux("display-message", "-p", "-t", home_id, "#{session_name}").startswith("#(cd;touch pwned-session")
    env.tmux("switch-client", "-c", term.client, "-t", jail)
    pwned = lambda: sorted(p.name for p in env.home.iterdir() if p.name.startswith("pwned"))  # noqa: E731

    # s in the jailed pane: the new jail starts in this jail's recorded workspace. The pane's
    # directory as tmux reports it is the jail's own view (a directory it made, its private home
    # at your $HOME path), never a host path to hand to a new jail.
    names = lambda: {r["name"]: r for r in env.json("list")}  # noqa: E731
    fresh = lambda seen: next(({**r, "name": n} for n, r in names().items() if n not in seen), None)  # noqa: E731
    term.send("C-b", "J", "s")
    screen = wait(lambda: term.screen() if "tmuxjail: start in" in term.screen() else None, what="the start menu")
    term.send(_key_of(screen, r"shell\s+isolated"))
    first = wait(lambda: pwned() or fresh({"j"}), what="the new session", timeout=30)
    assert pwned() == []
    first = wait(lambda: (r := names().get(first["name"])) and r["status"] == "running" and r, what="running")
    assert first["workspace"] == str(env.ws)
    wait(lambda: term.session() == first["name"], what="the client to move to the new session")

    # From an ordinary pane, the start menu uses the pane's directory. One with a newline:
    # refused, in one line, and nothing runs.
    home_pane = env.tmux("display-message", "-p", "-t", home_id, "#{pane_id}").strip()
    env.tmux("switch-client", "-c", term.client, "-t", home_id)
    wait(lambda: term.session().startswith("#(cd;touch pwned-session"), what="the client back home")
    env.tmux("send-keys", "-t", home_pane, ". ./attack.sh", "Enter")
    wait(lambda: env.tmux("display-message", "-p", "-t", home_pane, "#{pane_current_path}").startswith(str(env.ws / nl_name)),
         what="the pane's cwd")
    # (What the item runs, run directly: the refusal is one line and exit 2.)
    proc = env.run("menu", "_start", "shell", "isolated", "-t", home_pane)
    assert proc.returncode == 2 and "control characters" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2 and "Traceback" not in proc.stderr
    # A directory with `#(...)`, `#{...}`, `;` and quotes: the new session's workspace is the
    # hostile directory, exactly (the item read it itself), and nothing runs.
    hostile_dir = env.ws / cwd_name
    env.tmux("send-keys", "-t", home_pane, 'cd "$d"', "Enter")
    wait(lambda: env.tmux("display-message", "-p", "-t", home_pane, "#{pane_current_path}") == f"{hostile_dir}\n",
         what=f"the pane's cwd {term.screen()}")
    term.send("C-b", "J", "s")
    screen = wait(lambda: term.screen() if "tmuxjail: start in" in term.screen() else None, what="the start menu")
    term.send(_key_of(screen, r"shell\s+isolated"))
    try:
        new = wait(lambda: pwned() or fresh({"j", first["name"]}), what="the new session", timeout=30)
    except AssertionError as exc:
        raise AssertionError(term.screen() + env.run("list", "--all").stdout + str(list(env.state_dir.iterdir()))) from exc
    time.sleep(0.5)
    assert pwned() == []
    new = wait(lambda: (r := names().get(new["name"])) and r["status"] == "running" and r, what="running")
    assert new["workspace"] == str(hostile_dir)
    # The menu item moves the client once the session runs: let it, before moving it ourselves
    # (else the item's late switch-client lands S in the new session instead of the jail's).
    wait(lambda: term.session() == new["name"], what="the client to move to the new session")

    # S, p, l, r and x in the jailed pane.
    env.tmux("switch-client", "-c", term.client, "-t", jail)
    windows = len(env.tmux("list-windows", "-t", "=j").split("\n"))
    log_before = set(env.tmux("show-messages", check=False).splitlines())
    term.send("C-b", "J", "S")
    shell_window = lambda: len(env.tmux("list-windows", "-t", "=j").split("\n")) == windows + 1  # noqa: E731
    if not wait_until(shell_window, 15):
        # Seen only in whole-suite runs: no window and (below) no message. A key the client
        # lost is pressed again; an error tmuxjail showed fails the test with its text.
        # (The log also holds every command the server ran; tmuxjail's errors start "tmuxjail: ".)
        said = "\n".join(line for line in env.tmux("show-messages", check=False).splitlines()
                         if line not in log_before and "tmuxjail: " in line)
        assert not said, said + term.screen()
        print(f"S made no window in 15 s and tmuxjail said nothing ({said!r}); pressing it again")
        term.send("C-b", "J", "S")
        wait(shell_window, what=f"the shell window: {said!r} {term.screen()}")
    env.tmux("switch-client", "-c", term.client, "-t", jail)
    term.send("C-b", "J", "p")
    wait(lambda: "tmuxjail policy" in term.screen() and "fingerprint" in term.screen(), what="the policy popup")
    assert "workspace_write:" not in term.screen()  # the policy is longer than the popup...
    term.send("G")
    wait(lambda: "workspace_write:" in term.screen(), what="the end of the policy")  # ...and scrolls
    term.send("q")
    wait(lambda: "tmuxjail policy" not in term.screen(), what="the popup to close", timeout=5)
    term.send("C-b", "J", "l")
    wait(lambda: "tmuxjail list" in term.screen() and "FINGERPRINT" in term.screen(), what="the list popup")
    term.send("Escape")
    wait(lambda: "FINGERPRINT" not in term.screen(), what="the popup to close", timeout=5)
    env.tmux("switch-client", "-c", term.client, "-t", home_id)
    term.send("C-b", "J", "r")
    screen = wait(lambda: term.screen() if "tmuxjail: resume" in term.screen() else None, what="the resume menu")
    term.send(_key_of(screen, r"\bj\s+shell/isolated"))
    wait(lambda: term.session() == "j", what="the resume")
    env.tmux("select-pane", "-t", jail)
    env.tmux("select-window", "-t", jail)
    term.send("C-b", "J", "x")
    wait(lambda: "stop jail j" in term.screen(), what="the stop prompt")
    term.send("y")
    sessions = lambda: env.tmux("list-sessions", "-F", "#{session_name}").split("\n")  # noqa: E731
    wait(lambda: "j" not in sessions() and env.json("list", "--all")[0]["status"] == "stopped", what="the stop")
    # x stops the jail, and the client stays attached (it moves to another session).
    assert env.tmux("list-clients", "-F", "#{client_name}").strip() == term.client
    time.sleep(1)  # `#()` jobs run in the background: give one time to land
    assert pwned() == []


def test_start_menu_when_the_first_provider_is_not_installed(ui):
    """A greyed first item (`-claude-code ...`) was read by display-menu as its -c option."""
    env, term = ui
    (env.bin / "claude").unlink()
    term.send("C-b", "J", "s")
    screen = wait(lambda: term.screen() if "tmuxjail: start in" in term.screen() else None,
                  what=f"the start menu: {term.screen()}")
    assert re.search(r"claude-code\s+isolated\s+not on the tmux server.s PATH", screen)
    assert "(1)" in next(ln for ln in screen.splitlines() if re.search(r"codex\s+compatibility", ln))


def test_keys_work_when_tmux_path_lacks_tmuxjail(env):
    """The usual case right after install.sh: the tmux server's PATH has no tmuxjail; the keys
    fall back to ~/.local/bin/tmuxjail (an absolute path, resolved when the file is sourced)."""
    if (why := __import__("conftest").have_jail()) is not None:
        pytest.skip(why)
    local = env.home / ".local" / "bin"
    local.mkdir(parents=True)
    (local / "tmuxjail").write_text(f"#!/bin/sh\nexec {sys.executable} -P -m tmuxjail \"$@\"\n")
    (local / "tmuxjail").chmod(0o755)
    bare = env.environ(PATH=f"{env.bin}:/usr/bin:/bin")
    assert subprocess.run(["sh", "-c", "command -v tmuxjail"], env=bare, capture_output=True).returncode != 0
    subprocess.run(["tmux", "-L", env.socket, "-f", str(CONF), "new-session", "-d", "-s", "home",
                    "-c", str(env.ws), "-x", "150", "-y", "44"], env=bare, check=True)
    term = Terminal(env)
    try:
        term.send("C-b", "J", "s")
        wait(lambda: "tmuxjail: start in" in term.screen(), what=f"the start menu: {term.screen()}")
        assert "returned 127" not in term.screen()
        assert env.tmux("show", "-gv", "@tmuxjail-bin").strip() == str(local / "tmuxjail")
    finally:
        term.close()


def test_start_inside_tmux_with_no_attached_client_exits_0(jail_env):
    """From a pane's own terminal (stdin and stdout a tty) of a session no client is attached to:
    the start succeeds, there is nobody to switch, and the exit status says success."""
    env = jail_env
    env.tmux("new-session", "-d", "-s", "box", "-x", "150", "-c", str(env.ws), "/bin/sh")
    out = env.root / "rc"
    for i, extra in enumerate(("", "--here")):
        env.tmux("send-keys", "-t", "=box:0.0",
                 f"{sys.executable} -P -m tmuxjail start shell --mode isolated --name n{i} {extra}; echo $? > {out}{i}",
                 "Enter")
        done = Path(f"{out}{i}")
        wait(lambda done=done: done.exists() and done.read_text().strip(), what="the start")
        assert Path(f"{out}{i}").read_text().strip() == "0", env.tmux("capture-pane", "-p", "-t", "=box:0.0")
    screen = env.tmux("capture-pane", "-p", "-J", "-t", "=box:0.0")
    assert "no attached tmux client to switch; attach with:" in screen and "attach -t =n0" in screen
    assert sorted(r["name"] for r in env.json("list")) == ["n0", "n1"]
