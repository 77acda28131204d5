"""The command table: each command's handler ("module:function" in tmuxjail.commands), its help
and the arguments it declares, as data. cli/app.py builds the parser from it (only the command a
command line runs, or all of them for help), and completion.py reads the same data, so neither
needs argparse's internals. Here, beside the handler's name, rather than in each handler's module:
help and completion need every command's arguments, and importing every handler's code for them
(pydantic, sqlite3) took `--help` from 0.06 s to 0.24 s."""

from __future__ import annotations

import argparse
from typing import Any

from ..registry import CERTIFIABLE, MODES, PROVIDERS


class Arg:
    """One add_argument call: its names and keywords."""

    __slots__ = ("kw", "names")

    def __init__(self, *names: str, **kw: Any):
        self.names, self.kw = names, kw

    def but(self, **kw: Any) -> Arg:
        """The same argument with some keywords changed (another help, default or action)."""
        return Arg(*self.names, **{**self.kw, **kw})

    @property
    def flags(self) -> tuple[str, ...]:
        return self.names if self.names[0].startswith("-") else ()

    @property
    def dest(self) -> str:
        if "dest" in self.kw:
            return self.kw["dest"]
        if not self.flags:
            return self.names[0]
        long = next((n for n in self.flags if n.startswith("--")), self.flags[0])
        return long.lstrip("-").replace("-", "_")

    @property
    def takes_value(self) -> bool:
        return self.kw.get("action") not in ("store_true", "store_false", "count", "help", "version")


class OneOf(tuple):
    """Arguments that exclude each other (a mutually exclusive group)."""


class Verb:
    """A command: its name, its handler ("module:function" in tmuxjail.commands), its help, an
    example, its arguments, and more help after the example."""

    __slots__ = ("args", "epilog", "example", "handler", "help", "name")

    def __init__(self, name: str, handler: str, help: str, example: str, args: tuple[Arg | OneOf, ...],
                 epilog: str = ""):
        self.name, self.handler, self.help, self.example, self.args, self.epilog = (
            name, handler, help, example, args, epilog)

    def arguments(self) -> list[Arg]:
        return [a for item in self.args for a in (item if isinstance(item, OneOf) else (item,))]


class MenuActions(tuple):
    """The menu's actions as help, errors and completion list them; its internal ones (what menu
    items and prompts run: `menu _start|_resume|_stop ...`) are accepted but never listed."""

    def __contains__(self, word: object) -> bool:
        return word in ("_start", "_resume", "_stop") or tuple.__contains__(self, word)


ALLOW_DOMAIN_HELP = ("under --network proxy, the default in isolated and verified (repeatable; example.com, *.example.com for its subdomains, * for all): "
                     "in isolated and compatibility the jail reaches ONLY these (it replaces *); in verified they "
                     "are ADDED to the profile's domains and need approval (tmuxjail approve PROVIDER --allow-domain D)")

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

