"""Jenkins stage rows of ``jenkins/L0_Test.groovy``, read from its text without running Groovy."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.stages import Stage

# Python has no Groovy parser, and evaluating the Jenkinsfile would need Jenkins. The stage maps use
# a small corner of the language (map and list literals, string interpolation, `+=` of a generator
# call), so a hand tokenizer and a reader for those statements suffice; anything else written to a
# stage map is reported as a diagnostic rather than guessed.

KNOWN_MAPS = {"x86TestConfigs": "x86_64", "x86SlurmTestConfigs": "x86_64",
              "SBSATestConfigs": "aarch64", "SBSASlurmTestConfigs": "aarch64",
              "multiNodesSBSAConfigs": "aarch64"}
GENERATOR = "buildStageConfigs"
GENERATOR_PARAMS = ("stageName", "platform", "testlist", "testCount", "gpuCount", "nodeCount",
                    "runWithSbatch", "useClusterDurations")
ROW_FIELDS = ("platform", "context", "split id", "splits", "gpu count", "node count",
              "runWithSbatch", "useClusterDurations")
Value = str | int | bool
_ROW_TYPES = (str, str, int, int, int, int, bool, bool)
_GEN_TYPES = (str, str, str, int, int, int, bool, bool)
_DEFAULTS: tuple[Value, ...] = (1, 1, False, False)
# launchTestJobs reads multi-node rows with `values[5] ?: 2`: a row without a node count has two.
_MAP_DEFAULTS: dict[str, tuple[Value, ...]] = {"multiNodesSBSAConfigs": (1, 2, False, False)}
_AARCH64_NAME = re.compile(r"sbsa|aarch64|arm64", re.I)
_OPS = ("?.", "?:", "*.", "+=", "-=", "<<", "==", "!=", "=~", "->", "..", "&&", "||")
_OPS_AT = {c: tuple(op for op in _OPS if op[0] == c) for c in {op[0] for op in _OPS}}
_WORD = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?[A-Za-z]?")
_SLASHY = re.compile(r"/((?:\\.|[^/\\\n])+)/")
_INTERP = re.compile(r"\\(.)|\$\{([^}]*)\}|\$([A-Za-z_]\w*)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
# A line ending in one of these goes on; otherwise Groovy ends the statement at the newline.
_CONTINUES = frozenset(("+", "-", "*", "=", "+=", "-=", ",", ".", "?.", "?:", "?", ":", "&&",
                        "||", "==", "!=", "<<", "=~", "->"))
_COMMENTS = ("com", "bcom")
_RULE = "groovy-stage"
_MAX_COMMENT_DEPTH = 4  # real files comment out stage rows once, sometimes twice
_MAX_TOKENS = 500_000  # L0_Test.groovy has about 40,000; the tokenizer takes ~3 us a token


class _Unreadable(InputError):
    """A row or call the reader cannot evaluate; caught inside this module and made a Diagnostic."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # id num str gstr op com bcom bad
    text: str  # strings: the body between the quotes; comments: the text after the markers
    line: int
    own: bool  # the first thing on its line


@dataclass(frozen=True)
class _Row:
    name: str
    fields: tuple[Value, ...]  # checked against _ROW_TYPES; 4 to 8 of them
    line: int
    disabled: bool


@dataclass
class _Out:
    """What the function body's reader and every commented-out block's reader add to."""

    path: str
    maps: dict[str, list[_Row]] = field(default_factory=dict)
    stage_maps: set[str] = field(default_factory=lambda: set(KNOWN_MAPS))
    consumed: set[str] = field(default_factory=set)  # merged into another map: reported there
    diags: list[Diagnostic] = field(default_factory=list)

    def diag(self, line: int, msg: str, sev: Severity = Severity.ERROR) -> None:
        self.diags.append(Diagnostic(SourceLoc(self.path, line), sev, msg, _RULE))

    def add(self, name: str, rows: list[_Row]) -> None:
        have = self.maps.setdefault(name, [])
        for row in rows:
            old = next((o for o in have if o.name == row.name and not o.disabled), None)
            if old is not None and not row.disabled:
                have.remove(old)
                self.diag(row.line, f"stage {row.name} is defined again in {name} (first at line "
                          f"{old.line}); Groovy keeps the later row", Severity.WARNING)
            have.append(row)

    def stages(self) -> list[Stage]:
        out: list[Stage] = []
        for name, rows in self.maps.items():
            if name not in self.stage_maps or name in self.consumed:
                continue
            arch = KNOWN_MAPS.get(name) or ("aarch64" if _AARCH64_NAME.search(name) else "x86_64")
            defaults = _MAP_DEFAULTS.get(name, _DEFAULTS)
            for r in sorted(rows, key=lambda r: r.line):
                f = r.fields + defaults[len(r.fields) - 4:]
                out.append(Stage(
                    name=r.name, platform=str(f[0]), context=str(f[1]), split_id=int(f[2]),
                    splits=int(f[3]), gpu_count=int(f[4]), node_count=int(f[5]),
                    run_with_sbatch=bool(f[6]), use_cluster_durations=bool(f[7]), map=name,
                    arch=arch, loc=SourceLoc(self.path, r.line), disabled=r.disabled))
        return out


