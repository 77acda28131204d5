"""Worktree sessions (docs/worktrees.md): each agent works in a checkout of its own, on a branch
of its own, and commits there; tmuxjail brings its commits home without running anything the
agent wrote.

The model, in one paragraph. The agent's checkout W has a `.git` *file* naming a path that exists
only inside the jail (JAIL_GITDIR); its git directory G lives in tmuxjail's state, bound there
writable, with the user's object store bound read-only beside it (JAIL_OBJECTS) as G's alternate.
So inside the jail git works in full (add, commit, stash, rebase), while on the host W is not a
repository at all (the path its `.git` names is not there) and G is never handed to git: the host
reads one ref of it as text and copies its object files (regular files with object names, read
without following links) into a directory it made (the import repository I), and the user's
repository fetches the branch from I with every object checked (fetch.fsckObjects). Nothing of
G's config, hooks, info/, commondir, alternates or packed-refs beyond that one line is ever read
by git on the host. Landing and diffs run in the user's repository through gitrun, with its
hooks and command-running keys switched off."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import time
from pathlib import Path

from .config import load as load_config
from .effective import JAIL_GITDIR, JAIL_OBJECTS
from .errors import TmuxjailError, UsageError
from .gitrun import Git, GitError
from .paths import remove_tree
from .registry import Mode
from .subpath import inside
from .trust import catalogue

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
LOOSE_DIR = re.compile(r"^[0-9a-f]{2}$")
LOOSE = re.compile(r"^(?:[0-9a-f]{38}|[0-9a-f]{62})$")
PACK = re.compile(r"^pack-(?:[0-9a-f]{40}|[0-9a-f]{64})\.(?:pack|idx)$")
MAX_IMPORT = 4 << 30  # bytes of objects one import copies at most
MAX_REFS = 16 << 20  # packed-refs read at most
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class WorktreeError(TmuxjailError):
    pass


def state_root(state_dir: Path | str) -> Path:
    return Path(state_dir) / "worktrees"


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or name.endswith((".lock", ".")) or ".." in name:
        raise UsageError(f"invalid worktree name {name!r}",
                         hint="use letters, digits, '.', '_' or '-' (not starting with '.' or '-', up to 63)")
    return name


def repository(cwd: str) -> tuple[str, str]:
    """(the work tree's top, the common git directory) of the repository at cwd."""
    git = Git(cwd)
    done = git("rev-parse", "--is-bare-repository", "--show-toplevel", "--git-common-dir", check=False)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 3:
        raise UsageError(f"--worktree: {cwd} is not in a git repository",
                         hint="run it from a checkout (or give --workspace inside one)")
    if lines[0] == "true":
        raise UsageError(f"--worktree: {cwd} is a bare repository; run it from a checkout")
    top = os.path.realpath(lines[1])
    common = os.path.realpath(os.path.join(cwd, lines[2]))
    return top, common


def where(top: str, name: str, root: str | None, home: str) -> str:
    if root is None:
        return os.path.join(os.path.dirname(top), os.path.basename(top) + ".worktrees", name)
    root = home + root[1:] if root.startswith("~/") else root
    return os.path.join(os.path.realpath(root), os.path.basename(top), name)


def _lookup(git: Git, names: list[str]) -> list[str | None]:
    """Each name's commit id (None: no such commit), in one git call."""
    done = git("cat-file", "--batch-check=%(objectname) %(objecttype)", input="".join(n + "\n" for n in names))
    out: list[str | None] = []
    for line in done.stdout.splitlines():
        oid, _, kind = line.partition(" ")
        out.append(oid if kind == "commit" and OID.match(oid) else None)
    return out


def create(state_dir: Path | str, cwd: str, name: str, from_ref: str | None, root: str | None,
           prefix: str, home: str) -> dict:
    """Make the worktree of a new session (nothing is left behind if any step fails)."""
    check_name(name)  # with the prefix's own check (config.py), the branch is a valid ref name
    top, common = repository(cwd)
    git = Git(top)
    branch = prefix + name
    ref = from_ref or "HEAD"
    if ref.startswith("-") or not ref.isprintable() or "\n" in ref:
        raise UsageError(f"--from {ref!r}: not a commit")
    base, head = _lookup(git, [ref + "^{commit}", "HEAD^{commit}"])
    if base is None:
        raise UsageError(f"--from {ref!r}: no such commit in {top}")
    if (from_ref is None or from_ref in ("HEAD", "@")) and base == head and \
            git("diff", "--quiet", "--no-ext-diff", "HEAD", "--", check=False).returncode != 0:
        raise UsageError(f"--worktree: {top} has uncommitted changes, which a worktree from HEAD would leave out",
                         hint="commit or stash them first, or start it from a named commit: --from <commit>")
    path = where(top, name, root, home)
    if inside(path, top):
        raise UsageError(f"--worktree: {path} would be inside the checkout {top}",
                         hint="set [worktree] root in the config to a directory outside it")
    if os.path.lexists(path):
        raise UsageError(f"--worktree: {path} already exists",
                         hint="pick another name, or resume the session that uses it")
    wid = name + "-" + hashlib.sha256(path.encode()).hexdigest()[:10]
    meta_dir = state_root(state_dir) / wid
    wt = {"id": wid, "name": name, "branch": branch, "base": base, "from": ref, "repo": top, "common": common,
          "objects": os.path.join(common, "objects"), "path": path, "gitdir": str(meta_dir / "git"),
          "import": str(meta_dir / "import"), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if not os.path.isdir(wt["objects"]):
        raise UsageError(f"--worktree: {top} has no object directory at {wt['objects']}")
    # The branch first: creating it only where none exists is the check that it does not.
    if git("update-ref", "refs/heads/" + branch, base, "", check=False).returncode != 0:
        raise UsageError(f"--worktree: branch {branch} already exists in {top}",
                         hint="pick another name: --worktree NAME (or delete that branch)")
    try:
        os.makedirs(state_root(state_dir), mode=0o700, exist_ok=True)
        os.mkdir(meta_dir, 0o700)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        _make_gitdir(wt, git)
        _write(meta_dir / "meta.json", json.dumps(wt, indent=1, sort_keys=True) + "\n")
    except BaseException:
        discard(wt)
        raise
    return wt


def for_start(paths, where_dir: str, provider: str, name: str | None, from_ref: str | None, mode: str | None) -> dict:
    """The worktree a `--worktree` start runs in (the CLI's, the start menu's, api.start's), made
    now from the repository at where_dir; discard() it if the start then fails."""
    import secrets

    cfg = load_config(paths.config_file)
    if not Mode(mode or cfg.default_mode).strict:
        raise UsageError("--worktree needs --mode isolated or --mode verified",
                         hint="in compatibility mode the agent could write the repository's hooks and config anyway")
    return create(paths.state_dir, where_dir, name or f"{provider}-{secrets.token_hex(2)}", from_ref,
                  cfg.worktree_root, cfg.branch_prefix, str(paths.home))


def _bare(gitdir: str, config: str, alternate: str) -> None:
    """A git directory as `git init --bare --template=` makes it (no hooks, no info/), written here."""
    for d in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        os.makedirs(os.path.join(gitdir, d), exist_ok=True)
    _write(Path(gitdir, "config"), config)
    _write(Path(gitdir, "HEAD"), "ref: refs/heads/tip\n")
    _write(Path(gitdir, "objects", "info", "alternates"), alternate + "\n")


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _make_gitdir(wt: dict, main: Git) -> None:
    """G, the agent's git directory (its alternate: the repository's objects as the jail sees
    them), checked out into W; and I, the import repository (tmuxjail's alone)."""
    gitdir, path, branch = wt["gitdir"], wt["path"], wt["branch"]
    user = main.config("user.name") or "tmuxjail agent"
    email = main.config("user.email") or "agent@tmuxjail.invalid"
    if not (user + email).isprintable():
        user, email = "tmuxjail agent", "agent@tmuxjail.invalid"
    _bare(gitdir, "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tlogAllRefUpdates = true\n"
          f"[user]\n\tname = {_quoted(user)}\n\temail = {_quoted(email)}\n", wt["objects"])
    _write(Path(gitdir, "HEAD"), f"ref: refs/heads/{branch}\n")
    os.makedirs(os.path.dirname(os.path.join(gitdir, "refs", "heads", branch)), exist_ok=True)
    _write(Path(gitdir, "refs", "heads", branch), wt["base"] + "\n")
    Git(path, git_dir=gitdir, work_tree=path)("reset", "-q", "--hard", what="checking out the worktree")
    # From here on the alternate is the jail's path to the objects (the host never uses G again).
    _write(Path(gitdir, "objects", "info", "alternates"), JAIL_OBJECTS + "\n")
    _write(Path(path, ".git"), "gitdir: " + JAIL_GITDIR + "\n", 0o644)
    _bare(wt["import"], "[core]\n\trepositoryformatversion = 0\n\tbare = true\n", wt["objects"])


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def discard(wt: dict, branch: bool = True) -> None:
    """Remove what create made: the checkout, the state, and the branch while it is still at its base."""
    for p in (wt["path"], str(Path(wt["gitdir"]).parent)):
        if os.path.lexists(p) and not os.path.islink(p):
            remove_tree(p)
    try:
        os.rmdir(os.path.dirname(wt["path"]))  # REPO.worktrees/, once its last worktree is gone
    except OSError:
        pass
    if branch:
        Git(wt["repo"])("update-ref", "-d", "refs/heads/" + wt["branch"], wt["base"], check=False)


def all_worktrees(state_dir: Path | str) -> list[dict]:
    top = state_root(state_dir)
    out = []
    for entry in sorted(os.listdir(top)) if top.is_dir() else []:
        try:
            wt = json.loads((top / entry / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(wt, dict) and wt.get("id") == entry:
            out.append(wt)
    return out


# -- reading the agent's side (never through git) -------------------------------------------------

def _open_path(dfd: int, rel: str, flags: int) -> int:
    """rel below the directory dfd, one component at a time, following no link."""
    parts = rel.split("/")
    fd = os.dup(dfd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        out = os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)
    return out


def _read_small(dfd: int, rel: str, limit: int) -> str | None:
    try:
        fd = _open_path(dfd, rel, FILE_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WorktreeError(f"the worktree's {rel} is not a plain file ({exc.strerror}); refusing to read it") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise WorktreeError(f"the worktree's {rel} is not a plain file of at most {limit} bytes; refusing it")
        return os.read(fd, limit + 1).decode("ascii", "replace")
    finally:
        os.close(fd)


def tip(wt: dict) -> str:
    """The agent's branch as the agent left it: the loose ref, else its line in packed-refs. Only
    a plain object name is taken (a symbolic ref, a link or anything else is refused)."""
    ref = "refs/heads/" + wt["branch"]
    try:
        gfd = os.open(wt["gitdir"], DIR_FLAGS)
    except OSError as exc:
        raise WorktreeError(f"the worktree's git directory {wt['gitdir']} cannot be opened ({exc.strerror})") from None
    try:
        loose = _read_small(gfd, ref, 200)
        if loose is not None:
            value = loose.strip()
            if not OID.match(value):
                raise WorktreeError(f"the worktree's branch {wt['branch']} is not a commit id; refusing it")
            return value
        packed = _read_small(gfd, "packed-refs", MAX_REFS) or ""
    finally:
        os.close(gfd)
    for line in packed.splitlines():
        oid, _, name = line.partition(" ")
        if name == ref and OID.match(oid):
            return oid
    raise WorktreeError(f"the branch {wt['branch']} is gone from the worktree",
                        hint="the agent deleted or renamed it; nothing can be brought home")


def _copy_objects(wt: dict) -> int:
    """The agent's object files into the import repository: loose objects and packs by their
    names only, each a regular file opened without following a link. Returns bytes copied."""
    dest = os.path.join(wt["import"], "objects")
    total = 0
    try:
        gfd = os.open(wt["gitdir"], DIR_FLAGS)
    except OSError as exc:
        raise WorktreeError(f"the worktree's git directory cannot be opened ({exc.strerror})") from None
    try:
        try:
            ofd = _open_path(gfd, "objects", DIR_FLAGS)
        except OSError:
            raise WorktreeError("the worktree's objects directory is gone or not a directory") from None
        try:
            for e in os.scandir(ofd):
                if LOOSE_DIR.match(e.name):
                    names = [n for n in _names(ofd, e.name) if LOOSE.match(n)]
                elif e.name == "pack":
                    found = set(_names(ofd, "pack"))
                    names = [n for n in found if PACK.match(n) and n.rsplit(".", 1)[0]
                             + (".idx" if n.endswith(".pack") else ".pack") in found]
                else:
                    continue
                for n in sorted(names):
                    total += _copy_one(ofd, e.name + "/" + n, os.path.join(dest, e.name, n), MAX_IMPORT - total)
        finally:
            os.close(ofd)
    finally:
        os.close(gfd)
    return total


def _names(ofd: int, sub: str) -> list[str]:
    try:
        fd = os.open(sub, DIR_FLAGS, dir_fd=ofd)
    except OSError:
        return []  # a link or not a directory: nothing of it is taken
    try:
        return [e.name for e in os.scandir(fd)]
    finally:
        os.close(fd)


def _copy_one(ofd: int, rel: str, dest: str, budget: int) -> int:
    try:
        fd = _open_path(ofd, rel, FILE_FLAGS)
    except OSError:
        return 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0
        try:
            if os.stat(dest).st_size == st.st_size:
                return 0  # object files are named by their content: already here
        except FileNotFoundError:
            pass
        if st.st_size > budget:
            raise WorktreeError(f"the worktree's objects exceed {MAX_IMPORT >> 30} GiB; refusing to import them")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = dest + ".tmp"
        with open(tmp, "wb") as out, os.fdopen(os.dup(fd), "rb") as src:
            os.set_blocking(src.fileno(), True)
            shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(tmp, 0o444)
        os.replace(tmp, dest)
        return st.st_size
    finally:
        os.close(fd)


def bring(wt: dict) -> str:
    """The agent's branch into the user's repository (refs/heads/BRANCH), every object checked;
    returns its commit."""
    commit = tip(wt)
    main = Git(wt["repo"])
    have, current = _lookup(main, [commit + "^{commit}", f"refs/heads/{wt['branch']}^{{commit}}"])
    if have is None:
        _copy_objects(wt)
        _write(Path(wt["import"], "refs", "heads", "tip"), commit + "\n")
        main("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
             wt["import"], "+refs/heads/tip:refs/heads/" + wt["branch"],
             what="the agent's commits fail git's checks; nothing was imported")
    elif current != commit:
        main("update-ref", "refs/heads/" + wt["branch"], commit, what="updating the branch")
    return commit


def commits(wt: dict, commit: str, since: str | None = None) -> list[dict]:
    out = Git(wt["repo"]).out("log", "--no-decorate", "--format=%H%x1f%an%x1f%aI%x1f%s",
                              (since or wt["base"]) + ".." + commit)
    return [dict(zip(("commit", "author", "date", "subject"), line.split("\x1f"), strict=False))
            for line in out.splitlines() if line]


def files(wt: dict, commit: str) -> list[dict]:
    out = Git(wt["repo"]).out("diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--name-status", "-z",
                              wt["base"] + "..." + commit)
    parts = [p for p in out.split("\0") if p]
    return [{"status": parts[i], "path": parts[i + 1]} for i in range(0, len(parts) - 1, 2)]


def patch(wt: dict, commit: str) -> str:
    return Git(wt["repo"])("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--stat", "--patch",
                           wt["base"] + "..." + commit).stdout


# -- landing ----------------------------------------------------------------------------------------

def checked_out(main: Git, branch: str) -> str | None:
    """The work tree of the user's repository that has branch checked out, if any."""
    block: dict[str, str] = {}
    for line in [*main.out("worktree", "list", "--porcelain").splitlines(), ""]:
        if not line:
            if block.get("branch") == "refs/heads/" + branch and "worktree" in block:
                return block["worktree"]
            block = {}
            continue
        key, _, value = line.partition(" ")
        block[key] = value
    return None


def land(wt: dict, into: str | None, how: str, trust_files: bool = False) -> dict:
    """how: "auto" (fast-forward, else a merge commit), "ff-only", "merge" (always a merge
    commit) or "squash". A conflict, or local changes in the way, changes nothing."""
    main = Git(wt["repo"])
    commit = bring(wt)
    if into is None:
        head = main("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
        if not head:
            raise UsageError(f"{wt['repo']} is on a detached HEAD; say where to land: --into BRANCH")
        into = head
    if into == wt["branch"]:
        raise UsageError(f"--into {into}: that is the worktree's own branch")
    if into.startswith("-") or not into.isprintable() or "\n" in into:
        raise UsageError(f"--into {into!r}: not a branch name")
    (target,) = _lookup(main, [f"refs/heads/{into}^{{commit}}"])
    if target is None:
        raise UsageError(f"--into {into}: no such branch in {wt['repo']}")
    if commit == wt["base"]:
        raise UsageError(f"{wt['branch']} has no commits to land")
    common = main.out("merge-base", target, commit, what="finding where the branches meet")
    if common == commit:
        raise UsageError(f"{wt['branch']} is already in {into}")
    trusted = host_trusted(files(wt, commit))
    if trusted and not trust_files:
        listed = ", ".join(t["path"] for t in trusted[:5]) + ("..." if len(trusted) > 5 else "")
        raise WorktreeError(f"{wt['branch']} changes {len(trusted)} file(s) that your tools run or trust: {listed}; "
                            "nothing changed",
                            hint=f"read them (tmuxjail diff {wt['name']}), then land with --trust-files",
                            data={"trusted": trusted})
    ff = common == target
    if how == "ff-only" and not ff:
        raise WorktreeError(f"{into} has moved on since {wt['branch']} began: not a fast-forward; nothing changed",
                            hint="land without --ff-only (a merge commit) or with --squash")
    new_commits = commits(wt, commit, since=target)
    n = len(new_commits)
    if ff and how in ("auto", "ff-only"):
        new, kind = commit, "fast-forward"
    else:
        done = main("merge-tree", "--write-tree", "--name-only", "--no-messages", target, commit, check=False)
        lines = done.stdout.splitlines()
        if done.returncode == 1:
            conflicted = [x for x in lines[1:] if x]
            raise WorktreeError(f"landing {wt['branch']} into {into} conflicts in {len(conflicted)} file(s): "
                                + ", ".join(conflicted[:5]) + ("..." if len(conflicted) > 5 else "")
                                + "; nothing changed",
                                hint=f"merge it yourself: git -C {wt['repo']} merge {wt['branch']}",
                                data={"conflicts": conflicted})
        if done.returncode != 0 or not lines or not OID.match(lines[0]):
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise WorktreeError(f"landing {wt['branch']} into {into}: the merge failed ({last}); nothing changed",
                                hint="tmuxjail runs no merge driver; merge it yourself after review")
        tree = lines[0]
        if how == "squash":
            subjects = "".join(f"\n* {c['subject']}" for c in new_commits)
            msg = f"{wt['branch']}: {n} commit(s), squashed by tmuxjail land\n{subjects}\n"
            new = main.out("commit-tree", tree, "-p", target, input=msg, what="making the squash commit")
            kind = "squash"
        else:
            msg = f"Merge branch '{wt['branch']}' into {into} (tmuxjail land)\n"
            new = main.out("commit-tree", tree, "-p", target, "-p", commit, input=msg, what="making the merge commit")
            kind = "merge"
    at = checked_out(main, into)
    if at is not None:
        # The branch's own checkout moves with it; git refuses (and changes nothing) when local
        # changes are in the way. Filters and hooks are off (gitrun), so nothing of the agent's runs.
        moved = Git(at)("merge", "--ff-only", "--quiet", "--no-edit", "--no-verify", new, check=False)
        if moved.returncode != 0:
            last = " ".join(moved.stderr.split())[:300] or "git merge refused"
            raise WorktreeError(f"landing into {into} (checked out at {at}) stopped: {last}; nothing changed",
                                hint="commit or stash the changes there first")
    else:
        main("update-ref", "-m", "tmuxjail land " + wt["branch"], "refs/heads/" + into, new, target,
             what="moving " + into)
    _write(Path(wt["gitdir"]).parent / "landed", json.dumps({"tip": commit, "into": into, "commit": new}) + "\n")
    return {"branch": wt["branch"], "into": into, "method": kind, "commits": n, "tip": commit, "result": new,
            "checkout": at}


def landed(wt: dict) -> bool:
    """Is the agent's branch, as it is now, in the user's repository (landed, or merged by hand)?"""
    try:
        commit = tip(wt)
        rec = json.loads((Path(wt["gitdir"]).parent / "landed").read_text())
        if isinstance(rec, dict) and rec.get("tip") == commit:
            return True
    except (OSError, ValueError, TmuxjailError):
        pass
    try:
        main = Git(wt["repo"])
        for branch in main.out("for-each-ref", "--format=%(refname)", "refs/heads/").splitlines():
            if branch != "refs/heads/" + wt["branch"] and main(
                    "merge-base", "--is-ancestor", commit, branch, check=False).returncode == 0:
                return commit != wt["base"]
    except (TmuxjailError, UnboundLocalError):
        return False
    return False


def remove(wt: dict) -> None:
    """A worktree, its state and its branch (only while the branch is what the agent left)."""
    try:
        commit = tip(wt)
    except TmuxjailError:
        commit = None
    main_branch = None
    try:
        main_branch = Git(wt["repo"])("rev-parse", "--verify", "--quiet", "refs/heads/" + wt["branch"],
                                      check=False).stdout.strip()
    except (TmuxjailError, OSError):
        pass
    discard(wt, branch=False)
    if main_branch and main_branch in (commit, wt["base"]):
        try:
            Git(wt["repo"])("update-ref", "-d", "refs/heads/" + wt["branch"], main_branch, check=False)
        except (TmuxjailError, OSError):
            pass


__all__ = ["JAIL_GITDIR", "JAIL_OBJECTS", "GitError", "WorktreeError", "bring", "create", "land", "tip"]


def ahead(wt: dict, limit: int = 1000) -> int | None:
    """Commits on the agent's branch since its base, counted from the agent's own loose objects
    (list runs no git and imports nothing): a walk from the tip through the commits the agent
    made, which stops at the base and at any commit it did not make (those are the repository's).
    None when a commit of the agent's is packed (after a gc): then `tmuxjail diff` counts."""
    import zlib

    try:
        start = tip(wt)
        gfd = os.open(wt["gitdir"], DIR_FLAGS)
    except (OSError, TmuxjailError):
        return None
    seen: set[str] = set()
    todo = [start]
    try:
        while todo:
            oid = todo.pop()
            if oid == wt["base"] or oid in seen:
                continue
            if len(seen) >= limit:
                return None
            try:
                fd = _open_path(gfd, f"objects/{oid[:2]}/{oid[2:]}", FILE_FLAGS)
            except FileNotFoundError:
                if _packed_here(gfd):
                    return None
                continue  # not the agent's: the repository's history
            except OSError:
                return None
            try:
                raw = os.read(fd, 1 << 20)
            finally:
                os.close(fd)
            try:
                body = zlib.decompressobj().decompress(raw, 64 << 10)
            except zlib.error:
                return None
            head, _, text = body.partition(b"\0")
            if not head.startswith(b"commit "):
                return None
            seen.add(oid)
            for line in text.split(b"\n"):
                if not line:
                    break
                if line.startswith(b"parent ") and OID.match(line[7:].decode("ascii", "replace")):
                    todo.append(line[7:].decode())
        return len(seen)
    finally:
        os.close(gfd)


def _packed_here(gfd: int) -> bool:
    try:
        fd = _open_path(gfd, "objects/pack", DIR_FLAGS)
    except OSError:
        return False
    try:
        return any(e.name.endswith(".pack") for e in os.scandir(fd))
    finally:
        os.close(fd)


def host_trusted(changed: list[dict]) -> list[dict]:
    """The changed paths that a host program runs or trusts (the catalogue's guard entries, and
    .gitattributes and .gitmodules, which route files to drivers and say where submodules come
    from): landing them is a decision of its own (`land --trust-files`)."""
    cat = catalogue()
    out = []
    for f in changed:
        parts = f["path"].split("/")
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            e = cat.match(name, parts[i - 1] if i else "", not last)
            if name in (".gitattributes", ".gitmodules") and last:
                out.append({"path": f["path"], "entry": name, "trigger": "git status, git checkout, git submodule"})
                break
            if e is not None and e.treatment == "guard":
                out.append({"path": f["path"], "entry": e.id, "trigger": e.trigger})
                break
    return out


def uncommitted(wt: dict) -> list[str] | None:
    """The checkout's changes against the agent's branch (`git status --porcelain` paths), as the
    host sees them without trusting the agent's git directory: in the import repository (its
    config and alternate are tmuxjail's; the agent's object files copied by name), with an index
    of tmuxjail's own, submodules ignored and every command key off (gitrun). None when it cannot
    tell (a branch or object that does not read)."""
    try:
        commit = tip(wt)
        _copy_objects(wt)
    except (TmuxjailError, OSError):
        return None
    meta = Path(wt["gitdir"]).parent
    index = str(meta / "status-index")
    git = Git(wt["path"], git_dir=wt["import"], work_tree=wt["path"],
              extra_env={"GIT_INDEX_FILE": index, "GIT_OPTIONAL_LOCKS": "1"})
    try:
        seen = (meta / "status-tip").read_text().strip()
    except OSError:
        seen = ""
    _write(Path(wt["import"], "refs", "heads", "tip"), commit + "\n")  # the import repository's HEAD
    if seen != commit:  # --reset: entries the new tip leaves as they were keep their stat data (no rehash)
        if git("read-tree", *(["--reset"] if seen else []), commit, check=False).returncode != 0:
            return None
        _write(meta / "status-tip", commit + "\n")
    git("update-index", "-q", "--refresh", "--ignore-submodules", check=False)
    done = git("status", "--porcelain=v1", "-z", "--ignore-submodules=all", "--untracked-files=normal",
               "--no-renames", check=False)
    if done.returncode != 0:
        return None
    return [item[3:] for item in done.stdout.split("\0") if len(item) > 3]
