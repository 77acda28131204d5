"""The command table: each command's name, its handler ("module:function" in tmuxjail.commands)
and its one-line help, plus the arguments several commands share. Each command declares its own
arguments, example and further help next to its handler (`@declares`, in its module). cli/app.py
builds the parser from both (the top level and its help from this table alone; a command's
subparser with its arguments once that command is named), and completion.py reads the same
declarations, so neither needs argparse's internals. The one-line help stays here: `--help`
lists every command, and importing every handler's code for it (pydantic, sqlite3) took it from
0.06 s to 0.24 s."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module

from ..registry import MODES, PROVIDERS

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])


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


class Declared:
    """What a handler declares (@declares): an example, its arguments, more help after the example."""

    __slots__ = ("args", "epilog", "example")

    def __init__(self, example: str, args: tuple[Arg | OneOf, ...], epilog: str = ""):
        self.example, self.args, self.epilog = example, args, epilog


def declares(example: str, *args: Arg | OneOf, epilog: str = "") -> Callable[[F], F]:
    """A handler's own arguments, declared on the handler itself."""
    def mark(func: F) -> F:
        setattr(func, "declared", Declared(example, args, epilog))  # noqa: B010 - mypy: no attribute on F
        return func
    return mark


def load(ref: str, package: str = "tmuxjail.commands") -> Any:
    """The function a "module:function" reference names (importing its module)."""
    module, _, func = ref.partition(":")
    return getattr(import_module(f"{package}.{module}"), func)


class Verb:
    """A command: its name, its handler ("module:function" in tmuxjail.commands) and its help; what
    the handler declares (Declared) is read from it when asked."""

    __slots__ = ("handler", "help", "name")

    def __init__(self, name: str, handler: str, help: str):
        self.name, self.handler, self.help = name, handler, help

    def declared(self) -> Declared:
        return load(self.handler).declared

    def arguments(self) -> list[Arg]:
        return [a for item in self.declared().args for a in (item if isinstance(item, OneOf) else (item,))]


ALLOW_DOMAIN_HELP = ("under --network proxy, the default in isolated and verified (repeatable; example.com, *.example.com for its subdomains, * for all): "
                     "in isolated and compatibility the jail reaches ONLY these (it replaces *); in verified they "
                     "are ADDED to the profile's domains and need approval (tmuxjail approve PROVIDER --allow-domain D)")

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
    Arg("--mcp", action="append", default=[], metavar="NAME",
        help="strict modes: attach the MCP server the config declares as [mcp.NAME] (repeatable); it runs "
             "outside the jail with its secrets, and the CLI reaches it through the session's broker (docs/mcp.md)"),
)
RESTRICT = Arg("--restrict", metavar="FILE", help="restriction file (TOML) that narrows the policy; never widens")

VERBS = (
    Verb("start", "start:run", "start a CLI in a new jailed tmux pane"),
    Verb("resume", "resume:run", "reattach if live; relaunch the CLI's own resume if gone; refuse a relaunch if changed"),
    Verb("attach", "manage:run_attach",
         "reattach a live session: nothing is relaunched (resume relaunches a CLI that ended)"),
    Verb("rename", "manage:run_rename", "rename a session (its record, and its tmux session when tmuxjail owns it)"),
    Verb("list", "list:run", "list sessions with their effective modes and status"),
    Verb("prune", "prune:run", "forget sessions that are over (never a live one); --homes: unused private homes"),
    Verb("show", "show:run", "show a session and its effective policy, in full"),
    Verb("stop", "stop:run", "stop sessions (kills their tmux sessions; the records stay)"),
    Verb("diff", "worktree:run_diff", "show a worktree session's commits and files against its base"),
    Verb("land", "worktree:run_land",
         "bring a worktree session's commits into the repository (fast-forward, merge or --squash); runs nothing of the agent's"),
    Verb("shell", "shell:run", "open your login shell in a new window, inside the same jail as a session"),
    Verb("audit", "audit:run", "list what the session left that the host would run or trust; exit 6 if any"),
    Verb("menu", "menu:run", "run (or --print) the tmux menu behind a key of tmux.conf.example"),
    Verb("doctor", "doctor:run", "check what works here, and print the command that fixes the rest"),
    Verb("completion", "completion:run", "print a shell completion script: eval \"$(tmuxjail completion bash)\""),
    Verb("profiles", "profiles:run", "list, show or check the provider profiles"),
    Verb("login", "login:run", "sign in to a CLI once, in a jail of its own; only its credential files are kept, "
         "where no jail sees them"),
    Verb("logout", "login:run_logout", "remove a CLI's kept login"),
    Verb("approve", "approve:run",
         "approve a provider's capabilities for verified mode (shows exactly what, then records it)"),
    Verb("approvals", "approve:approvals_", "list recorded approvals"),
    Verb("revoke", "approve:revoke", "revoke every approval of a provider"),
    Verb("certify", "certify:run", "run the installed CLI in real jailed panes under each mode and record the evidence "
         "(scratch HOME, private tmux server; needs no credentials or network)"),
    Verb("preflight", "start:run_preflight",
         "check that a start would run, without prompting or starting anything (for scheduled runs)"),
    Verb("discover", "discover:run", "run a provider once in an observed (isolated, traced) jail and propose a profile; "
         "PROVIDER starts a discovery, show/replay take its ID, list lists them"),
)
# A command line that a handler other than its verb's runs.
ROUTES = {"approve --candidate": "discover:approve_candidate"}
# The top level's own (besides COMMON and the command).
TOP = (Arg("--version", action="store_true", help="print the version"),)
