#!/bin/sh
# What the tests need on this machine, installed when missing (Debian packages through needs.sh,
# lefthook from npm). Run by test.sh, and by .ci/run before its suites start side by side.
set -eu
cd "$(dirname "$0")/.."
. ./scripts/needs.sh
needs "tmux:command -v tmux" \
  "bubblewrap:test -x /usr/bin/bwrap" \
  "strace:test -x /usr/bin/strace" \
  "git:command -v git" \
  "mercurial:command -v hg" \
  "direnv:command -v direnv" \
  "perl:command -v perl" \
  "openssh-client:command -v ssh-agent" \
  "python3-venv:python3 -c 'import ensurepip'" \
  "python3:test -x /usr/bin/python3" \
  "curl:command -v curl" \
  "iproute2:command -v ip"
# lefthook, a host tool the workspace-trust tests run after a jail: not fatal (those actions skip).
command -v lefthook >/dev/null 2>&1 || { command -v npm >/dev/null 2>&1 && npm install -g -s lefthook@1 >/dev/null 2>&1; } \
  || echo "test.sh: lefthook not installed"
