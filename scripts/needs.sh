# Sourced by install.sh and test.sh: install the Debian packages whose check fails.
# Usage: needs "tmux:command -v tmux" "bubblewrap:test -x /usr/bin/bwrap" ...
needs() {
  missing=""
  for pair in "$@"; do
    sh -c "${pair#*:}" >/dev/null 2>&1 || missing="$missing ${pair%%:*}"
  done
  [ -z "$missing" ] && return 0
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing
}
