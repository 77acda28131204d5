"""Entry points that exist for tests only (never reached from the `tmuxjail` command)."""
