"""The command line behind cli.main: the parser, built from the command table (commands/table.py:
each command's name, handler and help) and from what each handler declares next to itself (its
arguments, read when that command is named), and the exit codes. Handlers (tmuxjail.commands) return data; render.py prints it as text or JSON."""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__, log, paths
from ..commands import Call
from ..commands.table import COMMON, ROUTES, TOP, VERBS, OneOf, load
from ..errors import TmuxjailError
from ..pane.command import PANE_VERB
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

# command -> "module:handler" in tmuxjail.commands. The one place that imports a command's code,
# and only the command that runs (tests/unit/test_imports.py holds each fast path to its imports).
COMMANDS = {**{v.name: v.handler for v in VERBS}, **ROUTES}
SUBCOMMANDS = frozenset(name for name in COMMANDS if " " not in name)
# Hidden commands that tmux runs (no argparse): a new pane of a jailed session, a pane-died hook.
HIDDEN = {PANE_VERB: "commands.pane:run_pane", "_audit": "audit:run_hidden"}
# Commands that work without a usable HOME (they say what is wrong, or need no state).
NO_HOME = ("completion", "doctor", "profiles")


def handler(name: str, table: dict[str, str] = COMMANDS, package: str = "tmuxjail.commands"):
    return load(table[name], package)


def invoked(argv: list[str]) -> str | None:
    """The subcommand a command line runs, when the parser need hold only that one (a start from
    a key binding should not build twenty subparsers). None, and so the whole parser, for help, no
    command, and any top-level option but -L/-S/-v. (Completion reads commands/table.py, not the
    parser.)"""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        if word in ("-L", "-S"):
            i += 2
        elif word in ("-v", "--verbose") or (word[:2] in ("-L", "-S") and len(word) > 2):
            i += 1
        else:
            return None
    if i >= len(argv) or argv[i] not in SUBCOMMANDS:
        return None
    return None if "-h" in argv or "--help" in argv else argv[i]


def parser(only: str | None = None, argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (only=a subcommand) one whose other subcommands are left out: it
    parses that subcommand's command lines exactly as the whole one does. Given the command line
    (argv), the whole parser holds the arguments of only the commands it names (importing their
    handlers): `--help` lists every command from the table alone."""
    common = argparse.ArgumentParser(add_help=False)
    add(common.add_argument_group("tmux server"), COMMON)
    p = argparse.ArgumentParser(
        prog="tmuxjail", parents=[common], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run coding-agent CLIs in tmux panes whose own process is a sandbox.")
    add(p, TOP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    named = None if argv is None else set(argv)
    for verb in VERBS:
        if only is not None and verb.name != only:
            continue
        sp = sub.add_parser(verb.name, parents=[common], help=verb.help, description=verb.help,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        if named is None or verb.name in named:
            declared = verb.declared()
            sp.epilog = "example:\n  " + declared.example + ("\n\n" + declared.epilog if declared.epilog else "")
            add(sp, declared.args)
    return p


def add(p, args) -> None:
    """Declarations (commands/table.py) onto a parser or an argument group."""
    for item in args:
        if isinstance(item, OneOf):
            add(p.add_mutually_exclusive_group(), item)
        else:
            p.add_argument(*item.names, **item.kw)


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
    only = invoked(argv)
    if only == "start" and os.getuid() == 0:
        # Root's jails mask what others cannot read under /etc: that walk runs on another core
        # while the start's code loads (for its declarations, next: host.root_only_ahead).
        from ..host import root_only_ahead

        root_only_ahead()
    p = parser(only, argv)
    args = p.parse_args(argv)
    if args.version:
        print(f"tmuxjail {__version__}")
        return 0
    if not args.command:
        p.print_help()
        return 2
    json_out = getattr(args, "json", False)
    try:
        return _dispatch(args, passthrough, json_out)
    except TmuxjailError as exc:
        return error(exc, json_out)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, the traceback in the log
        return _unexpected(exc, getattr(args, "verbose", False))


def _dispatch(args, passthrough: list[str], json_out: bool) -> int:
    tmux = Tmux(getattr(args, "socket_name", None), getattr(args, "socket_path", None))
    call = Call(args, passthrough, json_out, tmux)
    if args.command not in NO_HOME and (why := paths.home_problem(os.environ)):
        raise TmuxjailError(f"{why}: tmuxjail keeps its state under HOME and mounts private homes there",
                            hint=paths.HOME_FIX)
    name = "approve --candidate" if args.command == "approve" and args.candidate else args.command
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
    try:
        import traceback  # here only: with linecache and tokenize, ~3 ms of every command otherwise

        trace = traceback.format_exc()
    except Exception:  # noqa: BLE001 - the error path must not raise
        trace = repr(exc)
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
