#!/bin/sh
# Install what the tests need and run the whole suite: as you, and (when run as root) again as an
# ordinary user created for the purpose, because root and non-root jails differ.
set -eu
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=""
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
[ -x /usr/bin/bwrap ] || missing="$missing bubblewrap"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v perl >/dev/null 2>&1 || missing="$missing perl"
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing="$missing python3-venv"
[ -x /usr/bin/python3 ] || missing="$missing python3"
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing
fi
# A real install (not editable), so the packaging of adapters/ and profiles/ is tested too.
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check '.[test]'
# Run from outside the source tree so the installed package is what gets imported.
rm -rf build
.venv/bin/pytest -q -p no:cacheprovider tests "$@"

if [ "$(id -u)" -eq 0 ] && [ -z "${TMUXJAIL_NO_USER_RUN:-}" ]; then
  user=tmuxjail-ci
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
  copy=$(mktemp -d /tmp/tmuxjail-user.XXXXXX)
  git ls-files -z | xargs -0 -I{} cp --parents {} "$copy"/ 2>/dev/null || cp -r . "$copy"
  chown -R "$user:" "$copy"
  echo "--- again as the ordinary user $user ---"
  runuser -u "$user" -- sh -c "cd '$copy' && /usr/bin/python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check '.[test]' && .venv/bin/pytest -q -p no:cacheprovider tests/integration tests/adversarial"
  rm -rf "$copy"
fi
