"""The command line behind cli.main: the parser, the command table (name -> handler, imported when it runs), and the
exit codes. Handlers (tmuxjail.commands) return data; render.py prints it as text or JSON."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from importlib import import_module

from .. import __version__, log, paths
from ..commands import Call
from ..errors import TmuxjailError
from ..pane.command import PANE_VERB
from ..registry import CERTIFIABLE, MODES, PROVIDERS
from ..render import Result, error, fail, out
from ..tmux import Tmux, hand_over

EPILOG = """examples:
  tmuxjail start shell --mode isolated             a jailed login shell with a private home
  tmuxjail start codex --mode isolated --workspace ~/src/app --name app
  tmuxjail list                                    sessions, their modes and status
  tmuxjail resume app                              reattach, or relaunch the CLI's own resume

exit codes: 0 ok, 1 error, 2 usage or bad input, 3 resume refused,
            4 approval/capability/allowed mode missing, 5 sandbox unavailable,
            6 audit found something to review"""

ALLOW_DOMAIN_HELP = ("under --network proxy, the default in isolated and verified (repeatable; example.com, *.example.com for its subdomains, * for all): "
                     "in isolated and compatibility the jail reaches ONLY these (it replaces *); in verified they "
                     "are ADDED to the profile's domains and need approval (tmuxjail approve PROVIDER --allow-domain D)")

# command -> "module:handler" in tmuxjail.commands. The one place that imports a command's code,
# and only the command that runs (tests/unit/test_imports.py holds each fast path to its imports).
COMMANDS = {
    "start": "start:run",
    "resume": "resume:run",
    "attach": "manage:run_attach",
    "rename": "manage:run_rename",
    "list": "list:run",
    "prune": "prune:run",
    "show": "show:run",
    "stop": "stop:run",
    "shell": "shell:run",
    "audit": "audit:run",
    "menu": "menu:run",
    "doctor": "doctor:run",
    "completion": "completion:run",
    "profiles": "profiles:run",
    "approve": "approve:run",
    "approvals": "approve:approvals_",
    "revoke": "approve:revoke",
    "certify": "certify:run",
    "preflight": "start:run_preflight",
    "discover": "discover:run",
    "approve --candidate": "discover:approve_candidate",
}
SUBCOMMANDS = frozenset(name for name in COMMANDS if " " not in name)
# Hidden commands that tmux runs (no argparse): a new pane of a jailed session, a pane-died hook.
HIDDEN = {PANE_VERB: "commands.pane:run_pane", "_audit": "audit:run_hidden"}
# Commands that work without a usable HOME (they say what is wrong, or need no state).
NO_HOME = ("completion", "doctor", "profiles")


def handler(name: str, table: dict[str, str] = COMMANDS, package: str = "tmuxjail.commands"):
    module, _, func = table[name].partition(":")
    return getattr(import_module(f"{package}.{module}"), func)


class _Verbs(tuple):
    """The menu's actions as help, errors and completion list them; its internal ones (what menu
    items and prompts run: `menu _start|_resume|_stop ...`) are accepted but never listed."""

    def __contains__(self, word: object) -> bool:
        return word in ("_start", "_resume", "_stop") or tuple.__contains__(self, word)


STATUS_HELP = """status words (STATUS column; `--json`: status, with exit_status, signal, reasons):
  running      the CLI runs in its jailed pane
  exited(N)    the CLI ended with exit status N; the pane stays; `tmuxjail resume NAME`
               relaunches it in the same jail
  killed(SIG)  the CLI was ended by signal SIG; resume relaunches it
  gone         the tmux session or pane is no more (a server restart, a killed window);
               resume relaunches it
  unreachable  its tmux server exists but does not answer (it may still run there)
  failed       the sandbox did not start (see `tmuxjail show NAME` for why)
  stopped      `tmuxjail stop` ended it (shown with --all); the record stays
  mismatch(R)  (with --check) a resume would be refused: the policy changed; R names what (mode,
               profile, executable, config, workspace, network, tampered...)
  unjailed     a pane of a jailed session that does not run inside the jail (not protected)
  ...!audit(N) N findings of the session's last audit to review: `tmuxjail audit NAME`
