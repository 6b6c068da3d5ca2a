"""Which items a ``unittest/<path> -k "expr" -m "expr"`` line selects, by pytest's own rules."""

from __future__ import annotations

import bisect
import fnmatch
import functools
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from _pytest.mark.expression import Expression

from testdb.errors import InputError, SourceLoc
from testdb.grammar import Entry
from testdb.inventory.model import Inventory, InventoryItem

# Options of the inner pytest that take the next word as their value.
_VALUE_OPTIONS = frozenset({
    "-p", "-c", "-n", "-W", "-o", "--rootdir", "--timeout", "--maxfail", "--tb", "--durations",
    "--confcutdir", "--basetemp", "--junitxml", "--junit-xml", "--import-mode", "--dist",
    "--timeout-method", "--capture", "-r",
})


@dataclass(frozen=True)
class Selection:
    """The parts of a unit-test selection that decide which items run."""

    paths: tuple[str, ...]
    keyword: str | None = None
    markexpr: str | None = None
    ignore: tuple[str, ...] = ()
    ignore_glob: tuple[str, ...] = ()
    deselect: tuple[str, ...] = ()


def parse_selection(words: Sequence[str]) -> Selection:
    """Read pytest's command line as far as selection goes (argparse: the last -k/-m wins)."""
    paths: list[str] = []
    keyword = markexpr = None
    ignore: list[str] = []
    ignore_glob: list[str] = []
    deselect: list[str] = []
    it = iter(words)
    for word in it:
        opt, eq, val = word.partition("=")
        if word in ("-k", "-m"):
            value = next(it, "")
            keyword, markexpr = (value, markexpr) if word == "-k" else (keyword, value)
        elif word.startswith(("-k", "-m")) and not word.startswith("--"):
            value = word[2:]
            keyword, markexpr = (value, markexpr) if word[1] == "k" else (keyword, value)
        elif opt in ("--ignore", "--ignore-glob", "--deselect"):
            value = val if eq else next(it, "")
            {"--ignore": ignore, "--ignore-glob": ignore_glob, "--deselect": deselect}[opt].append(
                _norm(value))
        elif word in _VALUE_OPTIONS:
            next(it, None)
        elif not word.startswith("-"):
            paths.append(_norm(word))
    return Selection(tuple(paths), keyword, markexpr, tuple(ignore), tuple(ignore_glob),
                     tuple(deselect))


