"""`tmuxjail certify PROVIDER`: run the installed CLI in real jailed panes, per mode, and record
what was observed. Needs no credentials and no network.

Everything runs against a scratch HOME/XDG tree (its own store, approvals, private homes) and a
private tmux server (-L certify-<random>), by calling the real `tmuxjail` command with that
environment: the user's real state is never touched, and the real HOME is snapshotted before and
after to prove it. The evidence goes to the user's store (event "certify") and a JSON file only
after the last snapshot. Nothing is edited: the suggested change to the provider's certification
record is printed.

  run       one run: preconditions, the modes, the evidence
  steps     one mode's steps, in order, each returning its checks
  quirks    checks only one provider needs (how to drive a CLI is in its adapter's certify hooks)
  scratch   the scratch world: HOME tree, tmux server, planted services, the CLI's processes
  snapshot  the real-HOME snapshot
  report    the text report and the suggested certification record
  data/     the probe run inside the jail and the Cursor stand-in
"""

from .report import render, suggest
from .run import MODES, run_certify
from .scratch import other_instances

__all__ = ["MODES", "other_instances", "render", "run_certify", "suggest"]
