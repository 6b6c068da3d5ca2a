"""Where promote and demote took each line from, so that moving it back restores its place."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from testdb.files import read_cache, write_cache

KEEP = 500  # records kept; a move older than that goes to the end of its block, as before


@dataclass(frozen=True)
class Origin:
    """One moved line: its file (relative to the checkout), its text, the context and stage
    term of the block it left, and the entry lines around it there (``None`` at an end)."""

    path: str
    text: str
    context: str
    stage: str
    before: str | None
    after: str | None


def journal_path() -> str:
    from testdb.index import cache_dir

    return os.path.join(cache_dir(), "moves.json")


def load(path: str | None = None) -> list[Origin]:
    """The recorded moves, newest last; a missing or damaged journal is an empty one (it is
    only a hint: without it a line goes to the end of its block)."""
    data = read_cache(path or journal_path())
    if data is None:
        return []
    try:
        rows = json.loads(data)
        return [Origin(**row) for row in rows if isinstance(row, dict)]
    except (ValueError, TypeError):
        return []


def record(origins: Iterable[Origin], path: str | None = None) -> None:
    target = path or journal_path()
    new = list(origins)
    keys = {(o.path, o.text) for o in new}
    rows = [o for o in load(target) if (o.path, o.text) not in keys] + new
    os.makedirs(os.path.dirname(target), exist_ok=True)
    write_cache(target, json.dumps([asdict(o) for o in rows[-KEEP:]]).encode(), keep=None)


def origin_of(journal: Sequence[Origin], path: str, text: str, context: str, stage: str
              ) -> Origin | None:
    """The latest record of ``text`` leaving a ``stage`` block of ``context`` in ``path``."""
    return next((o for o in reversed(journal) if (o.path, o.text, o.context, o.stage)
                 == (path, text, context, stage)), None)
