"""One test file as the packed inventory keeps it: item rows, ids, value-index entries, counts.

A cold build prepares each file where it was scanned (in the worker processes), so the main
process only merges: turning 100,000+ items into rows, ids and index entries one by one was
most of a cold build's serial time.
"""

from __future__ import annotations

import marshal
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from testdb.inventory.groups import Group, Variant
from testdb.inventory.groups import rows as group_rows
from testdb.inventory.model import (
    WILDCARD,
    InventoryItem,
    params_text,
    split_params,
    value_pieces,
)

# value -> [(file, positions in the file's ids, parameter names)]
Entries = dict[str, list[tuple[str, list[int], list[str | None]]]]
# value -> (positions in one file's ids, parameter names)
FileEntries = dict[str, tuple[list[int], list[str | None]]]


class Prepared(NamedTuple):
    """A file's blob and what the inventory derives from it (see ``prepared``)."""

    blob: bytes  # marshal of the item rows
    ids: list[str]  # every id but the placeholders'
    placeholders: list[tuple[Any, ...]]  # their rows
    odd: list[str]  # ids that do not start with `file::`
    entries: FileEntries
    pieces: list[str]  # the value pieces of each id, as value_counts counts them
    names: str  # what a pattern must be found in to name one of the ids (``names_text``)


def file_blob(items: Iterable[InventoryItem]) -> bytes:
    """One file's items as a packed inventory keeps them; as in ``Inventory``, a test defined
    twice keeps its first place and its last definition."""
    return marshal.dumps(_rows(items))


def _rows(items: Iterable[InventoryItem]) -> list[tuple[Any, ...]]:
    by_id: dict[str, InventoryItem] = {}
    for i in items:
        by_id[i.nodeid] = i
    return [row(i) for i in by_id.values()]


def row(i: InventoryItem) -> tuple[Any, ...]:
    """The item's fields in order (``InventoryItem(*row)`` gives it back); ``error`` only
    where it is set (a file that does not parse), so every other row stays as short."""
    fields = (i.nodeid, i.file, i.line, i.function, i.classes, i.params, i.markers, i.keywords,
              i.indeterminate, i.source, i.path)
    return (*fields, i.error) if i.error else fields


def prepared_groups(file: str, path: str, groups: Sequence[Group]) -> Prepared:
    """``prepared_blob(file, file_blob(expand(groups, file, path)))``, from the rows straight
    away, and the ids' index from the groups' parametrizations where they give it
    (``group_index``)."""
    by_id: dict[str, tuple[Any, ...]] = {}
    for r in group_rows(groups, file, path):
        by_id[r[0]] = r  # as ``_rows``: first place, last definition
    rows = list(by_id.values())
    ids = [r[0] for r in rows if WILDCARD not in r[3]]
    # Each row an id of its own, and no "[" before the params: the ids are the groups'.
    plain = len(rows) == sum(len(g.variants) for g in groups) and "[" not in file and not any(
        "[" in g.function or any("[" in c for c in g.classes) for g in groups)
    index = group_index(file, groups, ids) if plain else (*file_entries(ids), names_text(ids))
    return _prepared(file, marshal.dumps(rows), rows, ids, index)


def prepared_blob(file: str, blob: bytes) -> Prepared:
    rows = marshal.loads(blob)
    ids = [r[0] for r in rows if WILDCARD not in r[3]]
    return _prepared(file, blob, rows, ids, (*file_entries(ids), names_text(ids)))


def _prepared(file: str, blob: bytes, rows: list[tuple[Any, ...]], ids: list[str],
              index: tuple[FileEntries, list[str], str]) -> Prepared:
    """``index``: the ids' value index entries, value pieces and names text."""
    return Prepared(blob, ids, [r for r in rows if WILDCARD in r[3]],
                    [r[0] for r in rows if not r[0].startswith(file + "::")], *index)


def names_text(ids: list[str]) -> str:
    """The text a pattern's name (``pattern_name``) is found in when one of ``ids`` can match
    the pattern (``testdb.query.match_ids``): the ids' heads (the part before ``[``), once
    each. Every match but one contains the pattern within an id's head; the exception is an
    id that ends in ``::PATTERN`` or ``/PATTERN`` where that separator lies inside its
    ``[params]``: a file with such an id gives all its ids instead."""
    heads: dict[str, None] = {}
    for tid in ids:
        b = tid.find("[")
        if b < 0:
            heads[tid] = None
            continue
        if "/" in tid[b:] or "::" in tid[b:]:
            return "\n".join(ids)
        heads[tid[:b]] = None
    return "\n".join(heads)


