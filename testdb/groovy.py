"""Jenkins stage rows of ``jenkins/L0_Test.groovy``, read from its text without running Groovy."""

from __future__ import annotations

import re

from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.groovy_lex import Tok, find_code, tokenize
from testdb.groovy_rows import Out, StageReader
from testdb.stages import Stage

# Python has no Groovy parser, and evaluating the Jenkinsfile would need Jenkins. The stage maps use
# a small corner of the language (map and list literals, string interpolation, `+=` of a generator
# call), so a hand tokenizer (groovy_lex) and a reader for those statements (groovy_values,
# groovy_rows) suffice; anything else written to a stage map is reported as a diagnostic rather
# than guessed.

FUNCTION = "launchTestJobs"
_DEF = re.compile(r"\bdef\s+launchTestJobs\s*\(")
_DEF_LINE = re.compile(r"^[ \t]*def\s+launchTestJobs\s*\(", re.M)


def load_groovy_stages_text(text: str, path: str) -> tuple[list[Stage], list[Diagnostic]]:
    """The stage rows of ``launchTestJobs`` (commented-out ones as disabled) and what went wrong."""
    out = Out(path)
    at = find_code(text, _DEF)
    first = text.count("\n", 0, at) + 1 if at is not None else 1
    try:
        toks = tokenize(text[at:] if at is not None else text, first)
    except InputError as exc:
        raise InputError(exc.bare, SourceLoc(path, first), exc.hint) from None
    if at is None and (hidden := _hidden_def(text, toks)) is not None:
        out.diag(*hidden)
        return [], out.diags
    reader = StageReader(toks, out, {}, disabled=False)
    lo, hi = 0, len(reader.toks)
    if at is not None:
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


def find_def(toks: list[Tok], name: str) -> int | None:
    """Index of the first ``def NAME(`` token triple: one inside a comment or a string (a
    comment that quotes ``def launchTestJobs(``, say) is text, not the definition. The loader
    finds it with ``find_code`` without tokenizing what comes before; the tests check the two
    agree."""
    for k in range(len(toks) - 2):
        t = toks[k]
        if t.kind == "id" and t.text == "def" and toks[k + 1].kind == "id" \
                and toks[k + 1].text == name and toks[k + 2].kind == "op" \
                and toks[k + 2].text == "(":
            return k
    return None


def _hidden_def(text: str, toks: list[Tok]) -> tuple[int, str] | None:
    """A ``def launchTestJobs(`` that starts its line but reads as inside a string or a block
    comment: the quotes or comment markers above it are off, and guessing would be wrong."""
    m = _DEF_LINE.search(text)
    if m is None:
        return None
    line = text.count("\n", 0, m.start()) + 1
    inside = next((t for t in toks if t.line < line <= t.line + t.text.count("\n")), None)
    if inside is None or inside.kind == "com":
        return None
    what = "a block comment" if inside.kind == "bcom" else "a string"
    return line, (f"`def {FUNCTION}(` at line {line} reads as inside {what} that starts at line "
                  f"{inside.line}; check the quotes and comment markers above it")