# Every command's own group: the tmux server it talks to (also the top level's).
COMMON = (
    Arg("-L", dest="socket_name", metavar="SOCKET_NAME", default=argparse.SUPPRESS,
        help="tmux server socket name (as tmux -L)"),
    Arg("-S", dest="socket_path", metavar="SOCKET_PATH", default=argparse.SUPPRESS,
        help="tmux server socket path (as tmux -S)"),
    Arg("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="also print log lines on stderr"),
)

# Shared arguments: declared once, used by every command that takes them (`but` changes a word).
JSON = Arg("--json", action="store_true", help="print JSON")
NAME = Arg("name")
DETACH = Arg("--detach", action="store_true", help="do not attach or switch the client")
CLIENT = Arg("--client", metavar="CLIENT", help="tmux client to switch to the session (key bindings pass it)")
DRY_RUN = Arg("--dry-run", action="store_true")
WORKSPACE = Arg("--workspace", action="append", default=[], metavar="DIR",
                help="writable workspace, same absolute path inside (repeatable; the first is the cwd; default: .)")
ENV = Arg("--env", dest="env_name", default="default", metavar="NAME",
          help="private-home environment for isolated mode (default: default)")
MODE = Arg("--mode", choices=MODES, help="security mode (default: from config, compatibility out of the box)")
CAPABILITY = Arg("--capability", action="append", default=[], metavar="ID", help="optional capability to add (verified mode)")
ALLOW_DOMAIN = Arg("--allow-domain", action="append", default=None, metavar="PATTERN", dest="allow_domain",
                   help=ALLOW_DOMAIN_HELP)
CANDIDATE = Arg("--candidate", metavar="ID", help="verified mode: use this approved discovery candidate as the profile")
ALL = Arg("--all", action="store_true")

# What a start asks for: start and preflight take the same request (preflight checks it).
REQUEST = (
    Arg("provider", metavar="PROVIDER", help="one of: " + ", ".join(PROVIDERS)),
    MODE,
    WORKSPACE,
)
REQUEST_JAIL = (
    ENV,
    Arg("--network", choices=("host", "none", "proxy"), default=None,
        help="host: the host's network; none: only the jail's own loopback; proxy: only through the "
             "session's proxy, to public destinations its allow list names (default: from config; host in "
             "compatibility, proxy in isolated and verified)"),
    ALLOW_DOMAIN,
    CAPABILITY,
)
RESTRICT = Arg("--restrict", metavar="FILE", help="restriction file (TOML) that narrows the policy; never widens")

START = (
    *REQUEST,
    Arg("--name", help="session name (default: PROVIDER-WORKSPACE-XXXX)"),
    *REQUEST_JAIL,
    DETACH,
    OneOf((Arg("--here", action="store_true", help="a new window in the current tmux session (inside tmux)"),
           Arg("--split", choices=("h", "v"), help="split the current tmux pane: h side by side, v stacked"))),
    CLIENT.but(help="tmux client to switch to the new session (key bindings pass it)"),
    Arg("--non-interactive", action="store_true", help="never prompt; fail instead"),
    DRY_RUN.but(help="print the policy, fingerprint, pane command and sandbox argv; run nothing"),
    RESTRICT,
    Arg("--backend", choices=("bwrap", "seatbelt"), default=None,
        help="with --dry-run: show what this backend would run (seatbelt = the macOS profile, auditable anywhere)"),
    CANDIDATE,
    JSON,
)

LIST = (
    ALL.but(help="include stopped sessions"),
    Arg("--check", action="store_true",
        help="recompute each policy as resume would, and show `mismatch` with reason codes (slower)"),
    Arg("--color", choices=("auto", "always", "never"), default="auto", help="colour the table (auto: on a terminal)"),
    Arg("--server", metavar="SERVER",
        help="only sessions of this tmux server (its -L name or socket path; default: every server)"),
    Arg("--workspace", metavar="DIR", help="only sessions whose workspace is DIR (or under it)"),
    Arg("--provider", choices=PROVIDERS, help="only sessions of this provider"),
    OneOf((JSON.but(help="print a JSON array"), Arg("--ndjson", action="store_true", help="print one JSON object per line"))),
)

DISCOVER = (
    Arg("target", metavar="PROVIDER|show|replay|list"),
    Arg("id", nargs="?", metavar="ID", help="for show and replay: the discovery's id"),
    WORKSPACE.but(help="writable workspace (repeatable; the first is the cwd; default: .)"),
    ENV.but(help="private-home environment of the observed isolated jail (default: default)"),
    Arg("--non-interactive", action="store_true",
        help="do not attach: run the step detached until it exits or --timeout; never prompts"),
    Arg("--timeout", type=float, default=None, metavar="SECONDS",
        help="with --non-interactive: stop the step after this long (default: 600)"),
    JSON.but(help="print JSON (a new discovery: its id)"),
)

VERBS = (
    Verb("start", "start:run", "start a CLI in a new jailed tmux pane",
         "tmuxjail start codex --mode isolated --workspace ~/src/app --name app -- --model o4", START),
    Verb("resume", "resume:run", "reattach if live; relaunch the CLI's own resume if gone; refuse a relaunch if changed",
         "tmuxjail resume app", (
             NAME, DETACH, CLIENT,
             Arg("--accept-changes", action="store_true",
                 help="move the session to today's policy, ending its CLI if it runs (asks on a terminal; "
                      "verified mode needs the new approval first)"),
             Arg("--yes", action="store_true", help="with --accept-changes: do not ask (scripts)"),
             JSON)),
    Verb("attach", "manage:run_attach",
         "reattach a live session: nothing is relaunched (resume relaunches a CLI that ended)",
         "tmuxjail attach app", (NAME, CLIENT, JSON)),
    Verb("rename", "manage:run_rename", "rename a session (its record, and its tmux session when tmuxjail owns it)",
         "tmuxjail rename codex-app-1a2b app", (NAME.but(metavar="OLD"), Arg("new", metavar="NEW"), JSON)),
    Verb("list", "list:run", "list sessions with their effective modes and status", "tmuxjail list --json", LIST,
         epilog=STATUS_HELP),
    Verb("prune", "prune:run", "forget sessions that are over (never a live one); --homes: unused private homes",
         "tmuxjail prune --older-than 30d --dry-run", (
             Arg("--older-than", metavar="AGE", help="only those unchanged for AGE (30d, 12h, 45m, 2w)"),
             DRY_RUN.but(help="show what would be pruned"),
             Arg("--homes", action="store_true",
                 help="instead: delete the private homes (isolated mode) of workspaces that no longer exist or "
                      "have no session left, with their sizes (try --dry-run first)"),
             JSON)),
    Verb("show", "show:run", "show a session and its effective policy, in full", "tmuxjail show app --json", (
        NAME, JSON, Arg("--network", action="store_true", help="the destinations its egress proxy allowed and denied"))),
    Verb("stop", "stop:run", "stop sessions (kills their tmux sessions; the records stay)",
         "tmuxjail stop app\n  tmuxjail stop --all --workspace ~/src/app", (
             NAME.but(nargs="?", help="the session (or --all)"),
             ALL.but(help="stop every live session (with --workspace: of that workspace)"),
             Arg("--workspace", metavar="DIR", help="with --all: only sessions whose workspace is DIR (or under it)"),
             JSON)),
    Verb("shell", "shell:run", "open your login shell in a new window, inside the same jail as a session",
         "tmuxjail shell app", (NAME, DETACH, CLIENT.but(help="tmux client to switch to the new window"), JSON)),
    Verb("audit", "audit:run", "list what the session left that the host would run or trust; exit 6 if any",
         "tmuxjail audit app --json", (
             NAME, ALL.but(help="everything present, not only what changed since the start"), JSON)),
    Verb("menu", "menu:run", "run (or --print) the tmux menu behind a key of tmux.conf.example",
         "tmuxjail menu start --print", (
             Arg("action", choices=MenuActions(("start", "resume", "list", "shell", "policy", "stop")),
                 metavar="{start,resume,list,shell,policy,stop}"),
             Arg("-c", dest="client", metavar="CLIENT", help="tmux client (bindings pass '#{client_name}')"),
             Arg("-t", dest="pane", metavar="PANE", help="tmux pane (bindings pass '#{pane_id}')"),
             Arg("--print", action="store_true", help="print the tmux command instead of running it"),
             JSON.but(help="with --print: print the command as JSON, {\"command\": [its words]}"),
             Arg("rest", nargs="*", help=argparse.SUPPRESS))),  # _start PROVIDER MODE (a start-menu item)
    Verb("doctor", "doctor:run", "check what works here, and print the command that fixes the rest", "tmuxjail doctor", (
        Arg("--move-store-aside", action="store_true",
            help="rename a damaged store to store.db.broken-TIME (kept) and copy what still reads into a new one"),
        JSON)),
    Verb("completion", "completion:run", "print a shell completion script: eval \"$(tmuxjail completion bash)\"",
         'eval "$(tmuxjail completion bash)"', (Arg("shell", choices=("bash", "zsh")),)),
    Verb("profiles", "profiles:run", "list, show or check the provider profiles", "tmuxjail profiles show codex --details", (
        Arg("action", nargs="?", default="list", choices=("list", "show", "check")),
        Arg("provider", nargs="?", help="for show"),
        Arg("--details", action="store_true", help="show: add paths, env names, hosts, version range, certification"),
        Arg("--update", metavar="FILE", help="check: write the hash list to FILE (profiles/hashes.json in a checkout)"),
        JSON)),
    Verb("approve", "approve:run",
         "approve a provider's capabilities for verified mode (shows exactly what, then records it)",
         "tmuxjail approve codex --capability git-identity", (
             Arg("provider"),
             CAPABILITY.but(help="optional capability to include"),
             ALLOW_DOMAIN.but(default=[], help="a domain verified sessions may reach beyond what the capabilities "
                                               "declare (repeatable)"),
             Arg("--yes", action="store_true", help="do not ask (for scripts that already reviewed it)"),
             Arg("--details", action="store_true", help="also show paths, env names and hosts"),
             CANDIDATE.but(help="approve a discovery's candidate profile (shows the diff; a terminal must confirm; no --yes)"),
             JSON)),
    Verb("approvals", "approve:approvals_", "list recorded approvals", "tmuxjail approvals --json", (
        ALL.but(help="include revoked approvals"), JSON)),
    Verb("revoke", "approve:revoke", "revoke every approval of a provider", "tmuxjail revoke codex", (Arg("provider"), JSON)),
    Verb("certify", "certify:run", "run the installed CLI in real jailed panes under each mode and record the evidence "
         "(scratch HOME, private tmux server; needs no credentials or network)",
         "tmuxjail certify codex --mode isolated --json", (
             Arg("provider", choices=CERTIFIABLE),
             MODE.but(action="append", default=[], help="repeatable (default: all three)"),
             Arg("--standin", action="store_true", help="cursor: certify a stand-in that follows its documented contract"),
             Arg("--output", metavar="FILE", help="evidence JSON file (default: in the state dir, under certify/)"),
             JSON)),
    Verb("preflight", "start:run_preflight",
         "check that a start would run, without prompting or starting anything (for scheduled runs)",
         "tmuxjail preflight codex --mode verified --workspace ~/src/app --json",
         (*REQUEST, *REQUEST_JAIL, RESTRICT, CANDIDATE, JSON)),
    Verb("discover", "discover:run", "run a provider once in an observed (isolated, traced) jail and propose a profile; "
         "PROVIDER starts a discovery, show/replay take its ID, list lists them",
         "tmuxjail discover codex --workspace ~/src/app\n"
         "  tmuxjail discover codex --non-interactive --timeout 60 -- exec \"run the tests\"\n"
         "  tmuxjail discover show codex-app-1 --json\n  tmuxjail discover replay codex-app-1", DISCOVER),
)
# A command line that a handler other than its verb's runs.
ROUTES = {"approve --candidate": "discover:approve_candidate"}
# The top level's own (besides COMMON and the command).
TOP = (Arg("--version", action="store_true", help="print the version"),)
