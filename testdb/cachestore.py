"""The caches' one store: key -> record, written atomically, a damaged entry a miss.

Every cache of the tool keeps answers that are functions of some inputs, and a kept answer is
stale exactly when an input changed that its key does not name. So every key is made here, by
``cache_key``: it always mixes in the tool's version, the cache's kind and the layout of its
records (``fmt``), then each named ingredient. The table says what each cache keys on, and so
what can make its answer stale (below it: what no key holds).

==============  ===============================  ==========================================
cache (kind)    module                           keyed on (ingredients)
==============  ===============================  ==========================================
``stamp``       ``testdb/stamp.py``              identity (``plan_stamp``: the plan layout,
                                                 the ``testdb`` code stamp, the root as given
                                                 and resolved, explicit input paths; the
                                                 inventory's and the graph's stamps name
                                                 theirs); the record holds each input's stat
                                                 and sha256 and each listed directory's stat:
                                                 any change of one is a miss
``inventory``   ``testdb/inventory/cache.py``    one test file's scan (``file_key``): the
                                                 scanner's ``SCHEMA``, the file's bytes, the
                                                 static config's fingerprint (its settings,
                                                 ``SCAN_RULES``, pytest's collection rules),
                                                 the file's id and its ``-k`` directories;
                                                 kept inside the whole inventories
``whole``       ``testdb/inventory/packed.py``   (key made by ``build``) every file's
                                                 ``file_key`` and shown path and
                                                 ``tree.whole_format`` (the inventory code
                                                 stamp); ``packed.FORMAT`` in the header
``decorator``   ``testdb/inventory/memo.py``     in-process only: the decorator's text, the
                                                 import aliases it names, the config's
                                                 fingerprint, the function's name for
                                                 ``expand``, each constant it names with
                                                 its value's text (never on disk)
``selections``  ``inventory/select_cache.py``    pytest's version, the inventory code stamp,
                                                 every ``unittest/...`` line in order; each
                                                 entry the digest of its items' fields
``parts``       ``auditor/part_memo.py``         ``tool_key``, the plan's key, the started
                                                 stages; each entry its file's ``file_key``
``behaviours``  ``auditor/behaviour_memo.py``    Python's version, the ``auditor`` code
                                                 stamp, each changed Python file's paths,
                                                 both texts and changed lines
``reach``       ``auditor/reach_memo.py``        the import graph's key (its plain form's
                                                 name: the tree's content and the change),
                                                 the ``auditor`` code stamp, Python's version
``audit``       ``reports/audit_memo.py``        ``tool_key``, the change (both commits,
                                                 paths, changed lines, both texts, files
                                                 outside the root), the root as given and
                                                 resolved, options given outside the checkout
                                                 (by content), coverage data (path and
                                                 content), the ``/bot run`` text
``audittext``   ``reports/audit_memo.py``        the answer's key and sha256, render options
``rec``         ``auditor/replay/cache.py``      ``RECORD_VERSION``, ``tool_key``, the
                                                 options' key, the commit and its parent
==============  ===============================  ==========================================

``tool_key`` (``testdb.stamp``): the tool's version, Python's and pytest's versions and the
modules (name and mtime) of every package directory of ``testdb``, ``auditor``, ``reports``.

Not yet on this store (their modules were other helpers' while it was built), with their own
keys: the plan's index pickle and ``stats`` (``testdb/index.py``, ``testdb/stats.py``: the tool's
version, the plan schema and ``testdb`` code stamp, each input's role, name and sha256), the
``where`` records (``testdb/query.py``: the plan's key), the import graph's caches
(``auditor/graph.py``: file contents, the tree, the change's head-side texts) and the unit-test
ids beside a whole inventory (``testdb/inventory/build.py``: the whole inventory's key).

What no key holds, so what can make an answer stale: the versions of PyYAML and networkx (not
in the plan's or the graph's keys, so not in the answers built on them: after upgrading one,
run once with ``--no-cache`` or empty ``$TESTDB_CACHE_DIR``); an edit of the tool's code that
keeps every module's mtime (code stamps are by mtime, which an editable install changes); and
for one file's scan, the scanner's code itself (``SCHEMA`` and ``SCAN_RULES`` are bumped by
hand when its output for the same source changes).

A record file is sealed (``testdb.files.write_cache``: magic, sha256, payload) and its payload
starts with its kind and format, so a file cut short, scribbled on, or written by another
layout under the same name is a miss, never an exception and never a wrong answer. A write is
atomic (temp file and ``os.replace``); a write that fails only costs speed.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterable
from typing import Any, Protocol

from testdb.files import prune, read_cache, write_cache

Ingredient = str | bytes | int | None | Iterable[str]
_TOOL = b"testdb-audit-cache"


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...
    def copy(self) -> Any: ...


def tool_version() -> str:
    import testdb  # a module of one line: the version

    return testdb.__version__


def cache_key(kind: str, fmt: int | str, /, **ingredients: Ingredient) -> str:
    """The key of one record of the cache ``kind`` (sha256, hex): the tool's version, the
    kind, the layout ``fmt`` and each ingredient by name, each field told apart from its
    neighbours (length-prefixed) and None from every string. A list of strings is one
    ingredient (its length, then each). The callers name every ingredient, so what a key
    holds reads at its call site, and in the table above."""
    head = (tool_version(), kind, str(fmt))
    prefix = _PREFIXES.get(head)
    if prefix is None:  # the version, kind and format, hashed once per process
        import hashlib

        prefix = _PREFIXES[head] = hashlib.sha256(_TOOL)
        for part in head:
            add(prefix, part)
    h = prefix.copy()
    for name, value in ingredients.items():
        add(h, name)
        add(h, value)
    return h.hexdigest()


_PREFIXES: dict[tuple[str, str, str], Any] = {}


def add(h: _Hash, part: Ingredient) -> None:
    """One field into a running hash, told apart from its neighbours and from None (also for
    callers that hash many parts, such as ``audit_memo.change_digest``)."""
    if isinstance(part, str):
        part = part.encode("utf-8", "surrogatepass")
    elif part is None:
        h.update(b"\1")
        return
    elif isinstance(part, int):
        part = str(part).encode()
    if isinstance(part, bytes):
        h.update(b"\2" + len(part).to_bytes(8, "little"))
        h.update(part)
        return
    parts = list(part)
    h.update(b"\3" + len(parts).to_bytes(8, "little"))
    for p in parts:
        add(h, p)


class Store:
    """The records of one cache kind in one directory: ``<root>/<kind>-<key><suffix>``
    (``fanout``: ``<root>/<key[:2]>/<key><suffix>``, for many small files). Of the files of
    the kind the ``keep`` newest stay (None: never pruned here)."""

    def __init__(self, kind: str, fmt: int | str, root: str, *, keep: int | None = 8,
                 suffix: str = ".marshal", fanout: bool = False,
                 prune_each: bool = True) -> None:
        """``prune_each``: prune on every ``put`` (else the caller calls ``prune`` once)."""
        if "-" in kind:
            raise ValueError(f"a cache kind has no '-' (pruning reads it up to one): {kind!r}")
        self.kind, self.fmt, self.root = kind, fmt, root
        self.keep, self.suffix, self.fanout = keep, suffix, fanout
        self._prune_each = prune_each and not fanout
        self._tag = f"{kind}/{fmt}\0".encode()

    def key(self, **ingredients: Ingredient) -> str:
        """``cache_key`` of this kind and format."""
        return cache_key(self.kind, self.fmt, **ingredients)

    def path(self, key: str) -> str:
        if self.fanout:
            return os.path.join(self.root, key[:2], f"{key}{self.suffix}")
        return os.path.join(self.root, f"{self.kind}-{key}{self.suffix}")

    def get(self, key: str) -> bytes | None:
        """The record's bytes, or None: missing, damaged, or of another kind or format."""
        payload = read_cache(self.path(key))
        if payload is None or not payload.startswith(self._tag):
            return None
        return payload[len(self._tag):]

    def put(self, key: str, record: bytes) -> None:
        """Keep ``record`` under ``key`` (atomically; a failure only costs speed)."""
        write_cache(self.path(key), self._tag + record,
                    keep=self.keep if self._prune_each else None)

    def load(self, key: str) -> Any:
        """The marshalled value kept under ``key``, or None (a miss, as in ``get``)."""
        data = self.get(key)
        if data is None:
            return None
        try:
            return marshal.loads(data)
        except (ValueError, EOFError, TypeError):
            return None

    def dump(self, key: str, value: Any) -> bool:
        """Keep ``value`` marshalled; False when marshal cannot write it (nothing kept)."""
        try:
            data = marshal.dumps(value)
        except ValueError:
            return False
        self.put(key, data)
        return True

    def prune(self) -> None:
        """Keep the ``keep`` newest files of this kind (for stores that write many records
        in one run and prune once)."""
        if self.keep is not None and not self.fanout:
            import contextlib

            with contextlib.suppress(OSError):
                prune(os.path.join(self.root, f"{self.kind}-"), self.keep)
