# Sourced by install.sh and test.sh: install the Debian packages whose check fails.
# Usage: needs "tmux:command -v tmux" "bubblewrap:test -x /usr/bin/bwrap" ...
needs() {
  missing=""
  for pair in "$@"; do
    sh -c "${pair#*:}" >/dev/null 2>&1 || missing="$missing ${pair%%:*}"
  done
  [ -z "$missing" ] && return 0
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "missing packages:$missing" >&2
      echo "  there is no sudo here: as root, run  apt-get install -y$missing  then rerun $0" >&2
      return 1
    fi
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing
}
