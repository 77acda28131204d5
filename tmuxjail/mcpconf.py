"""The operator's MCP servers (issue 31, DESIGN §10): `[mcp.NAME]` tables of tmuxjail's config,
checked where the config is read. Only the operator declares a server; a session attaches one by
name (`start --mcp NAME`), and the agent never names a command, an argument or a secret.

    [mcp.github]
    command = "/usr/local/bin/github-mcp-server"  # absolute; an executable regular file
    args = ["stdio"]
    env = ["GITHUB_TOKEN"]        # names from tmuxjail's own environment, for the server only
    env_file = "~/.config/tmuxjail/github.env"   # or KEY=VALUE lines from a file only you can read
    run = "host"                  # outside the agent's jail, in a jail of its own; or "jail":
                                  # in the agent's (no env, env_file, network or tools then)
    network = "host"              # that jail's network: "host" or "none"
    read = ["/opt/github-mcp"]    # more host paths it may read (its install, say); with
                                  # run = "jail", bound read-only into the agent's jail
    tools = ["search_issues"]     # only these are listed and callable (absent: all)

Stdlib only: the config is read on every start."""

from __future__ import annotations

import os
import re
import stat

from .errors import ConfigError, SandboxUnavailable, UsageError
from .record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .effective import McpServer

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
TOOL_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
KEYS = {"command", "args", "env", "env_file", "run", "network", "read", "tools"}
MAX_ARGS = 64
JAIL_REFUSED = {  # keys a server in the agent's jail cannot have, and why
    "env": "the agent could read the server's environment (its secrets)",
    "env_file": "the agent could read the server's environment (its secrets)",
    "network": "the server has the jail's network",
    "tools": "the agent can start the server itself, so an allowlist would hold nothing",
}


