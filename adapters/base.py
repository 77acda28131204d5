"""What every provider adapter knows: how to find, start and resume one CLI. Pure functions of
their inputs: no filesystem, tmux, SQLite or environment reads (identity.py does the looking)."""

from __future__ import annotations

from pathlib import PurePosixPath

from tmuxjail.record import Record
from tmuxjail.registry import Mode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tmuxjail.effective import Policy


class Certification(Record):
    """How `tmuxjail certify` recognises and probes this CLI (data only: tmuxjail.certify runs it)."""

    first_screen: tuple[str, ...]  # regexes; any match = the CLI reached its first screen
    state_dir: str  # relative to HOME: where the CLI keeps its state once relocated/approved
    token_files: tuple[str, ...]  # relative to HOME: written on the first run, kept afterwards
    resume_syntax: str  # regex the relaunched CLI's argv must match
    child_note: str  # how a child process of the CLI is made, in words
    child_by_keys: bool = False  # typed into the running CLI (else a second session starts one)
    env: dict[str, str] = {}  # noqa: RUF012 - added to the scratch environment (read only)
    probe_env: dict[str, str] = {}  # noqa: RUF012 - added for the child session only (read only)


class Conversation(Record):
    """Where a CLI that cannot be given its conversation id up front keeps its conversations, so
    tmuxjail can learn the id after the start (tmuxjail.conversation reads it; data only here)."""

    state_dir: str  # relative to HOME: conversation files below it (date directories, any depth <= 3)
    file: str  # regex on a file name; group 1 is the conversation id
    screen: str  # regex on the dead pane's last screen (the CLI's exit note); group 1 is the id


