"""Which list lines select each unit-test item, kept on disk per test file's items."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

from testdb.cachestore import Store
from testdb.inventory.model import InventoryItem
from testdb.stamp import code_stamp

# Bump when the layout below changes.
FORMAT = 1
KEEP = 4  # one file per set of list lines (a checkout's branches differ in their lists)

Positions = tuple[int, ...]  # positions of the selecting lines in the cache's line list


class SelectionCache:
    """``SelectionIndex``'s answers for whole test files, in one file per set of lines.

    The file's name is a digest of every ``unittest/...`` line's text, in order (the positions
    stored are into that list), of this package's code and of pytest's version (its
    expression evaluator decides). Each test file's entry holds a digest of the fields of its
    items that selection reads (node id, name, classes, markers, keywords), so an entry is used
    only for the same items: a changed test file is evaluated afresh and its entry replaced.
    Unreadable or damaged files are misses (``read_cache``); a failed write only costs speed.
    """

    def __init__(self, store: Store, key: str,
                 files: dict[str, tuple[bytes, tuple[Positions, ...]]]) -> None:
        self._store, self._key = store, key
        self.path = store.path(key)
        self._files = files
        self._shared: dict[Positions, Positions] = {}  # one object per answer: marshal refs
        self._dirty = False

    @classmethod
    def open(cls, cache_dir: str, lines: Sequence[str]) -> SelectionCache:
        import _pytest._version  # the version alone: the evaluator itself is not imported

        store = Store("selections", FORMAT, cache_dir, keep=KEEP)
        key = store.key(pytest=_pytest._version.version,
                        code=code_stamp(os.path.dirname(os.path.abspath(__file__))),
                        lines=lines)
        files = store.load(key)
        return cls(store, key, files if isinstance(files, dict) else {})

    def get(self, file: str, key: bytes, n: int) -> tuple[Positions, ...] | None:
        """The selecting lines of each of the ``n`` items whose ``items_digest`` is ``key``."""
        entry = self._files.get(file)
        if entry is None or entry[0] != key or len(entry[1]) != n:
            return None
        return entry[1]

    def put(self, file: str, key: bytes, found: Sequence[Positions]) -> None:
        shared = self._shared
        self._files[file] = (key, tuple(shared.setdefault(p, p) for p in found))
        self._dirty = True

    def save(self) -> None:
        if self._dirty:
            self._store.dump(self._key, self._files)
            self._dirty = False


def items_digest(items: Sequence[InventoryItem]) -> bytes:
    """A digest of what selection reads of each item, in order (strings, not marshal: its
    output depends on object identity)."""
    h = hashlib.blake2b(digest_size=16)
    for i in items:
        h.update("\0".join((i.nodeid, i.file, i.function, i.params or "\1",
                            "\1".join(i.classes), "\1".join(i.markers),
                            "\1".join(i.keywords), "\n")).encode())
    return h.digest()
