"""A tokenizer for the corner of Groovy that Jenkins stage files use (see testdb/groovy.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from testdb.errors import InputError

# Python has no Groovy tokenizer; strings (with ${...} inside), comments, slashy regexes after an
# operator, numbers, words and a few multi-character operators are all the stage reader needs.
_OPS = ("?.", "?:", "*.", "+=", "-=", "<<", "==", "!=", "=~", "->", "..", "&&", "||")
_OPS_AT = {c: tuple(op for op in _OPS if op[0] == c) for c in {op[0] for op in _OPS}}
_WORD = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?[A-Za-z]?")
_SLASHY = re.compile(r"/((?:\\.|[^/\\\n])+)/")
COMMENTS = ("com", "bcom")
MAX_TOKENS = 500_000  # L0_Test.groovy has about 40,000; the tokenizer takes ~3 us a token


@dataclass(frozen=True)
class Tok:
    kind: str  # id num str gstr op com bcom bad
    text: str  # strings: the body between the quotes; comments: the text after the markers
    line: int
    own: bool  # the first thing on its line


def tokenize(text: str, line: int = 1) -> list[Tok]:
    toks: list[Tok] = []
    i, n, own, prev = 0, len(text), True, ""
    while i < n:
        c = text[i]
        if c in " \t\r\f\n":
            line, own = (line + 1, True) if c == "\n" else (line, own)
            i += 1
            continue
        start, was_own, own = line, own, False
        if text.startswith("//", i):
            j = _find(text, "\n", i)
            kind, body, i = "com", text[i + 2:j], j
        elif text.startswith("/*", i):
            j = _find(text, "*/", i + 2)
            kind, body, i = "bcom", text[i + 2:j], j + 2
        elif c in "\"'":
            kind, body, i = _string(text, i)
        elif c == "/" and prev == "op" and (sm := _SLASHY.match(text, i)):
            kind, body, i = "str", sm.group(1), sm.end()  # a /regex/, not a division
        elif wm := _WORD.match(text, i):
            kind, body, i = ("num" if c.isdigit() else "id"), wm.group(), wm.end()
        else:
            ops = _OPS_AT.get(c, ())
            kind, body = "op", next((op for op in ops if text.startswith(op, i)), c)
            i += len(body)
        line += body.count("\n")
        toks.append(Tok(kind, body, start, was_own))
        if len(toks) > MAX_TOKENS:
            raise InputError(f"over {MAX_TOKENS} tokens from line {toks[0].line}; this is not "
                             "a Jenkins stage file", hint="pass jenkins/L0_Test.groovy")
        if kind not in COMMENTS:
            prev = "close" if body in (")", "]") else kind
    return toks


def _find(text: str, what: str, start: int) -> int:
    j = text.find(what, start)
    return len(text) if j < 0 else j


def _string(text: str, i: int) -> tuple[str, str, int]:
    q = text[i]
    kind = "gstr" if q == '"' else "str"
    if text.startswith(q * 3, i):
        j = _find(text, q * 3, i + 3)
        return kind, text[i + 3:j], j + 3
    j, depth = i + 1, 0  # depth: inside ${...}, whose quotes and braces do not end the string
    while j < len(text) and text[j] != "\n":
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if q == '"' and text.startswith("${", j):
            depth, j = depth + 1, j + 2
            continue
        if ch == q and not depth:
            return kind, text[i + 1:j], j + 1
        depth += ((ch == "{") - (ch == "}")) if depth else 0
        j += 1
    return "bad", text[i:j], j


_INTERESTING = re.compile(r"//|/\*|[\"'/]")


def find_code(text: str, pattern: re.Pattern[str]) -> int | None:
    """Offset of the first match of ``pattern`` that lies in code, not in a comment or a string,
    as ``tokenize`` splits them; skips the code between them at regex speed (a Jenkinsfile's
    stage function can sit 250,000 characters in). The test suite checks it against
    ``tokenize``."""
    i, n, prev = 0, len(text), ""
    while i < n:
        m = _INTERESTING.search(text, i)
        stop = m.start() if m else n
        if found := pattern.search(text, i, stop):
            return found.start()
        code = text[i:stop].rstrip()
        if code:
            last = code[-1]
            prev = "close" if last in ")]" else "word" if last.isalnum() or last == "_" else "op"
        if m is None:
            return None
        mark = m.group()
        if mark == "//":
            i = _find(text, "\n", stop)
        elif mark == "/*":
            i = _find(text, "*/", stop + 2) + 2
        elif mark != "/":
            prev, _, i = _string(text, stop)
        elif prev == "op" and (sm := _SLASHY.match(text, stop)):
            prev, i = "str", sm.end()
        else:
            prev, i = "op", stop + 1
    return None

_MARGIN = re.compile(r"^[ \t]*\*(?!/)")
_MAP_OPENER = re.compile(r"^\s*(?:def\s+)?([A-Za-z_]\w*)\s*\+?=\s*\[\s*(?://.*)?$")
_MAP_CLOSER = re.compile(r"^\s*\]\s*(?://.*)?$")


def comment_lines(toks: list[Tok]) -> list[tuple[int, str]]:
    """(line, text) of each line of consecutive comments, without the markers; a block
    comment loses its `` * `` margin."""
    out: list[tuple[int, str]] = []
    for t in toks:
        for i, text in enumerate(t.text.split("\n")):
            if t.kind == "bcom":
                text = _MARGIN.sub(" ", text)
            out.append((t.line + i, text))
    return out


def map_windows(lines: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """Commented-out map literals among comment lines: (opener, closer, map name) for each line
    ``[def] NAME = [`` / ``NAME += [`` whose ``[`` the line leaves open, up to the next line
    that is only ``]``."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        m = _MAP_OPENER.match(lines[i][1])
        closer = next((j for j in range(i + 1, len(lines)) if _MAP_CLOSER.match(lines[j][1])),
                      None) if m else None
        if m is None or closer is None:
            i += 1
            continue
        out.append((i, closer, m.group(1)))
        i = closer + 1
    return out


def bracket_balance(text: str) -> int:
    """``[`` minus ``]`` outside strings and comments of one line."""
    try:
        toks = tokenize(text)
    except InputError:
        return 0
    return sum((t.text == "[") - (t.text == "]") for t in toks if t.kind == "op")
