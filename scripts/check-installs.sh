#!/bin/sh
# Prove that the ways people install CLI tools all give a working jail, including those that put
# tmuxjail's interpreter and package inside the home that isolated mode hides:
# a plain venv, pip install --user, pipx install, and uv tool install. Run as an ordinary user.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
src=$(mktemp -d)  # a private copy: building writes into the source tree
tar -C "$repo" --exclude=./.venv --exclude=./.git --exclude=./build --exclude=./.hypothesis --exclude=./.pytest_cache -cf - . | tar -C "$src" -xf -
py=${PYTHON:-/usr/bin/python3}
check() {  # $1: method, $2: path of the installed tmuxjail
  ws=$(mktemp -d); sock="tj-install-$$-$1"
  "$2" -L "$sock" start shell --mode isolated --workspace "$ws" --name "inst-$1" --detach >/dev/null
  "$2" -L "$sock" list --json | grep -q '"status": "running"'
  tmux -L "$sock" send-keys -t "=inst-$1:" "touch ./ok; cat ~/.tmuxjail-marker > ./leak 2>/dev/null" Enter
  sleep 1; tmux -L "$sock" kill-server 2>/dev/null || true
  [ -f "$ws/ok" ] && [ ! -s "$ws/leak" ] && echo "install via $1: ok"
}
run_in_home() {  # a fresh HOME per method
  export HOME=$(mktemp -d); unset XDG_CONFIG_HOME XDG_STATE_HOME XDG_DATA_HOME
  echo secret > "$HOME/.tmuxjail-marker"; export PATH="$HOME/.local/bin:$PATH"
}
( run_in_home; "$py" -m venv "$HOME/venv"; "$HOME/venv/bin/pip" install -q "$src"; check venv "$HOME/venv/bin/tmuxjail" )
( run_in_home; "$py" -m venv "$HOME/base"; "$HOME/base/bin/pip" install -q --upgrade pip
  # --user needs an interpreter whose user site is enabled: the venv's own python does not qualify,
  # so install the user site for the base interpreter through its pip module.
  "$py" -m pip --version >/dev/null 2>&1 && { "$py" -m pip install -q --user --break-system-packages "$src" && check pip-user "$HOME/.local/bin/tmuxjail"; } \
    || echo "install via pip-user: skipped (no pip for $py)" )
( run_in_home; "$py" -m venv "$HOME/tools"; "$HOME/tools/bin/pip" install -q pipx uv
  "$HOME/tools/bin/pipx" install -q "$src" >/dev/null 2>&1 || "$HOME/tools/bin/pipx" install "$src"
  check pipx "$HOME/.local/bin/tmuxjail"
  "$HOME/tools/bin/uv" tool uninstall tmuxjail >/dev/null 2>&1 || true
  rm -f "$HOME/.local/bin/tmuxjail"
  "$HOME/tools/bin/uv" tool install -q "$src" 2>/dev/null || "$HOME/tools/bin/uv" tool install "$src"
  check uv "$HOME/.local/bin/tmuxjail" )
