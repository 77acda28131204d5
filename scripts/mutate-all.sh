#!/bin/sh
# Every registered guard, removed one at a time (scripts/mutate.py): as you, and, when run as root,
# again as an ordinary user (default tmuxjail-ci, or the one named), because root and non-root
# jails differ. Prints each run's last line (count, time). Needs the venv of scripts/test.sh.
set -eu
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check '.[test]'; }
.venv/bin/python scripts/mutate.py "$@"
if [ "$(id -u)" -eq 0 ]; then
  user=${TMUXJAIL_MUTATE_USER:-tmuxjail-ci}
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
  copy=$(mktemp -d /tmp/tmuxjail-mutate.XXXXXX)
  git ls-files -z | xargs -0 -I{} cp --parents {} "$copy"/
  chown -R "$user:" "$copy"
  echo "--- again as the ordinary user $user ---"
  runuser -u "$user" -- sh -c "cd '$copy' && /usr/bin/python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check '.[test]' && .venv/bin/python scripts/mutate.py $*"
  rm -rf "$copy"
fi
