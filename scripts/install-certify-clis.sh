#!/bin/sh
# Install the CLI versions pinned in certify/pins.json with npm, each into its own prefix under
#   ${TMUXJAIL_CERTIFY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tmuxjail-certify}/<first 12 hex of sha256(pins.json)>/<provider>
# (outside the repo: node_modules and 200-400 MB binaries are never committed), skipping what is
# already there. A pin that cannot be installed is reported and skipped, never fatal: the
# certification tests then skip with the reason, which is written to <provider>/SKIP.
# Prints the cache directory on the last line of stdout.
set -u
cd "$(dirname "$0")/.."
pins=certify/pins.json
base=${TMUXJAIL_CERTIFY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tmuxjail-certify}
dir="$base/$(sha256sum "$pins" | cut -c1-12)"
mkdir -p "$dir"
cp "$pins" "$dir/pins.json"
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  for p in codex claude-code pi; do
    mkdir -p "$dir/$p"; echo "npm/node is not installed on this machine" > "$dir/$p/SKIP"
  done
  echo "install-certify-clis: npm is not installed; certification tests will skip" >&2
  echo "$dir"; exit 0
fi
node -e 'const p=require("./"+process.argv[1]).packages; for (const [k,v] of Object.entries(p)) console.log(k, v.npm+"@"+v.version, v.bin)' "$pins" |
while read -r provider spec bin; do
  pdir="$dir/$provider"
  if [ -f "$pdir/.installed" ] && [ -x "$pdir/node_modules/.bin/$bin" ]; then
    echo "install-certify-clis: $spec already in $pdir" >&2; continue
  fi
  rm -rf "$pdir"; mkdir -p "$pdir"
  echo "install-certify-clis: npm install $spec -> $pdir" >&2
  if timeout 600 npm install --prefix "$pdir" --no-audit --no-fund --loglevel=error "$spec" >"$pdir/npm.log" 2>&1 \
      && [ -x "$pdir/node_modules/.bin/$bin" ]; then
    touch "$pdir/.installed"
  else
    reason="npm install $spec failed: $(grep -m1 -i 'err' "$pdir/npm.log" || tail -n1 "$pdir/npm.log")"
    echo "$reason" > "$pdir/SKIP"
    echo "install-certify-clis: $reason (the certification tests will skip)" >&2
  fi
done
echo "$dir"
