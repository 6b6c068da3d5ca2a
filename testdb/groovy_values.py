"""Token views of Groovy stage statements: matched brackets, literal values (see groovy.py)."""

from __future__ import annotations

import re

from testdb.errors import InputError
from testdb.groovy_lex import COMMENTS, Tok

Value = str | int | bool
_INTERP = re.compile(r"\\(.)|\$\{([^}]*)\}|\$([A-Za-z_]\w*)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
# A line ending in one of these goes on; otherwise Groovy ends the statement at the newline.
_CONTINUES = frozenset(("+", "-", "*", "=", "+=", "-=", ",", ".", "?.", "?:", "?", ":", "&&",
                        "||", "==", "!=", "<<", "=~", "->"))


class Unreadable(InputError):
    """A row or call the reader cannot evaluate; caught by the reader and made a Diagnostic."""


class TokenView:
    """A token list with its brackets matched, and the values its literals evaluate to."""

    def __init__(self, toks: list[Tok], scope: dict[str, Value]) -> None:
        self.toks, self.scope = toks, scope
        self.match: dict[int, int] = {}
        self.broken: list[tuple[int, str]] = []
        stack: list[int] = []
        for k, t in enumerate(toks):
            if t.kind == "op" and t.text in "([{":
                stack.append(k)
            elif t.kind == "op" and t.text in ")]}":
                if stack and toks[stack[-1]].text == "([{"[")]}".index(t.text)]:
                    self.match[stack.pop()] = k
                else:
                    self.broken.append((k, f"unbalanced `{t.text}`"))
            elif t.kind == "bad":
                self.broken.append((k, f"string without its closing quote: {t.text}"))
        self.broken += [(k, f"`{toks[k].text}` is never closed") for k in stack]

    def next_sig(self, k: int) -> int | None:
        k += 1
        while k < len(self.toks) and self.toks[k].kind in COMMENTS:
            k += 1
        return k if k < len(self.toks) else None

    def sig(self, lo: int, hi: int) -> list[int]:
        return [k for k in range(lo, hi) if self.toks[k].kind not in COMMENTS]

    def is_op(self, k: int | None, text: str) -> bool:
        return k is not None and self.toks[k].kind == "op" and self.toks[k].text == text

    def text(self, lo: int, hi: int) -> str:
        return " ".join(self.toks[k].text for k in self.sig(lo, hi))[:100]

    def split(self, lo: int, hi: int, sep: str = ",") -> tuple[list[tuple[int, int]], list[int]]:
        """The non-empty top-level pieces of lo..hi between ``sep``s, and the top-level comments."""
        parts, coms, start, k = [], [], lo, lo
        while k < hi:
            if self.toks[k].kind in COMMENTS:
                coms.append(k)
            elif self.is_op(k, sep):
                parts.append((start, k))
                start = k + 1
            k = self.match.get(k, k) + 1
        parts.append((start, hi))
        return [p for p in parts if self.sig(*p)], coms

    def find_top(self, lo: int, hi: int, text: str) -> int | None:
        k = lo
        while k < hi and not self.is_op(k, text):
            k = self.match.get(k, k) + 1
        return k if k < hi else None

    def group(self, lo: int, hi: int, opener: str) -> int | None:
        """The opener's index when lo..hi is exactly one bracketed group."""
        s = self.sig(lo, hi)
        return s[0] if s and self.is_op(s[0], opener) and self.match.get(s[0]) == s[-1] else None

    def is_map(self, g: int) -> bool:
        """``[k: v]``, ``[:]``, or ``[]`` (how a map whose rows are all commented out looks)."""
        parts = self.split(g + 1, self.match[g])[0]
        return not parts or self.find_top(*parts[0], ":") is not None

    def stmt_end(self, lo: int, hi: int) -> int:
        k, last = lo, -1
        while k < hi and not (self.toks[k].kind == "op" and self.toks[k].text in ";)]}"):
            t = self.toks[k]
            if t.kind not in COMMENTS:
                lt = self.toks[last] if last >= 0 else None
                if lt and t.line > lt.line and t.text not in (".", "?.") \
                        and not (lt.kind == "op" and lt.text in _CONTINUES):
                    break
                last = self.match.get(k, k)
            k = self.match.get(k, k) + 1
        return last + 1 if last >= 0 else lo  # comments after the statement are read on their own

    def eval(self, toks: list[Tok]) -> Value:
        """A literal, a variable set to one, ``.toString()``, or such values joined by ``+``."""
        parts: list[list[Tok]] = [[]]
        depth = 0
        for t in toks:
            if t.kind == "op" and t.text == "+" and not depth:
                parts.append([])
                continue
            depth += (t.kind == "op" and t.text in "([{") - (t.kind == "op" and t.text in ")]}")
            parts[-1].append(t)
        vals = [self.term(p) for p in parts]
        if len(vals) == 1:
            return vals[0]
        if all(type(v) is int for v in vals):
            return sum(int(v) for v in vals)
        if any(isinstance(v, bool) for v in vals):
            raise Unreadable(f"cannot read `{' '.join(t.text for t in toks)}`")
        return "".join(str(v) for v in vals)

    def term(self, toks: list[Tok]) -> Value:
        texts = [t.text for t in toks]
        if texts[-4:] == [".", "toString", "(", ")"]:
            toks = toks[:-4]
        elif texts[-2:] == ["as", "String"]:
            toks = toks[:-2]
        if len(toks) > 2 and toks[0].text == "(" and toks[-1].text == ")":
            return self.eval(toks[1:-1])
        if not toks:
            raise Unreadable("an empty value (a `+` or `:` with nothing on one side)")
        t = toks[0]
        if len(toks) != 1:
            raise Unreadable(f"cannot read `{' '.join(texts)}`")
        if t.kind in ("str", "gstr"):
            return self.render(t)
        if t.kind == "num" and t.text.isdigit():
            return int(t.text)
        if t.text in ("true", "false"):
            return t.text == "true"
        if t.kind == "id" and t.text in self.scope:
            return self.scope[t.text]
        raise Unreadable(f"`{t.text}` is not a literal or a variable set to one in launchTestJobs"
                          if t.kind == "id" else f"cannot read `{t.text}`")

    def render(self, t: Tok) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) is not None:
                return _ESCAPES.get(m.group(1), m.group(1))
            if t.kind != "gstr":  # single quotes: `$` is a plain character
                return m.group(0)
            var = (m.group(2) or m.group(3) or "").strip()
            if var not in self.scope:
                raise Unreadable(f"`{m.group(0)}` in \"{t.text}\" names no variable set to a "
                                  "literal in launchTestJobs")
            v = self.scope[var]
            return str(v).lower() if isinstance(v, bool) else str(v)
        return _INTERP.sub(sub, t.text)

    def values(self, g: int) -> list[Value]:
        return [self.eval([self.toks[k] for k in self.sig(*p)])
                for p in self.split(g + 1, self.match[g])[0]]
