"""The PR gates of ``jenkins/L0_MergeRequest.groovy``, read from its text without running it.

A real checkout has no ``ci/pr-triggers.yml``: its gates are three Groovy functions of
``L0_MergeRequest.groovy`` (the stored version at 11ea7cc3, read with the search tool):

- ``getMultiGpuFileChanged``: ``def relatedFileList = ["path", ...]``, each entry tested with
  ``changedFileListStr.contains(it)`` on the changed files joined by ``", "``;
- ``getAutoTriggerTagList``: ``def specialFileToTagMap = ["prefix": ["-Tag-"], ...]``, a changed
  file opens a rule's tags when it ``startsWith`` the prefix;
- ``getOnlyOneGroupChanged``: ``def groupFileMap = ["Docs": [...], "PyTorch": [...], ...]``, tried
  in map order; a group wins when every changed file ``startsWith`` one of its prefixes (Docs
  also takes any ``.md`` file).

Only those three literals are read, with the project's Groovy tokenizer and value reader
(``groovy_lex``, ``groovy_values``): the file is parsed, never executed. A function that is
present but whose literal cannot be read is an error (gates read wrong would close silently);
a missing function leaves that rule empty with a warning. The match rule each function uses is
checked by a token it must hold, so a changed rule is reported, not misread.

The same file says whether the pipeline runs CBTS: ``setupPipelineEnvironment`` sets
``testFilter[(CBTS_RESULT)] = getCbtsResult(...)`` (11ea7cc3). A checkout whose Groovy calls it
but lacks ``jenkins/scripts/cbts/main.py`` (a sparse or partial checkout) still gets the caveat
that CBTS may narrow the PR's stages, never a silent full stage set (``Triggers.cbts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.groovy_lex import COMMENTS, Tok, tokenize
from testdb.groovy_values import TokenView, Unreadable, Value
from testdb.triggers import Triggers

_RULE = "merge-request-gates"
CBTS_CALL = "getCbtsResult"  # L0_MergeRequest.groovy's CBTS entry (testdb/cbts.py)


@dataclass(frozen=True)
class Gate:
    """One gate function: the literal it holds and the token its match rule needs."""

    function: str
    variable: str
    match_token: str  # the String method the tool's reading of the rule depends on
    what: str


MULTI_GPU = Gate("getMultiGpuFileChanged", "relatedFileList", "contains",
                 "the multi-GPU path list")
AUTO_TRIGGER = Gate("getAutoTriggerTagList", "specialFileToTagMap", "startsWith",
                    "the auto-trigger tag rules")
ONE_GROUP = Gate("getOnlyOneGroupChanged", "groupFileMap", "startsWith",
                 "the one-group rule")


class _Reader(TokenView):
    def __init__(self, toks: list[Tok], path: str) -> None:
        super().__init__(toks, {})
        self.path = path
        self.diags: list[Diagnostic] = []

    def fail(self, line: int, msg: str) -> InputError:
        return InputError(msg, SourceLoc(self.path, line),
                          "give the gates as data with --triggers FILE (shaped like "
                          "ci/pr-triggers.yml)")

    def body(self, name: str) -> tuple[int, int, int] | None:
        """The ``{``..``}`` token range of ``def NAME(...)``'s body, and its line."""
        for k in range(len(self.toks) - 2):
            t = self.toks[k]
            if t.kind == "id" and t.text == "def" and self.toks[k + 1].text == name \
                    and self.is_op(k + 2, "(") and k + 2 in self.match:
                brace = self.next_sig(self.match[k + 2])
                if not self.is_op(brace, "{") or brace not in self.match:
                    raise self.fail(t.line, f"cannot find the body of {name}")
                assert brace is not None
                return brace + 1, self.match[brace], t.line
        return None

    def literal(self, gate: Gate) -> tuple[int, int] | None:
        """The ``[`` index of ``[def] VARIABLE = [...]`` in the gate function, and its line;
        None (with a warning) when the function is not in the file."""
        found = self.body(gate.function)
        if found is None:
            self.diags.append(Diagnostic(
                SourceLoc(self.path, 1), Severity.WARNING,
                f"no `def {gate.function}(`: {gate.what} is taken as empty", _RULE))
            return None
        lo, hi, line = found
        s = self.sig(lo, hi)
        for i, k in enumerate(s[:-2]):
            if self.toks[k].text == gate.variable and self.is_op(s[i + 1], "=") \
                    and self.is_op(s[i + 2], "[") and s[i + 2] in self.match:
                if not any(self.toks[j].text == gate.match_token for j in s):
                    self.diags.append(Diagnostic(
                        SourceLoc(self.path, line), Severity.WARNING,
                        f"{gate.function} no longer uses `{gate.match_token}`: {gate.what} is "
                        "read as before, but CI may now match it otherwise", _RULE))
                return s[i + 2], self.toks[k].line
        raise self.fail(line, f"{gate.function} has no `{gate.variable} = [...]` literal: "
                              f"{gate.what} cannot be read")

    def strings(self, g: int, what: str) -> tuple[str, ...]:
        try:
            vals = self.values(g)
        except Unreadable as e:
            raise self.fail(self.toks[g].line, f"{what}: {e.bare}") from None
        return tuple(_string(v, self.toks[g].line, what, self) for v in vals)

    def string_map(self, g: int, what: str) -> list[tuple[str, tuple[str, ...]]]:
        """``["key": ["a", ...], ...]`` in source order; a bare string value is a one-item list."""
        out: list[tuple[str, tuple[str, ...]]] = []
        for a, b in self.split(g + 1, self.match[g])[0]:
            c = self.find_top(a, b, ":")
            line = self.toks[self.sig(a, b)[0]].line
            if c is None:
                raise self.fail(line, f"{what}: `{self.text(a, b)}` is not a `key: [values]` "
                                      "entry")
            try:
                key = self.eval([self.toks[k] for k in self.sig(a, c)])
                v = self.group(c + 1, b, "[")
                vals: tuple[str, ...] = (self.strings(v, what) if v is not None else
                                         (_string(self.eval([self.toks[k] for k in
                                                             self.sig(c + 1, b)]),
                                                  line, what, self),))
            except Unreadable as e:
                raise self.fail(line, f"{what}: {e.bare}") from None
            out.append((_string(key, line, what, self), vals))
        return out


