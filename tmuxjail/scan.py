"""Walks a session's workspaces for what the host will later run or trust: git repositories and
their command-running config keys, hooks and commondir files, .gitmodules, direnv and editor
files, setuid/setgid files, symlinks out of the workspace, hard links.

The walk never follows a symlink: every directory is opened relative to its parent's fd with
O_NOFOLLOW, and files are read the same way (O_NONBLOCK, regular files only, size-capped), so a
jail that swaps a directory for a link or plants a FIFO cannot steer or hang it. It is bounded
(entries, depth) and says so when a bound was hit. Nothing here runs git or any other program."""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
import time

from . import gitconfig

SKIP_DIRS = frozenset({"node_modules", ".venv", "target"})
MAX_ENTRIES = 200_000
MAX_DEPTH = 48
MAX_READ = 1 << 20  # per file: the rest is dated by size and ctime
MAX_PARSE = 256 << 10  # a git config larger than this is reported, not parsed
READ_BUDGET = 64 << 20  # bytes read in one walk, so many large planted files cannot stall it
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NAMED = {".envrc": "direnv", ".env": "direnv", ".gitmodules": "gitmodules", ".nvim.lua": "editor",
         ".nvimrc": "editor", ".exrc": "editor", ".vimrc": "editor", ".dir-locals.el": "editor",
         ".dir-locals-2.el": "editor"}
IN_DIR = {".vscode": {"tasks.json", "settings.json", "launch.json"}, ".zed": {"settings.json", "tasks.json"},
          ".helix": {"config.toml", "languages.toml"}, ".devcontainer": {"devcontainer.json"},
          ".idea": {"workspace.xml"}}
ANY_IN = {"runConfigurations", ".run"}  # .idea/runConfigurations/*, .run/*.run.xml (JetBrains)
GIT_CONFIGS = ("config", "config.worktree")
NAMES = frozenset({*NAMED, *(n for names in IN_DIR.values() for n in names), ".git"})
STAT_KINDS = ("setuid", "setgid", "hardlink")  # found by lstat; `ctime` says when they appeared


def _id(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]


