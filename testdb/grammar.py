"""The line grammar shared by test-db entries, QA lists and waives (trtllm-ci.md section 3)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from testdb.errors import Diagnostic, Severity, SourceLoc

DEFAULT_TIMEOUT_MINUTES = 60
UNITTEST_PREFIX = "unittest/"
_FULL_PREFIX = re.compile(r"full:([^/\s]+)/")
_MARKER_WORD = re.compile(r"(?<=\s)(XFAIL|SKIP|UNSTABLE|TIMEOUT|ISOLATION)(?![\w-])")
_MARKER_AT = re.compile(r"(XFAIL|SKIP|UNSTABLE|TIMEOUT|ISOLATION)(?![\w-])")
_TIMEOUT_ARG = re.compile(r"\s*\(\s*([^)]*?)\s*\)")
_MINUTES = re.compile(r"[0-9]{1,9}")  # ASCII digits: int() refuses '²' and 5,000-digit numbers
_MAKO = re.compile(r"^\s*%|\$\{")


@dataclass(frozen=True)
class NodeId:
    """An exact pytest node id split into its parts: ``file::Class::func[params]``."""

    file: str
    classes: tuple[str, ...]
    function: str
    params: str | None

    @property
    def base(self) -> str:
        """The id without its ``[params]`` part."""
        return "::".join((self.file, *self.classes, self.function))

    @property
    def text(self) -> str:
        return self.base if self.params is None else f"{self.base}[{self.params}]"

    @property
    def qualname(self) -> str:
        """``Class::function`` (or just ``function``)."""
        return "::".join((*self.classes, self.function))


def split_node_id(text: str) -> NodeId | None:
    """Split ``path.py::A::b[x::y]`` into parts; ``[...]`` may hold ``::``, spaces and brackets."""
    bracket = text.find("[")
    head, params = (text, None) if bracket < 0 else (text[:bracket], text[bracket + 1 : -1])
    if bracket >= 0 and not text.endswith("]"):
        return None
    parts = head.split("::")
    if len(parts) < 2 or not all(parts):
        return None
    return NodeId(parts[0], tuple(parts[1:-1]), parts[-1], params)


def _is_node_id(text: str) -> bool:
    """``split_node_id(text) is not None``, without building the parts."""
    bracket = text.find("[")
    if bracket >= 0:
        if not text.endswith("]"):
            return False
        text = text[:bracket]
    parts = text.split("::")
    return len(parts) >= 2 and "" not in parts


@dataclass(frozen=True)
class Entry:
    """One test line: a node id or a unit-test selection, with its marker and provenance."""

    test: str  # what the line names: a node id or the unittest selection text, without prefix
    loc: SourceLoc
    kind: str  # "nodeid" | "unittest" | "path" (a file or directory that is not a unittest/ line)
    gpu_prefix: str | None = None  # the GPU of a ``full:GPU/`` prefix
    marker: str | None = None
    reason: str | None = None
    timeout_minutes: int | None = None
    isolation: bool = False
    comment: str | None = None

    @property
    def node(self) -> NodeId | None:
        """The node id split into parts (computed on use, so neither stored nor cached)."""
        return split_node_id(self.test) if self.kind == "nodeid" else None

    @property
    def base(self) -> str:
        """The test without its ``[params]`` part (the text itself for other kinds)."""
        bracket = self.test.find("[") if self.kind == "nodeid" else -1
        return self.test if bracket < 0 else self.test[:bracket]

    @property
    def is_unittest(self) -> bool:
        return self.kind == "unittest"

    @property
    def unittest_path(self) -> str:
        """The path part of a unit-test selection (``unittest/_torch/speculative``)."""
        return self.test.split(None, 1)[0]

    @property
    def unittest_args(self) -> tuple[str, ...]:
        """The pytest options of a unit-test selection (``-k``, ``eagle3``), shell-split."""
        rest = self.test.split(None, 1)[1] if " " in self.test.strip() else ""
        try:
            return tuple(shlex.split(rest))
        except ValueError:
            return tuple(rest.split())

    @property
    def ci_node_id(self) -> str:
        """The id CI reports: unittest lines run through ``test_unittests_v2``."""
        if self.kind == "unittest":
            return f"test_unittests.py::test_unittests_v2[{self.test}]"
        return self.test

    @property
    def timeout(self) -> int:
        return self.timeout_minutes or DEFAULT_TIMEOUT_MINUTES


@dataclass
class LineResult:
    entries: list[Entry] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def _strip_comment(text: str) -> tuple[str, str | None]:
    # Everything after the first '#' is a comment (the real parser does exactly this).
    pos = text.find("#")
    if pos < 0:
        return text, None
    return text[:pos], text[pos + 1 :].strip() or None


def _closing_paren(text: str, start: int) -> int:
    """Index of the ``)`` that closes the ``(`` at ``start``; the last ``)`` if unbalanced."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return text.rfind(")")


@dataclass
class _Markers:
    marker: str | None = None
    reason: str | None = None
    timeout: int | None = None
    isolation: bool = False


