"""Does a listed name name a test of this checkout? valid, invalid (with the nearest), unchecked.

CI keeps only collected items whose node id is exactly a listed name, and prints any other name
as an invalid test-name filter that it ignores (TensorRT-LLM's
``tests/integration/defs/test_list_parser.py``, ``modify_by_test_list``). Its corrector
(``get_test_name_corrections_v2``) buckets candidates by file and function, tries the same
function's parametrizations first, then function names within a small edit distance, and caps
its work. The suggestions here follow the same buckets, as a reviewer needs them:

- the bare name of a parametrized function: its own parametrizations, in source order;
- a wrong parameter id: the same function's ids, closest first (fewest differing ``-`` pieces,
  then string similarity);
- a wrong function: the nearest function names of the same class, else the nearest classes or
  functions of the same file.

Work per name is bounded: one file's items are grouped once (``NameChecker`` memoizes per
file and per missing function), and at most ``MAX_CANDIDATES`` ids are ranked per name.
"""

from __future__ import annotations

import fnmatch
import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from testdb.grammar import NodeId, split_node_id

Status = Literal["valid", "invalid", "not-checked"]
VALID: Status = "valid"
INVALID: Status = "invalid"
NOT_CHECKED: Status = "not-checked"

INVALID_MEANING = "names no test in this checkout; CI ignores it"
NOT_CHECKED_MEANING = "not checked against sources"
MAX_SUGGESTIONS = 3
MAX_CANDIDATES = 500  # ids of one function ranked per name (CI caps its candidates too)
# A suggested name (``Class::function``, as CI's corrector compares them) is at most this many
# edits from the wanted one (CI's MAX_TEST_NAME_EDIT_DISTANCE), and at most a third of the
# wanted name's length: two short names within 6 edits of each other are any two names
# (``test_a`` and ``test_fp8``), and a suggestion past that is noise, not help.
MAX_NAME_DISTANCE = 6
# A parameter id sharing no piece and no parameter name is suggested only this close: about
# CI's MAX_TEST_PARAMETER_EDIT_DISTANCE (12), measured as (1 - difflib ratio) x length.
PARAM_DISTANCE = 12


@dataclass(frozen=True)
class NameCheck:
    """The answer for one listed name: ``status``, why (in words), the nearest real ids, and
    how many more ids the first suggestion's function has (a bare name's parametrizations)."""

    id: str
    status: Status
    reason: str = ""
    nearest: tuple[str, ...] = ()
    more: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "nearest": list(self.nearest),
                "more": self.more}


@dataclass
class _File:
    """One test file's items, grouped: function id -> its ids (``[params]`` or the bare id)."""

    functions: dict[str, list[str]] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    indeterminate: set[str] = field(default_factory=set)
    placeholders: list[str] = field(default_factory=list)  # fnmatch patterns of bases
    unparsable: str = ""  # "path:line: what is wrong" when the file does not parse
    _classes: dict[tuple[str, ...], list[str]] | None = None

    def classes(self) -> dict[tuple[str, ...], list[str]]:
        """Class path -> its function names (``()``: the module's own functions)."""
        if self._classes is None:
            self._classes = {}
            for base in self.functions:
                node = split_node_id(base)
                if node is not None:
                    self._classes.setdefault(node.classes, []).append(node.function)
        return self._classes


@functools.lru_cache(maxsize=1 << 16)
def _parsed(params: str) -> tuple[frozenset[str], Counter[str] | None, frozenset[str]]:
    """A ``[params]`` string's ``-`` pieces (pytest joins stacked ids with ``-``), as a set and,
    when a piece repeats, as a multiset; and its parameter names. One function's ids are ranked
    for each wrong id of it: each is split once."""
    pieces = params.split("-")
    unique = frozenset(pieces)
    counted = Counter(pieces) if len(unique) != len(pieces) else None
    return unique, counted, frozenset(p.split("=", 1)[0] for p in unique if "=" in p)


def _differing(a: tuple[frozenset[str], Counter[str] | None, frozenset[str]],
               b: tuple[frozenset[str], Counter[str] | None, frozenset[str]]) -> int:
    """How many pieces differ between two parsed ``[params]`` (multiset difference)."""
    if a[1] is None and b[1] is None:
        return len(a[0] ^ b[0])
    ca, cb = a[1] or Counter(a[0]), b[1] or Counter(b[0])
    return sum(((ca - cb) + (cb - ca)).values())


