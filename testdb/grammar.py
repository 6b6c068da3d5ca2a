"""The line grammar shared by test-db entries, QA lists and waives (trtllm-ci.md section 3)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property

from testdb.errors import Diagnostic, Severity, SourceLoc

DEFAULT_TIMEOUT_MINUTES = 60
MARKERS = ("XFAIL", "SKIP", "UNSTABLE", "TIMEOUT", "ISOLATION")
WAIVE_MARKERS = ("XFAIL", "SKIP", "UNSTABLE")
UNITTEST_PREFIX = "unittest/"
_FULL_PREFIX = re.compile(r"full:([^/\s]+)/")
_MARKER_WORD = re.compile(r"(?<=\s)(XFAIL|SKIP|UNSTABLE|TIMEOUT|ISOLATION)(?![\w-])")
_TIMEOUT_ARG = re.compile(r"\s*\(\s*([^)]*?)\s*\)")
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

    @cached_property
    def node(self) -> NodeId | None:
        """The node id split into parts (computed on first use; not stored in the cache)."""
        return split_node_id(self.test) if self.kind == "nodeid" else None

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "node"}

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


def _at_depth0(text: str, pos: int) -> bool:
    """Whether ``text[pos]`` sits outside ``[...]`` and ``(...)`` (str.count runs in C)."""
    head = text[:pos]
    return head.count("[") <= head.count("]") and head.count("(") <= head.count(")")


def _strip_comment(text: str) -> tuple[str, str | None]:
    # Everything after the first '#' is a comment (the real parser does exactly this).
    pos = text.find("#")
    if pos < 0:
        return text, None
    return text[:pos], text[pos + 1 :].strip() or None


def parse_line(raw: str, loc: SourceLoc, *, waive: bool = False) -> LineResult:
    """Parse one list line. Blank and comment-only lines give no entries."""
    res = LineResult()

    def diag(sev: Severity, msg: str, rule: str) -> None:
        res.diagnostics.append(Diagnostic(loc, sev, msg, rule))

    if _MAKO.search(raw):
        diag(Severity.ERROR, "Mako template line (`%` or `${`) is not supported; "
             "render the template first or remove the line", "mako-line")
        return res
    body, comment = _strip_comment(raw)
    body = body.strip()
    if not body:
        return res
    marker = reason = None
    timeout = None
    isolation = False
    found = [m for m in _MARKER_WORD.finditer(body) if _at_depth0(body, m.start())]
    if found:
        first = found[0]
        test_text = body[: first.start()].rstrip()
        tail = body[first.start() :]
        # Parse markers left to right; TIMEOUT (N) ISOLATION is a real combination.
        pos = 0
        while pos < len(tail):
            m = _MARKER_WORD.match(" " + tail[pos:], 1) if pos else _MARKER_WORD.match(" " + tail, 1)
            if not m:
                diag(Severity.WARNING, f"unexpected text after marker: {tail[pos:].strip()!r}; "
                     "a line carries one marker with an optional (reason)", "marker-trailing")
                break
            word = m.group(1)
            pos += m.end() - 1
            arg = _TIMEOUT_ARG.match(tail, pos)
            if word == "TIMEOUT":
                if not arg or not arg.group(1).isdigit() or int(arg.group(1)) <= 0:
                    diag(Severity.ERROR, "TIMEOUT needs a positive whole number of minutes in "
                         "parentheses, e.g. `TIMEOUT (90)`", "bad-timeout")
                    return res
                timeout = int(arg.group(1))
                pos = arg.end()
            elif word == "ISOLATION":
                isolation = True
            else:
                if marker is not None:
                    diag(Severity.WARNING, f"second marker {word} ignored; one marker per line",
                         "marker-twice")
                marker = word
                if arg:
                    # reasons may hold parentheses themselves: take up to the last ')'
                    close = tail.rfind(")")
                    reason = tail[tail.index("(", pos) + 1 : close].strip()
                    pos = len(tail)
                else:
                    rest = tail[pos:].strip()
                    if rest:
                        diag(Severity.WARNING, f"{word} reason must be in parentheses: "
                             f"write `{word} ({rest})`", "reason-parens")
                        reason = rest
                        pos = len(tail)
            while pos < len(tail) and tail[pos] == " ":
                pos += 1
    else:
        test_text = body
    if waive and marker is None:
        diag(Severity.WARNING, "waive without SKIP/XFAIL/UNSTABLE marker; it is read as SKIP",
             "waive-no-marker")
        marker = "SKIP"
    gpu = None
    m = _FULL_PREFIX.match(test_text)
    if m:
        gpu = m.group(1)
        test_text = test_text[m.end() :]
    for part in _split_several(test_text):
        res.entries.append(_make_entry(part, loc, gpu, marker, reason, timeout, isolation,
                                       comment, res))
    return res


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
    for i, ch in enumerate(text):
        if ch == " " and _at_depth0(text, i):
            if text[start:i]:
                parts.append(text[start:i])
            start = i + 1
    if text[start:]:
        parts.append(text[start:])
    return parts if len(parts) > 1 and all(("/" in p or ".py" in p) for p in parts) else [text]


def _make_entry(text: str, loc: SourceLoc, gpu: str | None, marker: str | None,
                reason: str | None, timeout: int | None, isolation: bool,
                comment: str | None, res: LineResult) -> Entry:
    common = dict(loc=loc, gpu_prefix=gpu, marker=marker, reason=reason,
                  timeout_minutes=timeout, isolation=isolation, comment=comment)
    if text.startswith(UNITTEST_PREFIX):
        return Entry(test=text, kind="unittest", **common)  # type: ignore[arg-type]
    node = split_node_id(text)
    if node is None:
        if " " in text and "[" not in text:
            res.diagnostics.append(Diagnostic(loc, Severity.WARNING,
                f"{text!r} is not an exact node id; pytest options work only on unittest/ "
                "lines", "not-node-id"))
        return Entry(test=text, kind="path", **common)  # type: ignore[arg-type]
    return Entry(test=text, kind="nodeid", **common)  # type: ignore[arg-type]
