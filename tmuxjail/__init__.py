"""tmuxjail: coding-agent CLIs in tmux panes whose own process is a sandbox."""

__version__ = "0.1.0"
