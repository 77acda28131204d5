"""git, as tmuxjail runs it on the host for worktree sessions (docs/worktrees.md): a fixed
binary, none of the caller's GIT_* variables, no hook, no fsmonitor, no pager, no automatic
maintenance, and every command-running key that the repository's configuration sets (filters,
drivers, editors, helpers: gitconfig.RUNS) switched off for the call. tmuxjail never runs git in
a git directory a jail could write: only in the user's repository and in directories it made."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator

from . import gitconfig
from .errors import TmuxjailError, UsageError

FIXED_PATHS = ("/usr/bin/git", "/usr/local/bin/git", "/opt/homebrew/bin/git", "/bin/git")
# Set on every call: hooks never run, nothing watches or pages, nothing runs in the background.
SAFE = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false", "core.pager=cat",
    "core.editor=false", "sequence.editor=false", "core.sshCommand=false", "core.askPass=",
    "credential.helper=", "diff.external=", "submodule.recurse=false", "gc.auto=0", "maintenance.auto=false",
    "protocol.allow=never", "advice.detachedHead=false", "init.templateDir=",
)
# Output is read as UTF-8 with undecodable bytes kept as surrogates: paths, subjects and link
# targets are the agent's bytes, and a name that is no UTF-8 must not fail the command.
ENCODING, ERRORS = "utf-8", "surrogateescape"
# Keys of the repository's own config that stay as they are: switching them off breaks the
# repository itself (its work tree), or an empty value is not "off" for them (an empty include
# is a fatal error on the command line; includeIf.*.path too, by gitconfig.is_include).
KEPT = frozenset({"core.worktree", "include.path"})
# The caller's GIT_* variables that only say who commits: the rest are dropped.
IDENTITY = frozenset({"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
                      "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE"})


class GitError(TmuxjailError):
    """A git call that failed: one line, git's own last words included."""


def binary() -> str:
    for path in FIXED_PATHS:
        if os.access(path, os.X_OK):
            return path
    raise UsageError("git is not installed (looked in " + ", ".join(FIXED_PATHS) + ")",
                     hint="sudo apt-get install -y git")


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without GIT_* (GIT_DIR, GIT_CONFIG_*, GIT_EXEC_PATH, ... would
    steer the call), with prompts off and plain output."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in IDENTITY}
    out.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_ATTR_NOSYSTEM": "1",
                "GIT_NO_REPLACE_OBJECTS": "1"})
    out.update(extra or {})
    return out


def switched_off(listing: str) -> list[str]:
    """`-c KEY=` for every command-running key in `git config --list -z` output (pure)."""
    off: list[str] = []
    for item in listing.split("\0"):
        if not item:
            continue
        key, _, value = item.partition("\n")
        if key.lower() in KEPT or gitconfig.is_include(key) or any(key.lower() == s.split("=")[0].lower() for s in SAFE):
            continue
        if gitconfig.runs(key, value):
            off += ["-c", key + "="]
    return off


def reason(stderr: str) -> str:
    """git's own words for a failure: its first `error:` line (fsck names the object and the
    check there), else its last line."""
    lines = [x.strip() for x in stderr.strip().splitlines() if x.strip()]
    first = next((x for x in lines if x.startswith("error: ")), None)
    return "".join(c if c.isprintable() else "?" for c in (first or (lines[-1] if lines else "(no message)")))[:400]


_LISTINGS: dict[tuple, tuple[str, list[tuple[str, str, str]]]] = {}
_USER_CONFIG = re.compile(r"^GIT_CONFIG(?:_GLOBAL|_SYSTEM|_NOSYSTEM|_COUNT|_PARAMETERS|_KEY_\d+|_VALUE_\d+)?$")


def user_config_env() -> dict[str, str]:
    """The caller's GIT_CONFIG* variables: which config your own git reads (env drops them for
    tmuxjail's calls; what your git will run later is read with them: worktree.configured)."""
    return {k: v for k, v in os.environ.items() if _USER_CONFIG.match(k)}


def with_origins(out: str) -> tuple[str, list[tuple[str, str, str]]]:
    """`git config --list -z --show-origin` output as the plain listing and as (file it came
    from, or "" when no file, key, value) entries (pure)."""
    items = out.split("\0")
    entries = []
    for origin, item in zip(items[0::2], items[1::2], strict=False):  # (a last "" has no pair)
        key, _, value = item.partition("\n")
        entries.append((origin[len("file:"):] if origin.startswith("file:") else "", key, value))
    return "".join(f"{k}\n{v}\0" for _, k, v in entries), entries


