"""Command line: parse, call sessions, render text or JSON, map errors to exit codes."""

from __future__ import annotations

import sys

EPILOG = """examples:
  tmuxjail start shell --mode isolated             a jailed login shell with a private home
  tmuxjail start codex --mode isolated --workspace ~/src/app --name app
  tmuxjail list                                    sessions, their modes and status
  tmuxjail resume app                              reattach, or relaunch the CLI's own resume

exit codes: 0 ok, 1 error, 2 usage or bad input, 3 resume refused,
            4 approval/capability/allowed mode missing, 5 sandbox unavailable,
            6 audit found something to review"""

PROVIDERS = ("codex", "claude-code", "cursor", "pi", "shell")
MODES = ("compatibility", "isolated", "verified")
ALLOW_DOMAIN_HELP = ("with --network proxy (repeatable; example.com, *.example.com for its subdomains, * for all): "
                     "in isolated and compatibility the jail reaches ONLY these (it replaces *); in verified they "
                     "are ADDED to the profile's domains and need approval (tmuxjail approve PROVIDER --allow-domain D)")


def _parser():
    import argparse

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
                        "session's proxy, to public destinations its allow list names (default: from config, host)")
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

    r = cmd("resume", "reattach a live session, or relaunch the CLI's resume in the same jail", "tmuxjail resume app")
    r.add_argument("name")
    r.add_argument("--detach", action="store_true", help="do not attach or switch the client")
    r.add_argument("--client", metavar="CLIENT", help="tmux client to switch to the session (key bindings pass it)")
    r.add_argument("--accept-changes", action="store_true",
                   help="move the session to today's policy (asks on a terminal; verified mode needs the new approval first)")
    r.add_argument("--json", action="store_true", help="print JSON")

    ls = cmd("list", "list sessions with their effective modes", "tmuxjail list --json")
    ls.add_argument("--all", action="store_true", help="include stopped sessions")
    ls.add_argument("--check", action="store_true",
                    help="recompute each policy as resume would, and show `mismatch` with reason codes (slower)")
    ls.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the table (auto: on a terminal)")
    ls.add_argument("--server", metavar="SERVER",
                    help="only sessions of this tmux server (its -L name or socket path; default: every server)")
    lf = ls.add_mutually_exclusive_group()
    lf.add_argument("--json", action="store_true", help="print a JSON array")
    lf.add_argument("--ndjson", action="store_true", help="print one JSON object per line")

    pn = cmd("prune", "forget sessions that are over (stopped, failed, gone); never a live one",
             "tmuxjail prune --older-than 30d --dry-run")
    pn.add_argument("--older-than", metavar="AGE", help="only those unchanged for AGE (30d, 12h, 45m, 2w)")
    pn.add_argument("--dry-run", action="store_true", help="show what would be pruned")
    pn.add_argument("--json", action="store_true", help="print JSON")

    sh = cmd("show", "show a session and its effective policy, in full", "tmuxjail show app --json")
    sh.add_argument("name")
    sh.add_argument("--json", action="store_true", help="print JSON")
    sh.add_argument("--network", action="store_true", help="the destinations its egress proxy allowed and denied")

    st = cmd("stop", "stop a session (kills its tmux session; the record stays)", "tmuxjail stop app")
    st.add_argument("name")
    st.add_argument("--json", action="store_true", help="print JSON")

    sl = cmd("shell", "open your login shell in a new window, inside the same jail as a session", "tmuxjail shell app")
    sl.add_argument("name")
    sl.add_argument("--detach", action="store_true", help="do not attach or switch the client")
    sl.add_argument("--client", metavar="CLIENT", help="tmux client to switch to the new window")
    sl.add_argument("--json", action="store_true", help="print JSON")

    au = cmd("audit", "list what the session left in its workspaces that the host would run or trust "
             "(git hooks and command keys, .envrc, editor tasks, setuid files, links out); exit 6 if any",
             "tmuxjail audit app --json")
    au.add_argument("name")
    au.add_argument("--all", action="store_true", help="everything present, not only what changed since the start")
    au.add_argument("--json", action="store_true", help="print JSON")

    mn = cmd("menu", "run (or --print) the tmux menu/popup behind a tmux.conf.example key",
             "tmuxjail menu start --print")
    mn.add_argument("action", choices=("start", "resume", "list", "shell", "policy", "stop", "_start"),
                    metavar="{start,resume,list,shell,policy,stop}")
    mn.add_argument("-c", dest="client", metavar="CLIENT", help="tmux client (bindings pass '#{client_name}')")
    mn.add_argument("-t", dest="pane", metavar="PANE", help="tmux pane (bindings pass '#{pane_id}')")
    mn.add_argument("--print", action="store_true", help="print the tmux command instead of running it")
    mn.add_argument("rest", nargs="*", help=argparse.SUPPRESS)  # _start PROVIDER MODE (a start-menu item)

    d = cmd("doctor", "check tmux, bubblewrap and user namespaces, and say how to fix them", "tmuxjail doctor")
    d.add_argument("--move-store-aside", action="store_true",
                   help="rename a damaged store to store.db.broken-TIME (kept) and copy what still reads into a new one")
    d.add_argument("--json", action="store_true", help="print JSON")

    c = cmd("completion", "print a shell completion script", 'eval "$(tmuxjail completion bash)"')
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
    ce.add_argument("provider", choices=("codex", "claude-code", "pi", "cursor"))
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
    from .discover.cli import add_parser as discover_parser

    discover_parser(cmd)
    return p


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    for verb in ("start", "discover"):
        if verb in argv and "--" in argv[argv.index(verb):]:
            i = argv.index("--", argv.index(verb))
            return argv[:i], argv[i + 1:]
    return argv, []


