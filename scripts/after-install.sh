#!/bin/sh
# The end of install.sh, on its own so it can be run (and tested) without installing: the PATH
# note for the shell this account logs in with, the tmux keys hint, doctor, and then the jailed
# shell of this directory: the one that already runs (reattached: running install.sh again starts
# no second one), else a new one. $1: the installed tmuxjail.
set -eu
tj=$1
ws=$PWD
case ":${PATH:-}:" in
  *":$HOME/.local/bin:"*) ;;
  *)
    # Which file this account's login shell reads: bash reads the first of ~/.bash_profile,
    # ~/.bash_login, ~/.profile; zsh ~/.zprofile; fish its config; other shells ~/.profile.
    # SHELL is the login shell a login gave; else the password database's.
    login=${SHELL:-$(getent passwd "$(id -un)" 2>/dev/null | cut -d: -f7)}
    case "${login:-/bin/sh}" in
      */bash) profile="$HOME/.profile"
              for f in "$HOME/.bash_profile" "$HOME/.bash_login"; do [ -e "$f" ] && { profile=$f; break; }; done ;;
      */zsh) profile="$HOME/.zprofile" ;;
      */fish) profile="" ;;
      *) profile="$HOME/.profile" ;;
    esac
    if [ -z "$profile" ]; then
      echo "note: $HOME/.local/bin is not on your PATH; for fish, run once: fish_add_path ~/.local/bin"
    elif [ -f "$profile" ] && grep -q '\.local/bin' "$profile"; then
      echo "note: $HOME/.local/bin is not on this shell's PATH, but $profile adds it at login now that it exists:"
      echo "  log in again, or in this shell: export PATH=\"\$HOME/.local/bin:\$PATH\""
    else
      echo "note: $HOME/.local/bin is not on your PATH; to run tmuxjail by name, add this line to $profile:"
      echo '  export PATH="$HOME/.local/bin:$PATH"'
    fi ;;
esac
echo "tmux keys (optional): add to ~/.tmux.conf"
echo "  set -g @tmuxjail-bin $HOME/.local/bin/tmuxjail"
echo "  source-file $(cd "$(dirname "$0")/.." && pwd)/tmux.conf.example"
"$tj" doctor || true
# A jailed shell of this directory that runs already: reattach it instead of starting another.
running=$("$tj" list --json --provider shell --workspace "$ws" 2>/dev/null | python3 -c '
import json, sys
ws = sys.argv[1]
for d in json.load(sys.stdin):
    if d["kind"] == "agent" and d["status"] == "running" and d["workspace"] == ws:
        print(d["name"]); break' "$ws" 2>/dev/null || true)
if [ -n "$running" ]; then
  echo "a jailed shell of $ws runs already: $running (reattaching; \`tmuxjail stop $running\` ends it)"
  exec "$tj" attach "$running"
fi
exec "$tj" start shell --mode isolated --workspace "$ws"
