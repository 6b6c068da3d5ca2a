"""The packed inventory: the whole-inventory cache's form, read lazily and updated per file.

Building all 100,000+ items of a large checkout costs more than the rest of an audit, which
looks at the few hundred test files that import the changed code. So the cache keeps, per test
file, one marshalled blob of its item rows; the ids, how many ids carry each parameter value,
and a value index come with it. Items are built when a file is first asked for.

A new head of the same tree usually changes a few test files: ``replace_files`` swaps their
blobs and adjusts the ids, counts and index by those files alone, so the next build costs what
the changed files cost. ``value index`` entries are per file (positions within the file's ids),
which keeps every other file's entries valid when one file changes.
"""

from __future__ import annotations

import marshal
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from testdb.inventory.model import WILDCARD, Inventory, InventoryItem, Status, split_params

# value -> [(file, positions in the file's ids, parameter names)]
Entries = dict[str, list[tuple[str, list[int], list[str | None]]]]


def file_blob(items: Iterable[InventoryItem]) -> bytes:
    """One file's items as a packed inventory keeps them; as in ``Inventory``, a test defined
    twice keeps its first place and its last definition."""
    by_id: dict[str, InventoryItem] = {}
    for i in items:
        by_id[i.nodeid] = i
    return marshal.dumps([_row(i) for i in by_id.values()])


def _row(i: InventoryItem) -> tuple[Any, ...]:
    return (i.nodeid, i.file, i.line, i.function, i.classes, i.params, i.markers, i.keywords,
            i.indeterminate, i.source, i.path)


def _entries(ids_by_file: dict[str, list[str]]) -> tuple[Entries, Counter[str]]:
    """The value index entries of these files' ids, and their ``value_counts`` (one pass)."""
    found: Entries = {}
    pieces: list[str] = []
    # The same parameter strings recur across functions and files: split each once.
    parsed: dict[str, tuple[list[tuple[str | None, str]], set[str]]] = {}
    for f, ids in ids_by_file.items():
        per: dict[str, tuple[list[int], list[str | None]]] = {}
        for pos, tid in enumerate(ids):
            b = tid.find("[")
            if b > 0 and tid.endswith("]"):
                params = tid[b + 1:-1]
                got = parsed.get(params)
                if got is None:
                    got = parsed[params] = (
                        [(sys.intern(n) if n is not None else None, v)
                         for n, v in split_params(params)],
                        set(params.replace("=", "-").split("-")))  # as value_counts
                pieces.extend(got[1])
                for name, v in got[0]:
                    where, names = per.setdefault(v, ([], []))
                    where.append(pos)
                    names.append(name)
        for v, (where, names) in per.items():
            found.setdefault(v, []).append((f, where, names))
    return found, Counter(pieces)


