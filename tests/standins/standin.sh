#!/bin/sh
# Stand-in provider CLI: reports what it sees into the workspace, then waits like a real TUI.
# Options (after tmuxjail's `--`): --outside PATH (try to write there), --secret PATH (try to read).
name=$(basename "$0")
out="$PWD/.standin-$name.report"
outside=""; secret=""
args="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --outside) outside="$2"; shift;;
    --secret) secret="$2"; shift;;
  esac
  shift
done
{
  echo "argv: $args"
  echo "uid: $(id -u)"
  echo "home: $HOME"
  echo "home-list: $(ls -A "$HOME" 2>/dev/null | tr '\n' ' ')"
  echo "env-names: $(env | sed 's/=.*//' | sort | tr '\n' ' ')"
  for v in CODEX_HOME CLAUDE_CONFIG_DIR CLAUDE_CODE_TMPDIR PI_CODING_AGENT_DIR CURSOR_CONFIG_DIR TMUX OPENAI_API_KEY UNDECLARED_SECRET \
           HTTPS_PROXY https_proxy HTTP_PROXY ALL_PROXY NO_PROXY no_proxy; do
    eval "val=\${$v-}"; [ -n "$val" ] && echo "env-$v: $val"
  done
  if echo ok > "$PWD/.standin-write-test" 2>/dev/null; then echo "write-workspace: ok"; else echo "write-workspace: denied"; fi
  if [ -n "$outside" ]; then
    if echo escaped > "$outside" 2>/dev/null; then echo "write-outside: ok"; else echo "write-outside: denied"; fi
  fi
  if [ -n "$secret" ]; then
    if cat "$secret" >/dev/null 2>&1; then echo "read-secret: ok"; else echo "read-secret: denied"; fi
  fi
  sed 's/^/persisted: /' "$HOME/.standin-persist-$name" 2>/dev/null
  echo run >> "$HOME/.standin-persist-$name" 2>/dev/null
  echo "done"
} > "$out.tmp" 2>&1
mv "$out.tmp" "$out"
exec sleep 600
