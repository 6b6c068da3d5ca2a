"""QA ``.txt`` lists, ``waives.txt`` and ``.test_durations``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from testdb.errors import Diagnostic, Severity, SourceLoc
from testdb.grammar import Entry, parse_line


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
    """``{nodeid: seconds}``; non-numeric or negative values are reported and dropped."""
    diags: list[Diagnostic] = []
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
    bad = 0
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            bad += 1
            continue
        out[str(k)] = float(v)
    if bad:
        diags.append(Diagnostic(SourceLoc(path, 1), Severity.WARNING,
                                f"{bad} duration(s) are not non-negative numbers and were "
                                "ignored", "bad-duration"))
    return out, diags