class Server(Record):
    """One declared server, as the config says it (paths expanded)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    env_file: str | None = None
    run: str = "host"
    network: str = "host"
    read: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None


def _path(value: object, where: str, home: str) -> str:
    if not isinstance(value, str) or not value.isprintable() or not value.startswith(("/", "~/")):
        raise ConfigError(f"{where}: must be an absolute path (or ~/...)")
    path = home + value[1:] if value.startswith("~/") else value
    if os.path.normpath(path) != path:
        raise ConfigError(f"{where}: {path!r} is not a plain absolute path (no '..', '.' or '//')")
    return path


def _strings(value: object, where: str, pattern: re.Pattern[str] | None = None, most: int = MAX_ARGS) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > most or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be a list of at most {most} strings")
    for v in value:
        if "\x00" in v or (pattern is not None and not pattern.match(v)):
            raise ConfigError(f"{where}: {v!r} is not accepted here")
    return tuple(value)


def executable_file(path: str, where: str) -> None:
    """The command must be an executable regular file (links followed, as exec follows them)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{where}: {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
        raise ConfigError(f"{where}: {path} is not an executable regular file")


def parse(raw: object, source: str, home: str) -> dict[str, Server]:
    """The config's `mcp` table -> {name: Server}, or a one-line ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: mcp: must be a table of [mcp.NAME] servers")
    out = {}
    for name, body in raw.items():
        where = f"{source}: mcp.{name}"
        if not NAME_RE.match(name):
            raise ConfigError(f"{source}: mcp.{name!r}: a server name is 1-32 of a-z, 0-9, '-' and '_'")
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: must be a table")
        unknown = set(body) - KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key {min(unknown)!r} (known: {', '.join(sorted(KEYS))})")
        if "command" not in body:
            raise ConfigError(f"{where}: command is missing (an absolute path to the server's executable)")
        command = _path(body["command"], f"{where}.command", home)
        executable_file(command, f"{where}.command")
        run = body.get("run", "host")
        if run not in ("host", "jail"):
            raise ConfigError(f'{where}.run: must be "host" (outside the agent\'s jail, in one of its own) or "jail"')
        if run == "jail":
            # Inside the agent's jail the server is the agent's to start, read and trace: what would
            # keep a secret or a tool from the agent is nothing tmuxjail could hold there.
            held = next((k for k in JAIL_REFUSED if k in body), None)
            if held is not None:
                raise ConfigError(f'{where}.{held}: not with run = "jail": {JAIL_REFUSED[held]}; '
                                  'use run = "host" for it')
        network = body.get("network", "host")
        if network not in ("host", "none"):
            raise ConfigError(f'{where}.network: must be "host" or "none"')
        env_file = body.get("env_file")
        if env_file is not None:
            env_file = _path(env_file, f"{where}.env_file", home)
        tools = body.get("tools")
        out[name] = Server(
            name=name, command=command, args=_strings(body.get("args", []), f"{where}.args"),
            env=tuple(sorted(set(_strings(body.get("env", []), f"{where}.env", ENV_RE)))),
            env_file=env_file, run=run, network=network,
            read=tuple(sorted({_path(p, f"{where}.read", home) for p in _strings(body.get("read", []), f"{where}.read")})),
            tools=None if tools is None else tuple(sorted(set(_strings(tools, f"{where}.tools", TOOL_RE, 1024)))),
        )
        bad = [n for n in out[name].env if n.startswith(("TMUX", "TMUXJAIL"))]
        if bad:
            raise ConfigError(f"{where}.env: {bad[0]} is tmux's or tmuxjail's own, never passed on")
    return out


def env_file_values(path: str, where: str) -> dict[str, str]:
    """KEY=VALUE lines of a file only the user can read and write (0600 or narrower, owned by the
    user, not a link): a secret file anyone else can change or read is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{where}: {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise UsageError(f"{where}: {path} must be a regular file of yours that only you can read "
                             f"(chmod 600 {path})")
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    out = {}
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or not ENV_RE.match(key):
            raise UsageError(f"{where}: {path}, line {n}: not KEY=VALUE")
        out[key] = value
    return out


def secrets(server: Server | McpServer, environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """What the server's environment gets from the host: its env_file's values, then the named
    variables from tmuxjail's own environment. A name that is not set refuses the start."""
    where = f"mcp.{server.name}"
    out = env_file_values(server.env_file, f"{where}.env_file") if server.env_file else {}
    for name in server.env:
        if name not in environ:
            raise UsageError(f"{where}: {name} is not set in tmuxjail's environment",
                             hint=f"export {name}=... before `tmuxjail start`, or put it in the server's env_file")
        out[name] = environ[name]
    return out


# Where the jail finds an interpreter for the MCP stub: under /usr, which every strict jail binds
# read-only from the host (a python3 elsewhere, in a home or /opt, may not be in the jail).
STUB_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def stub_python() -> str:
    for path in STUB_PYTHONS:
        real = os.path.realpath(path)
        if real.startswith("/usr/") and os.path.isfile(real) and os.access(real, os.X_OK):
            return path
    raise SandboxUnavailable("--mcp needs python3 in /usr/bin or /usr/local/bin: the jail runs the stub that "
                             "connects the CLI to the session's MCP broker with it",
                             hint="sudo apt-get install -y python3-minimal")


def host_facts(servers: list[dict], declared: dict[str, Server], digest=None) -> list | None:
    """What a policy's servers were resolved from, looked up again (the warm start): each one's
    real command path, its stat identity and its read paths' real paths, and the stub's
    interpreter; None when one is gone or changed (then the full resolution hashes and checks
    again). With `digest(path, key)` (the digest cache: when an entry is made), each stat identity
    must also still give the policy's sha256; a hit then compares the stat identities alone, as it
    does for the CLI's executable."""
    out: list = []
    for s in servers:
        server = declared.get(s["name"])
        if server is None:
            return None
        real = os.path.realpath(server.command)
        try:
            st = os.stat(real)
        except OSError:
            return None
        key = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        if real != s["command"] or (digest is not None and digest(real, tuple(key)) != s["sha256"]):
            return None
        out.append([s["name"], real, key, sorted({os.path.realpath(p) for p in server.read})])
    try:
        return [out, stub_python() if servers else ""]
    except SandboxUnavailable:
        return None
