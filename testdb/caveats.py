"""What an answer must say when the gate rules it rests on were not found (issue 23).

No imports: the warm paths of ``where`` and ``stats`` read it without loading any records."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

GATES_UNKNOWN = ("gate rules unknown: no L0_MergeRequest.groovy or --triggers; multi-GPU and "
                 "auto-trigger stages are assumed not to start")
# The verdict that unknown gates can make wrong in a PR-independent answer: a post-merge-only
# test may be opened by an auto-trigger tag no rule names. `pre-merge` (a PR that changes
# nothing starts it) and `gated` (--add-multi-gpu-test starts it) hold without the rules.
GATE_DEPENDENT = ("post-merge-only",)


def gate_caveats(source: str | None) -> tuple[str, ...]:
    """What an answer built on the gates of ``source`` (the gates file found or given; None
    or "" when there is none) must say of them."""
    return () if source else (GATES_UNKNOWN,)


def verdict_caveats(source: str | None, verdicts: Iterable[str]) -> tuple[str, ...]:
    """``gate_caveats`` for a PR-independent answer (``where``, ``stats``): only when one of
    its ``verdicts`` (an iterable of verdict words) depends on the gates."""
    if source or not any(v in GATE_DEPENDENT for v in verdicts):
        return ()
    return (GATES_UNKNOWN,)