def pattern_name(pattern: str) -> str:
    """The part of a wildcard-free pattern that any id it names contains within the text
    ``names_text`` keeps (see there): the pattern up to its first ``[``, without trailing
    ``/`` (a folder pattern ``dir/`` names ids whose head has ``dir`` in it)."""
    return pattern.strip().partition("[")[0].rstrip("/")


def file_entries(ids: list[str]) -> tuple[FileEntries, list[str]]:
    """The value index entries of one file's ids, and their value pieces (one pass)."""
    per: FileEntries = {}
    pieces: list[str] = []
    for pos, tid in enumerate(ids):
        params = params_text(tid)
        if params is not None:
            pairs, got = _split(params)
            pieces.extend(got)
            for name, v in pairs:
                where, names = per.setdefault(v, ([], []))
                where.append(pos)
                names.append(name)
    return per, pieces


# The same parameter strings recur across functions and files (114,054 ids of the benchmark
# tree hold 14,508 distinct ones): each is split once per process, as ``DecoratorMemo`` does.
_SPLITS: dict[str, tuple[list[tuple[str | None, str]], set[str]]] = {}
_SPLITS_MAX = 100_000


def _split(params: str) -> tuple[list[tuple[str | None, str]], set[str]]:
    """``split_params(params)``, names interned, and the value pieces ``value_counts``
    counts of it."""
    got = _SPLITS.get(params)
    if got is None:
        if len(_SPLITS) >= _SPLITS_MAX:
            _SPLITS.clear()
        got = _SPLITS[params] = (
            [(sys.intern(n) if n is not None else None, v) for n, v in split_params(params)],
            value_pieces(params))
    return got


def group_index(file: str, groups: Sequence[Group], ids: list[str]
                ) -> tuple[FileEntries, list[str], str]:
    """``file_entries(ids)`` and ``names_text(ids)`` of ``ids``, the ids of ``groups`` in
    ``file``, where each group's ids are its own (no two alike) and hold no ``[`` before
    their params: each distinct parametrization (a stack of layers) is indexed once per
    process (``_stack_index``), a group's entries are its stack's moved to the group's place,
    and its ids' head is its base. Indexing every id's params and head cost the benchmark
    tree's cold scan 0.2 s, two fifths of the rows' preparation."""
    per: FileEntries = {}
    pieces: list[str] = []
    heads: dict[str, None] = {}
    whole = False
    pos = 0
    for g in groups:
        if WILDCARD in g.function:
            continue  # a placeholder: not among the ids
        stack, stack_pieces, stack_whole = _stack_index(g.variants)
        for v, (offsets, names) in stack.items():
            entry = per.get(v)
            if entry is None:
                entry = per[v] = ([], [])
            entry[0].extend([pos + o for o in offsets])
            entry[1].extend(names)
        pieces += stack_pieces
        whole = whole or stack_whole
        heads["::".join((file, *g.classes, g.function))] = None
        pos += len(g.variants)
    return per, pieces, "\n".join(ids) if whole else "\n".join(heads)


_STACKS: dict[tuple[Variant, ...], tuple[FileEntries, list[str], bool]] = {}


def _stack_index(variants: tuple[Variant, ...]) -> tuple[FileEntries, list[str], bool]:
    """``file_entries`` of one group's ids, at positions from 0, and whether ``names_text``
    gives such ids whole (kept: read, never changed)."""
    got = _STACKS.get(variants)
    if got is None:
        if len(_STACKS) >= _SPLITS_MAX:
            _STACKS.clear()
        params = [p for p, _ in variants if p is not None]
        got = _STACKS[variants] = (
            *file_entries([f"-[{p}]" if p is not None else "-" for p, _ in variants]),
            any("/" in p or "::" in p for p in params))
    return got


def entries(ids_by_file: dict[str, list[str]]) -> tuple[Entries, list[str]]:
    """The value index entries of these files' ids, and their value pieces."""
    found: Entries = {}
    pieces: list[str] = []
    for f, ids in ids_by_file.items():
        per, p = file_entries(ids)
        pieces += p
        for v, (where, names) in per.items():
            found.setdefault(v, []).append((f, where, names))
    return found, pieces
