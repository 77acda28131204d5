#!/bin/sh
# tmuxjail certify probe: runs as a child of the CLI inside the jail, reports what it can reach.
out="$1"; tmp="$out.tmp"
{
echo "uid: $(id -u)"
echo "pid1: $(cat /proc/1/comm 2>/dev/null)"
echo "procs: $(ls -d /proc/[0-9]* 2>/dev/null | wc -l)"
echo "home: $HOME"
for v in CODEX_HOME CLAUDE_CONFIG_DIR CLAUDE_CODE_TMPDIR IS_SANDBOX PI_CODING_AGENT_DIR PI_OFFLINE CURSOR_CONFIG_DIR TMUX; do
  eval "val=\${$v-}"; echo "env-$v: ${val:-<unset>}"
done
if cat "$HOME/.certify-canary" >/dev/null 2>&1; then echo "home-canary: visible"; else echo "home-canary: hidden"; fi
if echo escaped > "@OUTSIDE@" 2>/dev/null; then echo "outside-write: ok"; else echo "outside-write: denied"; fi
sd="$HOME/@STATE@"
if touch "$sd/.certify-write" 2>/dev/null; then echo "state-dir: writable"; rm -f "$sd/.certify-write"; else echo "state-dir: not writable"; fi
inst="@INSTALLDIR@"
if [ -n "$inst" ]; then
  if [ -e "$inst/../../not-the-install-root.txt" ]; then echo "install-sibling: visible"; else echo "install-sibling: hidden"; fi
  if touch "$inst/.certify-write" 2>/dev/null; then echo "install-root: writable"; rm -f "$inst/.certify-write"; else echo "install-root: read-only"; fi
  echo "local-bin: $(ls -A "$HOME/.local/bin" 2>/dev/null | tr '\n' ' ')"
fi
for f in @TOKENS@; do
  if [ -f "$HOME/$f" ]; then echo "state-seen: $f $(sha256sum "$HOME/$f" | cut -c1-64)"; else echo "state-seen: $f absent"; fi
done
if tmux -L "@SOCK@" new-window true >/dev/null 2>&1; then echo "tmux-L: ok"; else echo "tmux-L: failed"; fi
if tmux -S "@SOCKPATH@" new-window true >/dev/null 2>&1; then echo "tmux-S: ok"; else echo "tmux-S: failed"; fi
for kind in path abstract; do
  if [ $kind = path ]; then addr="@HOSTSOCK@"; else addr="@ABSTRACT@"; fi
  if python3 -c 'import socket,sys
a=sys.argv[1]; s=socket.socket(socket.AF_UNIX); s.settimeout(3)
s.connect("\0"+a[1:] if a.startswith("@") else a)' "$addr" 2>/dev/null
  then echo "socket-$kind: connected"; else echo "socket-$kind: failed"; fi
done
} > "$tmp" 2>&1
mv "$tmp" "$out"
cat "$out"