def load_groovy_stages_text(text: str, path: str) -> tuple[list[Stage], list[Diagnostic]]:
    """The stage rows of ``launchTestJobs`` (commented-out ones as disabled) and what went wrong."""
    out = _Out(path)
    m = re.search(r"\bdef\s+launchTestJobs\s*\(", text)
    first = text.count("\n", 0, m.start()) + 1 if m else 1
    try:
        toks = _tokenize(text[m.start():] if m else text, first)
    except InputError as exc:
        raise InputError(exc.bare, SourceLoc(path, first), exc.hint) from None
    reader = _Reader(toks, out, {}, disabled=False)
    lo, hi = 0, len(reader.toks)
    if m:
        params = reader.next_sig(1)
        body = reader.next_sig(reader.match.get(params, params)) if params is not None else None
        if body is None or not reader.is_op(body, "{") or body not in reader.match:
            out.diag(first, "cannot find the body of launchTestJobs")
            return [], out.diags
        lo, hi = body + 1, reader.match[body]
    else:
        out.diag(1, "no `def launchTestJobs(`; reading the whole file", Severity.WARNING)
    for k, msg in reader.broken:
        if lo <= k < hi:
            out.diag(reader.toks[k].line, msg)
    try:
        reader.scan(lo, hi)
    except RecursionError:  # maps, parentheses or comments nested thousands deep
        out.diag(first, "the stage maps nest too deeply to read; no stages are taken from it")
        return [], out.diags
    stages = out.stages()
    if not stages and not any(d.severity is Severity.ERROR for d in out.diags):
        out.diag(first, "no stage maps found")
    return stages, out.diags


def _tokenize(text: str, line: int = 1) -> list[_Tok]:
    toks: list[_Tok] = []
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
        toks.append(_Tok(kind, body, start, was_own))
        if len(toks) > _MAX_TOKENS:
            raise InputError(f"over {_MAX_TOKENS} tokens from line {toks[0].line}; this is not "
                             "a Jenkins stage file", hint="pass jenkins/L0_Test.groovy")
        if kind not in _COMMENTS:
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