class Scan:
    def __init__(self, roots, stat_files: bool = True, deadline: float | None = None):
        """stat_files=False: the start snapshot. It skips the lstat of every file (most of the
        walk's cost): setuid/setgid/hard-link findings carry their inode's ctime instead, which
        a jail cannot set back, and the audit compares that with the snapshot's time."""
        self.roots = [os.path.normpath(r) for r in roots]
        self.stat_files = stat_files
        self.findings: list[dict] = []
        self.entries = 0
        self.capped: list[str] = []
        self.skipped: list[str] = []
        self.budget = READ_BUDGET
        self.deadline = deadline  # time.monotonic() past which the walk stops (a reason in capped)

    # -- results ----------------------------------------------------------------------------
    def add(self, kind: str, path: str, detail: str, material: str = "", key: str = "", **extra) -> None:
        """material: what makes two sightings the same (content hash, link target, value)."""
        ident = _id(kind, path, key)
        self.findings.append({"kind": kind, "path": path, "detail": detail, "id": ident,
                              "sig": _id(ident, material), **extra})

    def inside(self, real: str) -> bool:
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.roots)

    # -- walking ----------------------------------------------------------------------------
    def run(self) -> Scan:
        for root in self.roots:
            try:
                fd = os.open(root, DIR_FLAGS)
            except OSError as exc:
                self.capped.append(f"{root}: not scanned ({exc.strerror})")
                continue
            try:
                self._dir(fd, root, 0, False)
            finally:
                os.close(fd)
        return self

    def _dir(self, dfd: int, path: str, depth: int, in_git: bool) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            if not any(c.startswith("time limit") for c in self.capped):
                self.capped.append(f"time limit: stopped at {path}")
            return
        try:
            with os.scandir(dfd) as it:
                entries = list(itertools.islice(it, MAX_ENTRIES - self.entries + 1))
        except OSError as exc:
            self.capped.append(f"{path}: not listed ({exc.strerror})")
            return
        self.entries += len(entries)
        if self.entries > MAX_ENTRIES:
            if not any(c.startswith("entry cap") for c in self.capped):
                self.capped.append(f"entry cap: stopped after {MAX_ENTRIES} entries")
            return
        names = {e.name: e for e in entries}
        base = os.path.basename(path)
        is_git = base == ".git" or ("HEAD" in names and ("objects" in names or "commondir" in names))
        if is_git:
            self._gitdir(dfd, path, names)
        named = base in ANY_IN
        for e in entries:
            try:
                if e.is_symlink():
                    self._link(dfd, e.name, os.path.join(path, e.name), base, is_git)
                elif e.is_dir(follow_symlinks=False):
                    self._subdir(dfd, e.name, os.path.join(path, e.name), depth, in_git or is_git)
                elif self.stat_files or named or e.name in NAMES:
                    # regular files, and FIFOs or sockets planted under a trusted name
                    self._file(dfd, e, os.path.join(path, e.name), base, path, in_git or is_git)
            except OSError:
                continue  # gone or changed while we looked: the next audit sees what is there

    def _subdir(self, dfd: int, name: str, path: str, depth: int, in_git: bool) -> None:
        if name in SKIP_DIRS:
            self.skipped.append(path)
            return
        if depth + 1 >= MAX_DEPTH:
            self.capped.append(f"depth cap: {path} not entered (deeper than {MAX_DEPTH})")
            return
        fd = os.open(name, DIR_FLAGS, dir_fd=dfd)
        try:
            self._dir(fd, path, depth + 1, in_git)
        finally:
            os.close(fd)

    def _named_kind(self, name: str, parent: str, grandparent: str) -> str | None:
        if name in NAMED:
            return NAMED[name]
        if name in IN_DIR.get(parent, ()):
            return "editor"
        if parent in ANY_IN and (parent == ".run" or grandparent == ".idea"):
            return "editor"
        if name == ".git":
            return "git-repo"
        return None

    def _file(self, dfd: int, e, path: str, parent: str, dirpath: str, in_git: bool) -> None:
        if self.stat_files:
            st = e.stat(follow_symlinks=False)
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID) or st.st_nlink > 1:
                self._stat_kinds(st, path, in_git)
        kind = self._named_kind(e.name, parent, os.path.basename(os.path.dirname(dirpath)))
        if kind is None:
            return
        text, digest = self.read(dfd, e.name)
        if kind == "git-repo":
            first = (text or "").strip().splitlines()[:1]
            self.add(kind, path, f"git file: {first[0] if first else '(empty)'}", digest)
        else:
            self.add(kind, path, f"{len(text or '')} characters" if text is not None else digest, digest)

    def _stat_kinds(self, st, path: str, in_git: bool) -> None:
        meta = f"{st.st_mode:o}:{st.st_ino}:{st.st_ctime_ns}"
        mode = f"mode {stat.S_IMODE(st.st_mode):04o}"
        if st.st_mode & stat.S_ISUID:
            self.add("setuid", path, f"{mode}, owner uid {st.st_uid}", meta, ctime=st.st_ctime_ns)
        if st.st_mode & stat.S_ISGID:
            self.add("setgid", path, f"{mode}, group gid {st.st_gid}", meta, ctime=st.st_ctime_ns)
        if st.st_nlink > 1 and stat.S_ISREG(st.st_mode) and not in_git:
            self.add("hardlink", path, f"{st.st_nlink} names for this file (another may be outside)", meta,
                     ctime=st.st_ctime_ns)

    def _link(self, dfd: int, name: str, path: str, parent: str, in_gitdir: bool) -> None:
        target = os.readlink(name, dir_fd=dfd)
        real = os.path.realpath(path)  # resolves link text only; opens nothing
        out = not self.inside(real)
        if out:
            self.add("symlink-out", path, f"-> {target} (resolves to {real})", target)
        kind = self._named_kind(name, parent, "")
        if in_gitdir and name in (*GIT_CONFIGS, "hooks", "commondir"):
            kind = "git-config" if name in GIT_CONFIGS else f"git-{name.rstrip('s')}"
        if kind is not None:
            self.add(kind, path, f"a symlink -> {target}", target, key="link")

    # -- git --------------------------------------------------------------------------------
    def _gitdir(self, dfd: int, path: str, names: dict) -> None:
        bare = os.path.basename(path) != ".git"
        self.add("git-repo", path, "git directory" + (" (bare, submodule or worktree)" if bare else ""))
        for cfg in GIT_CONFIGS:
            e = names.get(cfg)
            if e is None or not e.is_file(follow_symlinks=False):
                continue
            text, digest = self.read(dfd, cfg)
            cpath = os.path.join(path, cfg)
            if text is None or len(text) > MAX_PARSE:
                self.add("git-config", cpath, "not parsed (too large or unreadable): check it by hand", digest,
                         key="unparsed")
                continue
            entries, bad = gitconfig.parse(text)
            for key, value in entries:
                if gitconfig.runs(key, value):
                    shown = "(no value)" if value is None else value
                    self.add("git-config", cpath, f"{key} = {shown}", key=f"{key}={shown}")
            for line in bad:
                self.add("git-config", cpath, f"line {line} not understood (check it by hand)",
                         text or "", key=f"line{line}")
        e = names.get("commondir")
        if e is not None and e.is_file(follow_symlinks=False):
            text, digest = self.read(dfd, "commondir")
            self.add("git-commondir", os.path.join(path, "commondir"),
                     f"shares config and hooks with: {(text or '').strip()[:200]}", digest)
        e = names.get("hooks")
        if e is not None and e.is_dir(follow_symlinks=False):
            self._hooks(dfd, os.path.join(path, "hooks"))

    def _hooks(self, dfd: int, path: str) -> None:
        try:
            fd = os.open("hooks", DIR_FLAGS, dir_fd=dfd)
        except OSError:
            return
        try:
            with os.scandir(fd) as it:
                for e in it:
                    if e.name.endswith(".sample"):
                        continue
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                        _, digest = self.read(fd, e.name)
                        self.add("git-hook", os.path.join(path, e.name), "executable hook", digest)
                    elif stat.S_ISLNK(st.st_mode):
                        self.add("git-hook", os.path.join(path, e.name),
                                 f"hook is a symlink -> {os.readlink(e.name, dir_fd=fd)}", str(st.st_ino))
        except OSError:
            pass
        finally:
            os.close(fd)

    def read(self, dfd: int, name: str) -> tuple[str | None, str]:
        """(text, digest) of a regular file, never through a link, never blocking on a FIFO.
        Past the walk's read budget: no text, and a digest of size and ctime."""
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dfd)
        except OSError as exc:
            return None, f"unreadable:{exc.errno}"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None, f"not-a-file:{st.st_mode:o}"
            if self.budget <= 0:
                return None, f"unread:{st.st_size}:{st.st_ino}:{st.st_ctime_ns}"
            data = os.read(fd, min(MAX_READ, self.budget))
            self.budget -= len(data)
            digest = hashlib.sha256(data).hexdigest()[:16]
            if st.st_size > MAX_READ:
                digest += f":{st.st_size}:{st.st_ctime_ns}"
            return data.decode("utf-8", "replace"), digest
        except OSError as exc:
            return None, f"unreadable:{exc.errno}"
        finally:
            os.close(fd)


def scan(roots, stat_files: bool = True, deadline: float | None = None) -> Scan:
    return Scan(roots, stat_files, deadline).run()