def _parse_markers(tail: str, diag: _Diag) -> _Markers | None:
    """Markers left to right from the first one; ``TIMEOUT (N) ISOLATION`` is a real
    combination. ``None`` when the line is unusable (a bad TIMEOUT)."""
    out = _Markers()
    pos = 0
    while pos < len(tail):
        m = _MARKER_AT.match(tail, pos)
        if not m:
            diag(Severity.WARNING, f"unexpected text after marker: {tail[pos:].strip()!r}; "
                 "a line carries one marker with an optional (reason)", "marker-trailing")
            break
        word = m.group(1)
        pos = m.end()
        arg = _TIMEOUT_ARG.match(tail, pos)
        if word == "TIMEOUT":
            if not arg or not _MINUTES.fullmatch(arg.group(1)) or int(arg.group(1)) <= 0:
                diag(Severity.ERROR, "TIMEOUT needs a positive whole number of minutes in "
                     "parentheses, e.g. `TIMEOUT (90)`", "bad-timeout")
                return None
            out.timeout = int(arg.group(1))
            pos = arg.end()
        elif word == "ISOLATION":
            out.isolation = True
        else:
            if out.marker is not None:
                diag(Severity.WARNING, f"second marker {word} ignored; one marker per line",
                     "marker-twice")
            else:
                out.marker = word
            if arg:
                # a reason may hold parentheses itself: take up to the matching ')'
                opening = tail.index("(", pos)
                close = _closing_paren(tail, opening)
                if out.marker == word and out.reason is None:
                    out.reason = tail[opening + 1 : close].strip()
                pos = close + 1
            else:
                rest = tail[pos:].strip()
                if rest:
                    diag(Severity.WARNING, f"{word} reason must be in parentheses: "
                         f"write `{word} ({rest})`", "reason-parens")
                    out.reason = out.reason or rest
                    pos = len(tail)
        while pos < len(tail) and tail[pos] == " ":
            pos += 1
    return out


class _Diag:
    """Appends diagnostics for one line (a class, not a closure: most lines never need it)."""

    def __init__(self, res: LineResult, loc: SourceLoc) -> None:
        self.res, self.loc = res, loc

    def __call__(self, sev: Severity, msg: str, rule: str) -> None:
        self.res.diagnostics.append(Diagnostic(self.loc, sev, msg, rule))


def parse_line(raw: str, loc: SourceLoc, *, waive: bool = False) -> LineResult:
    """Parse one list line. Blank and comment-only lines give no entries."""
    res = LineResult()
    diag = _Diag(res, loc)
    if ("%" in raw or "${" in raw) and _MAKO.search(raw):
        diag(Severity.ERROR, "Mako template line (`%` or `${`) is not supported; "
             "render the template first or remove the line", "mako-line")
        return res
    body, comment = _strip_comment(raw)
    body = body.strip()
    if not body:
        return res
    markers = _Markers()
    test_text = body
    # A marker follows a space; most lines are a bare node id without one.
    first = _first_marker(body) if " " in body else None
    if first is not None:
        test_text = body[:first].rstrip()
        parsed = _parse_markers(body[first:], diag)
        if parsed is None:
            return res
        markers = parsed
    if waive and markers.marker is None:
        diag(Severity.WARNING, "waive without SKIP/XFAIL/UNSTABLE marker; it is read as SKIP",
             "waive-no-marker")
        markers.marker = "SKIP"
    gpu = None
    if test_text.startswith("full:"):
        m = _FULL_PREFIX.match(test_text)
        if m:
            gpu = m.group(1)
            test_text = test_text[m.end() :]
    for part in _split_several(test_text):
        res.entries.append(_make_entry(part, loc, gpu, markers, comment, res))
    return res


def _first_marker(body: str) -> int | None:
    """Where the first marker word outside ``[...]`` and ``(...)`` starts, if any."""
    prev = sq = par = 0  # bracket balance of body[:prev], kept as we go: linear, not quadratic
    for m in _MARKER_WORD.finditer(body):
        pos = m.start()
        sq += body.count("[", prev, pos) - body.count("]", prev, pos)
        par += body.count("(", prev, pos) - body.count(")", prev, pos)
        prev = pos
        if sq <= 0 and par <= 0:
            return pos
    return None


def _split_several(text: str) -> list[str]:
    """Older files put several space-separated test paths on one line; ids hold spaces in [...]."""
    if text.startswith(UNITTEST_PREFIX):
        # A selection line keeps its pytest options; only split when every word is a unittest path.
        words = text.split()
        if len(words) > 1 and all(w.startswith(UNITTEST_PREFIX) for w in words):
            return words
        return [text]
    if " " not in text:
        return [text]
    parts, start = [], 0
    prev = sq = par = 0  # bracket balance of text[:prev] (one linear pass)
    i = text.find(" ")
    while i >= 0:
        sq += text.count("[", prev, i) - text.count("]", prev, i)
        par += text.count("(", prev, i) - text.count(")", prev, i)
        prev = i
        if sq <= 0 and par <= 0:
            if text[start:i]:
                parts.append(text[start:i])
            start = i + 1
        i = text.find(" ", i + 1)
    if text[start:]:
        parts.append(text[start:])
    return parts if len(parts) > 1 and all(("/" in p or ".py" in p) for p in parts) else [text]


def _make_entry(text: str, loc: SourceLoc, gpu: str | None, markers: _Markers,
                comment: str | None, res: LineResult) -> Entry:
    if text.startswith(UNITTEST_PREFIX):
        kind = "unittest"
    elif _is_node_id(text):
        kind = "nodeid"
    else:
        kind = "path"
        if " " in text and "[" not in text:
            res.diagnostics.append(Diagnostic(loc, Severity.WARNING,
                f"{text!r} is not an exact node id; pytest options work only on unittest/ "
                "lines", "not-node-id"))
    return Entry(text, loc, kind, gpu, markers.marker, markers.reason, markers.timeout,
                 markers.isolation, comment)
