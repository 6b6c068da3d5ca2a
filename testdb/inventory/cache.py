"""Each test file's scan, found again by its key in the whole inventories the cache keeps.

A cold build once wrote one sealed JSON entry per scanned file (``FileCache.put``): one atomic
write each, ~1.8 s of CPU for 2,000 files, though the whole packed inventory written at the
build's end keeps every file's item rows under the same key (``PackedInventory.file_key``:
``file_key`` and the file's shown path). So nothing is written per file; a file to scan is
looked up by its key in every whole inventory kept (``testdb.inventory.build`` keeps three,
one per checkout or branch in use), not only in the one the stamp names, and its rows are
given back in the scanner's form (``groups_of``), checked to expand to the very rows kept.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testdb.cachestore import cache_key
from testdb.inventory.groups import Group

# The schema (bumped when the scanner's output for the same input changes) and the cache
# directory live in the light module a warm `stats` reads them from.
from testdb.inventory.tree import SCHEMA, default_cache_dir

__all__ = ["SCHEMA", "WHOLE_GLOB", "FileCache", "default_cache_dir", "file_key", "groups_of"]

# The whole inventories' file names (``build._whole_path``: whole-<digest>.records)
WHOLE_PREFIX, WHOLE_SUFFIX = "whole-", ".records"
WHOLE_GLOB = f"{WHOLE_PREFIX}*{WHOLE_SUFFIX}"


def file_key(content: bytes, *context: str) -> str:
    """The key of one file's scan (``testdb.cachestore``'s ``inventory`` row): the scanner's
    ``SCHEMA``, the file's bytes and the context its items depend on, as ``build`` gives it
    (the static config's fingerprint, the file's id (prefix and path), its ``-k`` dirs)."""
    return cache_key("inventory", SCHEMA, context=context, content=content)


class FileCache:
    """Scans by ``file_key``, read from the whole inventories kept in ``directory``; a blob
    that is missing, damaged, or does not expand back to itself is a miss."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._found: dict[str, tuple[Any, str, str]] | None = None  # key -> (inv, file, from)

    def get(self, key: str) -> list[Group] | None:
        """The file's groups, or None when no kept whole inventory has a good blob of it."""
        if self._found is None:
            self._found = self._index()
        hit = self._found.get(key)
        if hit is None:
            return None
        inv, file, built_from = hit
        try:
            blob = inv.blob_for(file, built_from)
            rows = marshal.loads(blob) if blob is not None else None
        except (RuntimeError, ValueError, EOFError, TypeError):  # a damaged record
            return None
        return groups_of(rows) if isinstance(rows, list) else None

    def _index(self) -> dict[str, tuple[Any, str, str]]:
        """Every file's key in the kept whole inventories, the newest inventory's first."""
        from testdb.inventory.packed import PackedInventory

        found: list[tuple[int, str]] = []
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    if e.name.startswith(WHOLE_PREFIX) and e.name.endswith(WHOLE_SUFFIX):
                        found.append((e.stat().st_mtime_ns, e.path))
        except OSError:
            return {}
        out: dict[str, tuple[Any, str, str]] = {}
        for _, path in sorted(found, reverse=True):
            inv = PackedInventory.open(path)
            if inv is None:
                continue
            try:
                for f in inv.files():
                    built_from = inv.file_key(f)
                    if built_from:
                        out.setdefault(built_from.split(":", 1)[0], (inv, f, built_from))
            except RuntimeError:  # its keys record is damaged: nothing of it is used
                continue
        return out


def groups_of(rows: Sequence[Sequence[Any]]) -> list[Group] | None:
    """One file's item rows (``packed_rows.row``) in the scanner's form: a group per item,
    which ``groups.expand`` turns back into the same rows; None when a row is not one that
    ``expand`` makes (so the file is scanned again, never answered wrongly).

    Each row is checked against what ``expand`` gives a one-variant group, field by field, not
    by expanding the groups and comparing (which cost as much as the rest of a build on the
    kept inventories); ``tests/testdb/test_cachestore.py`` expands them on real shapes."""
    if not rows:
        return []
    file, path = rows[0][1], rows[0][10]
    groups: list[Group] = []
    append = groups.append
    for r in rows:
        n = len(r)
        if n not in (11, 12) or r[1] != file or r[10] != path or r[9] != "static":
            return None
        nodeid, _, line, function, classes, params, markers, keywords, unknown = r[:9]
        error = r[11] if n == 12 else ""
        if n == 12 and not error:  # ``row`` keeps an error only where it is set
            return None
        base = "::".join((file, *classes, function))
        if params is None:
            if nodeid != base or function not in keywords:
                return None
            shared = tuple(keywords)
        else:
            name = f"{function}[{params}]"
            if nodeid != f"{base}[{params}]" or not keywords or keywords[0] != name:
                return None
            shared = tuple(keywords[1:])
        if len(set(markers)) != len(markers):  # expand gives each mark once
            return None
        append(Group(tuple(classes), function, line, unknown, tuple(markers), (), shared,
                     ((params, ()),), error))
    return groups
