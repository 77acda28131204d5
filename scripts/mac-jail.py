"""Print the sandbox-exec command line of a jailed shell, for the first run on a Mac
(docs/macos.md). Usage: .venv/bin/python scripts/mac-jail.py MODE [WORKSPACE] [CAPABILITY...]

The policy is the one the offline tests use (tests/unit/test_seatbelt.py: make_policy) on this
Mac's real paths; the layout comes from host.mac_layout, as a real start would build it."""

import os
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit"))
import test_seatbelt as t

from tmuxjail import host
from tmuxjail.paths import get
from tmuxjail.sandbox.seatbelt import Seatbelt

mode = sys.argv[1]
ws = os.path.realpath(sys.argv[2] if len(sys.argv) > 2 else os.getcwd())
home = os.path.realpath(os.path.expanduser("~"))
pol = t.make_policy(mode, home=home, workspace=ws, support=str(get().data_dir), install_roots=[],
                    capabilities=sys.argv[3:], git=os.path.exists(os.path.join(ws, ".git")))
if pol["private_home"]:
    os.makedirs(pol["private_home"], mode=0o700, exist_ok=True)
session_tmp = tempfile.mkdtemp(prefix="tmuxjail-")
layout = host.mac_layout(pol, os.environ.get("TMUX", "").split(",")[0] or None, dict(os.environ),
                         tty=os.ttyname(0) if os.isatty(0) else None, session_tmp=session_tmp)
shell = os.environ.get("SHELL", "/bin/zsh")
print(shlex.join(Seatbelt().wrap(pol, [shell, "-i"], layout)))
