"""Input problems as the commands report them: stderr lines and the note on unread input."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # (path, line, severity, message, rule): a diagnostic as plain values, which the warm
    # stats answer (reports/entry.py) prints without importing the record classes
    from testdb.stats import DiagRow

DURATIONS = ".test_durations"  # only shard estimates read it: its problems are warnings
LIMIT = 50  # diagnostics printed at most
_RANK = {"error": 2, "warning": 1, "info": 0}


def as_reported(row: DiagRow) -> DiagRow:
    """A ``.test_durations`` error is a warning: only shard estimates read the file, so every
    answer stands (a warning with a result is exit 0, issue 16.12)."""
    path, line, sev, msg, rule = row
    return (path, line, "warning", msg, rule) if sev == "error" and _durations(path) else row


def diagnostic_lines(rows: Iterable[DiagRow], *, quiet_warnings: bool = False,
                     limit: int = LIMIT) -> tuple[list[str], int]:
    """The stderr lines of these diagnostics (errors first, then by place; the commands print
    them before their result) and the exit code they imply. ``quiet_warnings`` leaves out
    warnings, but never those of ``.test_durations`` (a value it ignored changes the shard
    numbers printed)."""
    ds = sorted((as_reported(r) for r in rows), key=lambda r: (-_RANK[r[2]], r[0], r[1]))
    shown = [r for r in ds if not (quiet_warnings and r[2] != "error" and not _durations(r[0]))]
    lines = []
    for path, line, sev, msg, rule in shown[:limit]:
        suffix = ("; shard numbers assume unknown durations"
                  if _durations(path) and rule != "bad-duration" else "")
        lines.append(f"{f'{path}:{line}' if line else path}: {sev}: {msg}{suffix}")
    if len(shown) > limit:
        lines.append(f"... and {len(shown) - limit} more (see `testdb lint`)")
    return lines, 2 if any(r[2] == "error" for r in ds) else 0


def _durations(path: str) -> bool:
    return path.endswith(DURATIONS)


def unread_note(error_paths: Iterable[str], what: str = "these verdicts", shown: int = 3) -> str:
    """``note: ...`` naming the files with unreadable input (the paths of error diagnostics),
    or "" when there are none. The errors themselves go to stderr, before the result."""
    paths = [p for p in dict.fromkeys(error_paths) if p and not _durations(p)]
    if not paths:
        return ""
    names = ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more"
                                        if len(paths) > shown else "")
    return f"note: what could not be read in {names} is left out of {what} (errors on stderr)"
