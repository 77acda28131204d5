#!/bin/sh
# Stand-in provider CLI: reports what it sees into the workspace, then waits like a real TUI.
# Options (after tmuxjail's `--`): --outside PATH (try to write there), --secret PATH (try to read).
name=$(basename "$0")
case "$name $* " in
  # `codex login`: a login, as the real one keeps it, and the CLI ends (tmuxjail login).
  "codex "*" login "*)
    mkdir -p "${CODEX_HOME:-$HOME/.codex}" && printf '{"OPENAI_API_KEY":"sk-standin-login"}\n' > "${CODEX_HOME:-$HOME/.codex}/auth.json"
    sleep 1  # (a sign-in takes a while: a start that sees its CLI gone at once reports a failure)
    exit 0;;
esac
out="$PWD/.standin-$name.report"
outside=""; secret=""; conv=""; convfile=""
args="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --outside) outside="$2"; shift;;
    --secret) secret="$2"; shift;;
    # Each CLI's conversation ids, as the real ones keep them (provider-facts; certify checks the
    # real CLIs): Claude takes one up front, Pi a conversation file, Codex resumes one by id.
    --session-id|--resume) conv="$2"; shift;;
    --session) convfile="$2"; conv=$(basename "$2" .jsonl | sed "s/^tmuxjail-//"); shift;;
    resume) [ "$name" = codex ] && conv="$2" && shift;;
  esac
  shift
done
if [ "$name" = codex ]; then
  # Codex names its own id and keeps $CODEX_HOME/sessions/Y/M/D/rollout-<time>-<id>.jsonl open
  # while it runs (the real one from the first message on).
  dir="${CODEX_HOME:-$HOME/.codex}/sessions/$(date -u +%Y/%m/%d)"
  if [ -z "$conv" ]; then
    conv=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen | tr A-Z a-z)  # uuidgen: macOS
    mkdir -p "$dir" && printf '{"type":"session_meta","payload":{"id":"%s","timestamp":"%s","cwd":"%s"}}\n' \
      "$conv" "$(date -u +%Y-%m-%dT%H:%M:%S.000Z)" "$PWD" > "$dir/rollout-$(date -u +%Y-%m-%dT%H-%M-%S)-$conv.jsonl"
  fi
  convfile=$(ls "${CODEX_HOME:-$HOME/.codex}"/sessions/*/*/*/rollout-*-"$conv".jsonl 2>/dev/null | head -n1)
elif [ "$name" = claude ] && [ -n "$conv" ]; then
  # Claude's transcript: projects/<cwd, non-alphanumerics -> '-'>/<id>.jsonl (the real one writes it
  # at the first message; `--resume` of an id without one fails).
  d="${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/$(printf %s "$PWD" | sed 's/[^a-zA-Z0-9]/-/g')"
  mkdir -p "$d" && touch "$d/$conv.jsonl"
elif [ -n "$convfile" ] && [ ! -e "$convfile" ]; then
  mkdir -p "$(dirname "$convfile")" && echo '{"type":"session"}' > "$convfile"
fi
{
  echo "argv: $args"
  echo "conversation: ${conv:-none}"
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
  echo "auth: $(cat "${CODEX_HOME:-$HOME/.codex}/auth.json" 2>/dev/null)"
  echo "done"
} > "$out.tmp" 2>&1
mv "$out.tmp" "$out"
[ -n "$convfile" ] && exec 3>>"$convfile"
exec sleep 600
