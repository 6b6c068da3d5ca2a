"""A scanned function in compact form (it crosses processes, sits in the cache) and its items."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from testdb.inventory.model import InventoryItem

Variant = tuple[str | None, tuple[str, ...]]  # (params, marks of its pytest.param sets)


class Group(NamedTuple):
    """One test function (or placeholder) and all its parametrizations.

    Items share everything but ``params`` and the marks of their ``pytest.param`` sets, so a
    module's scan result stays small: a NamedTuple of strings pickles and serialises fast.
    """

    classes: tuple[str, ...]
    function: str
    line: int
    indeterminate: bool
    own_marks: tuple[str, ...]  # the function's marks, nearest decorator first
    outer_marks: tuple[str, ...]  # class marks (MRO order), then module marks
    keywords: tuple[str, ...]  # -k names shared by every variant (not the item name)
    variants: tuple[Variant, ...]
    error: str = ""  # the placeholder of a file that does not parse: why, at ``line``


def expand(groups: Iterable[Group], file_id: str, path: str) -> list[InventoryItem]:
    """The inventory items of one module's groups."""
    item = InventoryItem
    return [item(*r) for r in rows(groups, file_id, path)]


def rows(groups: Iterable[Group], file_id: str, path: str) -> Iterator[tuple[Any, ...]]:
    """``packed_rows.row`` of each item ``expand`` gives, without making the items: a cold
    build packs the rows straight away (making 110,000 frozen items first cost it ~0.2 s)."""
    for g in groups:
        function, classes, line, unknown = g.function, g.classes, g.line, g.indeterminate
        base = "::".join((file_id, *classes, function))
        plain = tuple(dict.fromkeys(g.own_marks + g.outer_marks))
        shared = g.keywords
        bare_known = function in shared  # never list a name twice
        for params, pmarks in g.variants:
            if params is None:
                nodeid, name = base, function
                keywords = shared if bare_known else (name, *shared)
            else:
                nodeid, name = f"{base}[{params}]", f"{function}[{params}]"
                keywords = (name, *shared)
            markers = plain
            if pmarks:
                markers = tuple(dict.fromkeys(g.own_marks + pmarks + g.outer_marks))
                keywords = (*keywords, *(m for m in dict.fromkeys(pmarks) if m not in shared))
            r = (nodeid, file_id, line, function, classes, params, markers, keywords, unknown,
                 "static", path)
            yield (*r, g.error) if g.error else r


def to_json(groups: Iterable[Group]) -> list[list[Any]]:
    return [[list(g.classes), g.function, g.line, g.indeterminate, list(g.own_marks),
             list(g.outer_marks), list(g.keywords), [[p, list(m)] for p, m in g.variants],
             *([g.error] if g.error else [])]
            for g in groups]


def from_json(rows: Iterable[list[Any]]) -> list[Group]:
    return [Group(tuple(r[0]), r[1], r[2], r[3], tuple(r[4]), tuple(r[5]), tuple(r[6]),
                  tuple((p, tuple(m)) for p, m in r[7]), str(r[8]) if len(r) > 8 else "")
            for r in rows]
