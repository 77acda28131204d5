"""Walks a session's workspaces for what the host will later run or trust: git repositories and
their command-running config keys, hooks, commondir files and what their configs name by path,
the trust catalogue's entries (trust.py: hook managers, other version control, direnv and version
managers, Python environments, package managers, editors, agent CLIs), setuid/setgid files,
symlinks out of the workspace, hard links. Every finding carries `trigger` (what on the host will
run it) and `fix` (what to do).

The walk never follows a symlink: every directory is opened relative to its parent's fd with
O_NOFOLLOW, and files are read the same way (O_NONBLOCK, regular files only, size-capped), so a
jail that swaps a directory for a link or plants a FIFO cannot steer or hang it. It is bounded
(names listed, depth, files stat'ed, bytes read) and says so when a bound was hit. In each
directory the catalogue names and the subdirectories come first and the per-file lstat (of every
file, catalogue names too) last, so a directory padded with files cannot push a repository or a
catalogue path out of reach. Directories in trust.HEAVY_DIRS are looked into for catalogue names
only (trust.descend). Nothing here runs git or any other program."""

from __future__ import annotations

import json
import os
import stat
import time

from . import gitconfig, gitglobal, trust
from .canon import sha256
from .subpath import below, inside_any

MAX_LISTED = 2_000_000  # names listed in one walk: past it the walk stops (listing costs time)
MAX_ENTRIES = 200_000  # files lstat'ed for setuid/setgid/hard links
MAX_DEPTH = 48
MAX_READ = 1 << 20  # per file: the rest is dated by size and ctime
MAX_PARSE = 256 << 10  # a git config larger than this is reported, not parsed
READ_BUDGET = 64 << 20  # bytes read in one walk, so many large planted files cannot stall it
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
GIT_CONFIGS = ("config", "config.worktree")
STAT_KINDS = ("setuid", "setgid", "hardlink")  # found by lstat; `ctime` says when they appeared
GIT = "any git command in that repository (`git status`)"
# trigger and fix of the kinds found by the walk itself rather than by a catalogue entry
KIND_TEXT = {
    "git-repo": (GIT, "read its config and hooks before you run git there; delete it if you did not ask for it"),
    "git-config": (GIT, "read the key before you run git there (`git config --file PATH --list` runs nothing)"),
    "git-hook": ("the git command the hook is named for (`git commit`, `git checkout`, `git push`)",
                 "read it before your next git command there; delete it if you did not ask for it"),
    "git-commondir": (GIT, "it points the repository's config and hooks elsewhere: remove it unless you made it"),
    "setuid": ("running it: it runs as its owner", "remove the bit (`chmod u-s`) or the file"),
    "setgid": ("running it: it runs with its group", "remove the bit (`chmod g-s`) or the file"),
    "symlink-out": ("any tool that follows it (an editor, a build, a copy)", "check where it points; remove it if unsure"),
    "hardlink": ("writing this file writes every other name of it (one may be outside)",
                 "check the other names (`find / -samefile PATH`); remove it if unsure"),
}
DEFAULT_TEXT = ("a host program that trusts it", "read it before you use the workspace on the host")


def _id(*parts: str) -> str:
    return sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]


