"""The jail of an MCP server run on the host (`run = "host"`, issue 31): the broker starts the
operator's server in a bubblewrap jail of its own, apart from the agent's. Pure: no I/O.

The server sees the system read-only, the paths it was given to read, its own executable, an
empty home, and no network unless its config says "host". Its environment (which carries its
secrets) is never in this argv: the broker hands it to Popen, and bwrap passes it on."""

from __future__ import annotations

from ..subpath import inside, inside_any

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


def argv(bwrap: str, command: str, args: list[str], read: list[str], network: str,
         home: str) -> list[str]:
    """bwrap's argv around `command *args`; network is "host" or "none"."""
    out = [bwrap, "--unshare-all"]
    if network == "host":
        out.append("--share-net")
    out += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
    for path in SYSTEM[1:]:
        out += ["--ro-bind-try", path, path]
    out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", home]
    # After the tmpfs mounts (a path may lie in /tmp or the home). A path inside another is
    # bound already: bwrap cannot make a mount point inside a read-only bind (and a symlink
    # there, a venv's python, fails outright).
    binds = dict.fromkeys(read, "--ro-bind-try")
    binds[command] = "--ro-bind"
    for path in sorted(binds, key=lambda p: (p.rstrip("/").count("/"), p)):
        if not inside_any(path, SYSTEM) and not any(q != path and inside(path, q) for q in binds):
            out += [binds[path], path, path]
    return [*out, "--chdir", "/", "--", command, *args]