def _string(v: Value, line: int, what: str, r: _Reader) -> str:
    if not isinstance(v, str):
        raise r.fail(line, f"{what}: {v!r} is not a path string")
    return v


def load_merge_request_text(text: str, path: str) -> tuple[Triggers, list[Diagnostic]]:
    """The gate rules of an ``L0_MergeRequest.groovy`` text, and what is worth saying about
    them; InputError (exit 2) when a gate function is there but cannot be read."""
    try:
        toks = tokenize(text)
    except InputError as exc:
        raise InputError(exc.bare, SourceLoc(path, 1), exc.hint) from None
    r = _Reader(toks, path)
    for k, msg in r.broken[:1]:
        raise r.fail(toks[k].line, msg)
    paths: tuple[str, ...] = ()
    rules: list[tuple[str, tuple[str, ...]]] = []
    groups: list[tuple[str, tuple[str, ...]]] = []
    if (at := r.literal(MULTI_GPU)) is not None:
        paths = r.strings(at[0], MULTI_GPU.variable)
    if (at := r.literal(AUTO_TRIGGER)) is not None:
        rules = r.string_map(at[0], AUTO_TRIGGER.variable)
    if (at := r.literal(ONE_GROUP)) is not None:
        groups = r.string_map(at[0], ONE_GROUP.variable)
    if not paths and not rules and not groups:
        raise r.fail(1, "no gate rules found (getMultiGpuFileChanged, getAutoTriggerTagList, "
                        "getOnlyOneGroupChanged); is this L0_MergeRequest.groovy?")
    return Triggers(paths, tuple(rules), tuple(groups), source=path,
                    cbts=cbts_call(toks, path)), r.diags


def cbts_call(toks: list[Tok], path: str) -> str:
    """``PATH:LINE calls getCbtsResult`` for the first call of it in code (a comment or a string
    naming it is no call, nor is its ``def``); "" when the file never calls it."""
    code = [t for t in toks if t.kind not in COMMENTS]
    for k, t in enumerate(code[:-1]):
        if t.kind == "id" and t.text == CBTS_CALL and code[k + 1].text == "(" \
                and not (k and code[k - 1].text == "def"):
            return f"{path}:{t.line} calls {CBTS_CALL}"
    return ""
