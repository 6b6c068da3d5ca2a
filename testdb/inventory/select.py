"""Which items a ``unittest/<path> -k "expr" -m "expr"`` line selects, by pytest's own rules."""

from __future__ import annotations

import bisect
import fnmatch
import functools
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testdb.errors import InputError, SourceLoc
from testdb.grammar import Entry
from testdb.inventory.model import Inventory, InventoryItem

if TYPE_CHECKING:  # pytest's evaluator is imported on first use (~40 ms; a warm audit
    from _pytest.mark.expression import Expression  # reads cached selections instead)

    from testdb.inventory.select_cache import SelectionCache

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
    return _in_paths(item, specs, ignore, ignore_glob, deselect) and _matches(item, kexpr, mexpr)


def _in_paths(item: InventoryItem, specs: Sequence[str], ignore: Sequence[str],
              ignore_glob: Sequence[str], deselect: Sequence[str]) -> bool:
    """The paths and node ids given, less --ignore, --ignore-glob and --deselect."""
    if not any(_under(item, spec) for spec in specs):
        return False
    # (each option tested only when given: this runs for every item and line of an audit)
    if ignore and any(item.file == p or item.file.startswith(p + "/") for p in ignore):
        return False
    if ignore_glob and any(fnmatch.fnmatch(item.file, g) for g in ignore_glob):
        return False
    return not deselect or not any(_deselected(item, d) for d in deselect)


def _matches(item: InventoryItem, kexpr: Expression | None, mexpr: Expression | None,
             keywords: _KeywordMatcher | None = None) -> bool:
    """-k, then -m (``keywords``: the item's matcher, when the caller made it already)."""
    if item.is_placeholder:
        return True
    if kexpr is not None and not kexpr.evaluate(
            keywords if keywords is not None else _KeywordMatcher(item.keywords)):
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
    from _pytest.mark import expression

    # pytest 8.x raises its own ParseError (column, message); 9.0 and later a SyntaxError
    parse_error: type[Exception] = getattr(expression, "ParseError", SyntaxError)
    try:
        return expression.Expression.compile(expr)
    except (SyntaxError, parse_error) as e:
        column = getattr(e, "offset", None) or getattr(e, "column", None)
        message = getattr(e, "msg", None) or getattr(e, "message", str(e))
        raise InputError(f"wrong expression passed to '{option}': {expr!r}: at column "
                         f"{column}: {message}", loc,
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
    """pytest's KeywordMatcher over recorded names: case-insensitive substring of a name.

    The names are kept joined by NUL: a name without NUL is in the joined text exactly when it
    is in one of the names (pytest's identifiers never hold NUL), one search instead of one
    per name."""

    __slots__ = ("_names", "_text")

    def __init__(self, names: Iterable[str]) -> None:
        self._names = [n.lower() for n in names]
        self._text = "\0".join(self._names)

    def __call__(self, subname: str, /, **kwargs: str | int | bool | None) -> bool:
        if kwargs:
            raise InputError("keyword expressions do not support call parameters")
        subname = subname.lower()
        if "\0" in subname:
            return any(subname in name for name in self._names)
        return subname in self._text


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
    resolving every selection against a whole inventory is quadratic in a large checkout.

    With ``inventory`` and ``cache_dir``, a file's items are judged together the first time one
    is asked for, and the answers are kept on disk (``testdb.inventory.select_cache``) under the
    file's items and every line's text: a warm audit evaluates no expression (``save()``
    writes what was evaluated)."""

    def __init__(self, lines: Iterable[Entry], inventory: Any = None,
                 cache_dir: str | None = None) -> None:
        by_path: dict[str, dict[str, Entry]] = {}
        for e in lines:
            if e.is_unittest:
                root = e.unittest_path.split("::", 1)[0].rstrip("/")
                by_path.setdefault(root, {}).setdefault(e.test, e)
        self._lines = [e for v in by_path.values() for e in v.values()]
        at = {e.test: n for n, e in enumerate(self._lines)}
        self._by_path = {k: [at[t] for t in v] for k, v in by_path.items()}
        self._parsed: dict[int, _Line] = {}
        self._memo: dict[str, list[Entry]] = {}
        self._inventory = inventory
        self._files: dict[str, dict[str, tuple[int, ...]]] = {}
        self._store: SelectionCache | None = None
        if inventory is not None and cache_dir is not None and self._lines:
            from testdb.inventory.select_cache import SelectionCache

            self._store = SelectionCache.open(cache_dir, [e.test for e in self._lines])

    def lines_for(self, item: InventoryItem) -> list[Entry]:
        found = self._memo.get(item.nodeid)
        if found is None:
            found = self._memo[item.nodeid] = [self._lines[n] for n in self._positions(item)]
        return found

    def save(self) -> None:
        """Keep the selections evaluated so far for the next run (nothing new: no write)."""
        if self._store is not None:
            self._store.save()

    def _positions(self, item: InventoryItem) -> tuple[int, ...]:
        if self._store is None:
            return self._evaluate(item)
        by_id = self._files.get(item.file)
        if by_id is None:
            by_id = self._files[item.file] = self._file(item.file)
        got = by_id.get(item.nodeid)
        return got if got is not None else self._evaluate(item)

    def _file(self, file: str) -> dict[str, tuple[int, ...]]:
        """Every item of one test file and the lines selecting it: cached, else evaluated."""
        from testdb.inventory.select_cache import items_digest

        assert self._store is not None
        items = self._inventory.by_file(file)
        key = items_digest(items)
        found = self._store.get(file, key, len(items))
        if found is None:
            found = tuple(self._evaluate(i) for i in items)
            self._store.put(file, key, found)
        return {i.nodeid: p for i, p in zip(items, found, strict=True)}

    def _evaluate(self, item: InventoryItem) -> tuple[int, ...]:
        """The positions of the lines selecting ``item``: those at its file or a directory
        above it, in that order, each by pytest's rules (``select_unittest``)."""
        parts = item.file.split("/")
        keywords = _KeywordMatcher(item.keywords)
        return tuple(n for depth in range(1, len(parts) + 1)
                     for n in self._by_path.get("/".join(parts[:depth]), ())
                     if self._line(n).selects(item, keywords))

    def _line(self, n: int) -> _Line:
        got = self._parsed.get(n)
        if got is None:
            got = self._parsed[n] = _Line.of(self._lines[n])
        return got


@dataclass(frozen=True, slots=True)
class _Line:
    """A list line's selection, parsed and compiled once: ``select_unittest`` for one item."""

    specs: tuple[str, ...]
    kexpr: Expression | None
    mexpr: Expression | None
    sel: Selection

    @classmethod
    def of(cls, entry: Entry) -> _Line:
        sel = _selection_of(entry.test)
        return cls(tuple(p for p in sel.paths if p), _compile(sel.keyword, "-k", entry.loc),
                   _compile(sel.markexpr, "-m", entry.loc), sel)

    def selects(self, item: InventoryItem, keywords: _KeywordMatcher) -> bool:
        sel = self.sel
        return (_in_paths(item, self.specs, sel.ignore, sel.ignore_glob, sel.deselect)
                and _matches(item, self.kexpr, self.mexpr, keywords))