class _Reader:
    """Reads stage statements from one token list: the function body or a commented-out block."""

    def __init__(self, toks: list[_Tok], out: _Out, scope: dict[str, Value],
                 disabled: bool, depth: int = 0) -> None:
        self.toks, self.out, self.scope, self.disabled = toks, out, scope, disabled
        self.depth = depth  # comments inside comments: each level re-reads the text
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

    def diag(self, line: int, msg: str, keep: bool = True) -> Diagnostic:
        # Commented-out code cannot break the build: what it gets wrong is only a warning.
        sev = Severity.WARNING if self.disabled else Severity.ERROR
        d = Diagnostic(SourceLoc(self.out.path, line), sev,
                       f"commented-out: {msg}" if self.disabled else msg, _RULE)
        if keep:
            self.out.diags.append(d)
        return d

    def next_sig(self, k: int) -> int | None:
        k += 1
        while k < len(self.toks) and self.toks[k].kind in _COMMENTS:
            k += 1
        return k if k < len(self.toks) else None

    def sig(self, lo: int, hi: int) -> list[int]:
        return [k for k in range(lo, hi) if self.toks[k].kind not in _COMMENTS]

    def is_op(self, k: int | None, text: str) -> bool:
        return k is not None and self.toks[k].kind == "op" and self.toks[k].text == text

    def text(self, lo: int, hi: int) -> str:
        return " ".join(self.toks[k].text for k in self.sig(lo, hi))[:100]

    def split(self, lo: int, hi: int, sep: str = ",") -> tuple[list[tuple[int, int]], list[int]]:
        """The non-empty top-level pieces of lo..hi between ``sep``s, and the top-level comments."""
        parts, coms, start, k = [], [], lo, lo
        while k < hi:
            if self.toks[k].kind in _COMMENTS:
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
            if t.kind not in _COMMENTS:
                lt = self.toks[last] if last >= 0 else None
                if lt and t.line > lt.line and t.text not in (".", "?.") \
                        and not (lt.kind == "op" and lt.text in _CONTINUES):
                    break
                last = self.match.get(k, k)
            k = self.match.get(k, k) + 1
        return last + 1 if last >= 0 else lo  # comments after the statement are read on their own

    def eval(self, toks: list[_Tok]) -> Value:
        """A literal, a variable set to one, ``.toString()``, or such values joined by ``+``."""
        parts: list[list[_Tok]] = [[]]
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
            raise _Unreadable(f"cannot read `{' '.join(t.text for t in toks)}`")
        return "".join(str(v) for v in vals)

    def term(self, toks: list[_Tok]) -> Value:
        texts = [t.text for t in toks]
        if texts[-4:] == [".", "toString", "(", ")"]:
            toks = toks[:-4]
        elif texts[-2:] == ["as", "String"]:
            toks = toks[:-2]
        if len(toks) > 2 and toks[0].text == "(" and toks[-1].text == ")":
            return self.eval(toks[1:-1])
        if not toks:
            raise _Unreadable("an empty value (a `+` or `:` with nothing on one side)")
        t = toks[0]
        if len(toks) != 1:
            raise _Unreadable(f"cannot read `{' '.join(texts)}`")
        if t.kind in ("str", "gstr"):
            return self.render(t)
        if t.kind == "num" and t.text.isdigit():
            return int(t.text)
        if t.text in ("true", "false"):
            return t.text == "true"
        if t.kind == "id" and t.text in self.scope:
            return self.scope[t.text]
        raise _Unreadable(f"`{t.text}` is not a literal or a variable set to one in launchTestJobs"
                          if t.kind == "id" else f"cannot read `{t.text}`")

    def render(self, t: _Tok) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) is not None:
                return _ESCAPES.get(m.group(1), m.group(1))
            if t.kind != "gstr":  # single quotes: `$` is a plain character
                return m.group(0)
            var = (m.group(2) or m.group(3) or "").strip()
            if var not in self.scope:
                raise _Unreadable(f"`{m.group(0)}` in \"{t.text}\" names no variable set to a "
                                  "literal in launchTestJobs")
            v = self.scope[var]
            return str(v).lower() if isinstance(v, bool) else str(v)
        return _INTERP.sub(sub, t.text)

    def values(self, g: int) -> list[Value]:
        return [self.eval([self.toks[k] for k in self.sig(*p)])
                for p in self.split(g + 1, self.match[g])[0]]

    def looks_like_row(self, lo: int, hi: int) -> bool:
        """``["platform", "context", ...]`` with 4 to 8 fields (or a map of such): a stage map."""
        g = self.group(lo, hi, "[")
        if g is None:
            return False
        parts = self.split(g + 1, self.match[g])[0]
        if self.is_map(g):
            return any((c := self.find_top(a, b, ":")) is not None and self.looks_like_row(c + 1, b)
                       for a, b in parts)
        return 3 <= len(parts) <= 8 and all(
            len(s := self.sig(*p)) == 1 and self.toks[s[0]].kind in ("str", "gstr")
            for p in parts[:2])

    def entry(self, klo: int, khi: int, vlo: int, vhi: int, errors: list[Diagnostic]
              ) -> tuple[list[_Row], bool]:
        """Rows of one ``"name": [fields]`` entry or of a nested map, and if it held a stage row."""
        key = self.sig(klo, khi)
        if not key:
            raise _Unreadable("a map entry without a key before its `:`")
        kt = self.toks[key[0]]
        name = self.eval([self.toks[k] for k in key])
        g = self.group(vlo, vhi, "[")
        if g is not None and self.is_map(g):
            return self.map_rows(g + 1, self.match[g], errors)
        if g is None:
            raise _Unreadable(f"stage {name}: the value is not a [platform, context, split id, "
                              "splits, ...] list")
        try:
            return [self.row(str(name), self.values(g), kt.line)], True
        except _Unreadable as e:
            raise _Unreadable(f"stage {name}: {e.bare}") from None

    def row(self, name: str, values: list[Value], line: int) -> _Row:
        if not 4 <= len(values) <= 8:
            raise _Unreadable(f"{len(values)} fields; a stage row has 4 to 8 "
                              f"({', '.join(ROW_FIELDS)})")
        for v, typ, what in zip(values, _ROW_TYPES, ROW_FIELDS, strict=False):
            if type(v) is not typ:
                raise _Unreadable(f"{what} should be {typ.__name__}, got {v!r}")
        return _Row(name, tuple(values), line, self.disabled)

    def map_rows(self, lo: int, hi: int, errors: list[Diagnostic]) -> tuple[list[_Row], bool]:
        """Rows of a map literal's body, commented-out ones included, and if it holds stages."""
        rows: list[_Row] = []
        like = False
        parts, coms = self.split(lo, hi)
        for a, b in parts:
            s = self.sig(a, b)
            c = self.find_top(a, b, ":")
            if len(s) == 1 and c is not None:  # [:]
                continue
            line = self.toks[s[0]].line
            if c is None:
                errors.append(self.diag(line, f"not a map entry: `{self.text(a, b)}`", False))
                continue
            like = like or self.looks_like_row(c + 1, b)
            try:
                more, ok = self.entry(a, c, c + 1, b, errors)
                rows, like = rows + more, like or ok
            except _Unreadable as e:
                errors.append(self.diag(line, e.bare, False))
        for grp in self.comment_groups(coms):
            more, subs = self.commented(grp).commented_entries()
            rows += more
            errors.extend(subs)
        return sorted(rows, key=lambda r: r.line), like

    def generated(self, g: int, line: int) -> list[_Row]:
        """``buildStageConfigs(stageName, platform, testlist, testCount, gpus, nodes, ...)``."""
        args = self.values(g)
        if not 6 <= len(args) <= 8:
            raise _Unreadable(f"{GENERATOR} takes 6 to 8 arguments, got {len(args)}")
        for v, typ, what in zip(args, _GEN_TYPES, GENERATOR_PARAMS, strict=False):
            if type(v) is not typ:
                raise _Unreadable(f"{GENERATOR}: {what} should be {typ.__name__}, got {v!r}")
        stage, count = str(args[0]), int(args[3])
        if count < 1:
            raise _Unreadable(f"{GENERATOR}({stage!r}, ...) makes no stages: testCount {count}")
        extra = tuple(args[4:]) + (False,) * (8 - len(args))
        return [_Row(f"{stage}-{k}", (args[1], args[2], k, count, *extra), line, self.disabled)
                for k in range(1, count + 1)]

    def comment_groups(self, coms: list[int]) -> list[list[int]]:
        """Runs of whole-line ``//`` comments on consecutive lines are read as one text."""
        groups: list[list[int]] = []
        for k in coms:
            p = groups[-1][-1] if groups else None
            t = self.toks[k]
            if p == k - 1 and p is not None and t.kind == self.toks[p].kind == "com" \
                    and t.own and self.toks[p].own and t.line == self.toks[p].line + 1:
                groups[-1].append(k)
            else:
                groups.append([k])
        return groups

    def commented(self, grp: list[int]) -> _Reader:
        first = self.toks[grp[0]]
        if self.depth >= _MAX_COMMENT_DEPTH:  # `// // // ...`: recursion and quadratic re-reads
            return _Reader([], self.out, {}, disabled=True, depth=self.depth + 1)
        text = "\n".join(self.toks[k].text for k in grp)
        if first.kind == "bcom":  # drop the ` * ` margin of block comments
            text = re.sub(r"(?m)^[ \t]*\*(?!/)", " ", text)
        try:
            toks = _tokenize(text, first.line)
        except InputError as exc:
            self.out.diag(first.line, f"comment not read for disabled stages: {exc.bare}",
                          Severity.WARNING)
            toks = []
        return _Reader(toks, self.out, dict(self.scope), disabled=True, depth=self.depth + 1)

    def commented_entries(self) -> tuple[list[_Row], list[Diagnostic]]:
        """``"name": [fields]`` entries in a comment inside a map literal: disabled stages."""
        rows: list[_Row] = []
        errors: list[Diagnostic] = []
        k = 0
        while k < len(self.toks):
            t, c = self.toks[k], self.next_sig(k)
            v = self.next_sig(c) if c is not None else None
            if t.kind in ("str", "gstr") and self.is_op(c, ":") and self.is_op(v, "[") \
                    and v in self.match:
                assert v is not None
                end = self.match[v] + 1
                try:
                    rows += self.entry(k, k + 1, v, end, errors)[0]
                except _Unreadable as e:
                    if self.looks_like_row(v, end):  # prose that merely quotes a name stays quiet
                        errors.append(self.diag(t.line, e.bare, False))
                k = end
                continue
            if t.kind in _COMMENTS:
                more, subs = self.commented([k]).commented_entries()
                rows, errors = rows + more, errors + subs
            k += 1
        return rows, errors

    def scan(self, lo: int, hi: int) -> None:
        k = lo
        while k < hi:
            t, nxt = self.toks[k], self.next_sig(k)
            if t.kind in _COMMENTS:
                j = k
                while j < hi and self.toks[j].kind in _COMMENTS:
                    j += 1
                grp = self.comment_groups(list(range(k, j)))[0]
                sub = self.commented(grp)
                sub.scan(0, len(sub.toks))
                k = grp[-1] + 1
                continue
            if t.text == "for" and self.is_op(nxt, "(") and nxt in self.match:
                assert nxt is not None  # a loop variable is no literal, whatever it starts at
                for j in range(nxt, self.match[nxt]):
                    self.scope.pop(self.toks[j].text, None)
                k = self.match[nxt] + 1
                continue
            prev = self.toks[k - 1].text if k > lo else ""
            if t.kind == "id" and prev not in (".", "?.", "*.") and nxt is not None \
                    and nxt < hi and self.toks[nxt].kind == "op":
                end = self.statement(k, nxt, hi)
                if end is not None:
                    k = end
                    continue
            k += 1

    def statement(self, k: int, op: int, hi: int) -> int | None:
        name, line, o = self.toks[k].text, self.toks[k].line, self.toks[op].text
        if o in ("=", "+=", "<<"):
            end = self.stmt_end(op + 1, hi)
            self.assign(name, op + 1, end, o == "=", line)
            return end
        meth = self.next_sig(op)
        paren = self.next_sig(meth) if meth is not None else None
        if o == "." and meth is not None and self.toks[meth].text == "putAll" \
                and self.is_op(paren, "(") and paren in self.match:
            assert paren is not None
            self.assign(name, paren + 1, self.match[paren], False, line)
            return self.match[paren] + 1
        eq = self.next_sig(self.match[op]) if op in self.match else None
        if o == "[" and self.is_op(eq, "=") and name in self.out.stage_maps:
            assert eq is not None  # NAME["stage"] = [fields]
            end, errors = self.stmt_end(eq + 1, hi), list[Diagnostic]()
            try:
                self.out.add(name, self.entry(op + 1, self.match[op], eq + 1, end, errors)[0])
            except _Unreadable as e:
                self.diag(line, e.bare)
            self.out.diags.extend(errors)
            return end
        return None

    def assign(self, name: str, lo: int, hi: int, replace: bool, line: int) -> None:
        """``NAME = / += / << / .putAll(`` of maps, generator calls and other maps, joined by +."""
        out = self.out
        rows: list[_Row] = []
        errors: list[Diagnostic] = []
        like, sources, parts = name in out.stage_maps, [], self.split(lo, hi, "+")[0]
        read = 0
        for a, b in parts:
            s, g = self.sig(a, b), self.group(a, b, "[")
            try:
                if g is not None and self.is_map(g):
                    more, ok = self.map_rows(g + 1, self.match[g], errors)
                    rows, like = rows + more, like or ok
                elif len(s) > 1 and self.toks[s[0]].text == GENERATOR \
                        and self.group(s[1], b, "(") == s[1]:
                    like = True
                    rows += self.generated(s[1], self.toks[s[0]].line)
                elif len(s) == 1 and self.toks[s[0]].text in out.maps:
                    sources.append(self.toks[s[0]].text)
                    rows, like = rows + out.maps[sources[-1]], like or sources[-1] in out.stage_maps
                else:
                    break
            except _Unreadable as e:
                errors.append(self.diag(self.toks[s[0]].line, e.bare, False))
            read += 1
        if read:
            active = [r for r in out.maps.get(name, []) if not r.disabled]
            if replace and active and not self.disabled:
                out.maps[name] = []
                out.diag(line, f"{name} is assigned again; its {len(active)} earlier stages are "
                         "dropped", Severity.WARNING)
            out.add(name, rows)
        if like:
            out.stage_maps.add(name)
            out.consumed.update(s for s in sources if s not in KNOWN_MAPS and s != name)
            out.diags.extend(errors)
            if read < len(parts) and not self.disabled:
                self.diag(line, f"cannot read how {name} is built here: `{self.text(lo, hi)}`; "
                          "its stages from this line are missing")
        elif replace and not read:  # a plain variable: keep literals for "${name}" interpolation
            try:
                self.scope[name] = self.eval([self.toks[k] for k in self.sig(lo, hi)])
            except _Unreadable:
                self.scope.pop(name, None)