class Scan:
    def __init__(self, roots, stat_files: bool = True, deadline: float | None = None):
        """stat_files=False: the start snapshot. It skips the lstat of every file (most of the
        walk's cost): setuid/setgid/hard-link findings carry their inode's ctime instead, which
        a jail cannot set back, and the audit compares that with the snapshot's time."""
        self.roots = [os.path.normpath(r) for r in roots]
        self.stat_files = stat_files
        self.findings: list[dict] = []
        self.entries = 0
        self.stated = 0
        self.capped: list[str] = []
        self.skipped: list[str] = []  # directories looked into for catalogue names only
        self.budget = READ_BUDGET
        self.cat = trust.catalogue()
        self.deadline = deadline  # time.monotonic() past which the walk stops (a reason in capped)
        self._globals: list | None = None  # gitglobal.configs(), read at the first repository

    # -- results ----------------------------------------------------------------------------
    def add(self, kind: str, path: str, detail: str, material: str = "", key: str = "",
            entry: trust.Entry | None = None, **extra) -> None:
        """material: what makes two sightings the same (content hash, link target, value)."""
        ident = _id(kind, path, key)
        if entry is not None:
            text = self.cat.finding(entry)
        else:
            trigger, fix = KIND_TEXT.get(kind, DEFAULT_TEXT)
            text = {"trigger": trigger, "fix": fix}
        self.findings.append({"kind": kind, "path": path, "detail": detail, "id": ident,
                              "sig": _id(ident, material), **text, **extra})

    def inside(self, real: str) -> bool:
        return inside_any(real, self.roots)

    def cap(self, reason: str) -> None:
        if reason not in self.capped:
            self.capped.append(reason)

    # -- walking ----------------------------------------------------------------------------
    def run(self) -> Scan:
        for root in self.roots:
            try:
                fd = os.open(root, DIR_FLAGS)
            except OSError as exc:
                self.capped.append(f"{root}: not scanned ({exc.strerror})")
                continue
            try:
                self._dir(fd, root, 0, False, None, -1)
            finally:
                os.close(fd)
        # Your global git config, or a file it includes, that is a file of a workspace (repository
        # or not): every git command of yours reads it.
        for path in gitglobal.files(self._global_configs()):
            if self.inside(path):
                self._target("include.path", path, "your global git config")
        return self

    def _global_configs(self) -> list:
        if self._globals is None:
            self._globals = gitglobal.configs()
        return self._globals

    def _dir(self, dfd: int, path: str, depth: int, in_git: bool, within: trust.Entry | None, hd: int) -> None:
        """within: the catalogue directory entry this directory lies in (all its files count);
        hd: depth below a trust.HEAVY_DIRS name (-1: not below one)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            if not any(c.startswith("time limit") for c in self.capped):
                self.capped.append(f"time limit: stopped at {path}")
            return
        try:
            with os.scandir(dfd) as it:
                entries = []
                for e in it:
                    entries.append(e)
                    if self.entries + len(entries) > MAX_LISTED:
                        break
        except OSError as exc:
            self.capped.append(f"{path}: not listed ({exc.strerror})")
            return
        self.entries += len(entries)
        if self.entries > MAX_LISTED:
            self.cap(f"entry cap: stopped after listing {MAX_LISTED} names")
            return
        base = os.path.basename(path)
        names = {e.name: e for e in entries}
        is_git = base == ".git" or ("HEAD" in names and ("objects" in names or "commondir" in names))
        if is_git:
            self._gitdir(dfd, path, names)
        in_git = in_git or is_git
        bulk = []
        maybe = self.cat.maybe
        for e in entries:  # names and directories first, the per-file lstat last
            try:
                if e.is_symlink():
                    self._link(dfd, e.name, os.path.join(path, e.name), base, in_git, within)
                elif e.is_dir(follow_symlinks=False):
                    self._subdir(dfd, e.name, os.path.join(path, e.name), depth, in_git, within, hd, base)
                else:
                    if within is not None or maybe(e.name):  # .git files too: the catalogue names .git
                        self._named(dfd, e, os.path.join(path, e.name), base, within, hd)
                    if self.stat_files and hd < 0:  # a catalogue name too: its setuid bit or other names count
                        bulk.append(e)
            except OSError:
                continue  # gone or changed while we looked: the next audit sees what is there
        if not self.stat_files:
            return
        for e in bulk:
            if self.stated >= MAX_ENTRIES:
                self.cap(f"entry cap: setuid, setgid and hard links checked on the first {MAX_ENTRIES} files only")
                return
            self.stated += 1
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID) or st.st_nlink > 1:
                self._stat_kinds(st, os.path.join(path, e.name), in_git)

    def _subdir(self, dfd: int, name: str, path: str, depth: int, in_git: bool, within: trust.Entry | None,
                hd: int, parent: str) -> None:
        m = self.cat.match(name, parent, True) if within is None and self.cat.maybe(name) else None
        if m is not None:
            within = m
            self.add(m.kind, path, "directory", key="dir", entry=m)
        sub = trust.descend(name, hd, site=True)
        if sub is None:
            return
        if sub >= 0 and hd < 0:
            self.skipped.append(path)
        if depth + 1 >= MAX_DEPTH:
            self.cap(f"depth cap: {path} not entered (deeper than {MAX_DEPTH})")
            return
        fd = os.open(name, DIR_FLAGS, dir_fd=dfd)
        try:
            self._dir(fd, path, depth + 1, in_git, within, sub)
        finally:
            os.close(fd)

    def _named(self, dfd: int, e, path: str, parent: str, within: trust.Entry | None, hd: int) -> None:
        """Report a file the catalogue names (or one inside a catalogue directory)."""
        if e.name == ".git":  # a .git file: a worktree or a submodule
            text, digest = self.read(dfd, e.name)
            first = (text or "").strip().splitlines()[:1]
            self.add("git-repo", path, f"git file: {first[0] if first else '(empty)'}", digest)
            return
        if within is not None and (not within.files or e.name in within.files):
            m: trust.Entry | None = within
        else:
            m = self.cat.match(e.name, parent, False)
        if m is None or (m.keys and hd >= 0):  # package.json in dependencies: not theirs to change
            return
        text, digest = self.read(dfd, e.name)
        if m.keys:
            picked = self._keys(text, m.keys)
            if picked is not None:
                self.add(m.kind, path, f"keys {', '.join(m.keys)}: {picked[:160]}", picked, key="keys", entry=m)
            return
        self.add(m.kind, path, f"{len(text or '')} characters" if text is not None else digest, digest, entry=m)

    @staticmethod
    def _keys(text: str | None, keys: tuple[str, ...]) -> str | None:
        """The named top-level keys of a JSON file, canonical; None when it has none of them."""
        try:
            data = json.loads(text or "")
        except ValueError:
            return None
        if not isinstance(data, dict) or not any(k in data for k in keys):
            return None
        return json.dumps({k: data.get(k) for k in keys}, sort_keys=True)

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

    def _link(self, dfd: int, name: str, path: str, parent: str, in_gitdir: bool, within: trust.Entry | None) -> None:
        target = os.readlink(name, dir_fd=dfd)
        real = os.path.realpath(path)  # resolves link text only; opens nothing
        out = not self.inside(real)
        if out:
            self.add("symlink-out", path, f"-> {target} (resolves to {real})", target)
        if in_gitdir and name in (*GIT_CONFIGS, "hooks", "commondir"):
            kind = "git-config" if name in GIT_CONFIGS else f"git-{name.rstrip('s')}"
            self.add(kind, path, f"a symlink -> {target}", target, key="link")
            return
        if name in trust.VCS_DIRS:
            self.add("git-repo" if name == ".git" else name[1:], path, f"a symlink -> {target}", target, key="link")
            return
        m = within or self.cat.match(name, parent, False) or self.cat.match(name, parent, True)
        if m is not None:
            self.add(m.kind, path, f"a symlink -> {target}", target, key="link", entry=m)

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
            top = os.path.dirname(path) if not bare else None
            for key, target in gitconfig.targets(entries, path, top):
                if self.inside(target) and not below(target, path):
                    self._target(key, target, cpath)
            for key, value in entries:
                if gitconfig.runs(key, value):
                    shown = "(no value)" if value is None else value
                    self.add("git-config", cpath, f"{key} = {shown}", key=f"{key}={shown}")
            for line in bad:
                self.add("git-config", cpath, f"line {line} not understood (check it by hand)",
                         text or "", key=f"line{line}")
        if not bare:  # your global config's paths relative to a work tree (core.hooksPath = .githooks)
            top = os.path.dirname(path)
            for name, _, entries in self._global_configs():
                for key, target in gitconfig.targets(entries, os.path.dirname(name), top):
                    if self.inside(target) and not below(target, path):
                        self._target(key, target, name)
        e = names.get("commondir")
        if e is not None and e.is_file(follow_symlinks=False):
            text, digest = self.read(dfd, "commondir")
            self.add("git-commondir", os.path.join(path, "commondir"),
                     f"shares config and hooks with: {(text or '').strip()[:200]}", digest)
        e = names.get("hooks")
        if e is not None and e.is_dir(follow_symlinks=False):
            self._hooks(dfd, os.path.join(path, "hooks"))

    def _target(self, key: str, target: str, cpath: str) -> None:
        """A file or directory a git config names by path (gitconfig.targets): its content counts."""
        k = key.lower()
        entry = self.cat.by_id["git-hooks-path" if k == "core.hookspath" else
                               "git-include" if k.endswith(".path") and k.startswith("include") else "git-command-path"]
        fd = _open_beneath([r for r in self.roots if below(target, r)], target)
        if fd is None:  # not there (or behind a link): reported when it appears
            return
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                with os.scandir(fd) as it:
                    for e in it:
                        if e.is_file(follow_symlinks=False) or e.is_symlink():
                            _, digest = self.read(fd, e.name)
                            self.add(entry.kind, os.path.join(target, e.name), f"in {key} of {cpath}", digest,
                                     key="target", entry=entry)
            else:
                _, digest = self.read_fd(fd)
                self.add(entry.kind, target, f"named by {key} in {cpath}", digest, key="target", entry=entry)
        except OSError:
            pass
        finally:
            os.close(fd)

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
            return self.read_fd(fd)
        finally:
            os.close(fd)

    def read_fd(self, fd: int) -> tuple[str | None, str]:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None, f"not-a-file:{st.st_mode:o}"
            if self.budget <= 0:
                return None, f"unread:{st.st_size}:{st.st_ino}:{st.st_ctime_ns}"
            data = os.read(fd, min(MAX_READ, self.budget))
            self.budget -= len(data)
            digest = sha256(data).hexdigest()[:16]
            if st.st_size > MAX_READ:
                digest += f":{st.st_size}:{st.st_ctime_ns}"
            return data.decode("utf-8", "replace"), digest
        except OSError as exc:
            return None, f"unreadable:{exc.errno}"


def _open_beneath(roots: list[str], path: str) -> int | None:
    """An fd of path, opened from its workspace root down without following any link; None when
    it is missing, behind a link, or in no root."""
    if not roots:
        return None
    root = max(roots, key=len)
    names = [c for c in path[len(root):].split("/") if c]
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError:
        return None
    for i, name in enumerate(names):
        try:
            nxt = os.open(name, FILE_FLAGS if i == len(names) - 1 else DIR_FLAGS, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        fd = nxt
    return fd


def scan(roots, stat_files: bool = True, deadline: float | None = None) -> Scan:
    return Scan(roots, stat_files, deadline).run()
