#!/bin/sh
# Install what the tests need and run the whole suite: as you, and (when run as root) again as an
# ordinary user created for the purpose, because root and non-root jails differ.
set -eu
cd "$(dirname "$0")/.."
./scripts/test-needs.sh
# A real install (not editable), so the packaging of adapters/ and profiles/ is tested too.
python3 -m venv .venv
# setuptools reuses build/lib: a module moved or removed since the last install would be
# installed again from there.
rm -rf build
.venv/bin/pip install -q --disable-pip-version-check '.[test]'
# The host tools the workspace-trust tests run after a jail (tests/adversarial/test_workspace_trust.py):
# pre-commit from PyPI into the test venv (lefthook, from npm, is in test-needs.sh). Not fatal:
# those host actions skip.
.venv/bin/pip install -q --disable-pip-version-check pre-commit || echo "test.sh: pre-commit not installed"
# Run from outside the source tree so the installed package is what gets imported.
rm -rf build
# Each half runs whatever the other did: a failure as root must not skip the ordinary user's run
# (set -e would, silently). Both must pass, and neither may leave tmux socket files behind.
# Only what this run left counts: stale sockets of earlier runs (another checkout, a killed run)
# are not this suite's doing. TJ_BEFORE is the count before the suite.
no_leftovers='n=$(ls "/tmp/tmux-$(id -u)" 2>/dev/null | grep -c "^tjtest-" || true)
  [ "$n" -le "${TJ_BEFORE:-0}" ] || { echo "$((n - ${TJ_BEFORE:-0})) tmux socket files left in /tmp/tmux-$(id -u)"; exit 1; }'
TJ_BEFORE=$(ls "/tmp/tmux-$(id -u)" 2>/dev/null | grep -c "^tjtest-" || true); export TJ_BEFORE
# The gates come first: ruff and mypy with zero findings (their settings: pyproject.toml).
gates='.venv/bin/ruff check . && .venv/bin/mypy'
root=0
mutate() {
  if [ -n "${TMUXJAIL_NO_MUTATE:-}" ]; then
    echo "test.sh: the fast mutation run is skipped (TMUXJAIL_NO_MUTATE is set)"
  else
    .venv/bin/python scripts/mutate.py --fast --no-baseline \
      && .venv/bin/python scripts/mutation.py --sample "${TMUXJAIL_MUTATION_SAMPLE:-12}" --budget 300
  fi
}
# Then every guard pinned: remove each fast guard in turn and check its tests go red
# (guards/registry.toml; the suite just passed: no need to run it again unmutated). And a sample
# of the security modules' mutants (scripts/mutation.py, docs/testing.md): 12 by default, one from
# each of 12 modules drawn with the day's date as seed, none started after 300 s (setup
# included); a score below the floor in mutation/modules.toml fails the run.
sh -c "$gates" && .venv/bin/pytest -q -p no:cacheprovider tests "$@" && sh -c "$no_leftovers" \
  && mutate || root=$?

user_run=skipped
if [ "$(id -u)" -eq 0 ] && [ -z "${TMUXJAIL_NO_USER_RUN:-}" ]; then
  user=tmuxjail-ci
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
  copy=$(mktemp -d /tmp/tmuxjail-user.XXXXXX)
  git ls-files -z | xargs -0 -I{} cp --parents {} "$copy"/ 2>/dev/null || cp -r . "$copy"
  chown -R "$user:" "$copy"
  echo "--- again as the ordinary user $user ---"
  user_run=0
  runuser -u "$user" -- sh -c "TJ_BEFORE=\$(ls /tmp/tmux-\$(id -u) 2>/dev/null | grep -c ^tjtest- || true); export TJ_BEFORE; cd '$copy' && /usr/bin/python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check '.[test]' pre-commit && $gates && .venv/bin/pytest -q -p no:cacheprovider tests/integration tests/adversarial && $no_leftovers && .venv/bin/python scripts/mutate.py --fast --no-baseline" || user_run=$?
  rm -rf "$copy"
fi
verdict() { case $1 in 0) echo passed ;; skipped) echo skipped ;; *) echo "FAILED ($1)" ;; esac; }
echo "test.sh: as $(id -un): $(verdict $root); as an ordinary user: $(verdict $user_run)"
[ "$root" -eq 0 ] && { [ "$user_run" = 0 ] || [ "$user_run" = skipped ]; }
