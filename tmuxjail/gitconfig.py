"""A small, tolerant reader of git's config syntax, and which keys make git run a command or trust
another file. Pure: `audit` reads the file itself, because running `git config` on a workspace
would run the very fsmonitor it is looking for.

Tolerant means: a line this parser does not understand is returned as unparsed (the audit reports
it) instead of being skipped, so a syntax git accepts and we do not is never silently trusted."""

from __future__ import annotations

import os
import re

# Keys (section and name lowercased; the subsection shape only) whose value git runs, passes to a
# shell, or follows to more configuration or to another worktree or hook directory.
RUNS = re.compile(r"""^(?:
    core\.(?:fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy|worktree|alternaterefscommand)
  | core\.attributesfile | gpg\.ssh\.(?:allowedsignersfile|revocationfile) | hook\..+\.command
  | http\.(?:.+\.)?sslca(?:info|path) | imap\.tunnel
  | diff\.external | sequence\.editor | interactive\.difffilter | web\.browser | gpg\.program
  | init\.templatedir | uploadpack\.packobjectshook | include\.path | includeif\..+\.path
  | sendemail\.(?:.+\.)?(?:smtpserver|tocmd|cccmd|headercmd|sendmailcmd)
  | credential\.(?:.+\.)?helper | filter\..+\.(?:clean|smudge|process)
  | diff\..+\.(?:textconv|command) | merge\..+\.driver | gpg\..+\.program | gpg\.ssh\.defaultkeycommand
  | (?:difftool|mergetool|man|browser|guitool)\..+\.(?:cmd|path)
  | remote\..+\.(?:uploadpack|receivepack) | tar\..+\.command | trailer\..+\.(?:command|cmd)
  | lfs\.customtransfer\..+\.path | lfs\.extension\..+\.(?:clean|smudge)
)$""", re.VERBOSE)
# Keys whose whole value is a file or directory git reads or runs by path, relative to the work
# tree: hooks, the attributes that route files to drivers, the SSH keys a signature is trusted or
# revoked by, the certificates a fetch trusts.
FILE_KEYS = re.compile(r"^(?:core\.hookspath|core\.attributesfile|gpg\.ssh\.(?:allowedsignersfile|revocationfile)"
                       r"|http\.(?:.+\.)?sslca(?:info|path))$")
BANG = re.compile(r"^(?:alias\..+|submodule\..+\.update)$")  # a command only when it starts with "!"
PAGER = re.compile(r"^pager\..+$")  # a command unless it is a boolean
BOOLS = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})
_NAME = re.compile(r"[A-Za-z0-9-]")
_SECTION = re.compile(r"[A-Za-z0-9.-]")
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}


def parse(text: str) -> tuple[list[tuple[str, str | None]], list[int]]:
    """(entries as (section[.subsection].name, value or None for a bare key), unparsed line numbers)."""
    entries: list[tuple[str, str | None]] = []
    bad: list[int] = []
    section: str | None = None
    i, n, line = 0, len(text), 1

    def skip_line(j: int) -> int:
        k = text.find("\n", j)
        return n if k < 0 else k

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r\f\v":
            i += 1
        elif c in "#;":
            i = skip_line(i)
        elif c == "[":
            section, i = _header(text, i + 1)
            if section is None:
                bad.append(line)
                i = skip_line(i)
        elif _NAME.match(c) and c.isascii() and c.isalpha() and section is not None:
            j = i
            while j < n and _NAME.match(text[j]):
                j += 1
            key = f"{section}.{text[i:j].lower()}"
            while j < n and text[j] in " \t":
                j += 1
            if j >= n or text[j] in "\n#;\r":
                entries.append((key, None))
                i = j
            elif text[j] == "=":
                value, i, lines, ok = _value(text, j + 1)
                if ok:
                    entries.append((key, value))
                else:
                    bad.append(line)
                    i = skip_line(i)
                line += lines
            else:
                bad.append(line)
                i = skip_line(j)
        else:
            bad.append(line)
            i = skip_line(i)
    return entries, bad


def _header(text: str, i: int) -> tuple[str | None, int]:
    n = len(text)
    j = i
    while j < n and _SECTION.match(text[j]):
        j += 1
    name = text[i:j]
    if not name:
        return None, j
    if j < n and text[j] == "]":
        if "." in name:  # the old [section.subsection] form
            sec, _, sub = name.partition(".")
            return f"{sec.lower()}.{sub.lower()}", j + 1
        return name.lower(), j + 1
    while j < n and text[j] in " \t":
        j += 1
    if j >= n or text[j] != '"' or "." in name:
        return None, j
    j += 1
    quoted = []
    while j < n and text[j] not in '"\n':
        if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n":
            j += 1
        quoted.append(text[j])
        j += 1
    if j + 1 < n and text[j] == '"' and text[j + 1] == "]":
        return f"{name.lower()}.{''.join(quoted)}", j + 2
    return None, j


def _value(text: str, i: int) -> tuple[str, int, int, bool]:
    """(value, index after it, newlines consumed by continuations, ok)."""
    n = len(text)
    out: list[str] = []
    keep = 0  # length of out up to the last character that is not trailing unquoted space
    quoted = False
    lines = 0
    while i < n and text[i] in " \t" and not out:
        i += 1
    while i < n:
        c = text[i]
        if c == "\n":
            if quoted:
                return "", i, lines, False
            break
        if c == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt == "\n":
                lines += 1
                i += 2
                continue
            if nxt == "\r" and text[i + 2: i + 3] == "\n":
                lines += 1
                i += 3
                continue
            if nxt not in _ESCAPES:
                return "", i, lines, False
            out.append(_ESCAPES[nxt])
            keep = len(out)
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            i += 1
            continue
        if not quoted and c in "#;":
            break
        out.append(c)
        if quoted or c not in " \t\r":
            keep = len(out)
        i += 1
    if quoted:
        return "", i, lines, False
    return "".join(out[:keep]), i, lines, True


