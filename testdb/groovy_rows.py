"""Stage rows from Groovy statements: map literals, generator calls, commented-out rows."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.groovy_lex import COMMENTS, Tok, bracket_balance, comment_lines, map_windows, tokenize
from testdb.groovy_values import TokenView, Unreadable, Value
from testdb.stages import Stage

KNOWN_MAPS = {"x86TestConfigs": "x86_64", "x86SlurmTestConfigs": "x86_64",
              "SBSATestConfigs": "aarch64", "SBSASlurmTestConfigs": "aarch64",
              "multiNodesSBSAConfigs": "aarch64"}
GENERATOR = "buildStageConfigs"
# `NAME = cbtsResizeSplits(NAME)` (11ea7cc3): change-based test selection (CBTS) may keep only
# shards 1..k of a stage it narrowed, at run time, from data no checkout has. Read as the map
# itself; the tool assumes the full split and says so once (an info note, not an error).
PASS_THROUGH = {"cbtsResizeSplits": "change-based test selection (CBTS) may run fewer shards "
                                    "of a stage it narrows at run time; not modelled: every "
                                    "shard is assumed to run (an audit carries CBTS's caveat)"}
GENERATOR_PARAMS = ("stageName", "platform", "testlist", "testCount", "gpuCount", "nodeCount",
                    "runWithSbatch", "useClusterDurations")
_GEN_TYPES = (str, str, str, int, int, int, bool, bool)
ROW_HEAD = ("platform", "context", "split id", "splits")
_HEAD_TYPES = (str, str, int, int)
MAX_FIELDS = 16  # a row of more is no stage row (real ones have 4 to 8)


@dataclass(frozen=True)
class Slot:
    """A row field after the first four, as the Groovy that consumes the map reads it:
    ``attr`` is the Stage field it fills (``""``: the tool does not read it)."""

    attr: str
    typ: type | None
    what: str


# Rows are read by what their fields are for the map's consumer (launchTestJobs at aebac710):
# the Kubernetes maps go to createKubernetesPodConfig(..., values[4] ?: 1, ...,
# values.size() > 5 ? values[5] : false), a pod-config flag (the ModelExpress sidecars); the
# Slurm maps to runLLMTestlistOnSlurm(..., values[4] ?: 1, values[5] ?: 1, values[6] ?: false,
# ...). A field past these, or the pod flag, selects no tests: a note, the stage kept.
K8S_MAPS = ("x86TestConfigs", "SBSATestConfigs")
_GPU = Slot("gpu_count", int, "gpu count")
K8S_SLOTS = (_GPU, Slot("", None, "a pod-config flag (values[5]; the ModelExpress sidecars "
                                  "at aebac710)"))
SLURM_SLOTS = (_GPU, Slot("node_count", int, "node count"),
               Slot("run_with_sbatch", bool, "runWithSbatch"),
               Slot("use_cluster_durations", bool, "useClusterDurations"))
ROW_FIELDS = (*ROW_HEAD, *(s.what for s in SLURM_SLOTS))
_DEFAULTS: dict[str, Value] = {"gpu_count": 1, "node_count": 1, "run_with_sbatch": False,
                               "use_cluster_durations": False}
# launchTestJobs reads multi-node rows with `values[5] ?: 2`: a row without a node count has two.
_MAP_DEFAULTS: dict[str, dict[str, Value]] = {"multiNodesSBSAConfigs": {"node_count": 2}}
_AARCH64_NAME = re.compile(r"sbsa|aarch64|arm64", re.I)
_RULE = "groovy-stage"
_MAX_RANGE = 1000  # collectEntries over a range: real files make about ten stages
_MAX_COMMENT_DEPTH = 4  # real files comment out stage rows once, sometimes twice


@dataclass(frozen=True)
class Row:
    name: str
    fields: tuple[Value, ...]  # the first four checked; the rest read by the map's slots
    line: int
    disabled: bool
    generated: bool = False  # by buildStageConfigs: always its eight fields


@dataclass
class Out:
    """What the function body's reader and every commented-out block's reader add to."""

    path: str
    maps: dict[str, list[Row]] = field(default_factory=dict)
    stage_maps: set[str] = field(default_factory=lambda: set(KNOWN_MAPS))
    consumed: set[str] = field(default_factory=set)  # merged into another map: reported there
    diags: list[Diagnostic] = field(default_factory=list)

    def diag(self, line: int, msg: str, sev: Severity = Severity.ERROR) -> None:
        self.diags.append(Diagnostic(SourceLoc(self.path, line), sev, msg, _RULE))

    def add(self, name: str, rows: list[Row]) -> None:
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
            slots = K8S_SLOTS if name in K8S_MAPS else SLURM_SLOTS
            unread: list[tuple[Row, str]] = []
            for r in sorted(rows, key=lambda r: r.line):
                kw = self.slots(name, r, slots, unread)
                if kw is None:
                    continue
                out.append(Stage(
                    name=r.name, platform=str(r.fields[0]), context=str(r.fields[1]),
                    split_id=int(r.fields[2]), splits=int(r.fields[3]), map=name, arch=arch,
                    loc=SourceLoc(self.path, r.line), disabled=r.disabled,
                    **kw))  # type: ignore[arg-type]
            if unread:
                first, what = unread[0]
                self.diag(first.line, f"{name}: {len(unread)} stage row(s) carry a field the "
                          f"tool does not read ({what}, first: {first.name}); it selects no "
                          "tests, so each such stage is kept", Severity.INFO)
        return out

    def slots(self, name: str, r: Row, slots: tuple[Slot, ...],
              unread: list[tuple[Row, str]]) -> dict[str, Value] | None:
        """The Stage fields of a row's fields past the first four, by the map's slots; None
        (with an error, a warning when commented out) when a field the tool reads has the
        wrong type."""
        kw = {**_DEFAULTS, **_MAP_DEFAULTS.get(name, {})}
        extra = r.fields[4:]
        for k, v in enumerate(extra):
            slot = slots[k] if k < len(slots) else None
            if slot is not None and slot.typ is not None:
                if type(v) is not slot.typ:
                    msg = f"stage {r.name}: {slot.what} should be {slot.typ.__name__}, got {v!r}"
                    if r.disabled:
                        self.diag(r.line, f"commented-out: {msg}", Severity.WARNING)
                    else:
                        self.diag(r.line, msg)
                    return None
                kw[slot.attr] = v
            elif not r.generated and not r.disabled:
                unread.append((r, slot.what if slot else f"field {k + 5} of {len(r.fields)}, "
                               "past every field the map's consumer reads"))
                break
        return kw


class StageReader(TokenView):
    """Reads stage statements from one token list: the function body or a commented-out block."""

    def __init__(self, toks: list[Tok], out: Out, scope: dict[str, Value],
                 disabled: bool, depth: int = 0) -> None:
        super().__init__(toks, scope)
        self.out, self.disabled = out, disabled
        self.depth = depth  # comments inside comments: each level re-reads the text

    def diag(self, line: int, msg: str, keep: bool = True) -> Diagnostic:
        # Commented-out code cannot break the build: what it gets wrong is only a warning.
        sev = Severity.WARNING if self.disabled else Severity.ERROR
        d = Diagnostic(SourceLoc(self.out.path, line), sev,
                       f"commented-out: {msg}" if self.disabled else msg, _RULE)
        if keep:
            self.out.diags.append(d)
        return d

    def looks_like_row(self, lo: int, hi: int) -> bool:
        """``["platform", "context", ...]`` with 4 to 8 fields (or a map of such): a stage map."""
        g = self.group(lo, hi, "[")
        if g is None:
            return False
        parts = self.split(g + 1, self.match[g])[0]
        if self.is_map(g):
            return any((c := self.find_top(a, b, ":")) is not None and self.looks_like_row(c + 1, b)
                       for a, b in parts)
        return 3 <= len(parts) <= MAX_FIELDS and all(
            len(s := self.sig(*p)) == 1 and self.toks[s[0]].kind in ("str", "gstr")
            for p in parts[:2])

    def entry(self, klo: int, khi: int, vlo: int, vhi: int, errors: list[Diagnostic]
              ) -> tuple[list[Row], bool]:
        """Rows of one ``"name": [fields]`` entry or of a nested map, and if it held a stage row."""
        key = self.sig(klo, khi)
        if not key:
            raise Unreadable("a map entry without a key before its `:`")
        kt = self.toks[key[0]]
        name = self.eval([self.toks[k] for k in key])
        g = self.group(vlo, vhi, "[")
        if g is not None and self.is_map(g):
            return self.map_rows(g + 1, self.match[g], errors)
        if g is None:
            raise Unreadable(f"stage {name}: the value is not a [platform, context, split id, "
                              "splits, ...] list")
        try:
            return [self.row(str(name), self.values(g), kt.line)], True
        except Unreadable as e:
            raise Unreadable(f"stage {name}: {e.bare}") from None

    def row(self, name: str, values: list[Value], line: int) -> Row:
        """The first four fields are every map's; the rest are read by the map's slots
        (``Out.slots``), which only the map the row ends up in knows."""
        if not 4 <= len(values) <= MAX_FIELDS:
            raise Unreadable(f"{len(values)} fields; a stage row has at least 4 "
                              f"({', '.join(ROW_FIELDS)}, ...)")
        for v, typ, what in zip(values, _HEAD_TYPES, ROW_HEAD, strict=False):
            if type(v) is not typ:
                raise Unreadable(f"{what} should be {typ.__name__}, got {v!r}")
        return Row(name, tuple(values), line, self.disabled)

    def map_rows(self, lo: int, hi: int, errors: list[Diagnostic]) -> tuple[list[Row], bool]:
        """Rows of a map literal's body, commented-out ones included, and if it holds stages."""
        rows: list[Row] = []
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
            except Unreadable as e:
                errors.append(self.diag(line, e.bare, False))
        for grp in self.comment_groups(coms):
            more, subs = self.commented(grp).commented_entries()
            rows += more
            errors.extend(subs)
        return sorted(rows, key=lambda r: r.line), like

    def generated(self, g: int, line: int) -> list[Row]:
        """``buildStageConfigs(stageName, platform, testlist, testCount, gpus, nodes, ...)``."""
        args = self.values(g)
        if not 6 <= len(args) <= 8:
            raise Unreadable(f"{GENERATOR} takes 6 to 8 arguments, got {len(args)}")
        for v, typ, what in zip(args, _GEN_TYPES, GENERATOR_PARAMS, strict=False):
            if type(v) is not typ:
                raise Unreadable(f"{GENERATOR}: {what} should be {typ.__name__}, got {v!r}")
        stage, count = str(args[0]), int(args[3])
        if count < 1:
            raise Unreadable(f"{GENERATOR}({stage!r}, ...) makes no stages: testCount {count}")
        extra = tuple(args[4:]) + (False,) * (8 - len(args))
        return [Row(f"{stage}-{k}", (args[1], args[2], k, count, *extra), line, self.disabled,
                    generated=True) for k in range(1, count + 1)]

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

    def commented(self, grp: list[int]) -> StageReader:
        return self.commented_lines(comment_lines([self.toks[k] for k in grp]))

    def commented_lines(self, lines: list[tuple[int, str]]) -> StageReader:
        """A reader of commented-out text (consecutive lines), one comment level deeper."""
        if self.depth >= _MAX_COMMENT_DEPTH or not lines:  # `// // // ...`: quadratic re-reads
            return StageReader([], self.out, {}, disabled=True, depth=self.depth + 1)
        try:
            toks = tokenize("\n".join(text for _, text in lines), lines[0][0])
        except InputError as exc:
            self.out.diag(lines[0][0], f"comment not read for disabled stages: {exc.bare}",
                          Severity.WARNING)
            toks = []
        return StageReader(toks, self.out, dict(self.scope), disabled=True, depth=self.depth + 1)

    def scan_commented(self, grp: list[int]) -> None:
        """Statements in a run of comment lines; a commented-out map literal is read row by row
        (``// NAME = [`` ... ``// ]``), since prose lines between its rows are no Groovy."""
        lines = comment_lines([self.toks[k] for k in grp])
        pos = 0
        for opener, closer, name in map_windows(lines):
            sub = self.commented_lines(lines[pos:opener])
            sub.scan(0, len(sub.toks))
            self.commented_map(name, lines[opener + 1:closer])
            pos = closer + 1
        sub = self.commented_lines(lines[pos:])
        sub.scan(0, len(sub.toks))

    def commented_map(self, name: str, lines: list[tuple[int, str]]) -> None:
        """The rows of a commented-out map literal's body: lines taken together only while a
        ``[`` is open (a row over several lines), so a prose line stands alone and reads as
        nothing."""
        rows: list[Row] = []
        errors: list[Diagnostic] = []
        start, depth = 0, 0
        for i, (_, text) in enumerate(lines):
            depth += bracket_balance(text)
            if depth > 0 and i + 1 < len(lines):
                continue
            more, errs = self.commented_lines(lines[start:i + 1]).commented_entries()
            rows, errors = rows + more, errors + errs
            start, depth = i + 1, 0
        self.out.add(name, rows)
        if rows:
            self.out.stage_maps.add(name)
        self.out.diags.extend(errors)

    def commented_entries(self) -> tuple[list[Row], list[Diagnostic]]:
        """``"name": [fields]`` entries in a comment inside a map literal: disabled stages."""
        rows: list[Row] = []
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
                except Unreadable as e:
                    if self.looks_like_row(v, end):  # prose that merely quotes a name stays quiet
                        errors.append(self.diag(t.line, e.bare, False))
                k = end
                continue
            if t.kind in COMMENTS:
                more, subs = self.commented([k]).commented_entries()
                rows, errors = rows + more, errors + subs
            k += 1
        return rows, errors

    def scan(self, lo: int, hi: int) -> None:
        k = lo
        while k < hi:
            t, nxt = self.toks[k], self.next_sig(k)
            if t.kind in COMMENTS:
                j = k
                while j < hi and self.toks[j].kind in COMMENTS:
                    j += 1
                grp = self.comment_groups(list(range(k, j)))[0]
                self.scan_commented(grp)
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
            except Unreadable as e:
                self.diag(line, e.bare)
            self.out.diags.extend(errors)
            return end
        return None

    def range_collect(self, s: list[int]) -> tuple[int, int, int] | None:
        """``(A..B).collectEntries { v -> ... }`` (or ``A..<B``): the range's ``(`` and the
        closure's ``{`` and ``}`` indices, when ``s`` (significant tokens) is exactly that."""
        if len(s) < 6 or not self.is_op(s[0], "(") or s[0] not in self.match:
            return None
        close = self.match[s[0]]
        rest = [k for k in s if k > close]
        if len(rest) < 3 or not self.is_op(rest[0], ".") or self.toks[rest[1]].text != \
                "collectEntries" or not self.is_op(rest[2], "{") or rest[2] not in self.match \
                or self.match[rest[2]] != s[-1]:
            return None
        return s[0], rest[2], s[-1]

    def collected(self, s: list[int], rng: int, brace: int, end: int,
                  errors: list[Diagnostic]) -> tuple[list[Row], bool]:
        """Rows of ``(A..B).collectEntries { v -> [KEY, [fields]] }``: the closure evaluated once
        for each v of the range, v in scope (``it`` without a parameter); the closure may also
        return a map literal ``[(KEY): [fields]]``."""
        inner = self.sig(rng + 1, self.match[rng])
        dots = [k for k in inner if self.is_op(k, "..")]
        if len(dots) != 1:
            raise Unreadable(f"cannot read the range `{self.text(rng, self.match[rng] + 1)}`")
        lo_toks = [self.toks[k] for k in inner if k < dots[0]]
        hi_sig = [k for k in inner if k > dots[0]]
        exclusive = bool(hi_sig) and self.is_op(hi_sig[0], "<")
        first, last = self.eval(lo_toks), self.eval([self.toks[k] for k in hi_sig[exclusive:]])
        if type(first) is not int or type(last) is not int:
            raise Unreadable(f"the range `{self.text(rng, self.match[rng] + 1)}` is not of "
                              "whole numbers")
        values = range(first, last if exclusive else last + 1)
        if len(values) > _MAX_RANGE:
            raise Unreadable(f"a range of {len(values)} stages; over {_MAX_RANGE} is not a "
                              "stage table")
        body = self.sig(brace + 1, end)
        param = "it"
        if len(body) > 2 and self.toks[body[0]].kind == "id" and self.is_op(body[1], "->"):
            param, body = self.toks[body[0]].text, body[2:]
        if self.is_op(body[0] if body else None, "[") and body[0] in self.match \
                and self.match[body[0]] == body[-1]:
            g = body[0]
        else:
            raise Unreadable("collectEntries: the closure is not one `[name, [fields]]` list")
        rows: list[Row] = []
        like = False
        saved = self.scope
        try:
            for v in values:
                self.scope = {**saved, param: v}
                if self.is_map(g):
                    more, ok = self.map_rows(g + 1, self.match[g], errors)
                    rows, like = rows + more, like or ok
                    continue
                parts = self.split(g + 1, self.match[g])[0]
                if len(parts) != 2 or self.group(*parts[1], "[") is None:
                    raise Unreadable("collectEntries: the closure is not one `[name, [fields]]` "
                                      "list")
                (ka, kb), (va, vb) = parts
                rows += self.entry(ka, kb, va, vb, errors)[0]
                like = True
        finally:
            self.scope = saved
        return rows, like

    def assign(self, name: str, lo: int, hi: int, replace: bool, line: int) -> None:
        """``NAME = / += / << / .putAll(`` of maps, generator calls and other maps, joined by +."""
        out = self.out
        s = self.sig(lo, hi)
        if (len(s) == 4 and self.toks[s[0]].text in PASS_THROUGH and self.toks[s[1]].text == "("
                and self.toks[s[3]].text == ")" and self.toks[s[2]].text in out.maps):
            fn, arg = self.toks[s[0]].text, self.toks[s[2]].text
            if not self.disabled and not any(f" = {fn}(" in d.message for d in out.diags):
                out.diag(line, f"{name} = {fn}({arg}) (and the other maps): "
                         f"{PASS_THROUGH[fn]}", Severity.INFO)
            if arg == name:
                return
            lo, hi = s[2], s[2] + 1
        rows: list[Row] = []
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
                elif (closure := self.range_collect(s)) is not None:
                    more, ok = self.collected(s, *closure, errors)
                    rows, like = rows + more, like or ok
                else:
                    break
            except Unreadable as e:
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
            except Unreadable:
                self.scope.pop(name, None)
