"""The packed inventory: the whole-inventory cache's form, read lazily and updated per file.

Building all 100,000+ items of a large checkout costs more than the rest of an audit, which
looks at the few hundred test files that import the changed code. So the cache keeps, per test
file, one marshalled blob of its item rows and one of its ids, plus the value counts and a
value index; items are built when a file is first asked for. On disk it is a records file
(``testdb.files.write_records``): opening it reads the sealed header alone, and each blob is
read, and its crc32 checked, when first asked for; a blob that fails its check makes the
inventory rebuild itself (``open``'s ``rebuild``) and answer from that.

A new head of the same tree usually changes a few test files: ``replace_files`` gives an
inventory holding the changed files' blobs that asks its parent for the others, adjusting the
counts and index by those files alone (index entries are positions within a file's ids, so
every other file's entries stay valid).

The file is a cache like the others (``testdb/cachestore.py``'s key table, row ``whole``):
written atomically, its layout (``FORMAT``) in its sealed header, a damaged or foreign file a
miss. It keeps its own records format, read lazily, since a warm audit reads a few hundred of
its thousands of records; the builder names it by its key (``testdb.inventory.build``).
"""

from __future__ import annotations

import marshal
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from testdb.files import Records, write_records
from testdb.inventory.model import WILDCARD, Inventory, InventoryItem, Status
from testdb.inventory.packed_rows import (
    Prepared,
    entries,
    file_blob,
    names_text,
    pattern_name,
    prepared_blob,
)
from testdb.inventory.packed_rows import row as _row

__all__ = ["FORMAT", "PackedInventory", "Prepared", "file_blob"]

# v4: a placeholder row may carry the error of a file that does not parse; v5: the names record
FORMAT = "packed-v5"


class _Stored:
    """The blobs of a packed inventory file: record numbers by name, read when asked for."""

    def __init__(self, records: Records, files: tuple[str, ...], values: list[str]) -> None:
        self.records = records
        n = len(files)
        self.rows = {f: 2 * k for k, f in enumerate(files)}
        self.values = {v: 2 * n + k for k, v in enumerate(values)}
        self.keys = 2 * n + len(values)
        self.names = self.keys + 1  # every file's names_text, in order: one record

    def get(self, record: int) -> bytes | None:
        """The record, or None when it fails its check (or the file no longer reads)."""
        try:
            return self.records.get(record)
        except (OSError, ValueError):
            return None


class _Damaged(Exception):
    """A record of the cache file failed its check."""


