#!/bin/bash
# The scriptable steps of docs/macos.md's first-run checklist, on a Mac: CI runs it
# (.github/workflows/macos.yml) and so can you, from the checkout, after step 0's set-up:
#   scripts/mac-checklist.sh [PYTHON]      (default: .venv/bin/python)
# Each denial runs with its allowed twin in the same profile, through the line
# scripts/mac-jail.py prints (the seatbelt dry run); a twin that fails makes the step fail
# (the denial would prove nothing). It touches only its own directory under $HOME, its own tmux
# server and files it creates; steps that need a human are listed as skipped at the end.
# Exit: 0 all ran checks passed, 1 some failed, 2 not a Mac or missing tools.
set -u
cd "$(dirname "$0")/.." || exit 2
repo=$PWD
py=${1:-.venv/bin/python}
case $py in /*) ;; *) py=$repo/$py ;; esac
# -P everywhere: the checkout's source tree (the cwd) must not shadow the installed tmuxjail
[ "$(uname -s)" = Darwin ] || { echo "mac-checklist: macOS only (it runs sandbox-exec)" >&2; exit 2; }
[ -x /usr/bin/sandbox-exec ] || { echo "mac-checklist: /usr/bin/sandbox-exec is missing" >&2; exit 2; }
command -v tmux >/dev/null || { echo "mac-checklist: tmux is missing (brew install tmux)" >&2; exit 2; }
[ -x "$py" ] || { echo "mac-checklist: no $py: make the venv first (docs/macos.md step 0)" >&2; exit 2; }

# Under $HOME, never $TMPDIR or /tmp: the profiles treat those specially (as the runtime suite).
root="$HOME/.tmuxjail-mac-checklist.$$"
ws="$root/ws"
mkdir -p "$ws" || exit 2
tjsock=tjcheck$$
bg=
cleanup() {
    [ -n "$bg" ] && kill $bg 2>/dev/null
    tmux -L "$tjsock" kill-server 2>/dev/null
    rm -rf "$root" "$(getconf DARWIN_USER_TEMP_DIR)tmuxjail-other-$$"
}
trap cleanup EXIT
failed=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
skip() { echo "skip $*"; }

# The workspace is a git repository before the dry runs (its .git is protected at start).
git -C "$ws" init -q && cp "$ws/.git/config" "$root/git-config" || exit 2
# The command line of a jailed shell per mode, once (workspace: $ws).
for mode in compatibility isolated verified; do
    (cd "$ws" && "$py" "$repo/scripts/mac-jail.py" "$mode" "$ws") >"$root/line.$mode" \
        || { echo "mac-checklist: scripts/mac-jail.py $mode failed" >&2; exit 1; }
done
# inside MODE CMD: CMD's status in a shell inside MODE's profile (its output in $root/out)
inside() {
    line=$(cat "$root/line.$1")
    (cd "$ws" && printf '%s\n' "$2" | eval "$line") >"$root/out" 2>&1
}
# pair STEP MODE DENIED TWIN: DENIED must fail and TWIN succeed, in the same profile
pair() {
    if ! inside "$2" "$4"; then
        bad "$1 ($2): the twin failed, so the denial proves nothing: $4"; sed 's/^/     | /' "$root/out" | tail -5
    elif inside "$2" "$3"; then
        bad "$1 ($2): allowed: $3"
    else
        ok "$1 ($2): denied: $3 (twin ok: $4)"
    fi
}
# works STEP MODE CMD: CMD succeeds inside
works() {
    if inside "$2" "$3"; then ok "$1 ($2): works: $3"; else bad "$1 ($2): failed: $3"; sed 's/^/     | /' "$root/out" | tail -5; fi
}

echo "--- 0. each mode's profile is accepted and a shell runs in it"
for mode in compatibility isolated verified; do
    if inside "$mode" 'echo tj-ok' && grep -q tj-ok "$root/out"; then ok "0 ($mode): a shell runs in the profile"
    else bad "0 ($mode): sandbox-exec refused or the shell failed:"; sed 's/^/     | /' "$root/out" | tail -5; fi
done

echo "--- 1. the runtime suite (TestRuntimeOnMac) runs, not skipped, and passes"
if "$py" -P -m pytest -q -rs -p no:cacheprovider tests/unit/test_seatbelt.py -k TestRuntimeOnMac >"$root/pytest" 2>&1 \
        && ! grep -qi skipped "$root/pytest"; then ok "1: $(tail -1 "$root/pytest")"
else bad "1: the runtime suite:"; tail -20 "$root/pytest" | sed 's/^/     | /'; fi

echo "--- 2. tmuxjail's state (compatibility)"
data=$("$py" -P -c 'from tmuxjail.paths import get; print(get().data_dir)')
state=$("$py" -P -c 'from tmuxjail.paths import get; print(get().store)' 2>/dev/null || true)
"$py" -P -m tmuxjail list >/dev/null 2>&1  # makes the store when there is none
echo twin >"$root/twin"
if [ -n "$state" ] && [ -f "$state" ]; then pair 2 compatibility "cat '$state'" "cat '$root/twin'"
else skip "2: no store found at '$state'"; fi
pair 2 compatibility "ls '$data'" "ls '$root'"

echo "--- 4. .git (isolated, verified)"
for mode in isolated verified; do
    for deny in "echo x >> .git/hooks/pre-commit" "git config core.hooksPath x" "mv .git g" "echo x > .GIT/config" \
            "echo x > '/System/Volumes/Data$ws/.git/config'" "mv '$ws' '$ws.away'"; do
        pair 4 "$mode" "$deny" "echo x > a.txt && mv a.txt b.txt && rm b.txt"
        # a denial that failed must not spoil the checks after it
        if [ -d "$ws.away" ]; then mv "$ws.away" "$ws"; fi
        if [ -d "$ws/g" ]; then mv "$ws/g" "$ws/.git"; fi
    done
    if cmp -s "$ws/.git/config" "$root/git-config"; then ok "4 ($mode): .git/config unchanged"
    else bad "4 ($mode): .git/config changed"; cp "$root/git-config" "$ws/.git/config"; fi
done

echo "--- 5. sockets and tmux (isolated)"
sock=/tmp/tj-$$.sock
"$py" -P -c 'import socket,sys,time;s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1]);s.listen();time.sleep(600)' "$sock" &
bg=$!
tmux -L "$tjsock" new-session -d 'sleep 600'
tsock=$(tmux -L "$tjsock" display -p '#{socket_path}')
sleep 1
pair 5 isolated "python3 -c 'import socket;socket.socket(socket.AF_UNIX).connect(\"$sock\")'" \
    "python3 -c 'import socket;s=socket.socket(socket.AF_UNIX);s.bind(\"w.sock\");s.listen();socket.socket(socket.AF_UNIX).connect(\"w.sock\")' && rm w.sock"
if tmux -S "$tsock" ls >/dev/null; then pair 5 isolated "tmux -S '$tsock' ls" "tmux -V"
else bad "5: tmux -S '$tsock' ls fails outside the jail"; fi
rm -f "$sock"

echo "--- 6. sysctl (isolated)"
# shellcheck disable=SC2016  # expanded inside the jail
probe='probe() { python3 -c "import ctypes,sys; a=[int(x) for x in sys.argv[1:]]; m=(ctypes.c_int*len(a))(*a); n=ctypes.c_size_t(1<<16); b=ctypes.create_string_buffer(1<<16); r=ctypes.CDLL(None).sysctl(m,len(a),b,ctypes.byref(n),None,0); sys.stdout.buffer.write(b.raw[:n.value]); sys.exit(r != 0)" "$@"; }'
TJ_SECRET=abc sleep 600 &
secret=$!
sleep 1
pair 6 isolated "$probe; probe 1 49 $secret | grep -q TJ_SECRET" "$probe; probe 1 14 1 $secret >/dev/null"
works 6 isolated "sysctl -n hw.ncpu kern.osrelease"
kill $secret 2>/dev/null

echo "--- 7. stragglers (isolated)"
# shellcheck disable=SC2016  # expanded inside the jail
pidpath='pidpath() { python3 -c "import ctypes,sys; b=ctypes.create_string_buffer(4096); n=ctypes.CDLL(\"/usr/lib/libproc.dylib\").proc_pidpath(int(sys.argv[1]),b,4096); print(b.value.decode() if n > 0 else \"denied\")" "$1"; }'
pair 7 isolated "$pidpath; pidpath 1 | grep -qv denied" "$pidpath; pidpath \$\$ | grep -qv denied"
pair 7 isolated "nvram -p" "true"
if command -v node >/dev/null; then works 7 isolated "node -e 'console.log(1)'"
else skip "7: node is not installed (JIT twin)"; fi

echo "--- 8. services"
for mode in compatibility isolated; do works 8 "$mode" "osascript -e 'return 1'"; done
if defaults read -g >/dev/null 2>&1 && defaults read com.apple.Safari >/dev/null 2>&1; then
    pair 8 isolated "defaults read com.apple.Safari" "defaults read -g"
else skip "8: com.apple.Safari or the global domain is not readable outside the jail either"; fi

echo "--- 9. paths (isolated)"
home=$(cd "$ws" && "$py" -P -m tmuxjail start shell --mode isolated --workspace "$ws" --backend seatbelt --dry-run --json \
    | "$py" -P -c 'import json,sys; print(json.load(sys.stdin)["policy"]["private_home"])')
works 9 isolated "[ \"\$HOME\" = '$home' ]"
for cmd in "cat /etc/resolv.conf" "id -un" "git --version"; do works 9 isolated "$cmd"; done

echo "--- 10. size and time"
wc -c tests/unit/golden/*.sb | tail -1 | sed 's/^/     /'
for mode in compatibility isolated verified; do
    "$py" - "$root/line.$mode" "$mode" <<'PY' || bad "10 ($mode): sandbox-exec ... /usr/bin/true failed"
import shlex, statistics, subprocess, sys, time
argv = shlex.split(open(sys.argv[1]).read())
argv = argv[:argv.index("--") + 1] + ["/usr/bin/true"]
times = []
for _ in range(10):
    t = time.perf_counter()
    subprocess.run(argv, check=True)
    times.append(time.perf_counter() - t)
print(f"ok   10 ({sys.argv[2]}): sandbox-exec ... /usr/bin/true, median of 10: {statistics.median(times) * 1000:.1f} ms")
PY
done

echo "--- 11. the profile review's fixes"
pair 11 compatibility "ln '$tsock' '$root/t.sock'" "ln '$root/twin' '$root/z' && rm '$root/z'"
if [ -n "$state" ] && [ -f "$state" ]; then
    pair 11 compatibility "ln '$state' '$root/s.db'" "ln '$root/twin' '$root/z' && rm '$root/z'"
    pair 11 compatibility "cp -c '$state' '$root/s2.db'" "cp -c '$root/twin' '$root/z' && rm '$root/z'"
fi
pair 11 isolated "echo x > a.txt; ln a.txt b.txt" "echo x > a.txt && rm a.txt"
pkg=$("$py" -P -c 'import os,tmuxjail; print(os.path.dirname(tmuxjail.__file__))')
pair 11 compatibility "touch '$pkg/tj-twin'" "touch '$root/tj-twin'"
if command -v brew >/dev/null; then
    prefix=$(brew --prefix)
    pair 11 compatibility "touch '$(brew --prefix tmux)/bin/tmux'" "touch '$prefix/bin/tj-twin' && rm '$prefix/bin/tj-twin'"
    pair 11 compatibility "touch '$prefix/bin/tmux'" "touch '$prefix/bin/tj-twin' && rm '$prefix/bin/tj-twin'"
    if [ -d "$prefix/var" ]; then pair 11 isolated "ls '$prefix/var'" "ls '$prefix/bin'"; fi
else skip "11: no Homebrew"; fi
if curl --max-time 20 -sI https://example.com >/dev/null 2>&1; then
    pair 11 isolated "curl --noproxy '*' --max-time 20 -sI https://example.com" "true"
    pair 11 isolated "python3 -c 'import socket;socket.getaddrinfo(\"example.com\",443)'" "true"
    works 11 compatibility "python3 -c 'import socket;socket.getaddrinfo(\"example.com\",443)'"
else skip "11: example.com is not reachable outside the jail either"; fi
other="$(getconf DARWIN_USER_TEMP_DIR)tmuxjail-other-$$"  # the profile's name for $TMPDIR
mkdir -p "$other" && touch "$other/x"
pair 11 isolated "cat \"\$(getconf DARWIN_USER_TEMP_DIR)tmuxjail-other-$$/x\"" \
    "touch \"\$(getconf DARWIN_USER_TEMP_DIR)tj-$$\" && rm \"\$(getconf DARWIN_USER_TEMP_DIR)tj-$$\""

echo "--- skipped: these need a human (docs/macos.md)"
skip "0: a prompt in a real tmux pane; 2: mv ~/Library/Application Support (destructive if it were allowed; the runtime suite checks it on fixtures)"
skip "3: terminals (a second pane's tty, job control)"
skip "5: mkdir /tmp/tmux-UID with tmux stopped (stops your server); the nohup survivor"
skip "8: open -a Calculator and System Events (a window or a permission prompt); the keychain (no profile lists macos-keychain yet)"
skip "9: TLS through the proxy, gh, corporate roots, each CLI's login, turn and resume"
skip "11: the session proxy's port (a real start passes it; the dry run shows 3128); network none"
echo "mac-checklist: $failed failed"
[ "$failed" -eq 0 ]