class Adapter(Record):
    """(NamedTuples, not dataclasses: every start loads its adapter, and dataclasses would cost it
    inspect and ast. A provider's subclass adds methods, never fields.)"""

    provider: str
    # Environment variables that relocate the CLI's state, as paths relative to HOME.
    home_env: dict[str, str] = {}  # noqa: RUF012 - read only
    # Directories (relative to HOME) that must exist before the CLI starts.
    home_dirs: tuple[str, ...] = ()
    # The CLI keeps its install next to its entry point (a bundled node, rg, ...), so expose the
    # whole directory of the real executable, not only the file.
    install_root_is_dir: bool = False
    # Arguments that turn the CLI's own sandbox off, where ours is the boundary and theirs cannot
    # run: Seatbelt cannot nest, and strict bwrap jails refuse nested user namespaces (which
    # Linux CLI sandboxes are built on). In compatibility mode on Linux the CLI keeps its own.
    seatbelt_args: tuple[str, ...] = ()
    # Set under --network proxy, beside the proxy variables the mechanism sets: whatever makes this
    # CLI's runtime use them (README, "Network policy", lists what each pinned CLI honours).
    proxy_env: tuple[tuple[str, str], ...] = ()
    certify: Certification | None = None  # None: `tmuxjail certify` does not know this CLI
    # The files of the CLI's own state (relative to HOME; a trailing "/" is a directory) that the
    # host's plain, unjailed CLI later obeys as commands: hooks, MCP servers, notify programs,
    # extensions (docs/provider-state.md says which and why). Where a mode binds that state back
    # writable (verified), state_guards are bound read-only onto themselves, and state_copies are
    # given to the jail as a private copy of its own that never flows back (for files the CLI
    # itself rewrites all the time, which a read-only bind would break).
    state_guards: tuple[str, ...] = ()
    state_copies: tuple[str, ...] = ()
    # Command files that can be neither guarded nor copied (the CLI rewrites them, and they must
    # flow back: a login), so the audit names them when changed, with the trigger: your next plain
    # `<plain>` on the host.
    state_audit: tuple[str, ...] = ()
    plain: str = ""
    # What a guarded file absent at start is created with, by file name, where the CLI rejects the
    # default (an empty file, or `{}` for JSON) as invalid.
    state_empty: dict[str, str] = {}  # noqa: RUF012 - read only
    conversation: Conversation | None = None  # the id is learned after the start (else assigned, or none)
    takes_mcp: bool = False  # mcp_args delivers the session's MCP servers (docs/mcp.md)
    # `tmuxjail login`: the files (relative to HOME, as the jail lays the CLI's state out) that hold
    # its login, the only ones kept in the credentials store; and the arguments that run its login.
    credential_files: tuple[str, ...] = ()
    login_args: tuple[str, ...] = ()

    def own_sandbox_off(self, exe: list[str], mode: Mode, backend: str) -> list[str]:
        """exe, plus the switches that turn the CLI's own sandbox off in a strict bwrap jail (the
        Seatbelt backend adds them itself: backend_resume_argv, the seatbelt dry run)."""
        if backend == "bwrap" and mode != Mode.compatibility:
            return [*exe, *self.seatbelt_args]
        return list(exe)

    def cli_exe(self, exe: list[str], pol: Policy) -> list[str]:
        """How the CLI starts in this policy's jail: its own sandbox off where ours is the boundary
        (own_sandbox_off), and told of the session's MCP servers (mcp_args)."""
        return [*self.own_sandbox_off(exe, pol.mode, pol.backend), *self.mcp_args(pol)]

    def mcp_args(self, pol: Policy) -> list[str]:
        """Arguments that give the CLI the session's MCP servers (each a stub to the broker); a CLI
        that cannot be given them refuses --mcp (takes_mcp)."""
        return []

    def native_candidates(self, found: PurePosixPath, machine: str) -> list[PurePosixPath]:
        """Paths that may hold the real executable behind what PATH found; the first that exists
        wins, and `found` itself is the fallback."""
        return []

    def new_native_id(self) -> str | None:
        """A session id picked up front, when the CLI accepts one."""
        return None

    def start_argv(self, exe: list[str], native_id: str | None, extra: list[str], home: str = "",
                   cwd: str = "") -> list[str]:
        """home, cwd: the jail's HOME and workspace (a CLI given a conversation file up front)."""
        return [*exe, *extra]

    def resume_argv(self, exe: list[str], native_id: str | None, extra: list[str], home: str = "",
                    cwd: str = "") -> list[str]:
        """Exactly this session's conversation; with no id known, a new one (never the CLI's
        "latest of this folder": that may be another session's, in a home they share)."""
        return [*exe, *extra]

    def conversation_file(self, cwd: str, native_id: str) -> str | None:
        """Where (relative to HOME) the CLI keeps the conversation of an id given up front, when
        resuming an id whose conversation never began fails (None: it does not, or unknown)."""
        return None

    def backend_resume_argv(self, backend: str, exe: list[str], native_id: str | None,
                            extra: list[str], home: str = "", cwd: str = "") -> list[str]:
        """resume_argv, plus under Seatbelt the flags that turn the CLI's own sandbox off (a
        resumed CLI would otherwise nest sandbox-exec, which fails)."""
        argv = self.resume_argv(exe, native_id, extra, home, cwd)
        return [*argv, *self.seatbelt_args] if backend == "seatbelt" else argv

    def shared_config(self, home: str) -> tuple[str, str] | None:
        """(a host config file, the file a verified session shares with the host CLI), for a CLI
        whose config lives outside its relocatable home; None for most."""
        return None

    def env(self, home: str, mode: Mode, uid: int) -> dict[str, str]:
        """Non-secret variables the adapter sets (values are fingerprinted). In isolated mode the
        CLI's state is pointed into the private home, which is mounted at HOME."""
        if mode != Mode.isolated:
            return {}
        return {name: f"{home}/{rel}" for name, rel in self.home_env.items()}


    # -- tmuxjail certify -------------------------------------------------------------------------
    def certify_tokens(self, mode: Mode) -> tuple[str, ...]:
        """Files (relative to HOME) the first run writes and later runs keep, in this mode."""
        return self.certify.token_files if self.certify else ()

    def certify_child_args(self, probe: str, out: str) -> list[str]:
        """Arguments that make the CLI run `/bin/sh PROBE OUT` as its child, without a model."""
        return []

    def certify_child_keys(self, probe: str, out: str) -> str:
        """What to type into the running CLI to run the probe (child_by_keys)."""
        return f"!/bin/sh {probe} {out}"


def new_uuid() -> str:
    import uuid  # only for the CLIs that take a session id up front: not on every start

    return str(uuid.uuid4())


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
