"""`tmuxjail diff` and `tmuxjail land`: a worktree session's commits, shown and brought home
(worktree.py; docs/worktrees.md). NAME is the session's name or its worktree's."""

from __future__ import annotations

import itertools

from .. import worktree
from ..context import Context
from ..errors import UsageError
from ..render import Result
from . import Call
from .table import JSON, NAME, Arg, OneOf, declares


def find(ctx: Context, name: str) -> tuple[dict, str | None]:
    """(the worktree, the session's id) for a session name or a worktree name."""
    row = ctx.readonly_store().find(name)
    if row is not None:
        wt = row.start_request.worktree
        if wt is None:
            raise UsageError(f"session {name} has no worktree (it was not started with --worktree)")
        return wt, row.id
    found = [wt for wt in worktree.all_worktrees(ctx.paths.state_dir) if name in (wt["name"], wt["branch"])]
    if len(found) == 1:
        return found[0], None
    if found:
        raise UsageError(f"{name!r} names {len(found)} worktrees (of different repositories)",
                         hint="name the session instead (tmuxjail list)")
    raise UsageError(f"no session or worktree named {name!r}", hint="see: tmuxjail list")


@declares("tmuxjail diff app\n  tmuxjail diff app --stat",
          NAME.but(help="the session (or its worktree's name)"),
          Arg("--stat", action="store_true", help="the commits and files only, no patch"),
          JSON)
def run_diff(call: Call) -> Result:
    wt, _ = find(call.ctx, call.args.name)
    commit = worktree.bring(wt)
    commits = worktree.commits(wt, commit)
    files = worktree.files(wt, commit)
    trusted = worktree.host_trusted(files, worktree.configured(wt))
    data = {"name": wt["name"], "branch": wt["branch"], "base": wt["base"], "tip": commit, "repository": wt["repo"],
            "worktree": wt["path"], "commits": commits, "files": files, "trusted": trusted}
    # Subjects, paths and the patch are the agent's words: control characters are shown, never
    # sent to your terminal (a clear-screen and a fake diff would hide the real one).
    shown = worktree.shown
    lines = [f"{wt['branch']}: {len(commits)} commit(s) on {wt['base'][:12]} in {wt['repo']}"]
    lines += [f"  {c['commit'][:12]} {shown(c['subject'])}" for c in commits]
    lines += [f"  {f['status']}\t{shown(f['path'])}" for f in files] or ["  (no files changed)"]
    if trusted:
        lines.append(f"{len(trusted)} of them your tools run or trust (land asks for --trust-files):")
        lines += [f"  {shown(t['path'])}: {t['trigger']}" for t in trusted]
    text = "\n".join(lines) + "\n"
    if not call.args.stat and not call.json and files:
        return Result(data, itertools.chain([text, "\n"], worktree.patch(wt, commit)))  # (streamed)
    return Result(data, text.rstrip("\n"))


@declares("tmuxjail land app\n  tmuxjail land app --into main --squash",
          NAME.but(help="the session (or its worktree's name)"),
          Arg("--into", metavar="BRANCH", help="the branch to land on (default: the one checked out in the repository)"),
          OneOf((Arg("--squash", action="store_true", help="one commit on BRANCH with all the changes"),
                 Arg("--ff-only", action="store_true", help="only a fast-forward; refuse otherwise"),
                 Arg("--merge", action="store_true", help="a merge commit even when a fast-forward would do"))),
          Arg("--trust-files", action="store_true",
              help="land even when the branch changes files your tools run or trust (hooks, .gitattributes, "
                   "direnv, ...: docs/workspace-trust.md); read them with `tmuxjail diff` first"),
          JSON)
def run_land(call: Call) -> Result:
    a, ctx = call.args, call.ctx
    wt, sid = find(ctx, a.name)
    how = "squash" if a.squash else "ff-only" if a.ff_only else "merge" if a.merge else "auto"
    done = worktree.land(wt, a.into, how, a.trust_files)
    ctx.store.event("land", sid, **done)
    return Result(done, f"landed {done['commits']} commit(s) of {done['branch']} into {done['into']} "
                        f"({done['method']}, {done['result'][:12]})")
