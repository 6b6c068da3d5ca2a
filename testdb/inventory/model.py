"""The test inventory: every pytest item a checkout defines, indexed by node id."""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from testdb.errors import SourceLoc
from testdb.grammar import split_node_id

Source = Literal["static", "collected"]
Status = Literal["present", "absent", "indeterminate"]

# A placeholder item's function name: "this scope may hold tests we cannot list".
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class InventoryItem:
    """One test item (one parametrization), or a placeholder for what cannot be known.

    ``nodeid`` follows the test-list convention: integration ids relative to
    ``tests/integration/defs``, unit-test ids relative to ``tests/`` (``unittest/...``).
    ``indeterminate`` items have ``params=None``: the function exists but its parametrization
    is computed at run time. A ``function`` holding ``*`` marks a scope (module, class, or a
    ``parameterized.expand`` family) whose members cannot be listed statically.
    ``markers`` are pytest's ``iter_markers()`` names (function, then its parameter sets,
    classes, module), each once; ``keywords`` the names ``-k`` matches (pytest's
    KeywordMatcher: item and parent names, markers, function attributes), in no set order.
    """

    nodeid: str
    file: str
    line: int
    function: str
    classes: tuple[str, ...] = ()
    params: str | None = None
    markers: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    indeterminate: bool = False
    source: Source = "static"
    path: str = ""  # the source file as found (relative to the checkout root where possible)
    # A placeholder for a file that does not parse: what is wrong at ``line`` ("syntax
    # error: ..."). pytest cannot import the file, so CI runs none of its tests.
    error: str = ""

    def __reduce__(self) -> tuple[type[InventoryItem], tuple[Any, ...]]:
        # Rebuild through __init__ from a plain tuple: twice as fast to unpickle as the
        # default per-field __setstate__ of a frozen, slotted dataclass.
        return (InventoryItem, (self.nodeid, self.file, self.line, self.function, self.classes,
                                self.params, self.markers, self.keywords, self.indeterminate,
                                self.source, self.path, self.error))

    @property
    def base(self) -> str:
        """The node id without ``[params]``."""
        return "::".join((self.file, *self.classes, self.function))

    @property
    def name(self) -> str:
        """pytest's item name: the function with its ``[params]``."""
        return self.function if self.params is None else f"{self.function}[{self.params}]"

    @property
    def is_placeholder(self) -> bool:
        return WILDCARD in self.function

    @property
    def loc(self) -> SourceLoc:
        return SourceLoc(self.path or self.file, self.line)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid, "file": self.file, "line": self.line,
            "function": self.function, "classes": list(self.classes), "params": self.params,
            "markers": list(self.markers), "keywords": list(self.keywords),
            "indeterminate": self.indeterminate, "source": self.source, "path": self.path,
            **({"error": self.error} if self.error else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InventoryItem:
        return cls(
            nodeid=data["nodeid"], file=data["file"], line=int(data["line"]),
            function=data["function"], classes=tuple(data.get("classes", ())),
            params=data.get("params"), markers=tuple(data.get("markers", ())),
            keywords=tuple(data.get("keywords", ())),
            indeterminate=bool(data.get("indeterminate", False)),
            source=data.get("source", "static"), path=data.get("path", ""),
            error=str(data.get("error", "")),
        )


class Inventory:
    """Items by node id, with look-ups by base id (no params), function name and file.

    Immutable once built; ``merge`` and the builders return new inventories.
    """

    __slots__ = ("_bases", "_by_id", "_files", "_functions", "_items", "_placeholders")

    def __init__(self, items: Iterable[InventoryItem] = ()) -> None:
        by_id: dict[str, InventoryItem] = {}
        for item in items:
            # Later wins, like a module dict: a redefined test replaces the earlier one.
            by_id[item.nodeid] = item
        self._by_id = by_id
        self._items = tuple(by_id.values())
        self._bases: dict[str, list[InventoryItem]] | None = None
        self._functions: dict[str, list[InventoryItem]] | None = None
        self._files: dict[str, list[InventoryItem]] | None = None
        self._placeholders = tuple(i for i in self._items if i.is_placeholder)

    # -- container protocol -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[InventoryItem]:
        return iter(self._items)

    def __contains__(self, nodeid: object) -> bool:
        return nodeid in self._by_id

    def lacking(self, ids: Iterable[str]) -> list[str]:
        """The ids of ``ids`` that name no item here, in their order."""
        return [i for i in ids if i not in self]

    def __repr__(self) -> str:
        return f"Inventory({len(self._items)} items, {len(self.files())} files)"

    @property
    def items(self) -> tuple[InventoryItem, ...]:
        return self._items

    # -- look-ups ---------------------------------------------------------------------------
    def get(self, nodeid: str) -> InventoryItem | None:
        return self._by_id.get(nodeid)

    def by_base(self, base: str) -> tuple[InventoryItem, ...]:
        """Every item of one function (``file::Class::func``), whatever its params."""
        if self._bases is None:
            self._bases = _group(self._items, lambda i: i.base)
        return tuple(self._bases.get(base, ()))

    def by_function(self, function: str) -> tuple[InventoryItem, ...]:
        """Every item whose function is called ``function``, in any file or class."""
        if self._functions is None:
            self._functions = _group(self._items, lambda i: i.function)
        return tuple(self._functions.get(function, ()))

    def by_file(self, file: str) -> tuple[InventoryItem, ...]:
        if self._files is None:
            self._files = _group(self._items, lambda i: i.file)
        return tuple(self._files.get(file, ()))

    def file_key(self, file: str) -> str | None:
        """What a file's items were built from, where the inventory keeps it (the packed
        cache form does); None here: an inventory built in memory keeps no keys."""
        return None

    def determinate_ids(self, file: str) -> list[str] | None:
        """The ids of a file's items, placeholders left out, in inventory order; None when
        one of them is indeterminate (its parametrizations are computed at run time)."""
        items = [i for i in self.by_file(file) if not i.is_placeholder]
        return None if any(i.indeterminate for i in items) else [i.nodeid for i in items]

    def files(self) -> tuple[str, ...]:
        if self._files is None:
            self._files = _group(self._items, lambda i: i.file)
        return tuple(self._files)

    def placeholders(self) -> tuple[InventoryItem, ...]:
        return self._placeholders

    def unparsable(self) -> tuple[InventoryItem, ...]:
        """One placeholder per test file that does not parse (``error`` says why, ``loc``
        where): pytest cannot collect such a file, so none of its tests runs."""
        return tuple(p for p in self.placeholders() if p.error)

    def ids(self) -> list[str]:
        """Every node id but the placeholders'."""
        return [i.nodeid for i in self._items if not i.is_placeholder]

    def param_value_counts(self) -> dict[str, int]:
        """How many parametrizations carry each parameter value piece (``a=x-y`` has the
        pieces ``a``, ``x``, ``y``), each piece counted once per id."""
        return value_counts(self.ids())

    def params_with_value(self, value: str) -> list[tuple[str, str | None]]:
        """``(id, parameter name)`` of each parameter whose value is ``value`` (the name is
        None for a bare id piece such as ``tp4``)."""
        return params_with_value(self.ids(), value)

    def without_files(self, files: set[str], added: Iterable[InventoryItem] = ()) -> Inventory:
        """This inventory with every item of ``files`` dropped and ``added`` appended."""
        return Inventory([*(i for i in self._items if i.file not in files), *added])

    def status(self, nodeid: str) -> Status:
        """Whether an exact node id names an item: present, absent, or not knowable here."""
        item = self._by_id.get(nodeid)
        if item is not None and not item.indeterminate:
            return "present"
        node = split_node_id(nodeid)
        if node is None:
            return "absent"
        if any(i.indeterminate for i in self.by_base(node.base)):
            return "indeterminate"
        for ph in self._placeholders:
            if fnmatch.fnmatchcase(node.base, ph.base):
                return "indeterminate"
        return "absent"

    # -- serialisation ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "items": [i.to_json() for i in self._items]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Inventory:
        return cls(InventoryItem.from_json(d) for d in data.get("items", ()))


def params_text(tid: str) -> str | None:
    """The ``[...]`` part of a test id, without the brackets (None: the id has none)."""
    b = tid.find("[")
    return tid[b + 1:-1] if b > 0 and tid.endswith("]") else None


def value_pieces(params: str) -> set[str]:
    """The value pieces one id's ``params_text`` counts for (``value_counts``): each part
    between ``-`` and ``=``, once."""
    return set(params.replace("=", "-").split("-"))


def value_counts(ids: Iterable[str]) -> dict[str, int]:
    """See ``Inventory.param_value_counts``."""
    pieces: list[str] = []
    for tid in ids:
        params = params_text(tid)
        if params is not None:
            pieces.extend(value_pieces(params))
    return dict(Counter(pieces))  # counting one flat list runs in C


def split_params(params: str) -> list[tuple[str | None, str]]:
    """``a=x-tp4`` -> ``[("a", "x"), (None, "tp4")]``: pytest joins ids with ``-``."""
    out: list[tuple[str | None, str]] = []
    for part in params.split("-"):
        name, eq, value = part.partition("=")
        out.append((name, value) if eq else (None, part))
    return out


def params_with_value(ids: Iterable[str], value: str) -> list[tuple[str, str | None]]:
    """See ``Inventory.params_with_value``: a substring test first, then an exact check."""
    found: list[tuple[str, str | None]] = []
    for tid in ids:
        if value not in tid:
            continue
        b = tid.find("[")
        if b < 0 or not tid.endswith("]"):
            continue
        found += [(tid, name) for name, v in split_params(tid[b + 1:-1]) if v == value]
    return found


def merge(static: Inventory, collected: Inventory) -> Inventory:
    """Static items, except that a file pytest collected is taken wholly from ``collected``.

    Per file, because a collected file is the truth for that file; files pytest did not see
    (not installed, not asked for) keep their static expansion.
    """
    seen = set(collected.files())
    kept = [i for i in static if i.file not in seen]
    return Inventory([*kept, *collected])


def _group(
    items: Iterable[InventoryItem], key: Callable[[InventoryItem], str]
) -> dict[str, list[InventoryItem]]:
    out: dict[str, list[InventoryItem]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out