class PackedInventory(Inventory):
    """An inventory kept as one marshalled blob of item rows per file (see the module doc).
    Anything that needs every item (iteration, ``by_function``, ``status``) builds them all,
    once."""

    __slots__ = ("_counts", "_full", "_ids_list", "_idset", "_keys", "_loaded", "_odd",
                 "_packed", "_spans", "_values")

    def __init__(self, packed: dict[str, bytes], ids: list[str],
                 spans: dict[str, tuple[int, int]], placeholders: Iterable[InventoryItem],
                 counts: dict[str, int], values: dict[str, bytes], odd: dict[str, str],
                 keys: dict[str, str]) -> None:
        self._packed = packed  # file -> marshal of its item rows, in inventory order
        self._ids_list = ids  # every id but the placeholders', file by file
        self._spans = spans  # file -> (start, stop) of its ids in _ids_list
        self._counts = counts  # value piece -> how many ids carry it
        self._values = values  # value -> marshal of its Entries rows
        self._odd = odd  # node id -> file, where the id does not start with `file::`
        self._keys = keys  # file -> what its blob was built from (see blob_for)
        self._placeholders = tuple(placeholders)
        self._idset: set[str] | None = None
        self._loaded: dict[str, tuple[InventoryItem, ...]] = {}
        self._full = False
        self._bases = self._functions = self._files = None

    # -- building -----------------------------------------------------------------------------
    @classmethod
    def from_blobs(cls, blobs: dict[str, bytes], keys: dict[str, str] | None = None
                   ) -> PackedInventory:
        """From each file's ``file_blob``, in inventory order; ``keys`` say what each blob was
        built from, so that the next build can reuse the blobs of unchanged files."""
        empty = cls({}, [], {}, (), {}, {}, {}, {})
        return empty.replace_files(set(), blobs, keys=keys)

    def replace_files(self, removed: set[str], fresh: dict[str, bytes],
                      order: list[str] | None = None, keys: dict[str, str] | None = None
                      ) -> PackedInventory:
        """This inventory without the files ``removed``, with the ``fresh`` blobs in place of
        (or beside) its own. Files follow ``order``, else the kept ones in their order, then
        the fresh ones. Only the changed files' ids are counted and indexed."""
        if order is None:
            order = [f for f in self._packed if f not in removed | set(fresh)] + list(fresh)
        removed = removed | (set(self._packed) - set(order))  # whatever order leaves out
        changed = removed | set(fresh)
        new_rows = {f: marshal.loads(b) for f, b in fresh.items()}
        new_ids = {f: [r[0] for r in rows if WILDCARD not in r[3]]
                   for f, rows in new_rows.items()}
        packed: dict[str, bytes] = {}
        ids: list[str] = []
        spans: dict[str, tuple[int, int]] = {}
        for f in order:
            blob = fresh.get(f) if f in fresh else (
                self._packed.get(f) if f not in removed else None)
            if blob is None:
                continue
            these = new_ids[f] if f in fresh else self._file_ids(f)
            packed[f] = blob
            spans[f] = (len(ids), len(ids) + len(these))
            ids += these
        rank = {f: n for n, f in enumerate(packed)}
        placeholders = [p for p in self._placeholders if p.file not in changed]
        placeholders += [InventoryItem(*r) for rows in new_rows.values() for r in rows
                         if WILDCARD in r[3]]
        placeholders.sort(key=lambda p: rank.get(p.file, len(rank)))
        odd = {k: v for k, v in self._odd.items() if v not in changed}
        odd.update({r[0]: f for f, rows in new_rows.items() for r in rows
                    if not r[0].startswith(f + "::")})

        removed_entries, removed_counts = _entries(
            {f: self._file_ids(f) for f in changed if f in self._spans})
        added, added_counts = _entries(new_ids)
        counts = Counter(self._counts)
        counts.subtract(removed_counts)
        counts.update(added_counts)
        values = dict(self._values)
        for v in set(removed_entries) | set(added):
            kept = [e for e in (marshal.loads(values[v]) if v in values else ())
                    if e[0] not in changed and e[0] in spans] + added.get(v, [])
            kept.sort(key=lambda e: rank[e[0]])
            if kept:
                values[v] = marshal.dumps(kept)
            else:
                values.pop(v, None)
        new_keys = {f: k for f, k in self._keys.items() if f not in changed and f in packed}
        new_keys.update(keys or {})
        return PackedInventory(packed, ids, spans, placeholders,
                               {k: n for k, n in counts.items() if n > 0}, values, odd,
                               new_keys)

    def blob_for(self, file: str, key: str) -> bytes | None:
        """The file's blob when it was built from ``key`` (the file is unchanged)."""
        return self._packed.get(file) if self._keys.get(file) == key else None

    def _file_ids(self, file: str) -> list[str]:
        start, stop = self._spans.get(file, (0, 0))
        return self._ids_list[start:stop]

    # -- the cache form ---------------------------------------------------------------------
    def state(self) -> tuple[Any, ...]:
        """Plain data (marshal can write it) that ``from_state`` turns back into this."""
        return (self._packed, self._ids_list, self._spans,
                [_row(p) for p in self._placeholders], self._counts, self._values, self._odd,
                self._keys)

    @classmethod
    def from_state(cls, state: tuple[Any, ...]) -> PackedInventory:
        packed, ids, spans, placeholders, counts, values, odd, keys = state
        return cls(packed, ids, spans, [InventoryItem(*r) for r in placeholders], counts,
                   values, odd, keys)

    # -- lazily built -------------------------------------------------------------------------
    def by_file(self, file: str) -> tuple[InventoryItem, ...]:
        got = self._loaded.get(file)
        if got is None:
            blob = self._packed.get(file)
            got = tuple(InventoryItem(*r) for r in marshal.loads(blob)) if blob else ()
            self._loaded[file] = got
        return got

    def get(self, nodeid: str) -> InventoryItem | None:
        file = self._odd.get(nodeid) or nodeid.split("::", 1)[0]
        for i in self.by_file(file):
            if i.nodeid == nodeid:
                return i
        return None

    def by_base(self, base: str) -> tuple[InventoryItem, ...]:
        return tuple(i for i in self.by_file(base.split("::", 1)[0]) if i.base == base)

    def __contains__(self, nodeid: object) -> bool:
        if self._idset is None:
            self._idset = {*self._ids_list, *(p.nodeid for p in self._placeholders)}
        return nodeid in self._idset

    def __len__(self) -> int:
        return len(self._ids_list) + len(self._placeholders)

    def files(self) -> tuple[str, ...]:
        return tuple(self._packed)

    def ids(self) -> list[str]:
        return list(self._ids_list)

    def param_value_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def params_with_value(self, value: str) -> list[tuple[str, str | None]]:
        blob = self._values.get(value)
        out: list[tuple[str, str | None]] = []
        for f, where, names in marshal.loads(blob) if blob else ():
            start, ids = self._spans[f][0], self._ids_list
            out += [(ids[start + p], n) for p, n in zip(where, names, strict=True)]
        return out

    def without_files(self, files: set[str], added: Iterable[InventoryItem] = ()) -> Inventory:
        by_file: dict[str, list[InventoryItem]] = {}
        for i in added:
            by_file.setdefault(i.file, []).append(i)
        return self.replace_files(set(files), {f: file_blob(items)
                                               for f, items in by_file.items()})

    # -- everything else needs every item -----------------------------------------------------
    def _all(self) -> None:
        if not self._full:
            items = [i for f in self._packed for i in self.by_file(f)]
            self._by_id = {i.nodeid: i for i in items}
            self._items = tuple(items)
            self._full = True

    def __iter__(self) -> Iterator[InventoryItem]:
        self._all()
        return super().__iter__()

    @property
    def items(self) -> tuple[InventoryItem, ...]:
        self._all()
        return self._items

    def by_function(self, function: str) -> tuple[InventoryItem, ...]:
        self._all()
        return super().by_function(function)

    def status(self, nodeid: str) -> Status:
        self._all()
        return super().status(nodeid)

    def to_json(self) -> dict[str, Any]:
        self._all()
        return super().to_json()

    def __repr__(self) -> str:
        return f"Inventory({len(self)} items, {len(self._packed)} files)"