def rank_params(params: str, candidates: list[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The ``[params]`` strings of ``candidates`` closest to ``params``: fewest differing
    ``-`` pieces first, then most parameter names in common, then source order. A candidate
    sharing no piece and no parameter name must be within ``PARAM_DISTANCE``."""
    want = _parsed(params)
    scored: list[tuple[int, int, float, int, str]] = []
    for n, c in enumerate(candidates[:MAX_CANDIDATES]):
        got = _parsed(c)
        names = len(want[2] & got[2])
        ratio = 0.0
        if not names and not want[0] & got[0]:
            import difflib  # here: a warm `where` compares no parameters

            ratio = difflib.SequenceMatcher(None, params, c, autojunk=False).ratio()
            if (1 - ratio) * max(len(params), len(c)) > PARAM_DISTANCE:
                continue
        scored.append((_differing(want, got), -names, -ratio, n, c))
    return [s[-1] for s in sorted(scored)[:limit]]


def nearest_names(name: str, candidates: list[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Function or class names within ``name_budget`` edits of ``name``, fewest edits first
    (then in the order given), as CI's corrector ranks names."""
    bound = name_budget(name)
    scored = []
    for n, c in enumerate(candidates):
        if abs(len(c) - len(name)) <= bound:  # the cheap test first: most names are turned away
            d = edit_distance(name, c, bound)
            if d is not None:
                scored.append((d, n, c))
    return [c for _, _, c in sorted(scored)[:limit]]


def name_budget(name: str) -> int:
    """The edits a suggestion for ``name`` may differ by (see ``MAX_NAME_DISTANCE``)."""
    return min(MAX_NAME_DISTANCE, max(1, len(name) // 3))


def close_enough(want: str, got: str) -> bool:
    """Whether ``got`` is within ``name_budget(want)`` edits of ``want``."""
    return edit_distance(want, got, name_budget(want)) is not None


def edit_distance(a: str, b: str, bound: int) -> int | None:
    """The Levenshtein distance of ``a`` and ``b`` when it is at most ``bound``, else None.
    Hand-written: difflib has no edit distance and the few names compared per suggestion do
    not pay for a dependency; rows stop early once every cell is past the bound."""
    if abs(len(a) - len(b)) > bound:
        return None
    if a == b:
        return 0
    # Cheap lower bounds first, which turn most unrelated names away before the table is
    # filled: an edit adds or removes at most one letter of the alphabet each side uses, and
    # changes the letters' counts by at most one either way.
    if len(set(a) ^ set(b)) > 2 * bound:
        return None
    bag_a, bag_b = Counter(a), Counter(b)
    bag_a.subtract(bag_b)
    if max(sum(v for v in bag_a.values() if v > 0), -sum(v for v in bag_a.values() if v < 0)
           ) > bound:
        return None
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > bound:
            return None
        prev = cur
    return prev[-1] if prev[-1] <= bound else None


class NameChecker:
    """Checks listed names against an inventory (``testdb.inventory.Inventory``); one file's
    items are grouped once, a missing function's neighbours found once."""

    def __init__(self, inventory: Any) -> None:
        self.inventory = inventory
        files = tuple(inventory.files()) if inventory is not None and len(inventory) else ()
        self._files = set(files)
        # Which pytest roots have sources: integration ids, and unit tests ("unittest/...").
        self._roots = {_root_of(f) for f in files}
        self._placeholders: dict[str, list[str]] = {}
        for p in inventory.placeholders() if files else ():
            self._placeholders.setdefault(p.file, []).append(p.base)
        self._groups: dict[str, _File] = {}
        self._ids: dict[str, set[str]] = {}  # group(file).ids, or the same from the ids alone
        self._near: dict[tuple[str, str], list[str]] = {}
        self._memo: dict[str, NameCheck] = {}

    @property
    def has_sources(self) -> bool:
        return bool(self._files)

    def check(self, test_id: str) -> NameCheck:
        got = self._memo.get(test_id)
        if got is None:
            got = self._memo[test_id] = self._check(test_id)
        return got

    def is_invalid(self, test_id: str) -> bool:
        """``check(test_id).status == "invalid"``, with a fast path for an id of the
        inventory (an audit asks this of every guard, nearly all of them real ids)."""
        file = test_id.partition("::")[0]
        if file in self._files and test_id in self._real_ids(file):
            return False
        return self.check(test_id).status == INVALID

    def _real_ids(self, file: str) -> set[str]:
        """``group(file).ids``, from the inventory's ids where none of the file's items is
        indeterminate (then no item is built)."""
        got = self._ids.get(file)
        if got is None:
            known = self.inventory.determinate_ids(file)
            got = self._ids[file] = set(known) if known is not None else self.group(file).ids
        return got

    def group(self, file: str) -> _File:
        g = self._groups.get(file)
        if g is None:
            g = self._groups[file] = _File(placeholders=list(self._placeholders.get(file, ())))
            for item in self.inventory.by_file(file) if file in self._files else ():
                if item.error:
                    g.unparsable = f"{item.loc}: {item.error}"
                if item.is_placeholder:
                    if item.base not in g.placeholders:
                        g.placeholders.append(item.base)
                    continue
                g.functions.setdefault(item.base, []).append(item.nodeid)
                if item.indeterminate:
                    g.indeterminate.add(item.base)
                else:
                    g.ids.add(item.nodeid)
        return g

    def _check(self, test_id: str) -> NameCheck:
        node = split_node_id(test_id)
        if node is None:
            return NameCheck(test_id, NOT_CHECKED, "not a node id (file.py::name)")
        if _root_of(node.file) not in self._roots:
            return NameCheck(test_id, NOT_CHECKED,
                             f"{NOT_CHECKED_MEANING}: no test sources in this checkout")
        if node.file not in self._files:
            return NameCheck(test_id, INVALID,
                             f"{INVALID_MEANING}: no test file {node.file}")
        g = self.group(node.file)
        if g.unparsable:
            return NameCheck(test_id, INVALID, unparsable_reason(g.unparsable))
        if test_id in g.ids:  # determinate ids only
            return NameCheck(test_id, VALID)
        if node.base in g.indeterminate or any(fnmatch.fnmatchcase(node.base, p)
                                               for p in g.placeholders):
            return NameCheck(test_id, NOT_CHECKED, f"{NOT_CHECKED_MEANING}: the ids of "
                             f"{node.qualname} are computed at run time")
        ids = g.functions.get(node.base)
        if ids is not None:
            return self._wrong_params(test_id, node, ids)
        return self._wrong_function(test_id, node, g)

    def _wrong_params(self, test_id: str, node: NodeId, ids: list[str]) -> NameCheck:
        base, cut = node.base, len(node.base) + 1  # (a property: not once per id)
        params = [i[cut:-1] for i in ids if i != base]
        if node.params is None:
            shown = ids[:MAX_SUGGESTIONS]
            return NameCheck(test_id, INVALID, f"{INVALID_MEANING}: CI matches exact ids and "
                             f"{node.qualname} is parametrized ({len(ids)} ids)",
                             tuple(shown), len(ids) - len(shown))
        if not params:
            return NameCheck(test_id, INVALID, f"{INVALID_MEANING}: {node.qualname} takes "
                             "no parameters", (node.base,))
        near = rank_params(node.params, params)
        return NameCheck(test_id, INVALID, f"{INVALID_MEANING}: {node.qualname} has no "
                         f"parametrization [{node.params}]",
                         tuple(f"{node.base}[{p}]" for p in near))

    def _wrong_function(self, test_id: str, node: NodeId, g: _File) -> NameCheck:
        key = (node.file, node.qualname)
        bases = self._near.get(key)
        if bases is None:
            bases = self._near[key] = _near_functions(node, g)
        nearest: list[str] = []
        for base in bases:
            ids = g.functions[base]
            if node.params is None or ids == [base]:
                nearest.append(ids[0])
                continue
            exact = f"{base}[{node.params}]"
            if exact in ids:
                nearest.append(exact)
            else:
                near = rank_params(node.params, [i[len(base) + 1:-1] for i in ids], 1)
                nearest.append(f"{base}[{near[0]}]" if near else ids[0])
        return NameCheck(test_id, INVALID, f"{INVALID_MEANING}: no test {node.qualname} in "
                         f"{node.file}", tuple(nearest[:MAX_SUGGESTIONS]))


def _near_functions(node: NodeId, g: _File) -> list[str]:
    """Function ids of the file nearest to a missing ``node``: same class first, then the
    nearest classes holding a function of that name (or the nearest functions in them).
    Each is within ``name_budget`` edits of the wanted ``Class::function`` (CI's corrector
    compares that whole name too): past it, nothing is suggested rather than noise."""
    classes = g.classes()
    prefix = "::".join((node.file, *node.classes))
    skip = len(node.file) + 2

    def near(bases: list[str]) -> list[str]:
        return [b for b in bases if close_enough(node.qualname, b[skip:])]

    found: list[str] = []
    if node.classes in classes:
        found = near([f"{prefix}::{f}" for f in nearest_names(node.function,
                                                              classes[node.classes])])
    if not found and node.classes:
        names = ["::".join(c) for c in classes if c]
        for cls in nearest_names("::".join(node.classes), names):
            funcs = classes[tuple(cls.split("::"))]
            pick = [node.function] if node.function in funcs else nearest_names(
                node.function, funcs, 1)
            found += near([f"{node.file}::{cls}::{f}" for f in pick])
    if not found:  # a module-level function, or nothing close in the classes
        qualnames = {b[skip:]: b for b in g.functions}
        found = [qualnames[q] for q in nearest_names(node.qualname, list(qualnames))]
    return found[:MAX_SUGGESTIONS]


def unparsable_reason(where_what: str) -> str:
    """Why every id of a test file that does not parse is ``invalid`` (``where_what``:
    ``path:line: what is wrong``)."""
    return (f"the test file does not parse ({where_what}): pytest cannot collect it, so CI "
            "runs none of its tests")


def _root_of(file: str) -> str:
    return "unittest" if file.startswith("unittest/") else ""


def check_names(inventory: Any, test_ids: list[str]) -> dict[str, NameCheck]:
    """``NameChecker(inventory).check`` for each id."""
    checker = NameChecker(inventory)
    return {t: checker.check(t) for t in test_ids}
