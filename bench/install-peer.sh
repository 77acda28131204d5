#!/bin/sh
# Install the peer sandbox launcher the start benchmark compares against (never done by run.py
# itself): @anthropic-ai/sandbox-runtime's `srt`, into the repo's node_modules (git-ignored),
# plus the tools it needs on Linux.
set -eu
cd "$(dirname "$0")/.."
. ./scripts/needs.sh
needs "ripgrep:command -v rg" "socat:command -v socat" "npm:command -v npm"
npm install --no-save --no-audit --no-fund --prefix . @anthropic-ai/sandbox-runtime@0.0.83
