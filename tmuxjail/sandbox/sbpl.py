"""A small reader and evaluator for the SBPL that tmuxjail generates (sandbox/seatbelt.py). The
tests check profiles offline with it (tests/unit/test_seatbelt.py, and the Darwin seam's stand-in
sandbox-exec, tests/standins/sandbox_exec.py); `tmuxjail doctor` on a Mac uses `problem` to check
that the profile of a dry run parses. Stdlib only, and never imported on a start: a start hands
the profile to sandbox-exec, which has its own reader.

The reader accepts the subset of SBPL syntax we emit (lists, symbols, numbers, "strings" with
backslash escapes, #"regex" literals, #t/#f, ; comments) and rejects anything unbalanced or
unterminated. The evaluator answers "would this operation be allowed?" with Seatbelt's own
semantics:
- the last matching rule wins (Apple's profiles, Chromium's, srt's and Codex's rely on it);
- `(default)` is the fallback, wherever it is written;
- `(deny default)` does not cover the STRAGGLERS: with no rule of their own they are allowed.
`decide(req, semantics="deny-wins")` / `"allow-wins"` answer under other precedence rules; the
tests use them to show that a file or socket decision of ours does not depend on precedence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..subpath import inside


class ParseError(ValueError):
    pass


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class Str:
    value: str


@dataclass(frozen=True)
class Regex:
    pattern: str


DELIMS = set('()";') | set(" \t\r\n")


def tokens(text: str) -> Iterator[Any]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c == ";":
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif c in "()":
            yield c
            i += 1
        elif c == '"' or text.startswith('#"', i):
            regex = c == "#"
            i += 2 if regex else 1
            out = []
            while True:
                if i >= n:
                    raise ParseError("unterminated string")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\n" and regex:
                    raise ParseError("newline inside a regex literal")
                if c == "\\":
                    if i + 1 >= n:
                        raise ParseError("dangling backslash")
                    nxt = text[i + 1]
                    if regex:
                        out.append(nxt if nxt == '"' else "\\" + nxt)
                    else:
                        out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"'}.get(nxt, nxt))
                    i += 2
                    continue
                out.append(c)
                i += 1
            yield Regex("".join(out)) if regex else Str("".join(out))
        else:
            j = i
            while j < n and text[j] not in DELIMS:
                j += 1
            atom = text[i:j]
            if atom.startswith("#") and atom not in ("#t", "#f"):
                raise ParseError(f"unknown # syntax {atom!r}")
            yield Sym(atom)
            i = j


def parse(text: str) -> list[Any]:
    """All top-level forms of `text`; ParseError when it is not well-formed."""
    stack: list[list[Any]] = [[]]
    for tok in tokens(text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise ParseError("unbalanced ')'")
            done = stack.pop()
            if not done:
                raise ParseError("empty list")
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise ParseError("unbalanced '('")
    for form in stack[0]:
        if not isinstance(form, list):
            raise ParseError(f"bare atom at top level: {form!r}")
    return stack[0]


def walk(form: Any) -> Iterator[Any]:
    yield form
    if isinstance(form, list):
        for item in form:
            yield from walk(item)


def params_used(forms: list[Any]) -> set[str]:
    out = set()
    for f in walk(forms):
        if isinstance(f, list) and f[0] == Sym("param"):
            if len(f) != 2 or not isinstance(f[1], Str):
                raise ParseError(f"malformed param reference {f!r}")
            out.add(f[1].value)
    return out


def problem(text: str, params: dict[str, str]) -> str | None:
    """Why sandbox-exec would refuse this profile with these parameters (as far as this reader
    knows), or None: it must parse, open with (version 1), and every (param ...) it names must
    be given."""
    try:
        forms = parse(text)
        if not forms or forms[0] != [Sym("version"), Sym("1")]:
            return "does not open with (version 1)"
        missing = sorted(params_used(forms) - set(params))
    except ParseError as exc:
        return f"does not parse: {exc}"
    if missing:
        return "names parameters it is not given: " + ", ".join(missing)
    return None


# ---------------------------------------------------------------------------------------------

# Operations `(deny default)` does not cover (prefixes, like the rule names they come from).
STRAGGLERS = ("process-info", "nvram", "iokit-get-properties", "file-map-executable",
              "dynamic-code-generation")


def straggler(op: str) -> bool:
    return any(op.startswith(s) for s in STRAGGLERS)


@dataclass(frozen=True)
class Request:
    op: str
    path: str | None = None        # file operations
    unix: str | None = None        # network-outbound / network-bind to a unix socket path
    ip: bool | str = False         # network to an IP address: True (any), or "host:port"
    mach: str | None = None        # mach-lookup global name
    target: str | None = None      # process-*/signal: "self", "same-sandbox" or "other"
    sysctl: str | None = None      # sysctl-read / sysctl-write name
    domain: str | None = None      # user-preference-read domain
    extensions: frozenset[str] = frozenset()  # sandbox extensions the process holds for the path


def _under(path: str, root: str) -> bool:
    return root.rstrip("/") == "" or inside(path, root.rstrip("/"))


class Profile:
    def __init__(self, text: str, params: dict[str, str]):
        self.forms = parse(text)
        self.params = params
        self.rules: list[tuple[str, list[str], list[Any]]] = []
        self.default: str | None = None
        for form in self.forms:
            head = form[0]
            if head in (Sym("allow"), Sym("deny")):
                ops = [x.name for x in form[1:] if isinstance(x, Sym)]
                filters = [x for x in form[1:] if isinstance(x, list)]
                if ops == ["default"] and not filters:
                    self.default = head.name
                else:
                    self.rules.append((head.name, ops, filters))

    def _value(self, x: Any) -> str:
        if isinstance(x, Str):
            return x.value
        if isinstance(x, list) and x[0] == Sym("param"):
            return self.params[x[1].value]  # KeyError: undefined parameter
        raise ParseError(f"not a string expression: {x!r}")

    def _match(self, f: Any, req: Request, path: str | None) -> bool:
        kind = f[0].name
        if kind == "require-all":
            return all(self._match(g, req, path) for g in f[1:])
        if kind == "require-any":
            return any(self._match(g, req, path) for g in f[1:])
        if kind == "require-not":
            return not self._match(f[1], req, path)
        if kind in ("remote", "local"):
            if f[1] == Sym("unix-socket"):
                if req.unix is None or (kind == "remote") != (req.op == "network-outbound"):
                    return False
                return len(f) == 2 or self._match(f[2], req, req.unix)
            if f[1] == Sym("ip"):
                if len(f) == 2 or not req.ip:
                    return bool(req.ip)
                # "host:port" with host localhost or *, port a number or *; True: an address no
                # narrower filter names
                want_host, want_port = self._value(f[2]).rsplit(":", 1)
                if req.ip is True:
                    return want_host == "*" and want_port == "*"
                host, port = req.ip.rsplit(":", 1)
                return want_host in ("*", host) and want_port in ("*", port)
            return False
        if kind == "global-name":
            return req.mach == self._value(f[1])
        if kind == "target":
            want = f[1].name
            return req.target is not None and (req.target == want or (want == "same-sandbox" and req.target == "self"))
        if kind == "sysctl-name":
            return req.sysctl == self._value(f[1])
        if kind == "sysctl-name-prefix":
            return req.sysctl is not None and req.sysctl.startswith(self._value(f[1]))
        if kind == "preference-domain":
            return req.domain is not None and req.domain in [self._value(x) for x in f[1:]]
        if kind == "extension":
            return self._value(f[1]) in req.extensions
        if path is None:
            return False
        if kind == "subpath":
            return _under(path, self._value(f[1]))
        if kind in ("literal", "path-literal"):
            return path == self._value(f[1])
        if kind == "prefix":
            return path.startswith(self._value(f[1]))
        if kind in ("regex", "path-regex"):
            pat = f[1].pattern if isinstance(f[1], Regex) else self._value(f[1])
            return re.search(pat, path) is not None
        return False  # vnode-type, iokit-*, ipc-posix-name, ...: never matched by our requests

    @staticmethod
    def _op_matches(rule_op: str, op: str) -> bool:
        if rule_op.endswith("*"):
            return op.startswith(rule_op[:-1])
        return rule_op == op

    def matches(self, req: Request) -> list[str]:
        """The actions of every rule matching `req`, in profile order."""
        out = []
        for action, ops, filters in self.rules:
            if not any(self._op_matches(o, req.op) for o in ops):
                continue
            if filters and not any(self._match(f, req, req.path) for f in filters):
                continue
            out.append(action)
        return out

    def fallback(self, op: str) -> str:
        if self.default is None or straggler(op):
            return "allow"
        return self.default

    def decide(self, req: Request, semantics: str = "last") -> str:
        hits = self.matches(req)
        if not hits:
            return self.fallback(req.op)
        if semantics == "last":
            return hits[-1]
        if semantics == "deny-wins":
            return "deny" if "deny" in hits else "allow"
        if semantics == "allow-wins":
            return "allow" if "allow" in hits else "deny"
        raise ValueError(semantics)

    def precedence_free(self, req: Request) -> bool:
        """True when no rule order could change the answer."""
        return len({self.decide(req, s) for s in ("last", "deny-wins", "allow-wins")}) == 1
