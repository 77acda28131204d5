"""`tmuxjail list`: one `list-panes -a` per server joined with the store (status.rows), as a table,
JSON or NDJSON. The fast path: no pydantic, structlog or libtmux unless --check asks for the
policy code."""

from __future__ import annotations

import os
import sys

from .. import listing, status
from ..registry import PROVIDERS
from ..render import Result
from . import Call
from .table import ALL, JSON, Arg, OneOf, declares

STATUS_HELP = """status words (STATUS column; `--json`: status, with exit_status, signal, reasons):
  running      the CLI runs in its jailed pane
  exited(N)    the CLI ended with exit status N; the pane stays; `tmuxjail resume NAME`
               relaunches it in the same jail
  killed(SIG)  the CLI was ended by signal SIG; resume relaunches it
  gone         the tmux session or pane is no more (a server restart, a killed window);
               resume relaunches it
  unreachable  its tmux server exists but does not answer (it may still run there)
  failed       the sandbox did not start (see `tmuxjail show NAME` for why)
  stopped      `tmuxjail stop` ended it (shown with --all); the record stays
  mismatch(R)  (with --check) a resume would be refused: the policy changed; R names what (mode,
               profile, executable, config, workspace, network, tampered...)
  unjailed     a pane of a jailed session that does not run inside the jail (not protected)
  ...!audit(N) N findings of the session's last audit to review: `tmuxjail audit NAME`
AGENT column: working (the CLI shows its busy footer), waiting (it waits for you: a prompt, a
  question, an approval); for shells, whether a command runs. KIND: agent (the CLI's pane), shell
  (a login shell inside the same jail), unjailed."""

LIST = (
    ALL.but(help="include stopped sessions"),
    Arg("--check", action="store_true",
        help="recompute each policy as resume would, and show `mismatch` with reason codes (slower)"),
    Arg("--color", choices=("auto", "always", "never"), default="auto", help="colour the table (auto: on a terminal)"),
    Arg("--server", metavar="SERVER",
        help="only sessions of this tmux server (its -L name or socket path; default: every server)"),
    Arg("--workspace", metavar="DIR", help="only sessions whose workspace is DIR (or under it)"),
    Arg("--provider", choices=PROVIDERS, help="only sessions of this provider"),
    OneOf((JSON.but(help="print a JSON array"), Arg("--ndjson", action="store_true", help="print one JSON object per line"))),
)


@declares("tmuxjail list --json", *LIST, epilog=STATUS_HELP)
def run(call: Call) -> Result:
    a = call.args
    check = None
    if a.check:
        from .. import plan  # seam: --check recomputes policies (pydantic, profiles, hashing)

        check = plan.listed
    rows = status.rows(call.ctx, include_stopped=a.all, check=check, server=a.server)
    if a.workspace:
        top = os.path.realpath(os.path.expanduser(a.workspace))
        rows = [d for d in rows if status.under(d["workspace"], top)]
    if a.provider:
        rows = [d for d in rows if d["provider"] == a.provider]
    if call.json:
        return Result(listing.public(rows))
    text = listing.render(rows, "ndjson" if a.ndjson else "table", listing.use_color(a.color, sys.stdout),
                          listing.width(sys.stdout, os.environ), os.environ.get("HOME", ""))
    return Result(None, text or None)
