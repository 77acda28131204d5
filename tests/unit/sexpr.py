"""A small reader and evaluator for the SBPL that tmuxjail generates, for offline tests.

The reader accepts the subset of SBPL syntax we emit (lists, symbols, numbers, "strings" with
backslash escapes, #"regex" literals, #t/#f, ; comments) and rejects anything unbalanced or
unterminated. The evaluator answers "would this operation on this path be allowed?" with the
semantics our profiles are written for: an explicit deny beats the default, an explicit allow beats
the default, and a path matched by both an explicit allow and an explicit deny is reported as a
conflict (our profiles must never rely on SBPL precedence, which is not settled).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


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


def tokens(text: str):
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


def parse(text: str) -> list:
    """All top-level forms of `text`; ParseError when it is not well-formed."""
    stack: list[list] = [[]]
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


def walk(form):
    yield form
    if isinstance(form, list):
        for item in form:
            yield from walk(item)


def params_used(forms) -> set[str]:
    out = set()
    for f in walk(forms):
        if isinstance(f, list) and f[0] == Sym("param"):
            if len(f) != 2 or not isinstance(f[1], Str):
                raise ParseError(f"malformed param reference {f!r}")
            out.add(f[1].value)
    return out


# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    op: str
    path: str | None = None        # file operations
    unix: str | None = None        # network-outbound / network-bind to a unix socket path
    ip: bool = False               # network to an IP address
    mach: str | None = None        # mach-lookup global name


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/") or root == ""


class Profile:
    def __init__(self, text: str, params: dict[str, str]):
        self.forms = parse(text)
        self.params = params
        self.rules: list[tuple[str, list[str], list]] = []
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

    def _value(self, x) -> str:
        if isinstance(x, Str):
            return x.value
        if isinstance(x, list) and x[0] == Sym("param"):
            return self.params[x[1].value]  # KeyError: undefined parameter
        raise ParseError(f"not a string expression: {x!r}")

    def _match(self, f, req: Request, path: str | None) -> bool:
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
                return req.ip
            return False
        if kind == "global-name":
            return req.mach == self._value(f[1])
        if path is None:
            return False
        if kind in ("subpath",):
            return _under(path, self._value(f[1]))
        if kind in ("literal", "path-literal"):
            return path == self._value(f[1])
        if kind == "prefix":
            return path.startswith(self._value(f[1]))
        if kind in ("regex", "path-regex"):
            pat = f[1].pattern if isinstance(f[1], Regex) else self._value(f[1])
            return re.search(pat, path) is not None
        return False  # vnode-type, extension, target, ...: never matched by our requests

    @staticmethod
    def _op_matches(rule_op: str, op: str) -> bool:
        if rule_op.endswith("*"):
            return op.startswith(rule_op[:-1])
        return rule_op == op

    def explicit(self, req: Request) -> tuple[bool, bool]:
        allowed = denied = False
        path = req.path
        for action, ops, filters in self.rules:
            if not any(self._op_matches(o, req.op) for o in ops):
                continue
            if filters and not any(self._match(f, req, path) for f in filters):
                continue
            if action == "allow":
                allowed = True
            else:
                denied = True
        return allowed, denied

    def decide(self, req: Request) -> str:
        allowed, denied = self.explicit(req)
        if allowed and denied:
            raise AssertionError(f"{req}: matched by an explicit allow AND an explicit deny "
                                 "(the result would depend on SBPL precedence)")
        if denied:
            return "deny"
        if allowed:
            return "allow"
        return self.default or "deny"
