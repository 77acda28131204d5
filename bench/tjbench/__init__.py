"""tmuxjail's side-by-side benchmarks, as a package (bench/run.py is the command; see bench/README.md).

  main     the command line, the run of the parts, the report
  parts    one function per part (start, identity, list, cli, work), each adding its rows
  mcp      issue 31's part: a tools/call through stub and broker, a start with --mcp
  world    a private tmuxjail world: temp HOME/XDG, its own tmux server, stand-in CLIs
  timing   how one thing is timed (ready file, exit, RSS, -X importtime)
  results  rows, baselines and targets, and the table they print as
  tools    the executables measured (found once, never at import time)
  workload.py  the script timed inside and outside the jail (a data file, run by /usr/bin/python3)
"""
