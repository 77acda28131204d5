"""Tests that kill the mutants scripts/mutation.py found alive (mutation/modules.toml)."""
