"""`tmuxjail list`: one `list-panes -a` per server joined with the store (status.rows), as a table,
JSON or NDJSON. The fast path: no pydantic, structlog or libtmux unless --check asks for the
policy code."""

from __future__ import annotations

import os
import sys

from .. import listing, status
from ..render import Result
from . import Call


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
