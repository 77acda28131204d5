#!/bin/sh
# Install tmuxjail and what it needs (tmux, bubblewrap), then open a jailed shell:
# isolated mode, a private home mounted at your $HOME, this directory as the writable workspace.
set -eu
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=""
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
[ -x /usr/bin/bwrap ] || missing="$missing bubblewrap"
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing="$missing python3-venv"
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing
fi
venv="${XDG_DATA_HOME:-$HOME/.local/share}/tmuxjail-venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check .
mkdir -p "$HOME/.local/bin"
ln -sf "$venv/bin/tmuxjail" "$HOME/.local/bin/tmuxjail"
echo "installed: $HOME/.local/bin/tmuxjail ($("$venv/bin/tmuxjail" --version))"
"$venv/bin/tmuxjail" doctor || true
exec "$venv/bin/tmuxjail" start shell --mode isolated --workspace "$PWD"