def _print_json(data) -> None:
    import json

    print(json.dumps(data, indent=2, sort_keys=True))



def _session_text(d: dict) -> str:
    lines = [f"{k}: {d.get(k)}" for k in ("name", "provider", "mode", "network", "status", "fingerprint",
                                          "workspace", "private_home", "tmux_session", "tmux_pane", "created_at")]
    if d.get("failure"):
        lines.append(f"failure: {d['failure']}")
    if d.get("audit"):
        from .audit import clean

        a = d["audit"]
        lines.append(f"audit: {a['count']} finding(s) at {a['at']} (tmuxjail audit {d['name']})")
        lines += [f"  {f['kind']}  {clean(f['path'])}: {clean(f['detail'])}" for f in a["findings"][:20]]
    return "\n".join(lines)


def _policy_text(pol: dict) -> str:
    out = []
    for k, v in pol.items():
        if isinstance(v, (list, tuple)) and v and not isinstance(v[0], (list, tuple)):
            out.append(f"  {k}:")
            out += [f"    {x}" for x in v]
        elif isinstance(v, (list, tuple)) and v:
            out.append(f"  {k}:")
            out += [f"    {a}={b}" for a, b in v]
        elif isinstance(v, dict):
            out.append(f"  {k}:")
            out += [f"    {a}: {b}" for a, b in v.items()]
        else:
            out.append(f"  {k}: {v}")
    return "\n".join(out)


def _attach(result: dict, json_out: bool) -> None:
    import os

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
    if "switch-client" in argv:  # inside tmux: a session with no attached client has none to switch
        import subprocess

        if subprocess.run(argv, capture_output=True).returncode != 0:
            print(f"no attached tmux client to switch; attach with: {' '.join(argv[:-3] + ['attach', *argv[-2:]])}")
        return
    os.execv(argv[0], argv)


