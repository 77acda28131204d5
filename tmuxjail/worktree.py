"""Worktree sessions (docs/worktrees.md): each agent works in a checkout of its own, on a branch
of its own, and commits there; tmuxjail brings its commits home without running anything the
agent wrote.

The model, in one paragraph. The agent's checkout W has a `.git` *file* naming a path that exists
only inside the jail (JAIL_GITDIR); its git directory G lives in tmuxjail's state, bound there
writable, with the user's object store bound read-only beside it (JAIL_OBJECTS) as G's alternate.
So inside the jail git works in full (add, commit, stash, rebase), while on the host W is not a
repository at all (the path its `.git` names is not there) and G is never handed to git: the host
reads one ref of it as text, reads the loose objects reachable from it by name (no link followed,
bounded) and packs them itself, copies the agent's packs whole, and the user's repository takes
each pack with `git index-pack --strict` (fsck on every object, no missing link) before its branch
moves (bring). Nothing of G's config, hooks, info/, commondir, alternates or packed-refs beyond
that one line is ever read by git on the host. Landing and diffs run in the user's repository
through gitrun, with its hooks and command-running keys switched off."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import gitconfig
from .config import load as load_config
from .effective import JAIL_GITDIR, JAIL_OBJECTS
from .errors import TmuxjailError, UsageError
from .gitglobal import git_home, read_regular
from .gitrun import Git, GitError, reason, user_config_env
from .paths import remove_tree
from .registry import Mode
from .subpath import inside
from .trust import catalogue

TYPE_CHECKING = False  # typing is not imported at run time: `land` pays for every import
if TYPE_CHECKING:
    from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
LOOSE_DIR = re.compile(r"^[0-9a-f]{2}$")
LOOSE = re.compile(r"^(?:[0-9a-f]{38}|[0-9a-f]{62})$")
PACK = re.compile(r"^pack-(?:[0-9a-f]{40}|[0-9a-f]{64})\.(?:pack|idx)$")
MAX_IMPORT = 4 << 30  # bytes of objects one import copies at most
MAX_LOOSE = 256 << 20  # one loose object, read and inflated in memory
MAX_LINKS = 2_000_000  # object ids one import takes from the objects it reads
MAX_PACKS = 256  # the agent's pack files one import takes
STATUS_TIMEOUT = 10.0  # seconds each of list's git calls on a checkout may take
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
    if os.path.lexists(meta_dir):
        raise UsageError(f"--worktree: tmuxjail still holds the state of an earlier worktree at {path} ({meta_dir})",
                         hint="tmuxjail prune --worktrees --force --dry-run shows it; prune it, or pick another name")
    # The branch first: creating it only where none exists is the check that it does not.
    if git("update-ref", "refs/heads/" + branch, base, "", check=False).returncode != 0:
        raise UsageError(f"--worktree: branch {branch} already exists in {top}",
                         hint="pick another name: --worktree NAME (or delete that branch)")
    made: list[str] = []  # only what this call made goes again on a failure (a race must not cost a directory)
    try:
        os.makedirs(state_root(state_dir), mode=0o700, exist_ok=True)
        os.mkdir(meta_dir, 0o700)
        made.append(str(meta_dir))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        made.append(path)
        _make_gitdir(wt, git)
        _write(meta_dir / "meta.json", json.dumps(wt, indent=1, sort_keys=True) + "\n")
    except BaseException as exc:
        for p in made:
            remove_tree(p)
        git("update-ref", "-d", "refs/heads/" + branch, base, check=False)
        if isinstance(exc, OSError):
            raise UsageError(f"--worktree: cannot make {exc.filename or path}: {exc.strerror}",
                             hint="set [worktree] root in the config to a directory you can write") from None
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


@contextmanager
def discarded_on_failure(wt: dict | None) -> Iterator[None]:
    """A start in a worktree just made (the CLI's, the menu's, the API's): if it does not happen,
    the worktree goes with it."""
    try:
        yield
    except BaseException:
        if wt is not None:
            discard(wt)
        raise


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


def _names(ofd: int, sub: str) -> list[str]:
    try:
        fd = os.open(sub, DIR_FLAGS, dir_fd=ofd)
    except OSError:
        return []  # a link or not a directory: nothing of it is taken
    try:
        return [e.name for e in os.scandir(fd)]
    finally:
        os.close(fd)


def bring(wt: dict) -> str:
    """The agent's branch into the user's repository (refs/heads/BRANCH), every object checked;
    returns its commit. The agent's objects reach the repository only through `git index-pack
    --strict`, which names each object by its content (a file's name counts for nothing), runs
    fsck on every one and refuses a pack whose objects point at any that is missing."""
    commit = tip(wt)
    main = Git(wt["repo"])
    _imports(wt, main, commit, *_lookup(main, _asked(wt, commit)))()
    return commit


def _asked(wt: dict, commit: str) -> list[str]:
    """What _imports needs looked up: the agent's tip and the branch as the repository has it."""
    return [commit + "^{commit}", f"refs/heads/{wt['branch']}^{{commit}}"]


def _imports(wt: dict, main: Git, commit: str, have: str | None, current: str | None) -> Callable[[], None]:
    """The agent's objects imported, unless the repository has the commit; returns the branch's
    move, for the caller to make (land makes it beside its own queries)."""
    if have is None:
        why = "the agent's commits fail git's checks; nothing was imported"
        algo = "sha256" if (main.config("extensions.objectformat") or "").lower() == "sha256" else "sha1"
        try:
            _packs(wt, commit, algo, lambda pack: main("index-pack", "--stdin", "--strict", "--fix-thin",
                                                       what=why, stdin=pack))
        except OSError as exc:  # (a descriptor or disk limit on the host's side)
            raise WorktreeError(f"reading the agent's objects failed: {exc.strerror}; nothing was imported") from None
    if current not in (None, commit, _imported(wt), wt["base"]):
        raise WorktreeError(f"{wt['branch']} was moved in {wt['repo']} since tmuxjail last set it; "
                            "it stays as it is", hint=f"to keep that work, rename it (git branch -m "
                            f"{wt['branch']} NEW); tmuxjail then makes the branch again")

    def move() -> None:
        if current == commit:
            return
        moved = main("update-ref", "refs/heads/" + wt["branch"], commit, *([current] if current else []), check=False)
        if moved.returncode != 0:  # (git refuses a branch at an object it lacks, or at no commit)
            raise WorktreeError(f"the agent's branch names {commit[:12]}, which is not among its objects or is no "
                                f"commit; nothing was imported ({reason(moved.stderr)})")
        _write(Path(wt["gitdir"]).parent / "imported", commit + "\n")  # what prune may delete it at
    return move


def _imported(wt: dict) -> str | None:
    try:
        return (Path(wt["gitdir"]).parent / "imported").read_text().strip() or None
    except OSError:
        return None


PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
TREE_ENTRY = {w: re.compile(rb"([0-7]{5,6}) [^\0]*\0(.{%d})" % w, re.DOTALL) for w in (20, 32)}
HEADER_LINK = re.compile(rb"^(?:tree|parent|object) ([0-9a-f]{64}|[0-9a-f]{40})$", re.MULTILINE)
TREE_IDS = {w: re.compile(rb"[0-7]{5,6} [^\0]*\0(.{%d})" % w, re.DOTALL) for w in (20, 32)}
# A whole tree, entry after entry, in time linear in its size (possessive: nothing is tried again).
# The two above are used only on a body this matched: searched elsewhere, a name with no NUL after
# it made each of them scan to the end from every position (hours for a few megabytes).
TREE_WHOLE = {w: re.compile(rb"(?:[0-7]{5,6} [^\0]++\0.{%d})*+" % w, re.DOTALL) for w in (20, 32)}


def _packs(wt: dict, commit: str, algo: str, index) -> None:
    """Each pack of the agent's objects handed to index(fd), in order, one at a time (an fd of an
    unlinked file tmuxjail wrote): a copy of each pack file it has, then one made here from its
    loose objects reachable from the tip (each read without following a link, inflated with a
    bound, its type and size checked)."""
    import tempfile

    meta = str(Path(wt["gitdir"]).parent)
    budget = MAX_IMPORT
    try:
        gfd = os.open(wt["gitdir"], DIR_FLAGS)
    except OSError as exc:
        raise WorktreeError(f"the worktree's git directory cannot be opened ({exc.strerror})") from None
    try:
        ofd = _open_path(gfd, "objects", DIR_FLAGS)
    except OSError:
        os.close(gfd)
        raise WorktreeError("the worktree's objects directory is gone or not a directory") from None
    try:
        # The agent's packs first: the loose objects made since may point into them.
        packs = sorted(n for n in _names(ofd, "pack") if PACK.match(n) and n.endswith(".pack"))
        if len(packs) > MAX_PACKS:
            raise WorktreeError(f"the agent has {len(packs)} packs (more than {MAX_PACKS}); nothing was imported",
                                hint="repack in the session (git gc), then try again")
        for pack in packs:
            with tempfile.TemporaryFile(dir=meta) as copy:
                size = _copy_fd(ofd, "pack/" + pack, copy, budget)
                budget -= size
                if size:
                    copy.seek(0)
                    index(copy.fileno())
        with tempfile.TemporaryFile(dir=meta) as loose:
            # The loose objects reachable from the tip, the walk stopping at each one the agent
            # does not have loose (the repository's, or in the agent's packs, sent whole above).
            dirs: dict[str, int] = {}
            try:
                count = _walk_loose(ofd, commit, dirs, budget, 32 if algo == "sha256" else 20, loose)
            finally:
                for dfd in dirs.values():
                    os.close(dfd)
            if count:
                pack_fd = _sealed(loose, count, meta, algo)
                try:
                    index(pack_fd)
                finally:
                    os.close(pack_fd)
    finally:
        os.close(ofd)
        os.close(gfd)


def _walk_loose(ofd: int, commit: str, dirs: dict[str, int], budget: int, width: int, loose) -> int:
    """Pack entries, into `loose`, for the agent's loose objects reachable from commit; their count.
    At most MAX_LINKS object ids are taken from the objects read (counted before a tree is parsed;
    ids already met are not queued again), and at most `budget` bytes read and inflated in all,
    whatever the objects say. Ids are kept raw: a tree's are compared as a set."""
    count, taken = 0, 0
    seen = {bytes.fromhex(commit)}
    todo = list(seen)
    inodes: set[tuple[int, int]] = set()
    while todo:
        if budget <= 0:
            raise WorktreeError(f"the agent's objects exceed {MAX_IMPORT >> 30} GiB; nothing was imported")
        oid = todo.pop().hex()
        raw, used = _read_object(ofd, f"{oid[:2]}/{oid[2:]}", budget, dirs, inodes)
        budget -= used
        if raw is None:
            continue
        head, _, body = raw.partition(b"\0")
        kind, _, size = head.partition(b" ")
        if kind not in PACK_TYPES or not size.isdigit() or len(size) > 20 or int(size) != len(body):
            continue  # not an object: if one is needed, index-pack says it is missing
        taken += body.count(b"\0") if kind == b"tree" else 0  # (each entry has one: counted before parsing)
        if taken > MAX_LINKS:
            raise WorktreeError(f"the agent's objects name more than {MAX_LINKS:,} others; nothing was imported")
        links = _links(kind, body, width)
        taken += 0 if kind == b"tree" else len(links)
        new = links - seen
        seen |= new
        todo += new
        loose.write(_pack_header(PACK_TYPES[kind], len(body)))
        loose.write(_deflated(kind, body))
        count += 1
    return count


def _deflated(kind: bytes, body: bytes) -> bytes:
    """A pack entry's data. Trees are mostly object ids, which do not compress: stored as they are.
    A small object gets a small zlib state: zlib's default (~270 KB) allocated and freed for
    each of hundreds of objects made the heap grow and shrink every time (15 ms for 400)."""
    import zlib

    if len(body) > 1 << 16 and kind != b"tree":
        return zlib.compress(body, 1)
    small = zlib.compressobj(0 if kind == b"tree" else 1, zlib.DEFLATED, 12, 2)
    return small.compress(body) + small.flush()


def _links(kind: bytes, body: bytes, width: int) -> set[bytes]:
    """The object ids (raw) a commit, tree or tag names (a gitlink's commit is another repository's)."""
    if kind == b"tree":  # entries: MODE SP NAME NUL ID
        if not TREE_WHOLE[width].fullmatch(body):
            return set()  # a tree that does not parse names nothing (and index-pack refuses it)
        if b"160000 " in body:
            return {oid for mode, oid in TREE_ENTRY[width].findall(body) if mode != b"160000"}
        return set(TREE_IDS[width].findall(body))
    out: set[bytes] = set()
    if kind in (b"commit", b"tag"):
        # The header only, each id line found by a search in C: splitting the whole body made a
        # commit of 87 million header lines (272 KB loose) take 5 GB.
        end = body.find(b"\n\n")
        for n, m in enumerate(HEADER_LINK.finditer(body, 0, len(body) if end < 0 else end + 1)):
            if n >= MAX_LINKS:
                raise WorktreeError(f"an object of the agent's names more than {MAX_LINKS:,} others; "
                                    "nothing was imported")
            out.add(bytes.fromhex(m.group(1).decode()))
    return out


def _pack_header(kind: int, size: int) -> bytes:
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte, size = size & 0x7F, size >> 7
    out.append(byte)
    return bytes(out)


def _sealed(entries, count: int, meta: str, algo: str) -> int:
    """PACK v2 header + the entries + the trailing hash (the repository's object format), as an
    fd at its start."""
    import tempfile

    digest = hashlib.new(algo)
    head = b"PACK" + (2).to_bytes(4, "big") + count.to_bytes(4, "big")
    with tempfile.TemporaryFile(dir=meta) as pack:
        pack.write(head)
        digest.update(head)
        entries.seek(0)
        while chunk := entries.read(1 << 20):
            pack.write(chunk)
            digest.update(chunk)
        pack.write(digest.digest())
        pack.seek(0)
        return os.dup(pack.fileno())


def _read_object(ofd: int, rel: str, budget: int, dirs: dict[str, int],
                 inodes: set[tuple[int, int]]) -> tuple[bytes | None, int]:
    """A loose object, inflated (None for anything that is not a regular file, is a file already
    read under another name, or does not inflate), and the bytes it cost: read plus inflated,
    charged whether or not it inflates. It is read and inflated a piece at a time, at most
    min(budget, MAX_LOOSE) bytes each way (a file that grows while it is read counts for what it
    was): a larger object is refused (the agent's `git gc` packs it). dirs: the fan-out
    directories this walk opened (no link followed), by name; the caller closes them."""
    import zlib

    sub, _, name = rel.partition("/")
    try:
        if sub not in dirs:
            dirs[sub] = os.open(sub, DIR_FLAGS, dir_fd=ofd)
        fd = os.open(name, FILE_FLAGS, dir_fd=dirs[sub])
    except OSError:
        return None, 0
    used = 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in inodes:
            return None, 0
        inodes.add((st.st_dev, st.st_ino))
        cap = min(budget, MAX_LOOSE)
        what = rel.replace("/", "")
        if st.st_size > cap:
            raise WorktreeError(f"the agent's object {what} is larger than {cap >> 20} MiB loose; "
                                "nothing was imported", hint="pack it in the session (git gc), then try again")
        if st.st_size > (1 << 20) and st.st_blocks * 512 < st.st_size // 2:
            raise WorktreeError(f"the agent's object {what} is mostly holes (a sparse file, no object); "
                                "nothing was imported")
        inflate, parts, got, left = zlib.decompressobj(), [], 0, st.st_size  # (O_NONBLOCK: nothing, for a file)
        while left and (chunk := os.read(fd, min(left, 1 << 20))):
            left -= len(chunk)
            used += len(chunk)
            out = inflate.decompress(chunk, cap + 1 - got)
            got += len(out)
            used += len(out)
            parts.append(out)
            if got > cap or inflate.unconsumed_tail:
                raise WorktreeError(f"the agent's object {what} inflates past {cap >> 20} MiB; "
                                    "nothing was imported", hint="pack it in the session (git gc), then try again")
        return b"".join(parts), used
    except zlib.error:
        return None, used
    finally:
        os.close(fd)


def _copy_fd(ofd: int, rel: str, dest, budget: int) -> int:
    try:
        fd = _open_path(ofd, rel, FILE_FLAGS)
    except OSError:
        return 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0
        if st.st_size > budget:
            raise WorktreeError(f"the worktree's objects exceed {MAX_IMPORT >> 30} GiB; refusing to import them")
        os.set_blocking(fd, True)
        head = os.pread(fd, 12, 0)
        if len(head) < 12 or head[:4] != b"PACK" or int.from_bytes(head[4:8], "big") not in (2, 3):
            return 0  # not a pack: nothing of it is taken
        if st.st_size > (1 << 20) and st.st_blocks * 512 < st.st_size // 2:
            raise WorktreeError(f"the agent's {rel} is mostly holes (a sparse file, no pack); nothing was imported")
        left = st.st_size  # what it was when looked at: a file that grows is copied that far
        with os.fdopen(os.dup(fd), "rb") as src:
            while left and (chunk := src.read(min(left, 1 << 20))):
                dest.write(chunk)
                left -= len(chunk)
        return st.st_size
    finally:
        os.close(fd)


def commits(wt: dict, commit: str, since: str | None = None) -> list[dict]:
    out = Git(wt["repo"])("log", "-z", "--no-decorate", "--format=%H%x00%an%x00%aI%x00%s",
                          (since or wt["base"]) + ".." + commit).stdout
    fields = out.split("\0")
    return [dict(zip(("commit", "author", "date", "subject"), fields[i:i + 4], strict=True))
            for i in range(0, len(fields) - 3, 4) if OID.match(fields[i].strip())]


def files(wt: dict, commit: str, since: str | None = None) -> list[dict]:
    """The paths a change makes (status, path, and the mode it leaves): from the base to the
    agent's tip (three dots: the agent's own work), or from `since` to commit (what landing it
    changes)."""
    span = wt["base"] + "..." + commit if since is None else since + ".." + commit
    out = Git(wt["repo"])("diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--raw", "-z",
                          span).stdout
    parts = out.split("\0")
    changed = []
    for i in range(0, len(parts) - 1, 2):  # ":OLDMODE NEWMODE OLDID NEWID STATUS" NUL PATH NUL
        head = parts[i].lstrip(":").split()
        if len(head) == 5:
            changed.append({"status": head[4], "path": parts[i + 1], "mode": head[1], "old": head[0]})
    return changed


def linked(wt: dict, changed: list[dict], config: list[tuple[str, str]], listing: str) -> list[dict]:
    """The changed files a host tool reaches through a link of the user's tree (listing: the
    landing target's `ls-tree -r -z --full-tree`; landing adds, changes or removes no link without
    --trust-files, so the result has no other): every other path a file has through those links
    (.envrc -> tools/env.sh makes tools/env.sh also .envrc), link after link, is checked as the
    file itself is (host_trusted). A link that cannot be followed (a loop, a missing blob) counts
    as leading anywhere; past MAX_ALIASES paths looked at, every changed file counts."""
    links: dict[str, str] = {}
    for item in listing.split("\0"):
        meta, _, path = item.partition("\t")
        if meta.startswith("120000 "):
            links[path] = meta.split()[2]
    if not links or not changed:
        return []
    targets = _link_targets(Git(wt["repo"]), links)
    top = os.path.realpath(wt["repo"])
    ends: dict[str, str | None] = {}
    for link in links:
        try:
            ends[link] = _resolved(link, targets, top)
        except _Unresolvable:
            ends[link] = ANYWHERE
    out, budget = [], MAX_ALIASES
    for f in changed:
        todo, seen, hit = [f["path"]], {f["path"]}, None
        while todo and hit is None:
            p = todo.pop()
            for link, end in ends.items():
                if end is None:
                    continue  # (it leads out of the repository)
                if end == ANYWHERE:
                    aliases = [link, link + "/" + p]
                elif end == ALL:
                    aliases = [link + "/" + p]
                elif inside(p, end):
                    aliases = [link + p[len(end):]]
                else:
                    continue
                # Through a link back to the top or to a directory above itself, an alias only
                # repeats names already checked: looked at once, not followed again (a cycle).
                again = end not in (ALL, ANYWHERE) and not inside(link, end)
                for alias in aliases:
                    if alias in seen:
                        continue
                    budget -= 1
                    if budget < 0:
                        return [{"path": g["path"], "entry": "links", "trigger": f"the links of {wt['repo']} give its "
                                 f"files more than {MAX_ALIASES:,} other paths: not all could be checked"} for g in changed]
                    seen.add(alias)
                    found = host_trusted([{"path": alias, "mode": ""}], config)
                    if found:
                        hit = {"path": f["path"], "entry": found[0]["entry"],
                               "trigger": f"it is also {alias} (through the link {link}): {found[0]['trigger']}"}
                        break
                    if again:
                        todo.append(alias)
                if hit is not None:
                    break
        if hit is not None:
            out.append(hit)
    return out


ALL = "."  # the whole work tree
PATH_KEY = "PATH"  # a directory of your PATH: its executables run by their bare names
PATH_REL_KEY = "PATH (relative)"  # a relative entry of your PATH: taken from wherever you are
PATH_LINK_KEY = "a link on your PATH"
PATH_MANY_KEY = "your PATH's links"  # more of them than are followed: every file counts
MAX_CONFIG = 1 << 20  # an include read here (not by git): read up to this much
SYSTEM_BINS = frozenset({"/usr/bin", "/usr/sbin", "/bin", "/sbin"})
# Catalogue entries the audit only reports in a workspace (agents legitimately edit most of
# these) that a landing still asks about: Python runs them at its every start, without asking.
LAND_ASKS = frozenset({"python-pth", "python-pth-dist", "sitecustomize", "usercustomize", "pyvenv-cfg"})
MAX_PATH_LINKS = 50_000  # in all your PATH's directories (a nix profile holds a few thousand)
ANYWHERE = "\0"  # linked(): a link that cannot be followed
MAX_ALIASES = 100_000  # linked(): other paths of the changed files looked at, at most


class _Unresolvable(Exception):
    pass


def _link_targets(main: Git, links: dict[str, str]) -> dict[str, str | None]:
    """Each link's target, read from its blob (None: missing, as in a partial clone)."""
    # --batch sizes count bytes: the output back as the bytes git wrote (gitrun keeps them).
    blobs = main("cat-file", "--batch", input="".join(oid + "\n" for oid in links.values())).stdout.encode(
        "utf-8", "surrogateescape")
    out: dict[str, str | None] = {}
    for path in links:
        head, _, blobs = blobs.partition(b"\n")
        fields = head.split()
        if len(fields) != 3 or not fields[2].isdigit():
            out[path] = None  # "<oid> missing": no body follows
            continue
        size = int(fields[2])
        out[path], blobs = blobs[:size].decode("utf-8", "surrogateescape"), blobs[size + 1:]
    return out


def _resolved(path: str, targets: dict[str, str | None], top: str) -> str | None:
    """Where path leads, relative to the work tree top (ALL for top itself), each component that
    is a link of the tree replaced by its target, at most 40 times; a way out of top is followed
    on the host (realpath) and back in if it comes back. None: it ends outside the repository."""
    parts, hops = path.split("/"), 40
    done: list[str] = []
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if done:
                done.pop()
                continue
            back = _back_in(os.path.join(os.path.dirname(top), *parts), top)
            if back is None:
                return None
            parts, done = back, []
            continue
        here = "/".join([*done, part])
        if here not in targets:
            done.append(part)
            continue
        hops -= 1
        target = targets[here]
        if hops < 0 or target is None or not target:
            raise _Unresolvable(here)
        if target.startswith("/"):
            back = _back_in(os.path.join(target, *parts), top)
            if back is None:
                return None
            parts, done = back, []
        else:
            parts = [*target.split("/"), *parts]  # relative to the link's own directory: `done`
    return "/".join(done) or ALL


def _back_in(host_path: str, top: str) -> list[str] | None:
    """A path that left the work tree, resolved on the host one component at a time while it is
    outside (links there are the host's) and taken as it is from where it comes back in (links
    there are the tree's, and the branch landed on need not be the one on disk): its parts under
    top, or None."""
    parts = [p for p in host_path.split("/") if p]
    cur = "/"
    for i, part in enumerate(parts):
        if inside(cur, top):
            return [*os.path.relpath(cur, top).split("/"), *parts[i:]]
        cur = os.path.realpath(os.path.join(cur, part))
    return os.path.relpath(cur, top).split("/") if inside(cur, top) else None


def patch(wt: dict, commit: str) -> Iterator[str]:
    """The branch's --stat and patch against its base, as they may reach a terminal (shown), in
    pieces: an agent's change of hundreds of megabytes is never held in memory."""
    for piece in Git(wt["repo"]).stream("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--stat", "--patch",
                                        wt["base"] + "..." + commit, what="git diff"):
        yield shown(piece)


# -- landing ----------------------------------------------------------------------------------------

def checked_out(listing: str, branch: str) -> str | None:
    """The work tree of the user's repository that has branch checked out, if any, from
    `git worktree list --porcelain`."""
    block: dict[str, str] = {}
    for line in [*listing.splitlines(), ""]:
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
    commit) or "squash". A conflict, files your tools run or trust (without trust_files), or
    local, untracked or ignored files in the way: nothing changes."""
    main = Git(wt["repo"])
    trees = main.spawn("worktree", "list", "--porcelain")
    tree = None
    try:
        commit = tip(wt)
        if into is None:
            into = main("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
        if not into:
            raise UsageError(f"{wt['repo']} is on a detached HEAD; say where to land: --into BRANCH")
        _check_into(wt, into)
        target, have, current = _lookup(main, [f"refs/heads/{into}^{{commit}}", *_asked(wt, commit)])
        if target is None:
            raise UsageError(f"--into {into}: no such branch in {wt['repo']}")
        # The links of the user's tree, listed while the agent's objects are read and checked:
        # landing adds no link without --trust-files, so new's links are among these.
        tree = main.spawn("ls-tree", "-r", "-z", "--full-tree", target)
        move = _imports(wt, main, commit, have, current)
        return _land(wt, main, into, target, commit, move, how, trust_files, trees, tree)
    finally:
        for started in filter(None, (trees, tree)):
            started.stop()


def _land(wt: dict, main: Git, into: str, target: str, commit: str, move: Callable[[], None], how: str,
          trust_files: bool, trees, tree) -> dict:
    if commit == wt["base"]:
        move()
        raise UsageError(f"{wt['branch']} has no commits to land")
    # Asked at once: where the branches meet, what they bring, and what a fast-forward (most
    # landings) would change; the agent's branch moves meanwhile.
    common, new_commits, changed, _ = _together(
        lambda: main.out("merge-base", target, commit, what="finding where the branches meet"),
        lambda: commits(wt, commit, since=target), lambda: _change(wt, commit, target), move)
    if common == commit:
        raise UsageError(f"{wt['branch']} is already in {into}")
    ff = common == target
    if how == "ff-only" and not ff:
        raise WorktreeError(f"{into} has moved on since {wt['branch']} began: not a fast-forward; nothing changed",
                            hint="land without --ff-only (a merge commit) or with --squash")
    if ff and how in ("auto", "ff-only"):
        new, kind = commit, "fast-forward"
    else:
        new, kind = _merged(wt, main, into, target, commit, how, new_commits)
        changed = _change(wt, new, target)
    at = checked_out(trees.done("listing the repository's work trees"), into)
    config = configured(wt, at)
    trusted = host_trusted(changed, config)
    named = {t["path"] for t in trusted}
    trusted += linked(wt, [f for f in changed if f["path"] not in named], config,
                      tree.done("listing the tree of " + into))
    if trusted and not trust_files:
        listed = ", ".join(shown(t["path"]) for t in trusted[:5]) + ("..." if len(trusted) > 5 else "")
        raise WorktreeError(f"landing {wt['branch']} changes {len(trusted)} file(s) that your tools run or trust: "
                            f"{listed}; nothing changed",
                            hint=f"read them (tmuxjail diff {wt['name']}), then land with --trust-files",
                            data={"trusted": trusted})
    if at is not None:
        _nothing_in_the_way(at, changed)
        # The branch's own checkout moves with it; git refuses (and changes nothing) when local
        # changes are in the way. Filters and hooks are off (gitrun), so nothing of the agent's runs.
        moved = Git(at)("merge", "--ff-only", "--quiet", "--no-edit", "--no-verify", new, check=False)
        if moved.returncode != 0:
            last = shown(" ".join(moved.stderr.split())[:300]) or "git merge refused"
            raise WorktreeError(f"landing into {into} (checked out at {at}) stopped: {last}; nothing changed",
                                hint="commit or stash the changes there first")
    else:
        main("update-ref", "-m", "tmuxjail land " + wt["branch"], "refs/heads/" + into, new, target,
             what="moving " + into)
    _write(Path(wt["gitdir"]).parent / "landed", json.dumps({"tip": commit, "into": into, "commit": new}) + "\n")
    return {"branch": wt["branch"], "into": into, "method": kind, "commits": len(new_commits), "tip": commit,
            "result": new, "checkout": at}


def _change(wt: dict, new: str, target: str) -> list[dict]:
    """What landing new on target changes: target -> new, not the branch's own diff from its
    base (a branch built on the user's current tip can put back what the user has changed since)."""
    return files(wt, new, since=target)


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order, the calls made at once (each waits on a git process of its
    own: threads overlap the waits); the first error is raised once all have ended."""
    import threading

    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # noqa: BLE001 (re-raised below, in the caller's thread)
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(1, len(calls))]
    for t in threads:
        t.start()
    one(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _check_into(wt: dict, into: str) -> None:
    if into == wt["branch"]:
        raise UsageError(f"--into {into}: that is the worktree's own branch")
    if into.startswith("-") or not into.isprintable():
        raise UsageError(f"--into {into!r}: not a branch name")


def _merged(wt: dict, main: Git, into: str, target: str, commit: str, how: str,
            new_commits: list[dict]) -> tuple[str, str]:
    """The merge (or squash) commit of commit onto target, made by merge-tree without a work
    tree; a conflict or a merge that needs a driver raises and changes nothing."""
    done = main("merge-tree", "--write-tree", "--name-only", "--no-messages", target, commit, check=False)
    lines = done.stdout.splitlines()
    if done.returncode == 1:
        conflicted = [shown(x) for x in lines[1:] if x]
        raise WorktreeError(f"landing {wt['branch']} into {into} conflicts in {len(conflicted)} file(s): "
                            + ", ".join(conflicted[:5]) + ("..." if len(conflicted) > 5 else "") + "; nothing changed",
                            hint=f"merge it yourself: git -C {wt['repo']} merge {wt['branch']}",
                            data={"conflicts": conflicted})
    if done.returncode != 0 or not lines or not OID.match(lines[0]):
        last = shown((done.stderr.strip().splitlines() or ["(no message)"])[-1])
        raise WorktreeError(f"landing {wt['branch']} into {into}: the merge failed ({last}); nothing changed",
                            hint="tmuxjail runs no merge driver; merge it yourself after review")
    if how == "squash":
        subjects = "".join(f"\n* {shown(c['subject'])}" for c in new_commits)
        msg = f"{wt['branch']}: {len(new_commits)} commit(s), squashed by tmuxjail land\n{subjects}\n"
        return main.out("commit-tree", lines[0], "-p", target, input=msg, what="making the squash commit"), "squash"
    msg = f"Merge branch '{wt['branch']}' into {into} (tmuxjail land)\n"
    return main.out("commit-tree", lines[0], "-p", target, "-p", commit, input=msg,
                    what="making the merge commit"), "merge"


def _nothing_in_the_way(checkout: str, changed: list[dict]) -> None:
    """git's checkout overwrites untracked and ignored files (a local .env, a data directory) with
    the landed ones, or replaces a directory with a link: refuse when anything the landing adds is
    already on disk there, or a directory it needs is something else."""
    for f in changed:
        if f["status"] not in ("A", "T"):
            continue
        parts = f["path"].split("/")
        for i in range(1, len(parts) + 1):
            here = os.path.join(checkout, *parts[:i])
            last = i == len(parts)
            if os.path.lexists(here) and (last or os.path.islink(here) or not os.path.isdir(here)):
                raise WorktreeError(f"landing would replace {shown('/'.join(parts[:i]))!r} in {checkout}, which git "
                                    "does not track there (untracked or ignored); nothing changed",
                                    hint="move it aside, then land again")


def shown(text: str) -> str:
    """Text from the agent's side as it may reach a terminal: control characters as \\xNN."""
    if text.replace("\n", "").replace("\t", "").isprintable():  # (most text: one pass in C)
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" for c in text)


def landed(wt: dict) -> bool:
    """Is the agent's branch, as it is now, in the user's repository (landed, or merged by hand)?"""
    try:
        commit = tip(wt)
    except TmuxjailError:
        return False
    try:
        rec = json.loads((Path(wt["gitdir"]).parent / "landed").read_text())
        if isinstance(rec, dict) and rec.get("tip") == commit:
            return True
    except (OSError, ValueError):
        pass
    if commit == wt["base"]:
        return False
    try:
        main = Git(wt["repo"])
        return any(branch != "refs/heads/" + wt["branch"] and main(
            "merge-base", "--is-ancestor", commit, branch, check=False).returncode == 0
            for branch in main.out("for-each-ref", "--format=%(refname)", "refs/heads/").splitlines())
    except TmuxjailError:
        return False


def remove(wt: dict) -> None:
    """A worktree, its state and its branch: the branch only while it is at the base or at what
    tmuxjail itself last wrote to it (bring), never at what the agent's ref says now (the agent
    could point it at a commit of the user's)."""
    commit = _imported(wt)
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
    (no git runs for it): a walk from the tip through the commits the agent made, which stops at
    the base and at any commit it did not make (those are the repository's). At most `limit`
    lookups in all, each of a regular file read with a bound. None when it cannot tell: a commit
    of the agent's is packed (after a gc), or anything is not what a commit is."""
    import zlib

    try:
        start = tip(wt)
        gfd = os.open(wt["gitdir"], DIR_FLAGS)
    except (OSError, TmuxjailError):
        return None
    try:
        packed = _packed_here(gfd)
        seen: set[str] = set()
        todo = [start]
        for _ in range(limit):
            if not todo:
                return len(seen)
            oid = todo.pop()  # every name taken counts against the bound, repeats too
            if oid == wt["base"] or oid in seen:
                continue
            try:
                fd = _open_path(gfd, f"objects/{oid[:2]}/{oid[2:]}", FILE_FLAGS)
            except FileNotFoundError:
                if packed:
                    return None
                continue  # not the agent's: the repository's history
            except OSError:
                return None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                raw = os.read(fd, 1 << 20)
            except OSError:
                return None
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
        return None  # the bound: no count rather than a slow list
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


def configured(wt: dict, at: str | None = None) -> list[tuple[str, str]]:
    """(path in the work tree, the key) of what the host runs or reads by path, for the main
    checkout and `at` (the checkout a landing writes into, with its own config.worktree):
    - what the config names (core.hooksPath, core.attributesFile, a filter's or driver's program,
      an include: gitconfig.targets, over every level as your git reads it, GIT_CONFIG* of your
      environment included, a relative include from its own file's directory, and an include git
      did not read now, its condition off, read here); the config files themselves and the
      default attributes file (a dotfiles repository: ~/.gitconfig -> repo/gitconfig);
    - executables your PATH runs by name from the work tree (PATH_KEY: directly in a directory of
      your PATH that lies in it; PATH_REL_KEY: under a relative entry, from any directory);
    - ALL (every file counts) for a command git runs by itself whose words cannot be read as
      paths (gitconfig.opaque)."""
    out: list[tuple[str, str]] = []
    path = [os.path.expanduser(e) if e.startswith("~") else e  # (bash expands it when it looks a command up)
            for e in os.environ.get("PATH", "").split(os.pathsep)]
    links = _path_links(path)
    if len(links) > MAX_PATH_LINKS:  # more than are followed: what they lead to cannot be told
        out.append((ALL, PATH_MANY_KEY))
        links = []
    for top in dict.fromkeys(filter(None, (wt["repo"], at))):
        _configured_at(wt, top, path, links, out)
    return out


def _path_links(path: list[str]) -> list[str]:
    """The links in your PATH's directories (a tool installed as ~/.local/bin/x -> ~/src/repo/x):
    what they lead to runs by name. The distribution's own bin directories are not listed."""
    out: list[str] = []
    for d in dict.fromkeys(e for e in path if os.path.isabs(e) and os.path.normpath(e) not in SYSTEM_BINS):
        try:
            with os.scandir(d) as it:
                out += [e.path for e in it if e.is_symlink()]
        except OSError:
            continue
        if len(out) > MAX_PATH_LINKS:
            break
    return out


def _configured_at(wt: dict, top: str, path: list[str], links: list[str], out: list[tuple[str, str]]) -> None:
    tops = {top, os.path.realpath(top)}
    entries = Git(top, extra_env=user_config_env()).origins()
    found: list[tuple[str, str]] = []
    read = {os.path.realpath(os.path.join(top, o)) for o, _, _ in entries if o}
    for origin, key, value in entries:
        base = os.path.dirname(os.path.join(top, origin)) if origin else wt["common"]
        found += gitconfig.targets([(key, value)], base, top)
        if gitconfig.opaque(key, value):
            out.append((ALL, key))
    found += [("git config", os.path.join(top, o)) for o in dict.fromkeys(o for o, _, _ in entries if o)]
    if not any(k.lower() == "core.attributesfile" for _, k, _ in entries):
        found.append(("core.attributesFile", os.path.join(git_home(), "attributes")))
    found += _unread_includes(found, read, top, out)
    found += [(PATH_LINK_KEY, link) for link in links]
    for entry in path:
        if os.path.isabs(entry):
            found.append((PATH_KEY, entry))
            continue
        # Relative: from whatever directory you are in, so under any directory of the work tree
        # ("../bin" from one directory is "bin" from its parent).
        parts = [p for p in os.path.normpath(entry).split("/") if p not in ("..", ".")]
        if ("/".join(parts) or ".", PATH_REL_KEY) not in out:
            out.append(("/".join(parts) or ".", PATH_REL_KEY))
    for key, named in found:
        # As named, and as the host resolves it (through a link to the repository, `..` after it).
        for where in {os.path.normpath(named), os.path.realpath(named)}:
            for t in tops:
                if inside(where, t) and ((rel := os.path.relpath(where, t)), key) not in out:
                    out.append((rel, key))  # (".": the top itself, ALL: every file counts)


def _unread_includes(found: list[tuple[str, str]], read: set[str], top: str,
                     out: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What an include names that your git did not read now (an includeIf whose condition is off:
    another branch, another directory) names in turn: read here, as git would once it holds."""
    more: list[tuple[str, str]] = []
    todo = [p for k, p in found if gitconfig.is_include(k)]
    while todo and len(read) < 256:
        path = todo.pop()
        real = os.path.realpath(path)
        if real in read:
            continue
        read.add(real)
        text = read_regular(real, MAX_CONFIG)  # (never a FIFO's wait)
        if text is None:
            continue
        entries, _ = gitconfig.parse(text)
        got = gitconfig.targets(entries, os.path.dirname(path), top)
        more += got
        todo += [p for k, p in got if gitconfig.is_include(k)]
        out += [(ALL, key) for key, value in entries if gitconfig.opaque(key, value) and (ALL, key) not in out]
    return more


def _runs(f: dict, rel: str, key: str) -> bool:
    """Does this entry of configured() cover the changed file f?"""
    if key not in (PATH_KEY, PATH_REL_KEY):
        return rel == ALL or inside(f["path"], rel)
    if f.get("mode") != "100755":  # PATH runs executables only (a mode change to one counts)
        return False
    where = os.path.dirname(f["path"])
    if key == PATH_KEY:
        return where == ("" if rel == "." else rel)
    return rel == "." or where == rel or where.endswith("/" + rel)


def host_trusted(changed: list[dict], config_paths: list[tuple[str, str]] | None = None) -> list[dict]:
    """The changed paths that a host program runs or trusts (the catalogue's guard entries, and
    .gitattributes and .gitmodules, which route files to drivers and say where submodules come
    from, and what the repository's config runs by path): landing them is a decision of its own
    (`land --trust-files`)."""
    cat = catalogue()
    out = []
    for f in changed:
        if "120000" in (f.get("mode"), f.get("old")):  # added, changed, made something else or removed
            out.append({"path": f["path"], "entry": "link",
                        "trigger": "a link: what it leads to is read wherever a tool looks through it"})
            continue
        if "160000" in (f.get("mode"), f.get("old")):
            out.append({"path": f["path"], "entry": "submodule",
                        "trigger": "a submodule's commit: git submodule update checks out a whole tree nobody checked"})
            continue
        at = next(((rel, key) for rel, key in config_paths or () if _runs(f, rel, key)), None)
        if at is not None:
            rel, hit = at
            why = (f"your shell and git run it by name (a directory of your {hit})" if hit in (PATH_KEY, PATH_REL_KEY)
                   else f"your PATH's directories hold more than {MAX_PATH_LINKS} links: any file could be "
                        "one of them" if hit == PATH_MANY_KEY
                   else f"{hit} runs a command that could run any file of the work tree" if rel == ALL
                   else f"a host tool runs it ({hit})")
            out.append({"path": f["path"], "entry": hit, "trigger": why})
            continue
        parts = f["path"].split("/")
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            e = cat.match(name, parts[i - 1] if i else "", not last)
            if name in (".gitattributes", ".gitmodules") and last:
                out.append({"path": f["path"], "entry": name, "trigger": "git status, git checkout, git submodule"})
                break
            if e is not None and (e.treatment == "guard" or e.id in LAND_ASKS):
                out.append({"path": f["path"], "entry": e.id, "trigger": e.trigger})
                break
    return out


def uncommitted(wt: dict) -> list[str] | None:
    """The checkout's changes against the agent's branch (`git status --porcelain` paths), as the
    host sees them without trusting the agent's git directory: the branch brought home first
    (bring: every object checked), then git status in the import repository (its config and
    alternate are tmuxjail's) with an index of tmuxjail's own, submodules ignored and every
    command key off (gitrun), each git call stopped after STATUS_TIMEOUT. None when it cannot tell
    (a branch or object that does not check, a checkout that takes too long to read); a tip that
    failed so is not tried again by list until the agent's branch moves."""
    meta = Path(wt["gitdir"]).parent
    try:
        commit = tip(wt)
    except TmuxjailError:
        return None
    try:
        failed = (meta / "list-failed").read_text().strip()
    except OSError:
        failed = ""
    if failed == commit:
        return None
    try:
        return _status(wt, meta, bring(wt))
    except TmuxjailError:
        _write(meta / "list-failed", commit + "\n")
        return None


def _status(wt: dict, meta: Path, commit: str) -> list[str]:
    index = str(meta / "status-index")
    git = Git(wt["path"], git_dir=wt["import"], work_tree=wt["path"],
              extra_env={"GIT_INDEX_FILE": index, "GIT_OPTIONAL_LOCKS": "1"})
    try:
        seen = (meta / "status-tip").read_text().strip()
    except OSError:
        seen = ""
    _write(Path(wt["import"], "refs", "heads", "tip"), commit + "\n")  # the import repository's HEAD
    if seen != commit:  # --reset: entries the new tip leaves as they were keep their stat data (no rehash)
        git("read-tree", *(["--reset"] if seen else []), commit, timeout=STATUS_TIMEOUT)
    git("update-index", "-q", "--refresh", "--ignore-submodules", check=False, timeout=STATUS_TIMEOUT)
    done = git("status", "--porcelain=v1", "-z", "--ignore-submodules=all", "--untracked-files=normal",
               "--no-renames", timeout=STATUS_TIMEOUT)
    _write(meta / "status-tip", commit + "\n")  # only once the index holds this tip's stat data
    return [item[3:] for item in done.stdout.split("\0") if len(item) > 3]