class Git:
    """git for one repository (its work tree or git directory), with that repository's
    command-running keys switched off (read once, the first time a call needs them)."""

    def __init__(self, where: str, git_dir: str | None = None, work_tree: str | None = None,
                 extra_env: dict[str, str] | None = None):
        self.where, self.git_dir, self.work_tree = where, git_dir, work_tree
        self.exe = binary()
        self.extra_env = extra_env
        self._off: list[str] | None = None

    def _base(self) -> list[str]:
        argv = [self.exe, "--no-pager", "--no-replace-objects"]
        for s in SAFE:
            argv += ["-c", s]
        if self.git_dir is not None:
            argv.append("--git-dir=" + self.git_dir)
        if self.work_tree is not None:
            argv.append("--work-tree=" + self.work_tree)
        return argv

    def listing(self) -> str:
        """`git config --list -z` here, read once per repository and process."""
        return self._listed()[0]

    def origins(self) -> list[tuple[str, str, str]]:
        """The listing's entries with the file each came from (a relative one is relative to
        `where`): a relative include is read from its own file's directory."""
        return self._listed()[1]

    def _listed(self) -> tuple[str, list[tuple[str, str, str]]]:
        key = (self.where, self.git_dir, *sorted((self.extra_env or {}).items()))
        if key not in _LISTINGS:
            done = self._call([*self._base(), "config", "--list", "-z", "--show-origin"], check=False)
            _LISTINGS[key] = with_origins(done.stdout if done.returncode == 0 else "")
        return _LISTINGS[key]

    def off(self) -> list[str]:
        if self._off is None:
            self._off = switched_off(self.listing())
        return self._off

    def config(self, key: str) -> str | None:
        """The last value of key in the listing (None: not set)."""
        found = None
        for item in self.listing().split("\0"):
            k, _, value = item.partition("\n")
            if k.lower() == key.lower():
                found = value
        return found

    def _call(self, argv: list[str], check: bool = True, input: str | None = None,
              what: str | None = None, stdin: int | None = None,
              timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """stdin: an fd to read from (input, text, otherwise; neither: /dev/null). timeout: the
        call is killed after it, and that is a GitError."""
        if stdin is None:
            stdin = subprocess.DEVNULL if input is None else None
        try:
            done = subprocess.run(argv, cwd=self.where, env=env(self.extra_env), input=input, encoding=ENCODING, errors=ERRORS,
                                  capture_output=True, stdin=stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GitError(f"{what or 'git'}: took longer than {timeout:g} s; stopped") from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc.strerror}") from None
        if check and done.returncode != 0:
            raise GitError(f"{what or 'git'}: {reason(done.stderr)}")
        return done

    def __call__(self, *args: str, check: bool = True, input: str | None = None,
                 what: str | None = None, stdin: int | None = None,
                 timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        return self._call([*self._base(), *self.off(), *args], check=check, input=input,
                          what=what or "git " + args[0], stdin=stdin, timeout=timeout)

    def spawn(self, *args: str) -> Started:
        """A call started now, read later with done(): for queries that do not wait on each other."""
        return Started([*self._base(), *self.off(), *args], self.where, env(self.extra_env))

    def stream(self, *args: str, what: str) -> Iterator[str]:
        """The call's output in pieces as git writes them (a change of hundreds of megabytes is
        never held whole); a GitError at the end when it failed. Stopping early kills it."""
        import codecs

        try:
            err = _scratch()
        except OSError as exc:
            raise GitError(f"cannot run git: {exc.strerror or exc}") from None
        with err:
            proc = subprocess.Popen([*self._base(), *self.off(), *args], cwd=self.where, env=env(self.extra_env),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            try:
                decode = codecs.getincrementaldecoder(ENCODING)(ERRORS).decode
                assert proc.stdout is not None
                while chunk := os.read(proc.stdout.fileno(), 1 << 16):
                    yield decode(chunk)
                yield decode(b"", final=True)
                if proc.wait() != 0:
                    err.seek(0)
                    raise GitError(f"{what}: {reason(err.read().decode(ENCODING, ERRORS))}")
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                assert proc.stdout is not None
                proc.stdout.close()

    def out(self, *args: str, what: str | None = None, input: str | None = None) -> str:
        return self(*args, what=what, input=input).stdout.strip()


class Started:
    """A git call running while the caller works: its output goes to unlinked files of its own
    (a pipe would stop a long listing at 64 KiB until the caller read it)."""

    def __init__(self, argv: list[str], cwd: str, environ: dict[str, str]):
        self.out = self.err = None
        try:
            self.out, self.err = _scratch(), _scratch()
            self.proc = subprocess.Popen(argv, cwd=cwd, env=environ, stdin=subprocess.DEVNULL, stdout=self.out,
                                         stderr=self.err)
        except OSError as exc:
            self.stop()
            raise GitError(f"cannot run git: {exc.strerror or exc}") from None

    def _text(self, f) -> str:
        f.seek(0)
        return f.read().decode(ENCODING, ERRORS)

    def done(self, what: str) -> str:
        """Its output, once it has ended; a GitError (git's own words) when it failed."""
        try:
            if (code := self.proc.wait()) != 0:
                said = self._text(self.err).strip()
                raise GitError(f"{what}: " + (reason(said) if said else f"git ended with {code} and said nothing "
                                              "(is the temporary directory full? its output goes there)"))
            return self._text(self.out)
        finally:
            self.stop()

    def stop(self) -> None:
        """Killed if still running, reaped, its files closed (again: nothing)."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in (self.out, self.err):
            if f is not None:
                f.close()


def _scratch():
    """An unlinked file in the temporary directory ($TMPDIR, else /tmp, ...) for git's output."""
    import tempfile

    return tempfile.TemporaryFile()
