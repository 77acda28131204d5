#!/bin/sh
# Install tmuxjail and what it needs (tmux, bubblewrap; strace for `tmuxjail discover`), then open a jailed shell:
# isolated mode, a private home mounted at your $HOME, this directory as the writable workspace.
set -eu
cd "$(dirname "$0")/.."
. ./scripts/needs.sh
needs "tmux:command -v tmux" \
  "bubblewrap:test -x /usr/bin/bwrap" \
  "strace:test -x /usr/bin/strace" \
  "python3-venv:python3 -c 'import ensurepip'"
venv="${XDG_DATA_HOME:-$HOME/.local/share}/tmuxjail-venv"
python3 -m venv "$venv"
# setuptools reuses build/lib: a module moved or removed since the last install would be
# installed again from there.
rm -rf build
"$venv/bin/pip" install -q --disable-pip-version-check .
mkdir -p "$HOME/.local/bin"
ln -sf "$venv/bin/tmuxjail" "$HOME/.local/bin/tmuxjail"
echo "installed: $HOME/.local/bin/tmuxjail ($("$venv/bin/tmuxjail" --version))"
exec ./scripts/after-install.sh "$venv/bin/tmuxjail"