AGENT column: working (the CLI shows its busy footer), waiting (it waits for you: a prompt, a
  question, an approval); for shells, whether a command runs. KIND: agent (the CLI's pane), shell
  (a login shell inside the same jail), unjailed."""


class _Unbuilt:
    """A subcommand this command line does not run: its arguments go nowhere (see invoked)."""

    def add_argument(self, *args, **kwargs) -> None:
        pass

    def add_mutually_exclusive_group(self, *args, **kwargs) -> _Unbuilt:
        return self


def invoked(argv: list[str]) -> str | None:
    """The subcommand a command line runs, when the parser need hold only that one (a start from
    a key binding should not build twenty subparsers). None, and so the whole parser, for help,
    completion (generated from the parser), no command, and any top-level option but -L/-S/-v."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        if word in ("-L", "-S"):
            i += 2
        elif word in ("-v", "--verbose") or (word[:2] in ("-L", "-S") and len(word) > 2):
            i += 1
        else:
            return None
    if i >= len(argv) or argv[i] not in SUBCOMMANDS or argv[i] == "completion":
        return None
    return None if "-h" in argv or "--help" in argv else argv[i]


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (only=a subcommand) one whose other subcommands are left out: it
    parses that subcommand's command lines exactly as the whole one does."""
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("tmux server")
    g.add_argument("-L", dest="socket_name", metavar="SOCKET_NAME", default=argparse.SUPPRESS,
                   help="tmux server socket name (as tmux -L)")
    g.add_argument("-S", dest="socket_path", metavar="SOCKET_PATH", default=argparse.SUPPRESS,
                   help="tmux server socket path (as tmux -S)")
    g.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="also print log lines on stderr")

    p = argparse.ArgumentParser(
        prog="tmuxjail", parents=[common], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run coding-agent CLIs in tmux panes whose own process is a sandbox.")
    p.add_argument("--version", action="store_true", help="print the version")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def cmd(name, help, example):
        if only is not None and name != only:
            return _Unbuilt()
        return sub.add_parser(name, parents=[common], help=help, description=help,
                              epilog="example:\n  " + example,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    s = cmd("start", "start a CLI in a new jailed tmux pane",
            "tmuxjail start codex --mode isolated --workspace ~/src/app --name app -- --model o4")
    s.add_argument("provider", metavar="PROVIDER", help="one of: " + ", ".join(PROVIDERS))
    s.add_argument("--mode", choices=MODES, help="security mode (default: from config, compatibility out of the box)")
    s.add_argument("--workspace", action="append", default=[], metavar="DIR",
                   help="writable workspace, same absolute path inside (repeatable; the first is the cwd; default: .)")
    s.add_argument("--name", help="session name (default: PROVIDER-WORKSPACE-XXXX)")
    s.add_argument("--env", dest="env_name", default="default", metavar="NAME",
                   help="private-home environment for isolated mode (default: default)")
    s.add_argument("--network", choices=("host", "none", "proxy"), default=None,
                   help="host: the host's network; none: only the jail's own loopback; proxy: only through the "
                        "session's proxy, to public destinations its allow list names (default: from config; host in "
                        "compatibility, proxy in isolated and verified)")
    s.add_argument("--allow-domain", action="append", default=None, metavar="PATTERN", dest="allow_domain",
                   help=ALLOW_DOMAIN_HELP)
    s.add_argument("--capability", action="append", default=[], metavar="ID",
                   help="optional capability to add (verified mode)")
    s.add_argument("--detach", action="store_true", help="do not attach or switch the client")
    where = s.add_mutually_exclusive_group()
    where.add_argument("--here", action="store_true", help="a new window in the current tmux session (inside tmux)")
    where.add_argument("--split", choices=("h", "v"), help="split the current tmux pane: h side by side, v stacked")
    s.add_argument("--client", metavar="CLIENT", help="tmux client to switch to the new session (key bindings pass it)")
    s.add_argument("--non-interactive", action="store_true", help="never prompt; fail instead")
    s.add_argument("--dry-run", action="store_true", help="print the policy, fingerprint, pane command and sandbox argv; run nothing")
    s.add_argument("--restrict", metavar="FILE", help="restriction file (TOML) that narrows the policy; never widens")
    s.add_argument("--backend", choices=("bwrap", "seatbelt"), default=None,
                   help="with --dry-run: show what this backend would run (seatbelt = the macOS profile, auditable anywhere)")
    s.add_argument("--candidate", metavar="ID", help="verified mode: use this approved discovery candidate as the profile")
    s.add_argument("--json", action="store_true", help="print JSON")

    r = cmd("resume", "reattach if live; relaunch the CLI's own resume if gone; refuse a relaunch if changed", "tmuxjail resume app")
    r.add_argument("name")
    r.add_argument("--detach", action="store_true", help="do not attach or switch the client")
    r.add_argument("--client", metavar="CLIENT", help="tmux client to switch to the session (key bindings pass it)")
    r.add_argument("--accept-changes", action="store_true",
                   help="move the session to today's policy, ending its CLI if it runs (asks on a terminal; "
                        "verified mode needs the new approval first)")
    r.add_argument("--yes", action="store_true", help="with --accept-changes: do not ask (scripts)")
    r.add_argument("--json", action="store_true", help="print JSON")

    a = cmd("attach", "reattach a live session: nothing is relaunched (resume relaunches a CLI that ended)",
            "tmuxjail attach app")
    a.add_argument("name")
    a.add_argument("--client", metavar="CLIENT", help="tmux client to switch to the session (key bindings pass it)")
    a.add_argument("--json", action="store_true", help="print JSON")

    rn = cmd("rename", "rename a session (its record, and its tmux session when tmuxjail owns it)",
             "tmuxjail rename codex-app-1a2b app")
    rn.add_argument("name", metavar="OLD")
    rn.add_argument("new", metavar="NEW")
    rn.add_argument("--json", action="store_true", help="print JSON")

    ls = cmd("list", "list sessions with their effective modes and status", "tmuxjail list --json")
    if not isinstance(ls, _Unbuilt):
        ls.epilog = "example:\n  tmuxjail list --json\n\n" + STATUS_HELP
    ls.add_argument("--all", action="store_true", help="include stopped sessions")
    ls.add_argument("--check", action="store_true",
                    help="recompute each policy as resume would, and show `mismatch` with reason codes (slower)")
    ls.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the table (auto: on a terminal)")
    ls.add_argument("--server", metavar="SERVER",
                    help="only sessions of this tmux server (its -L name or socket path; default: every server)")
    ls.add_argument("--workspace", metavar="DIR", help="only sessions whose workspace is DIR (or under it)")
    ls.add_argument("--provider", choices=PROVIDERS, help="only sessions of this provider")
    lf = ls.add_mutually_exclusive_group()
    lf.add_argument("--json", action="store_true", help="print a JSON array")
    lf.add_argument("--ndjson", action="store_true", help="print one JSON object per line")

    pn = cmd("prune", "forget sessions that are over (never a live one); --homes: unused private homes",
             "tmuxjail prune --older-than 30d --dry-run")
    pn.add_argument("--older-than", metavar="AGE", help="only those unchanged for AGE (30d, 12h, 45m, 2w)")
    pn.add_argument("--dry-run", action="store_true", help="show what would be pruned")
    pn.add_argument("--homes", action="store_true",
                    help="instead: delete the private homes (isolated mode) of workspaces that no longer exist or "
                         "have no session left, with their sizes (try --dry-run first)")
    pn.add_argument("--json", action="store_true", help="print JSON")

    sh = cmd("show", "show a session and its effective policy, in full", "tmuxjail show app --json")
    sh.add_argument("name")
    sh.add_argument("--json", action="store_true", help="print JSON")
    sh.add_argument("--network", action="store_true", help="the destinations its egress proxy allowed and denied")

    st = cmd("stop", "stop sessions (kills their tmux sessions; the records stay)",
             "tmuxjail stop app\n  tmuxjail stop --all --workspace ~/src/app")
    st.add_argument("name", nargs="?", help="the session (or --all)")
    st.add_argument("--all", action="store_true", help="stop every live session (with --workspace: of that workspace)")
    st.add_argument("--workspace", metavar="DIR", help="with --all: only sessions whose workspace is DIR (or under it)")
    st.add_argument("--json", action="store_true", help="print JSON")

    sl = cmd("shell", "open your login shell in a new window, inside the same jail as a session", "tmuxjail shell app")
    sl.add_argument("name")
    sl.add_argument("--detach", action="store_true", help="do not attach or switch the client")
    sl.add_argument("--client", metavar="CLIENT", help="tmux client to switch to the new window")
    sl.add_argument("--json", action="store_true", help="print JSON")

    au = cmd("audit", "list what the session left that the host would run or trust; exit 6 if any",
             "tmuxjail audit app --json")
    au.add_argument("name")
    au.add_argument("--all", action="store_true", help="everything present, not only what changed since the start")
    au.add_argument("--json", action="store_true", help="print JSON")

    mn = cmd("menu", "run (or --print) the tmux menu behind a key of tmux.conf.example",
             "tmuxjail menu start --print")
    mn.add_argument("action", choices=_Verbs(("start", "resume", "list", "shell", "policy", "stop")),
                    metavar="{start,resume,list,shell,policy,stop}")
    mn.add_argument("-c", dest="client", metavar="CLIENT", help="tmux client (bindings pass '#{client_name}')")
    mn.add_argument("-t", dest="pane", metavar="PANE", help="tmux pane (bindings pass '#{pane_id}')")
    mn.add_argument("--print", action="store_true", help="print the tmux command instead of running it")
    mn.add_argument("rest", nargs="*", help=argparse.SUPPRESS)  # _start PROVIDER MODE (a start-menu item)

    d = cmd("doctor", "check what works here, and print the command that fixes the rest", "tmuxjail doctor")
    d.add_argument("--move-store-aside", action="store_true",
                   help="rename a damaged store to store.db.broken-TIME (kept) and copy what still reads into a new one")
    d.add_argument("--json", action="store_true", help="print JSON")

    c = cmd("completion", "print a shell completion script: eval \"$(tmuxjail completion bash)\"", 'eval "$(tmuxjail completion bash)"')
    c.add_argument("shell", choices=("bash", "zsh"))

    pr = cmd("profiles", "list, show or check the provider profiles", "tmuxjail profiles show codex --details")
    pr.add_argument("action", nargs="?", default="list", choices=("list", "show", "check"))
    pr.add_argument("provider", nargs="?", help="for show")
    pr.add_argument("--details", action="store_true", help="show: add paths, env names, hosts, version range, certification")
    pr.add_argument("--update", metavar="FILE", help="check: write the hash list to FILE (profiles/hashes.json in a checkout)")
    pr.add_argument("--json", action="store_true", help="print JSON")

    ap = cmd("approve", "approve a provider's capabilities for verified mode (shows exactly what, then records it)",
             "tmuxjail approve codex --capability git-identity")
    ap.add_argument("provider")
    ap.add_argument("--capability", action="append", default=[], metavar="ID", help="optional capability to include")
    ap.add_argument("--allow-domain", action="append", default=[], metavar="PATTERN", dest="allow_domain",
                    help="a domain verified sessions may reach beyond what the capabilities declare (repeatable)")
    ap.add_argument("--yes", action="store_true", help="do not ask (for scripts that already reviewed it)")
    ap.add_argument("--details", action="store_true", help="also show paths, env names and hosts")
    ap.add_argument("--candidate", metavar="ID",
                    help="approve a discovery's candidate profile (shows the diff; a terminal must confirm; no --yes)")
    ap.add_argument("--json", action="store_true", help="print JSON")

    al = cmd("approvals", "list recorded approvals", "tmuxjail approvals --json")
    al.add_argument("--all", action="store_true", help="include revoked approvals")
    al.add_argument("--json", action="store_true", help="print JSON")

    rv = cmd("revoke", "revoke every approval of a provider", "tmuxjail revoke codex")
    rv.add_argument("provider")
    rv.add_argument("--json", action="store_true", help="print JSON")

    ce = cmd("certify", "run the installed CLI in real jailed panes under each mode and record the evidence "
             "(scratch HOME, private tmux server; needs no credentials or network)",
             "tmuxjail certify codex --mode isolated --json")
    ce.add_argument("provider", choices=CERTIFIABLE)
    ce.add_argument("--mode", action="append", choices=MODES, default=[], help="repeatable (default: all three)")
    ce.add_argument("--standin", action="store_true", help="cursor: certify a stand-in that follows its documented contract")
    ce.add_argument("--output", metavar="FILE", help="evidence JSON file (default: in the state dir, under certify/)")
    ce.add_argument("--json", action="store_true", help="print JSON")

    pf = cmd("preflight", "check that a start would run, without prompting or starting anything (for scheduled runs)",
             "tmuxjail preflight codex --mode verified --workspace ~/src/app --json")
    pf.add_argument("provider")
    pf.add_argument("--mode", choices=MODES)
    pf.add_argument("--workspace", action="append", default=[], metavar="DIR")
    pf.add_argument("--env", dest="env_name", default="default", metavar="NAME")
    pf.add_argument("--network", choices=("host", "none", "proxy"), default=None)
    pf.add_argument("--allow-domain", action="append", default=None, metavar="PATTERN", dest="allow_domain",
                    help=ALLOW_DOMAIN_HELP)
    pf.add_argument("--capability", action="append", default=[], metavar="ID")
    pf.add_argument("--restrict", metavar="FILE", help="restriction file (TOML) that narrows the policy")
    pf.add_argument("--candidate", metavar="ID", help="an approved discovery candidate as the profile")
    pf.add_argument("--json", action="store_true", help="print JSON")
    discover_args(cmd)
    return p


def discover_args(cmd) -> None:
    """`discover` (issue 16; its handlers are in discover/cli.py)."""
    d = cmd("discover", "run a provider once in an observed (isolated, traced) jail and propose a profile; "
            "PROVIDER starts a discovery, show/replay take its ID, list lists them",
            "tmuxjail discover codex --workspace ~/src/app\n"
            "  tmuxjail discover codex --non-interactive --timeout 60 -- exec \"run the tests\"\n"
            "  tmuxjail discover show codex-app-1 --json\n  tmuxjail discover replay codex-app-1")
    d.add_argument("target", metavar="PROVIDER|show|replay|list")
    d.add_argument("id", nargs="?", metavar="ID", help="for show and replay: the discovery's id")
    d.add_argument("--workspace", action="append", default=[], metavar="DIR",
                   help="writable workspace (repeatable; the first is the cwd; default: .)")
    d.add_argument("--env", dest="env_name", default="default", metavar="NAME",
                   help="private-home environment of the observed isolated jail (default: default)")
    d.add_argument("--non-interactive", action="store_true",
                   help="do not attach: run the step detached until it exits or --timeout; never prompts")
    d.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="with --non-interactive: stop the step after this long (default: 600)")
    d.add_argument("--json", action="store_true", help="print JSON (a new discovery: its id)")


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    for verb in ("start", "discover"):
        if verb in argv and "--" in argv[argv.index(verb):]:
            i = argv.index("--", argv.index(verb))
            return argv[:i], argv[i + 1:]
    return argv, []


def _attach(result: dict, json_out: bool) -> None:
    argv = result.get("attach")
    if not argv:
        return
    if "attach-session" in argv and os.environ.get("TMUX") and not json_out:
        # Inside another tmux server (the session runs where it was started): tmux refuses a
        # nested attach, so say how instead.
        print(f"{result.get('name')} runs on another tmux server; attach from outside tmux with: {' '.join(argv)}")
        return
    if json_out or not (sys.stdin.isatty() and sys.stdout.isatty()):
        if not json_out:
            print(f"attach with: {' '.join(argv[:1] + argv[1:])}")
        return
    sys.stdout.flush()
    # inside tmux: a session with no attached client has none to switch (attach execs instead)
    if hand_over(argv) != 0:
        print(f"no attached tmux client to switch; attach with: {' '.join(argv[:-3] + ['attach', *argv[-2:]])}")


def bring(tmux: Tmux, res: Result, args, json_out: bool) -> None:
    """Show the user the session: switch the given client (key bindings), else attach from outside
    tmux or switch-client from inside, unless --detach."""
    result = res.bring or {}
    client = getattr(args, "client", None)
    if client and result.get("tmux_socket") not in (None, tmux.socket) and not getattr(args, "detach", False):
        print(f"{result.get('name')} runs on the tmux server at {result['tmux_socket']}: "
              f"tmux -S {result['tmux_socket']} attach -t ={result['tmux_session']}")
        return
    if client and not getattr(args, "detach", False):
        tmux.switch_client(client, res.target or result.get("tmux_pane") or f"={result['tmux_session']}")
        return
    _attach(result, json_out)


def run(argv: list[str]) -> int:
    if argv[:1] and argv[0] in HIDDEN:
        return handler(argv[0], HIDDEN, "tmuxjail")(argv[1:])
    argv, passthrough = _split_passthrough(argv)
    p = parser(invoked(argv))
    args = p.parse_args(argv)
    if args.version:
        print(f"tmuxjail {__version__}")
        return 0
    if not args.command:
        p.print_help()
        return 2
    json_out = getattr(args, "json", False)
    try:
        return _dispatch(p, args, passthrough, json_out)
    except TmuxjailError as exc:
        return error(exc, json_out)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, the traceback in the log
        return _unexpected(exc, getattr(args, "verbose", False))


def _dispatch(p: argparse.ArgumentParser, args, passthrough: list[str], json_out: bool) -> int:
    tmux = Tmux(getattr(args, "socket_name", None), getattr(args, "socket_path", None))
    call = Call(args, passthrough, json_out, tmux, p)
    if args.command not in NO_HOME and (why := paths.home_problem(os.environ)):
        raise TmuxjailError(f"{why}: tmuxjail keeps its state under HOME and mounts private homes there",
                            hint=paths.HOME_FIX)
    name = "approve --candidate" if args.command == "approve" and args.candidate else args.command
    if name == "start" and os.getuid() == 0:
        # Root's jails mask what others cannot read under /etc: that walk runs on another core
        # while the start's code loads (host.root_only_ahead).
        from ..host import root_only_ahead

        root_only_ahead()
    res = handler(name)(call)
    code = out(res, json_out)
    if res.bring is not None:
        bring(call.tmux, res, args, json_out)
    return code


def _unexpected(exc: Exception, verbose: bool) -> int:
    """Errors nobody turned into a TmuxjailError. The environment's (a file tmuxjail cannot
    create, a damaged store) get one line with what to do; anything else is a bug of ours: one
    line, and the full traceback in the log (and on stderr with -v). Nothing here may raise."""
    if exc.__class__.__module__ == "sqlite3":
        from ..store import damaged  # sqlite3 is loaded already: this costs nothing more

        try:
            err = damaged(paths.get().store, exc)
            fail(err.message, err.hint)
            return err.code
        except Exception:  # noqa: BLE001, S110 - the error path must not raise
            pass
    if isinstance(exc, OSError) and exc.filename:
        fail(f"{exc.filename}: {exc.strerror or exc}", "run `tmuxjail doctor` to see what this account is missing")
        return 1
    trace = traceback.format_exc()
    where = None
    try:
        log.setup(paths.get().log_file, False)
        log.warning("internal_error", error=repr(exc), traceback=trace)
        where = paths.get().log_file
    except Exception:  # noqa: BLE001, S110 - no usable log directory: stderr still gets the line
        pass
    if verbose:
        sys.stderr.write(trace)
    fail(f"internal error: {exc.__class__.__name__}: {exc}",
         f"rerun with -v, and report it with the traceback{f' logged in {where}' if where else ''}")
    return 1
