"""The in-pane launcher: the pane's own process. It reads and deletes its spec, re-checks the
policy fingerprint against its argv and the store, then execs bubblewrap, which execs the CLI.
Stdlib only, and nothing it does not need: it runs on every start. It runs with -S (no site
processing, ~30 ms) and -I (no cwd on sys.path, no PYTHON* variables), with the directory that holds this very package put first on sys.path:

    python -I -S -c 'import sys; sys.path[:0] = [ROOT]; from tmuxjail.launch import main; ...' --fp sha256:... SPEC
"""

from __future__ import annotations

import json
import os
import sys

from .canon import fingerprint

EXIT_REFUSED = 3
STUB = "import sys; sys.path[:0] = [{root!r}]; from tmuxjail.launch import main; main(sys.argv[1:])"
EXIT_UNAVAILABLE = 5


def die(message: str, code: int) -> "NoReturn":  # noqa: F821
    sys.stderr.write(f"tmuxjail: {message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def read_spec(path: str) -> dict:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        die(f"launch spec {path} is gone ({exc.strerror}); this pane was not started by tmuxjail "
            "start/resume, refusing to run anything", EXIT_REFUSED)
    try:
        if os.fstat(fd).st_uid != os.getuid():
            die("launch spec is not owned by you; refusing", EXIT_REFUSED)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    finally:
        try:
            os.unlink(path)  # read once: it holds credential values
        except OSError:
            pass
    try:
        return json.loads(data)
    except ValueError:
        die("launch spec is not valid JSON; refusing", EXIT_REFUSED)


def stored_fingerprint(store: str, session_id: str) -> str | None:
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10)
        row = db.execute("SELECT fingerprint, status FROM sessions WHERE id=?", (session_id,)).fetchone()
        db.close()
    except sqlite3.Error:
        return None
    return row[0] if row and row[1] != "stopped" else None


def seccomp_fd(machine: str) -> int:
    from .sandbox.seccomp import program

    try:
        prog = program(machine)
    except KeyError:
        die(f"no seccomp filter for machine {machine!r}; refusing to run without it", EXIT_UNAVAILABLE)
    fd = os.memfd_create("tmuxjail-seccomp", 0)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def pane_command(python: str, fp: str, spec: str) -> list[str]:
    """The pane's argv: this launcher, from the installed package the caller runs."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # -I: no PYTHON* variables and, above all, not the cwd on sys.path: the pane starts in the
    # workspace, where the agent could plant json.py for this process, which runs outside the jail.
    return [python, "-I", "-S", "-c", STUB.format(root=root), "--fp", fp, spec]


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[0] != "--fp":
        die("usage: python -m tmuxjail.launch --fp FINGERPRINT SPEC", 2)
    expected, spec_path = argv[1], argv[2]
    spec = read_spec(spec_path)
    policy = spec.get("policy")
    if not isinstance(policy, dict) or fingerprint(policy) != expected or spec.get("fingerprint") != expected:
        die("the policy does not match the fingerprint of this pane (tampered); refusing", EXIT_REFUSED)
    if stored_fingerprint(spec["store"], spec["session_id"]) != expected:
        die("the store does not hold this fingerprint for this session; refusing", EXIT_REFUSED)

    env = {k: str(v) for k, v in spec["env"].items()}
    if os.environ.get("TERM"):
        env["TERM"] = os.environ["TERM"]  # the pane's terminal, as tmux set it
    if not spec.get("sandboxed", True):
        # compatibility-unguarded: the operator opted in to running without bubblewrap.
        exec_closing(spec["argv"], env, keep=())
    keep = (seccomp_fd(spec["machine"]),
            os.open(spec["status_file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600))
    if spec.get("landlock_scope"):
        from .sandbox import landlock

        try:
            landlock.scope_self()
        except OSError as exc:
            die(f"cannot scope the jail away from abstract unix sockets: {exc}", EXIT_UNAVAILABLE)
    bwrap, *rest = spec["argv"]
    exec_closing([bwrap, "--seccomp", str(keep[0]), "--json-status-fd", str(keep[1]), *rest], env, keep)


def exec_closing(argv: list[str], env: dict, keep) -> "NoReturn":  # noqa: F821
    """exec argv with only stdio and `keep` open: nothing else of ours leaks into the jail."""
    for fd in keep:
        os.set_inheritable(fd, True)
    bounds = [2, *sorted(keep), 65536]
    for lo, hi in zip(bounds, bounds[1:]):
        os.closerange(lo + 1, hi)
    try:
        os.execve(argv[0], argv, env)
    except OSError as exc:
        die(f"cannot run {argv[0]}: {exc.strerror}", EXIT_UNAVAILABLE)

if __name__ == "__main__":
    main(sys.argv[1:])