def runs(key: str, value: str | None) -> bool:
    """Does this key make git run something or trust something else?"""
    k = key.lower()
    if RUNS.match(k):
        return True
    v = (value or "").strip()
    if BANG.match(k):
        return v.startswith("!")
    if PAGER.match(k):
        return value is not None and v.lower() not in BOOLS
    return False


def _paths_in(command: str) -> list[str]:
    """The words of a shell command that name a file by path (a `/` in them; `--opt=PATH` counts
    for its PATH): `sh tools/clean.sh` runs tools/clean.sh as surely as `./tools/clean.sh` does."""
    import shlex

    v = command.strip().lstrip("!").strip()
    try:
        words = shlex.split(v)
    except ValueError:  # (an unclosed quote: the words as they stand, without it)
        words = [w.strip("\"'") for w in v.split()]
    out = []
    for w in words:
        if w.startswith("-") and "=" in w:
            w = w.split("=", 1)[1]
        if "/" in w:
            out.append(w)
    return out


def is_include(key: str) -> bool:
    k = key.lower()
    return k == "include.path" or (k.startswith("includeif.") and k.endswith(".path"))


# Programs that run what their arguments name (a script, a module, a string), and shell syntax
# that makes the words of a command something other than a program and its arguments.
INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "env", "exec", "eval", "source", ".", "cd",
                          "python", "python3", "node", "perl", "ruby", "php", "lua", "deno", "bun", "npx", "xargs",
                          # wrappers that run their arguments, and programs that run a file they name
                          "nice", "nohup", "timeout", "stdbuf", "setsid", "busybox", "sudo", "doas", "command",
                          "time", "chroot", "flock", "ionice", "taskset", "unshare", "awk", "gawk", "mawk", "nawk",
                          "sed", "make", "gmake", "tclsh", "wish", "expect", "java", "jshell", "Rscript", "julia",
                          "swipl", "osascript", "pwsh", "powershell", "groovy", "scala", "kotlin", "elixir", "erl",
                          "escript", "guile", "racket", "sbcl", "clisp", "gdb", "vim", "nvim", "emacs", "ex", "ed",
                          "git", "npm", "pnpm", "yarn", "pip", "uv", "poetry", "cargo", "go", "gradle", "mvn"})
SHELL_SYNTAX = re.compile(r"[;&|<>$`()\n\\{}*?]")
# Keys run only when you ask (an alias you type, a pager, an editor, a credential helper at a push):
# their paths count (targets), their shell syntax does not make every file count.
ASKED = re.compile(r"^(?:alias\..+|core\.pager|pager\..+|core\.editor|sequence\.editor|credential\..+"
                   r"|imap\.tunnel|sendemail\..+)$")


def opaque(key: str, value: str | None) -> bool:
    """A command git runs by itself (a filter, a driver, fsmonitor...) whose value is more than a
    program and its arguments (shell syntax, or an interpreter that runs what its arguments name):
    which of the work tree's files it runs cannot be told from its words."""
    k = key.lower()
    if value is None or not runs(key, value) or is_include(k) or FILE_KEYS.match(k) or k.endswith(".path") \
            or ASKED.match(k):
        return False
    v = value.strip().lstrip("!").strip()
    if not v:
        return False
    word = v.split(None, 1)[0]
    first = word.strip("\"'").rsplit("/", 1)[-1]
    # Quotes or an assignment in the program's word: the shell makes of it something else.
    return bool(SHELL_SYNTAX.search(v)) or any(c in word for c in "\"'=") or first in INTERPRETERS \
        or first.startswith(("python", "node", "perl", "ruby", "php", "lua", "tclsh"))


def targets(entries, config_dir: str, top: str | None) -> list[tuple[str, str]]:
    """(key, absolute path) of every file or directory a config's entries make git read or run by
    path: include.path and includeIf.*.path (relative to the config's own directory),
    FILE_KEYS such as core.hooksPath (relative to the worktree), and the program of a command key when it is a path
    (relative to the worktree, where git runs it; a `*.path` key such as mergetool.<tool>.path is
    that path whole, spaces and all; of a shell command, every word that is a path). `~` is
    expanded from HOME; bare program names are left out, and so are relative paths of a bare
    repository (top None)."""
    out: list[tuple[str, str]] = []
    for key, value in entries:
        if value is None or not runs(key, value):
            continue
        k = key.lower()
        base: str | None
        # A path taken whole as git keeps it (a quoted value keeps its spaces) and stripped.
        whole = list(dict.fromkeys([value, value.strip()])) if value.strip() else []
        if is_include(k):
            paths, base = whole, config_dir
        elif FILE_KEYS.match(k):
            paths, base = whole, top
        elif k.endswith(".path"):  # a *.path key names the program whole (git quotes it); no `/`: on PATH
            paths, base = whole if "/" in value else [], top
        else:  # a shell command: each word that is a path (a bare program name is looked up on PATH)
            paths, base = _paths_in(value), top
        for path in paths:
            if path.startswith("~"):
                path = os.path.expanduser(path)  # git expands ~ and ~user in these, from HOME
            if not path or path.startswith("~"):
                continue
            if not path.startswith("/"):
                if base is None:
                    continue
                path = os.path.join(base, path)
            out.append((key, os.path.normpath(path)))
    return out
