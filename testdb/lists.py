"""QA ``.txt`` lists, ``waives.txt`` and ``.test_durations``."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from testdb.errors import Diagnostic, Severity, SourceLoc
from testdb.grammar import Entry, parse_line

MAX_BAD_SHOWN = 20  # ignored durations named one by one; the rest are counted


@dataclass
class ListResult:
    entries: list[Entry] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def load_list_text(text: str, path: str, *, waive: bool = False) -> ListResult:
    """Parse a line-oriented list (a QA list or the waive list)."""
    res = ListResult()
    for n, line in enumerate(text.splitlines(), 1):
        parsed = parse_line(line, SourceLoc(path, n), waive=waive)
        res.entries.extend(parsed.entries)
        res.diagnostics.extend(parsed.diagnostics)
    return res


def load_durations_text(text: str, path: str) -> tuple[dict[str, float], list[Diagnostic]]:
    """``{nodeid: seconds}``; a value that is not a number of seconds is dropped with a
    warning naming its key and line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, [Diagnostic(SourceLoc(path, exc.lineno), Severity.ERROR,
                               f"malformed JSON: {exc.msg}; durations are ignored", "json")]
    except (RecursionError, ValueError) as exc:  # nesting past the stack; a 5,000-digit number
        return {}, [Diagnostic(SourceLoc(path, 1), Severity.ERROR,
                               "unreadable JSON: it nests too deeply or holds a number with "
                               f"thousands of digits ({type(exc).__name__}); durations are "
                               "ignored", "json")]
    if not isinstance(data, dict):
        return {}, [Diagnostic(SourceLoc(path, 1), Severity.ERROR,
                               "durations must be a JSON object {nodeid: seconds}", "bad-shape")]
    out: dict[str, float] = {}
    bad: list[tuple[str, object]] = []
    for k, v in data.items():
        if not _is_seconds(v):
            bad.append((str(k), v))
            continue
        out[str(k)] = float(v)
    return out, _bad_durations(text, path, bad)


def _is_seconds(v: object) -> bool:
    """A duration is a finite, non-negative number (JSON's true/false are not numbers)."""
    return (not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
            and v >= 0)


def _bad_durations(text: str, path: str, bad: list[tuple[str, object]]) -> list[Diagnostic]:
    """A warning per ignored value (the first MAX_BAD_SHOWN, then one for the rest), naming
    the key and its line: the test then counts as of unknown duration, which pytest-split
    replaces by the average of the known ones."""
    diags = []
    for key, value in bad[:MAX_BAD_SHOWN]:
        try:
            shown = json.dumps(value, ensure_ascii=False, allow_nan=True)
        except (RecursionError, ValueError):
            shown = f"a deeply nested {type(value).__name__}"
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        diags.append(Diagnostic(
            SourceLoc(path, _line_of_key(text, key)), Severity.WARNING,
            f"the duration of {key!r} is {shown}, not a number of seconds; it is ignored (the "
            "test counts as of unknown duration, pytest-split's average); write seconds, "
            "e.g. 12.5", "bad-duration"))
    if len(bad) > MAX_BAD_SHOWN:
        diags.append(Diagnostic(SourceLoc(path, 1), Severity.WARNING,
                                f"{len(bad) - MAX_BAD_SHOWN} more duration(s) are not numbers "
                                "of seconds and were ignored", "bad-duration"))
    return diags


def _line_of_key(text: str, key: str) -> int:
    """The line of ``"key":`` in the JSON text (its last occurrence: json keeps the last of
    duplicate keys); 1 when it is written in a form not found (escapes chosen otherwise).
    json reports no positions for values it parsed, and a second parser only for this would
    cost more than the search."""
    for quoted in dict.fromkeys((json.dumps(key, ensure_ascii=False), json.dumps(key))):
        at = -1
        for m in re.finditer(re.escape(quoted) + r"\s*:", text):
            at = m.start()
        if at >= 0:
            return text.count("\n", 0, at) + 1
    return 1