def _bring(tmux, result: dict, args, json_out: bool, target: str | None = None) -> None:
    """Show the user the session: switch the given client (key bindings), else attach from outside
    tmux or switch-client from inside, unless --detach."""
    client = getattr(args, "client", None)
    if client and result.get("tmux_socket") not in (None, tmux.socket) and not getattr(args, "detach", False):
        print(f"{result.get('name')} runs on the tmux server at {result['tmux_socket']}: "
              f"tmux -S {result['tmux_socket']} attach -t ={result['tmux_session']}")
        return
    if client and not getattr(args, "detach", False):
        tmux.switch_client(client, target or result.get("tmux_pane") or f"={result['tmux_session']}")
        return
    _attach(result, json_out)


def run(argv: list[str]) -> int:
    from .errors import TmuxjailError

    if argv[:1] == ["_pane"]:  # a new pane of a jailed session (its default-command); see panes.py
        from .panes import run_pane

        return run_pane(argv[1:])
    if argv[:1] == ["_audit"]:  # a pane-died hook of a strict session; see audit.py
        from .audit import run_hidden

        return run_hidden(argv[1:])
    argv, passthrough = _split_passthrough(argv)
    args = _parser().parse_args(argv)
    if args.version:
        from . import __version__

        print(f"tmuxjail {__version__}")
        return 0
    if not args.command:
        _parser().print_help()
        return 2
    json_out = getattr(args, "json", False)
    try:
        return _dispatch(args, passthrough, json_out)
    except TmuxjailError as exc:
        if json_out:
            _print_json({"error": exc.message, "code": exc.code, "hint": exc.hint, **exc.data})
        print(f"tmuxjail: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  {exc.hint}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, the traceback in the log
        return _unexpected(exc, getattr(args, "verbose", False))


def _unexpected(exc: Exception, verbose: bool) -> int:
    """Errors nobody turned into a TmuxjailError. The environment's (a file tmuxjail cannot
    create, a damaged store) get one line with what to do; anything else is a bug of ours: one
    line, and the full traceback in the log (and on stderr with -v). Nothing here may raise."""
    import traceback

    if exc.__class__.__module__ == "sqlite3":
        from . import paths
        from .store import damaged

        try:
            err = damaged(paths.get().store, exc)
            print(f"tmuxjail: {err.message}\n  {err.hint}", file=sys.stderr)
            return err.code
        except Exception:  # noqa: BLE001, S110 - the error path must not raise
            pass
    if isinstance(exc, OSError) and exc.filename:
        print(f"tmuxjail: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        print("  run `tmuxjail doctor` to see what this account is missing", file=sys.stderr)
        return 1
    trace = traceback.format_exc()
    where = None
    try:
        from . import log, paths

        log.setup(paths.get().log_file, False)
        log.warning("internal_error", error=repr(exc), traceback=trace)
        where = paths.get().log_file
    except Exception:  # noqa: BLE001, S110 - no usable log directory: stderr still gets the line
        pass
    if verbose:
        sys.stderr.write(trace)
    print(f"tmuxjail: internal error: {exc.__class__.__name__}: {exc}", file=sys.stderr)
    print(f"  rerun with -v, and report it with the traceback{f' logged in {where}' if where else ''}",
          file=sys.stderr)
    return 1


def _dispatch(args, passthrough: list[str], json_out: bool) -> int:
    import os

    from .tmux import Tmux

    tmux = Tmux(getattr(args, "socket_name", None), getattr(args, "socket_path", None))
    if args.command == "completion":
        from .completion import script

        print(script(args.shell))
        return 0
    if args.command not in ("doctor", "profiles"):
        from . import paths as paths_mod
        from .errors import TmuxjailError

        if why := paths_mod.home_problem(os.environ):
            raise TmuxjailError(f"{why}: tmuxjail keeps its state under HOME and mounts private homes there",
                                hint=paths_mod.HOME_FIX)
    if args.command == "doctor" and args.move_store_aside:
        from . import paths, store

        moved = store.move_aside(paths.get().store)
        _print_json(moved) if json_out else print(
            f"moved the store to {moved['moved_to']}; kept in the new one: "
            + ", ".join(f"{n} {t}" for t, n in sorted(moved["kept"].items())))
        return 0
    if args.command == "doctor":
        from . import doctor, paths

        results = doctor.checks(tmux, paths.get().store, dict(os.environ))
        failed = [c for c in results if c["required"] and not c["ok"]]
        if json_out:
            _print_json({"ok": not failed, "checks": results})
        else:
            for c in results:
                mark = "ok  " if c["ok"] else ("FAIL" if c["required"] else "warn")
                print(f"{mark}  {c['check']}: {c['detail']}")
                if c["fix"]:
                    print(f"      fix: {c['fix']}")
        return 1 if failed else 0
    if args.command == "profiles":
        return _profiles(args, json_out)
    if args.command == "certify":
        from . import certify

        rec = certify.run_certify(args.provider, tuple(args.mode), args.standin, args.output)
        _print_json(rec) if json_out else print(certify.render(rec))
        return 0 if rec["ok"] else 1
    from . import sessions
    from .errors import NotApproved, UsageError

    ctx = sessions.Context(tmux=tmux)
    if args.command in ("start", "resume", "stop", "approve", "revoke", "discover"):
        from . import log

        log.setup(ctx.paths.log_file, getattr(args, "verbose", False))
    if args.command == "start":
        opts = sessions.StartOptions(
            provider=args.provider, mode=args.mode, workspaces=tuple(args.workspace),
            name=args.name, env_name=args.env_name, capabilities=tuple(args.capability),
            detach=args.detach, non_interactive=args.non_interactive, dry_run=args.dry_run,
            args=tuple(passthrough), backend=args.backend, restriction=_restriction(args.restrict),
            network=args.network, candidate=args.candidate,
            allow_domains=_domains(args))
        place = None
        if (args.here or args.split) and not args.dry_run:
            from .panes import here

            place = here(tmux, ctx.env, "window" if args.here else "split", args.split)
        try:
            result = sessions.start(ctx, opts, place)
        except NotApproved as exc:
            # Interactive starts may ask a human; --non-interactive and scripts never do.
            if not exc.data.get("fix") or args.non_interactive or args.dry_run or json_out \
                    or not (sys.stdin.isatty() and sys.stdout.isatty()):
                raise
            print(f"tmuxjail: {exc.message}")
            if not _approve(ctx, args.provider, args.capability, False, False, False, args.allow_domain or ()):
                raise
            result = sessions.start(ctx, opts, place)
        if args.dry_run:
            if json_out:
                _print_json(result)
            else:
                import shlex

                print(f"mode: {result['mode']}\nfingerprint: {result['fingerprint']}\npolicy:")
                print(_policy_text(result["policy"]))
                print("pane command:\n  " + shlex.join(result["pane_command"]))
                print("sandbox argv:\n  " + shlex.join(result["sandbox_argv"]))
                if result.get("seatbelt_profile"):
                    print("seatbelt profile:\n" + result["seatbelt_profile"])
                    print("seatbelt parameters:")
                    print("\n".join(f"  {k}={v}" for k, v in result["seatbelt_params"].items()))
                print("environment names:\n  " + " ".join(result["env_names"]))
            return 0
        _print_json(result) if json_out else (None if args.client else print(
            f"started {result['name']} ({result['mode']}, {result['fingerprint']})"))
        _bring(tmux, result, args, json_out)
        return 0
    if args.command == "resume":
        if args.accept_changes and not _confirm(f"Move {args.name} to today's policy and relaunch it?"):
            raise UsageError("--accept-changes asks on a terminal only, and was not confirmed")
        result = sessions.resume(ctx, args.name, detach=args.detach, accept_changes=args.accept_changes)
        _print_json(result) if json_out else (None if args.client else print(
            f"resumed {result['name']} ({result['mode']})"))
        _bring(tmux, result, args, json_out)
        return 0
    if args.command == "list":
        from . import listing

        rows = listing.rows(ctx, include_stopped=args.all, check=args.check, server=args.server)
        fmt = "json" if json_out else "ndjson" if args.ndjson else "table"
        text = listing.render(rows, fmt, listing.use_color(args.color, sys.stdout),
                              listing.width(sys.stdout, os.environ), os.environ.get("HOME", ""))
        if text:
            print(text)
        return 0
    if args.command == "prune":
        from . import prune

        done = prune.prune(ctx, prune.parse_age(args.older_than), args.dry_run)
        if json_out:
            _print_json({"dry_run": args.dry_run, "sessions": done})
        else:
            verb = "would prune" if args.dry_run else "pruned"
            print(f"{verb} {len(done)} session(s)" + "".join(f"\n  {d['name']} ({d['status']})" for d in done))
        return 0
    if args.command == "shell":
        from . import log, panes

        log.setup(ctx.paths.log_file, getattr(args, "verbose", False))
        result = panes.shell(ctx, args.name, detach=args.detach or bool(args.client))
        _print_json(result) if json_out else (None if args.client else print(
            f"shell in {result['name']} ({result['mode']}): {result['shell_pane']}"))
        _bring(tmux, result, args, json_out, result["shell_pane"])
        return 0
    if args.command == "menu":
        from . import menu

        return menu.run(ctx, args.action, args.client, args.pane, args.print, args.rest)
    if args.command == "audit":
        from . import audit
        from .errors import FINDINGS
        from .tmux import check_name

        row = ctx.store.find(check_name(args.name))
        if row is None:
            raise UsageError(f"no session named {args.name!r}", hint="see: tmuxjail list --all")
        result = audit.run(ctx.store, row, show_all=args.all)
        _print_json(result) if json_out else print(audit.render(result))
        return FINDINGS if result["count"] else 0
    if args.command == "show":
        d = sessions.show(ctx, args.name)
        if args.network:
            from . import netlog

            rep = netlog.report(d, str(ctx.paths.store))
            _print_json(rep) if json_out else print(netlog.text(rep))
            return 0
        if json_out:
            _print_json(d)
        else:
            print(_session_text(d))
            print("policy:")
            print(_policy_text(d["policy"] or {}))
        return 0
    if args.command == "discover":
        from .discover.cli import run as discover

        return discover(ctx, args, passthrough, json_out)
    if args.command == "approve" and args.candidate:
        from .discover.cli import approve_candidate

        return approve_candidate(ctx, args, json_out)
    if args.command == "approve":
        approval = _approve(ctx, args.provider, args.capability, args.yes, args.details, json_out, args.allow_domain)
        if approval is None:
            return 1
        _print_json(approval) if json_out else print(f"approved ({approval['id']})")
        return 0
    if args.command == "approvals":
        from . import approve

        rows = approve.listing(ctx, include_revoked=args.all)
        if json_out:
            _print_json(rows)
        for r in [] if json_out else rows:
            state = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
            print(f"{r['provider']:12} v{r['profile_version']}  {r['executable']['version']:12} "
                  f"{r['approved_at']} by {r['approved_by']}  {state}  {', '.join(r['capabilities'])}")
        if not rows and not json_out:
            print("no approvals")
        return 0
    if args.command == "revoke":
        from . import approve

        n = approve.revoke(ctx, args.provider)
        _print_json({"provider": args.provider, "revoked": n}) if json_out else print(f"revoked {n} approval(s) of {args.provider}")
        return 0
    if args.command == "preflight":
        from . import approve

        opts = sessions.StartOptions(
            provider=args.provider, mode=args.mode, workspaces=tuple(args.workspace), env_name=args.env_name,
            capabilities=tuple(args.capability), non_interactive=True, restriction=_restriction(args.restrict),
            network=args.network, candidate=args.candidate,
            allow_domains=_domains(args))
        result = approve.preflight(ctx, opts)
        _print_json(result) if json_out else print(f"ok: {result['mode']} {result['fingerprint']}")
        return 0
    if args.command == "stop":
        d = sessions.stop(ctx, args.name)
        _print_json(d) if json_out else print(f"stopped {d['name']}")
        return 0
    return 2


def _profiles(args, json_out: bool) -> int:
    import json

    from . import profiles
    from .errors import UsageError

    if args.action == "check":
        files = profiles.shipped()
        if args.update:
            with open(args.update, "w") as f:
                json.dump(profiles.hash_list(files), f, indent=2, sort_keys=True)
                f.write("\n")
            print(f"wrote {args.update}")
            return 0
        problems = profiles.check(files, profiles.recorded_hashes())
        _print_json({"ok": not problems, "problems": problems}) if json_out else \
            print("\n".join(problems) if problems else f"ok: {len(files)} files match their versions")
        return 1 if problems else 0
    if args.action == "show":
        if not args.provider:
            raise UsageError("profiles show needs a PROVIDER")
        from .adapters import get

        get(args.provider)
        p = profiles.load(args.provider)
        if json_out:
            _print_json(p.model_dump(mode="json"))
            return 0
        print(f"{p.display_name}  (profile {p.provider} v{p.profile_version}, {p.certification})")
        for title, ids in (("always", p.baseline), ("optional", p.optional)):
            print(f"{title}:")
            for cid in ids:
                cap = p.capabilities[cid]
                print(f"  {cid:22} {cap.label}" + ("  [unverified]" if cap.unverified else ""))
                if args.details:
                    for g in cap.paths:
                        print(f"  {'':22}   {g.access} {g.kind} {g.path}{' (if present)' if g.optional else ''}")
                    if cap.env:
                        print(f"  {'':22}   env: {' '.join(cap.env)}")
                    if cap.network:
                        print(f"  {'':22}   network: {' '.join(cap.network)}")
        if args.details:
            print(f"executables: {', '.join(p.executables)}; supported versions: {p.supported_versions or 'any'}")
            print(f"certified on: {', '.join(p.certified_versions) or 'none yet'}; hash: {p.hash}")
        return 0
    data = [{"provider": p.provider, "profile_version": p.profile_version,
             "display_name": p.display_name, "certification": p.certification,
             "baseline": [p.capabilities[c].label for c in p.baseline]}
            for p in map(profiles.load, profiles.available())]
    if json_out:
        _print_json(data)
    else:
        for d in data:
            print(f"{d['provider']:12} v{d['profile_version']}  {d['certification']:15} {d['display_name']}")
    return 0


def _restriction(path: str | None) -> dict | None:
    if not path:
        return None
    import os

    from . import restrict

    return {"source": os.path.abspath(path), "rules": restrict.load(path)}


def _confirm(question: str) -> bool:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _domains(args) -> tuple[str, ...] | None:
    return None if args.allow_domain is None else tuple(args.allow_domain)


def _approve(ctx, provider: str, capabilities, yes: bool, details: bool, json_out: bool,
             domains=()) -> dict | None:
    from . import approve
    from .errors import UsageError

    plan = approve.preview(ctx, provider, tuple(capabilities), details, tuple(domains))
    if not json_out:
        print("This approval lets verified-mode sessions use:")
        print("\n".join(plan["text"]))
    if not yes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("approving needs a terminal to confirm, or --yes after reviewing the text above")
        if not _confirm("Approve?"):
            print("not approved")
            return None
    return approve.record(ctx, plan)


def main() -> None:
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `tmuxjail list | head` ends quietly
    argv = sys.argv[1:]
    if argv in (["--version"], ["-V"]):  # fast path: no argparse, nothing else imported
        from . import __version__

        print(f"tmuxjail {__version__}")
        raise SystemExit(0)
    raise SystemExit(run(argv))
