"""The behaviour changes of a change's Python files, kept between audits.

``auditor.behaviour.behaviours`` of a file is a function of that file's change alone (both
paths, both texts, the changed lines) and of the code that reads it (this package, Python's
``ast``). An audit of the same change that the audit memo cannot answer (other options, a
``/bot run`` command, another plan, the measured map) parses and compares both sides of every
changed module again: ~15 ms for the benchmark tree's 20-module change on this project's
2-core machine. One record per change holds every file's behaviours and notes; a change no
audit saw is a miss, judged and kept (one small write).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from auditor.behaviour import Behaviour
from auditor.diff import FileChange
from testdb.cachestore import Store
from testdb.stamp import code_stamp

FORMAT = 1  # bump when the record's layout changes
KEEP = 16  # the changes of the last audits: a PR's pushes, the replays of a few commits

Found = tuple[list[Behaviour], list[str]]


def _key(store: Store, files: Sequence[FileChange]) -> str:
    return store.key(python=sys.version, code=code_stamp(os.path.dirname(os.path.abspath(
        __file__))), files=[part for fc in files for part in (
            fc.old_path or "\1", fc.new_path or "\1", fc.old_text or "\1", fc.new_text or "\1",
            ",".join(map(str, sorted(fc.added))), ",".join(map(str, sorted(fc.removed))))])


def behaviours_of(files: Sequence[FileChange], judge: Callable[[FileChange], Found],
                  cache_dir: str | None) -> list[Found]:
    """``[judge(fc) for fc in files]``, kept under ``cache_dir`` (None: not kept)."""
    if cache_dir is None or not files:
        return [judge(fc) for fc in files]
    store = Store("behaviours", FORMAT, cache_dir, keep=KEEP)
    key = _key(store, files)
    kept = store.load(key)
    try:
        if isinstance(kept, list) and len(kept) == len(files):
            return [([Behaviour(*row) for row in rows], list(notes)) for rows, notes in kept]
    except TypeError:  # another layout under the same format: judged afresh
        pass
    found = [judge(fc) for fc in files]
    store.dump(key, [([_row(b) for b in bs], notes) for bs, notes in found])
    return found


def _row(b: Behaviour) -> tuple[object, ...]:
    return (b.path, b.module, b.qualname, b.kind, b.status, b.line, b.added, b.removed,
            b.tokens, b.parse_error, b.gone)
