"""The note a text result starts with when some of its input could not be read."""

from __future__ import annotations

from collections.abc import Iterable

DURATIONS = ".test_durations"  # only shard estimates read it: its problems are warnings


def unread_note(error_paths: Iterable[str], what: str = "these verdicts", shown: int = 3) -> str:
    """``note: ...`` naming the files with unreadable input (the paths of error diagnostics),
    or "" when there are none. The errors themselves go to stderr, before the result."""
    paths = [p for p in dict.fromkeys(error_paths) if p and not p.endswith(DURATIONS)]
    if not paths:
        return ""
    names = ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more"
                                        if len(paths) > shown else "")
    return f"note: what could not be read in {names} is left out of {what} (errors on stderr)"