def _norm(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/") if "::" not in path else path


def select_unittest(entry: Entry, inv: Inventory, *,
                    extra_markexpr: str | None = None) -> list[InventoryItem]:
    """The items a ``unittest/...`` entry selects, in inventory order.

    ``extra_markexpr`` is combined as CI's ``--unittest-markexpr`` does:
    ``(line's -m) and (extra)``. Indeterminate items are matched on what is known of them;
    placeholders (scopes that may hold unlisted tests) below a selected path are always
    returned, so a caller can tell a selection that may be incomplete.
    """
    sel = _selection_of(entry.test)
    markexpr = sel.markexpr
    if extra_markexpr:
        markexpr = f"({markexpr}) and ({extra_markexpr})" if markexpr else extra_markexpr
    return select(inv, sel.paths, keyword=sel.keyword, markexpr=markexpr, ignore=sel.ignore,
                  ignore_glob=sel.ignore_glob, deselect=sel.deselect, loc=entry.loc)


@functools.lru_cache(maxsize=8192)
def _selection_of(text: str) -> Selection:
    """A list line's selection, parsed once per distinct line (shlex is slow)."""
    path, _, rest = text.strip().partition(" ")
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    return parse_selection([path, *words])


def select(inv: Inventory, paths: Iterable[str], *, keyword: str | None = None,
           markexpr: str | None = None, ignore: Sequence[str] = (),
           ignore_glob: Sequence[str] = (), deselect: Sequence[str] = (),
           loc: SourceLoc | None = None) -> list[InventoryItem]:
    """pytest's selection over inventory items: paths/node ids, then -k, then -m."""
    kexpr = _compile(keyword, "-k", loc)
    mexpr = _compile(markexpr, "-m", loc)
    specs = [p for p in paths if p]
    return [item for item in _candidates(inv, specs)
            if _selects(item, specs, kexpr, mexpr, ignore, ignore_glob, deselect)]


def _selects(item: InventoryItem, specs: Sequence[str], kexpr: Expression | None,
             mexpr: Expression | None, ignore: Sequence[str], ignore_glob: Sequence[str],
             deselect: Sequence[str]) -> bool:
    """Whether pytest, given these paths and options, runs ``item`` (placeholders: may run)."""
    if not any(_under(item, spec) for spec in specs):
        return False
    if any(item.file == p or item.file.startswith(p + "/") for p in ignore):
        return False
    if any(fnmatch.fnmatch(item.file, g) for g in ignore_glob):
        return False
    if any(_deselected(item, d) for d in deselect):
        return False
    if item.is_placeholder:
        return True
    if kexpr is not None and not kexpr.evaluate(_KeywordMatcher(item.keywords)):
        return False
    return mexpr is None or mexpr.evaluate(_MarkMatcher(item.markers))


def _candidates(inv: Inventory, specs: list[str]) -> Iterable[InventoryItem]:
    """Items of the files a spec can select, in inventory order: checking every item against
    every spec made resolving a corpus of selections quadratic in the inventory size."""
    roots = [_norm(s.partition("::")[0]) for s in specs]
    if any(not r for r in roots):
        yield from inv
        return
    files = sorted(inv.files())
    chosen: set[str] = set()
    for r in roots:
        i = bisect.bisect_left(files, r)
        while i < len(files) and files[i].startswith(r):
            if files[i] == r or files[i].startswith(r + "/"):
                chosen.add(files[i])
            i += 1
    for f in inv.files():
        if f in chosen:
            yield from inv.by_file(f)


@functools.lru_cache(maxsize=4096)  # Expressions are immutable; lines repeat across calls
def _compile(expr: str | None, option: str, loc: SourceLoc | None) -> Expression | None:
    if expr is None or not expr.strip():
        return None
    try:
        return Expression.compile(expr)
    except SyntaxError as e:
        raise InputError(f"wrong expression passed to '{option}': {expr!r}: at column "
                         f"{e.offset}: {e.msg}", loc,
                         hint="pytest would stop with a usage error on this line") from None


def _under(item: InventoryItem, spec: str) -> bool:
    """pytest's argument matching: a directory, a file, or ``file::Class::func[params]``."""
    path, sep, rest = spec.partition("::")
    if not sep:
        return item.file == path or item.file.startswith(path + "/")
    if item.file != path:
        return False
    parts = rest.split("::")
    names = [*item.classes, item.name]
    if len(parts) > len(names):
        return False
    for i, part in enumerate(parts):
        if i == len(names) - 1:
            # the last name is the item's; its bare function name selects every parametrization
            if part not in (item.name, item.function):
                return False
        elif part != names[i]:
            return False
    return True


def _deselected(item: InventoryItem, prefix: str) -> bool:
    # pytest compares --deselect with its own node ids, which are relative to the inner
    # pytest's rootdir: tests/unittest (it has a pytest.ini), so without ``unittest/``.
    head, _, tail = item.nodeid.partition("/")
    return (tail if head == "unittest" else item.nodeid).startswith(prefix)


class _KeywordMatcher:
    """pytest's KeywordMatcher over recorded names: case-insensitive substring."""

    __slots__ = ("_names",)

    def __init__(self, names: Iterable[str]) -> None:
        self._names = [n.lower() for n in names]

    def __call__(self, subname: str, /, **kwargs: str | int | bool | None) -> bool:
        if kwargs:
            raise InputError("keyword expressions do not support call parameters")
        subname = subname.lower()
        return any(subname in name for name in self._names)


class _MarkMatcher:
    """pytest's MarkMatcher over marker names.

    Mark arguments are not recorded, so ``-m "mark(arg=1)"`` matches nothing.
    """

    __slots__ = ("_names",)

    def __init__(self, names: Iterable[str]) -> None:
        self._names = frozenset(names)

    def __call__(self, name: str, /, **kwargs: str | int | bool | None) -> bool:
        return name in self._names and not kwargs


class SelectionIndex:
    """Which ``unittest/...`` list lines select a given unit-test item. Only lines whose path is
    the item's file or one of its directories are evaluated, and only against that one item:
    resolving every selection against a whole inventory is quadratic in a large checkout."""

    def __init__(self, lines: Iterable[Entry]) -> None:
        by_path: dict[str, dict[str, Entry]] = {}
        for e in lines:
            if e.is_unittest:
                root = e.unittest_path.split("::", 1)[0].rstrip("/")
                by_path.setdefault(root, {}).setdefault(e.test, e)
        self._by_path = {k: list(v.values()) for k, v in by_path.items()}
        self._memo: dict[str, list[Entry]] = {}

    def lines_for(self, item: InventoryItem) -> list[Entry]:
        if item.nodeid not in self._memo:
            parts = item.file.split("/")
            found = [entry for depth in range(1, len(parts) + 1)
                     for entry in self._by_path.get("/".join(parts[:depth]), ())
                     if _selects_one(entry, item)]
            self._memo[item.nodeid] = found
        return self._memo[item.nodeid]


def _selects_one(entry: Entry, item: InventoryItem) -> bool:
    """``select_unittest(entry, Inventory([item]))``, without building an inventory."""
    sel = _selection_of(entry.test)
    return _selects(item, [p for p in sel.paths if p], _compile(sel.keyword, "-k", entry.loc),
                    _compile(sel.markexpr, "-m", entry.loc), sel.ignore, sel.ignore_glob,
                    sel.deselect)
