"""What the tests of each test module reach (the symbol tier's filter), kept per import graph.

``Candidates.linkable`` resolves every test function of each test module that imports a
changed module, into what any of them reaches, calls unresolved, or names (a class): ~1,500
test functions for the benchmark tree's change, 14-23 ms on this project's 2-core machine.
That index is a function of the head side's import graph alone (its modules, their code,
the names' definers) and of the code that resolves (this package). An audit whose graph
is one already judged (the same tree and change: another ``--bot-command``, another plan,
the audit memo gone) reads it back; a new diff's graph is another, and a miss.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from testdb.cachestore import Store
from testdb.stamp import code_stamp

FORMAT = 1  # bump when the record's layout changes
KEEP = 8  # one file per graph: the trees and changes of the last audits

# module -> (units reached, names called unresolved, classes named) by any of its tests
Entry = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


class ReachMemo:
    """The index entries of one graph's test modules."""

    def __init__(self, store: Store, key: str, entries: dict[str, Entry]) -> None:
        self._store, self._key, self._entries = store, key, entries
        self._dirty = False

    @classmethod
    def open(cls, cache_dir: str, graph_key: str) -> ReachMemo:
        """``graph_key``: what identifies the graph's content (``ImportGraph.key``)."""
        store = Store("reach", FORMAT, cache_dir, keep=KEEP)
        key = store.key(graph=graph_key, python=sys.version,
                        code=code_stamp(os.path.dirname(os.path.abspath(__file__))))
        kept: Any = store.load(key)
        return cls(store, key, kept if isinstance(kept, dict) else {})

    def get(self, module: str) -> Entry | None:
        entry = self._entries.get(module)
        try:
            units, unresolved, classes = entry  # type: ignore[misc]
        except (TypeError, ValueError):  # none, or a layout this code does not know
            return None
        return tuple(units), tuple(unresolved), tuple(classes)

    def put(self, module: str, entry: Entry) -> None:
        self._entries[module] = entry
        self._dirty = True

    def save(self) -> None:
        if self._dirty:
            self._store.dump(self._key, self._entries)
            self._dirty = False
