"""Print the sandbox-exec command line of a jailed shell, for the first run on a Mac
(docs/macos.md). Usage: .venv/bin/python scripts/mac-jail.py MODE [WORKSPACE] [CAPABILITY...]

One source of truth: the line is the sandbox_argv that
`tmuxjail start shell --mode MODE --workspace WS [--capability C ...] --backend seatbelt --dry-run --json`
reports. The dry run creates nothing, so this also makes the shell's private home (mode 0700),
which a real start would make and the profile cannot (its parent is hidden from the jail)."""

import json
import os
import shlex
import subprocess
import sys


def dry_run_command(mode: str, workspace: str, capabilities: list[str]) -> list[str]:
    caps = [arg for cap in capabilities for arg in ("--capability", cap)]
    # -P: the workspace (the cwd) never shadows the installed tmuxjail
    return [sys.executable, "-P", "-m", "tmuxjail", "start", "shell", "--mode", mode, "--workspace", workspace,
            *caps, "--backend", "seatbelt", "--dry-run", "--json"]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    mode, rest = argv[0], argv[1:]
    workspace = os.path.realpath(rest[0] if rest else os.getcwd())
    proc = subprocess.run(dry_run_command(mode, workspace, rest[1:]), stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:  # tmuxjail said why on stderr
        return proc.returncode
    out = json.loads(proc.stdout)
    if out["policy"].get("private_home"):
        os.makedirs(out["policy"]["private_home"], mode=0o700, exist_ok=True)
    print(shlex.join(out["sandbox_argv"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
