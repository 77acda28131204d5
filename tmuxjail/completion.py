"""Shell completion scripts. Session names come from `tmuxjail list --json` at completion time."""

BASH = r'''_tmuxjail() {
  local cur prev words cword
  cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"
  local cmds="start resume list show stop doctor completion profiles"
  case "$prev" in
    start) COMPREPLY=($(compgen -W "codex claude-code cursor pi shell" -- "$cur")); return;;
    --mode) COMPREPLY=($(compgen -W "compatibility isolated verified" -- "$cur")); return;;
    --workspace) COMPREPLY=($(compgen -d -- "$cur")); return;;
    resume|show|stop)
      COMPREPLY=($(compgen -W "$(tmuxjail list --json 2>/dev/null | sed -n 's/^ *"name": "\(.*\)",$/\1/p')" -- "$cur")); return;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return;;
  esac
  if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur")); return; fi
  COMPREPLY=($(compgen -W "--mode --workspace --name --env --detach --json --dry-run --non-interactive --all --help" -- "$cur"))
}
complete -F _tmuxjail tmuxjail'''

ZSH = r'''#compdef tmuxjail
_tmuxjail_sessions() {
  local -a names
  names=(${(f)"$(tmuxjail list --json 2>/dev/null | sed -n 's/^ *"name": "\(.*\)",$/\1/p')"})
  _describe 'session' names
}
_tmuxjail() {
  local -a cmds
  cmds=(start resume list show stop doctor completion profiles)
  if (( CURRENT == 2 )); then _describe 'command' cmds; return; fi
  case "$words[2]" in
    start) _arguments '2:provider:(codex claude-code cursor pi shell)' \
             '--mode[security mode]:mode:(compatibility isolated verified)' \
             '*--workspace[workspace]:dir:_files -/' '--name[name]:name:' '--env[env]:env:' \
             '--detach' '--json' '--dry-run' '--non-interactive';;
    resume|show|stop) _tmuxjail_sessions;;
    completion) _values 'shell' bash zsh;;
  esac
}
compdef _tmuxjail tmuxjail'''


def script(shell: str) -> str:
    return BASH if shell == "bash" else ZSH