class PackedInventory(Inventory):
    """An inventory kept as marshalled blobs per file (see the module doc). Anything that
    needs every item (iteration, ``by_function``, ``status``) builds them all, once."""

    __slots__ = ("_counts", "_determinate", "_file_index", "_full", "_idsets", "_keys",
                 "_loaded", "_n", "_odd", "_order", "_own_ids", "_own_names", "_own_rows",
                 "_own_values", "_parent", "_rank", "_rebuild", "_stored", "_value_names")

    def __init__(self, order: tuple[str, ...], rows: dict[str, bytes],
                 ids: dict[str, list[str] | bytes], values: dict[str, bytes | None],
                 value_names: set[str], counts: dict[str, int], odd: dict[str, str],
                 placeholders: Iterable[InventoryItem], keys: dict[str, str] | None,
                 n_ids: int, parent: PackedInventory | None = None,
                 stored: _Stored | None = None,
                 rebuild: Callable[[], PackedInventory] | None = None,
                 names: dict[str, str] | None = None) -> None:
        self._order = order  # the files, in inventory order
        self._rank = {f: k for k, f in enumerate(order)}
        self._own_rows = rows  # file -> marshal of its item rows (else: the parent's, stored)
        self._own_ids = ids  # file -> its ids but the placeholders' (or their marshal)
        self._own_values = values  # value -> marshal of its Entries rows; None: no entries
        self._value_names = value_names  # every value with index entries
        self._counts = counts  # value piece -> how many ids carry it
        self._odd = odd  # node id -> file, where the id does not start with `file::`
        self._keys = keys  # file -> what its blob was built from (None: stored, not read yet)
        self._n = n_ids
        self._own_names = names or {}  # file -> its names_text (else: computed, or stored)
        self._parent, self._stored, self._rebuild = parent, stored, rebuild
        self._placeholders = tuple(placeholders)
        self._idsets: dict[str, set[str]] = {}
        self._loaded: dict[str, tuple[InventoryItem, ...]] = {}
        self._determinate: dict[str, list[str] | None] = {}  # determinate_ids, by file
        self._file_index: dict[str, dict[str, InventoryItem]] = {}  # get(), by file
        self._full = False
        self._bases = self._functions = self._files = None

    # -- building -----------------------------------------------------------------------------
    @classmethod
    def from_blobs(cls, blobs: dict[str, bytes], keys: dict[str, str] | None = None
                   ) -> PackedInventory:
        """From each file's ``file_blob``, in inventory order; ``keys`` say what each blob was
        built from, so that the next build can reuse the blobs of unchanged files."""
        empty = cls((), {}, {}, {}, set(), {}, {}, (), {}, 0)
        return empty.replace_files(set(), blobs, keys=keys)

    def replace_files(self, removed: set[str], fresh: dict[str, bytes],
                      order: list[str] | None = None, keys: dict[str, str] | None = None,
                      prepared: dict[str, Prepared] | None = None) -> PackedInventory:
        """This inventory without the files ``removed``, with the ``fresh`` blobs (or the
        ``prepared`` files) in place of or beside its own. Files follow ``order``, else the
        kept ones in their order, then the fresh ones. Only the changed files' ids are counted
        and indexed; the others' blobs are this inventory's, read from it when asked for."""
        new = {f: prepared_blob(f, b) for f, b in fresh.items()}
        new.update(prepared or {})
        if order is None:
            order = [f for f in self._order if f not in removed | set(new)] + list(new)
        removed = removed | (set(self._order) - set(order))  # whatever order leaves out
        changed = removed | set(new)
        new_ids = {f: p.ids for f, p in new.items()}
        files = tuple(f for f in order if f in new or (f in self._rank and f not in removed))
        rank = {f: n for n, f in enumerate(files)}
        placeholders = [p for p in self._placeholders if p.file not in changed]
        placeholders += [InventoryItem(*r) for p in new.values() for r in p.placeholders]
        placeholders.sort(key=lambda p: rank.get(p.file, len(rank)))
        odd = {k: v for k, v in self._odd.items() if v not in changed}
        odd.update({i: f for f, p in new.items() for i in p.odd})

        old_ids = {f: self._file_ids(f) for f in changed if f in self._rank}
        removed_entries, removed_pieces = entries(old_ids)
        added: dict[str, list[tuple[str, list[int], list[str | None]]]] = {}
        counts = Counter(self._counts)
        counts.subtract(removed_pieces)
        for f, p in new.items():
            counts.update(p.pieces)
            for v, (where, pnames) in p.entries.items():
                added.setdefault(v, []).append((f, where, pnames))
        values: dict[str, bytes | None] = {}
        names = set(self._value_names)
        for v in set(removed_entries) | set(added):
            blob = self._value(v)
            kept = [e for e in (marshal.loads(blob) if blob else ())
                    if e[0] not in changed and e[0] in rank] + added.get(v, [])
            kept.sort(key=lambda e: rank[e[0]])
            values[v] = marshal.dumps(kept) if kept else None
            (names.add if kept else names.discard)(v)
        n = self._n - sum(map(len, old_ids.values())) + sum(map(len, new_ids.values()))
        return PackedInventory(files, {f: p.blob for f, p in new.items()}, dict(new_ids), values,
                               names, {k: c for k, c in counts.items() if c > 0}, odd,
                               placeholders, dict(keys or {}), n, parent=self,
                               names={f: p.names for f, p in new.items()})

    def blob_for(self, file: str, key: str) -> bytes | None:
        """The file's blob when it was built from ``key`` (the file is unchanged)."""
        return self._blob(file) if self.file_key(file) == key else None

    # -- where each blob is -------------------------------------------------------------------
    def _blob(self, file: str) -> bytes | None:
        """The file's item rows (None: not a file of this inventory)."""
        if file not in self._rank:
            return None
        if file in self._own_rows:
            return self._own_rows[file]
        if self._parent is not None:
            return self._parent._blob(file)
        blob: bytes | None = self._read(lambda s: s.rows[file], False, lambda: self._blob(file))
        return blob

    def _file_ids(self, file: str) -> list[str]:
        if file not in self._rank:
            return []
        got = self._own_ids.get(file)
        if isinstance(got, bytes):  # kept as read (see materialized)
            got = marshal.loads(got)
        elif got is None:
            if self._parent is not None:
                got = self._parent._file_ids(file)
            else:
                got = self._read(lambda s: s.rows[file] + 1, True, lambda: self._file_ids(file))
        self._own_ids[file] = got
        return got

    def _ids_blob(self, file: str) -> bytes:
        """The marshalled ids of a file, as read when they were (not decoded and encoded)."""
        got = self._own_ids.get(file)
        if isinstance(got, bytes):
            return got
        if file not in self._own_rows and self._parent is not None:
            return self._parent._ids_blob(file)
        if got is None and self._stored is not None:
            blob: bytes = self._read(lambda s: s.rows[file] + 1, False,
                                     lambda: self._ids_blob(file))
            return blob
        return marshal.dumps(self._file_ids(file))

    def _names(self, file: str) -> str:
        """The file's ``names_text``: given with its blob, the parent's, read with every other
        file's from the stored record, or made from its ids."""
        got = self._own_names.get(file)
        if got is not None:
            return got
        if file not in self._own_rows and self._parent is not None:
            return self._parent._names(file)
        if self._stored is not None and file not in self._own_rows:
            texts = self._read(lambda s: s.names, True, lambda: None)
            if isinstance(texts, list) and len(texts) == len(self._order):
                self._own_names.update(zip(self._order, texts, strict=True))
                return self._own_names[file]
        got = self._own_names[file] = names_text(self._file_ids(file))
        return got

    def _value(self, value: str) -> bytes | None:
        if value in self._own_values:
            return self._own_values[value]
        if self._parent is not None:
            return self._parent._value(value)
        if value not in self._value_names:
            return None
        blob: bytes | None = self._read(lambda s: s.values[value], False,
                                        lambda: self._value(value))
        return blob

    def file_key(self, file: str) -> str | None:
        """What the file's blob was built from (its content and the scan's configuration:
        ``testdb.inventory.cache.file_key``), or None: not a file of this inventory, or a
        blob given without a key (a test file changed by a diff, scanned from its text)."""
        if file not in self._rank:
            return None
        if self._keys is None:  # stored: all the keys are one record
            self._keys = self._read(lambda s: s.keys, True, lambda: self._keys)
        if file in self._keys:
            return self._keys[file]
        if file in self._own_rows or self._parent is None:
            return None  # this blob is not the parent's: its key is not either
        return self._parent.file_key(file)

    def _read(self, record: Callable[[_Stored], int], decode: bool, again: Callable[[], Any]
              ) -> Any:
        """Record ``record`` of the stored file (unmarshalled when ``decode``); when it fails
        its check, the inventory is rebuilt and the answer is ``again()``, asked of that."""
        assert self._stored is not None
        data = self._stored.get(record(self._stored))
        try:
            if data is None:
                raise _Damaged
            return marshal.loads(data) if decode else data
        except (_Damaged, ValueError, EOFError, TypeError):
            self._recover()
            return again()

    def _recover(self) -> None:
        """Take the rebuilt inventory's contents as this one's own."""
        if self._rebuild is None:
            raise RuntimeError("a packed inventory file is damaged and cannot be rebuilt")
        good = self._rebuild().materialized()
        self._order, self._rank = good._order, good._rank
        self._own_rows, self._own_ids = good._own_rows, good._own_ids
        self._own_values, self._value_names = good._own_values, good._value_names
        self._counts, self._odd, self._keys = good._counts, good._odd, good._keys
        self._own_names = good._own_names
        self._placeholders, self._n = good._placeholders, good._n
        self._stored = self._rebuild = None
        self._idsets.clear()

    def materialized(self) -> PackedInventory:
        """The same inventory with every blob in memory (read, and checked, now): a root of
        its own, whatever it was built on."""
        rows = {f: self._blob(f) or b"" for f in self._order}
        ids: dict[str, list[str] | bytes] = {f: self._ids_blob(f) for f in self._order}
        values: dict[str, bytes | None] = {v: self._value(v) for v in self._value_names}
        keys = {f: k for f in self._order if (k := self.file_key(f)) is not None}
        return PackedInventory(self._order, rows, ids, values, set(self._value_names),
                               dict(self._counts), dict(self._odd), self._placeholders, keys,
                               self._n, names={f: self._names(f) for f in self._order})

    # -- the cache forms ----------------------------------------------------------------------
    def state(self) -> tuple[Any, ...]:
        """Plain data (marshal can write it) that ``from_state`` turns back into this: the
        blobs, the ids and each file's span of them, the placeholders, the counts, the value
        index, the odd ids and the keys."""
        ids: list[str] = []
        spans: dict[str, tuple[int, int]] = {}
        for f in self._order:
            these = self._file_ids(f)
            spans[f] = (len(ids), len(ids) + len(these))
            ids += these
        values = {v: b for v in self._value_names if (b := self._value(v)) is not None}
        return ({f: self._blob(f) for f in self._order}, ids, spans,
                [_row(p) for p in self._placeholders], dict(self._counts), values,
                dict(self._odd), {f: k for f in self._order if (k := self.file_key(f))})

    @classmethod
    def from_state(cls, state: tuple[Any, ...]) -> PackedInventory:
        packed, ids, spans, placeholders, counts, values, odd, keys = state
        return cls(tuple(packed), dict(packed), {f: ids[a:b] for f, (a, b) in spans.items()},
                   dict(values), set(values), counts, odd,
                   [InventoryItem(*r) for r in placeholders], keys, len(ids))

    def write(self, path: str, *, keep: int = 3) -> None:
        """The records file ``open`` reads (written atomically; failures only cost speed)."""
        values = sorted(self._value_names)
        records: list[bytes] = []
        for f in self._order:
            records += [self._blob(f) or b"", self._ids_blob(f)]
        records += [self._value(v) or b"" for v in values]
        records.append(marshal.dumps({f: k for f in self._order if (k := self.file_key(f))}))
        records.append(marshal.dumps([self._names(f) for f in self._order]))
        meta = marshal.dumps((FORMAT, self._order, values, dict(self._counts),
                              dict(self._odd), [_row(p) for p in self._placeholders], self._n))
        write_records(path, meta, records, keep=keep)

    @classmethod
    def open(cls, path: str, rebuild: Callable[[], PackedInventory] | None = None
             ) -> PackedInventory | None:
        """The inventory of a ``write`` file, its blobs read when asked for; None when the
        file is missing, its header damaged, or of another layout. ``rebuild``: what to answer
        from when a blob turns out damaged."""
        records = Records.open(path)
        if records is None:
            return None
        try:
            fmt, order, values, counts, odd, placeholders, n = marshal.loads(records.meta)
            if fmt != FORMAT or len(records) != 2 * len(order) + len(values) + 2:
                raise ValueError(fmt)
            stored = _Stored(records, tuple(order), values)
            return cls(tuple(order), {}, {}, {}, set(values), counts, odd,
                       [InventoryItem(*r) for r in placeholders], None, n, stored=stored,
                       rebuild=rebuild)
        except Exception:  # another version's layout, or damage the seal let through
            records.close()
            return None

    # -- lazily built -------------------------------------------------------------------------
    def by_file(self, file: str) -> tuple[InventoryItem, ...]:
        got = self._loaded.get(file)
        if got is None:
            blob = self._blob(file)
            got = tuple(InventoryItem(*r) for r in marshal.loads(blob)) if blob else ()
            self._loaded[file] = got
        return got

    def get(self, nodeid: str) -> InventoryItem | None:
        file = self._odd.get(nodeid) or nodeid.split("::", 1)[0]
        by_id = self._file_index.get(file)
        if by_id is None:  # an audit asks for every id of a unit-test file: one dict per file
            by_id = self._file_index[file] = {i.nodeid: i for i in self.by_file(file)}
        return by_id.get(nodeid)

    def determinate_ids(self, file: str) -> list[str] | None:
        # From the rows, building no item: the module tier asks this of thousands of files.
        if file in self._loaded:
            return super().determinate_ids(file)
        if file not in self._determinate:
            blob = self._blob(file)
            rows = [r for r in marshal.loads(blob) if WILDCARD not in r[3]] if blob else []
            self._determinate[file] = (None if any(r[8] for r in rows)  # as in row()
                                       else [r[0] for r in rows])
        return self._determinate[file]

    def by_base(self, base: str) -> tuple[InventoryItem, ...]:
        return tuple(i for i in self.by_file(base.split("::", 1)[0]) if i.base == base)

    def __contains__(self, nodeid: object) -> bool:
        if not isinstance(nodeid, str):
            return False
        file = self._odd.get(nodeid) or nodeid.split("::", 1)[0]
        if file in self._rank:
            if file not in self._idsets:
                self._idsets[file] = set(self._file_ids(file))
            if nodeid in self._idsets[file]:
                return True
        return any(p.nodeid == nodeid for p in self._placeholders)

    def lacking(self, ids: Iterable[str]) -> list[str]:
        # ``__contains__`` of each id with its look-ups hoisted: the audit asks this of every
        # listed id (4,500 in data/trtllm's plan), 4 ms one by one, 1 ms so.
        odd, rank, placeholders = self._odd, self._rank, {p.nodeid for p in self._placeholders}
        out: list[str] = []
        for nodeid in ids:
            file = odd.get(nodeid) or nodeid.split("::", 1)[0]
            if file in rank:
                idset = self._idsets.get(file)
                if idset is None:
                    idset = self._idsets[file] = set(self._file_ids(file))
                if nodeid in idset:
                    continue
            if nodeid not in placeholders:
                out.append(nodeid)
        return out

    def __len__(self) -> int:
        return self._n + len(self._placeholders)

    def files(self) -> tuple[str, ...]:
        return self._order

    def ids(self) -> list[str]:
        return [i for f in self._order for i in self._file_ids(f)]

    def ids_naming(self, pattern: str) -> list[str]:
        """Every id ``testdb.query.match_ids(ids, pattern)`` can give for a pattern without
        wildcards (and others: the caller matches them), in ``ids()`` order, reading only the
        ids of the files whose ``names_text`` holds the pattern's name: one record (a tenth of
        the ids' size) instead of every file's ids."""
        name = pattern_name(pattern)
        return [i for f in self._order if name in self._names(f) for i in self._file_ids(f)]

    def ids_starting(self, prefix: str) -> list[str]:
        """``[i for i in self.ids() if i.startswith(prefix)]``, reading only the files whose
        ids can: those named so, and those of ids that do not start with their file."""
        files = {f for f in self._order if f.startswith(prefix)}
        files |= {f for i, f in self._odd.items() if i.startswith(prefix)}
        return [i for f in self._order if f in files for i in self._file_ids(f)
                if i.startswith(prefix)]

    def param_value_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def params_with_value(self, value: str) -> list[tuple[str, str | None]]:
        blob = self._value(value)
        out: list[tuple[str, str | None]] = []
        for f, where, names in marshal.loads(blob) if blob else ():
            ids = self._file_ids(f)
            out += [(ids[p], n) for p, n in zip(where, names, strict=True)]
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
            items = [i for f in self._order for i in self.by_file(f)]
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
        return f"Inventory({len(self)} items, {len(self._order)} files)"
