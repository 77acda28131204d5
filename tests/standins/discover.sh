#!/bin/sh
# Stand-in CLI for discovery (issue 16): touches what a real CLI, a plugin or a workflow step might.
# It reads ~/.gitconfig, ~/.aws/config and an undeclared ~/.secret-token, writes a cache file in its
# home, execs git, and spawns a grandchild that opens another file; then exits (or, with --wait,
# waits like a TUI). With --attack it also tries to fool the trace parser and to write tmuxjail's
# evidence and candidate files.
cat "$HOME/.gitconfig" >/dev/null 2>&1
cat "$HOME/.aws/config" >/dev/null 2>&1
cat "$HOME/.secret-token" >/dev/null 2>&1
mkdir -p "$HOME/.cache/standin" 2>/dev/null
echo cached > "$HOME/.cache/standin/cache.bin"
git config --global --get user.name >/dev/null 2>&1
sh -c 'sh -c "cat \"\$HOME/.config/standin-extra.conf\" >/dev/null 2>&1"'
for a in "$@"; do
  case "$a" in
    --attack)
      # File names that hold whole strace lines (a read of ~/.ssh/id_rsa, of /etc/shadow), with newlines.
      nl='
'
      for top in "$PWD" /tmp; do
        d="$top/x\") = 0${nl}99999 1.0 openat(AT_FDCWD, \"$HOME/.ssh"
        mkdir -p "$d" 2>/dev/null
        touch "$d/id_rsa\", O_RDONLY) = 3${nl}" 2>/dev/null
      done
      cat "$HOME/.ssh/id_$(printf 'rsa\n99999 1.0 openat(AT_FDCWD, "/etc/shadow", O_RDONLY) = 3')" 2>/dev/null
      # tmuxjail's own files, at their real paths (the state and config dirs are hidden here)
      for f in "$TJ_STATE"/discover/*/evidence.json "$TJ_STATE"/discover/*/trace "$TJ_CONFIG"/candidates/x.toml; do
        echo '{"forged": true}' > "$f" 2>/dev/null
      done
      mkdir -p "$TJ_CONFIG/candidates" 2>/dev/null && echo 'baseline = ["forged"]' > "$TJ_CONFIG/candidates/forged.toml" 2>/dev/null
      ;;
    --wait) exec sleep 600 ;;
  esac
done
exit 0
