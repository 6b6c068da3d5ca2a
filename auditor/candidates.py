"""Look-ups the linkers ask (which ids name a value, which tests import a module, which items a
test function has), each memoized once per audit: the caches behind the linking rules."""

from __future__ import annotations

import ast
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from auditor.behaviour import Behaviour
from auditor.graph import ImportGraph
from auditor.reach_memo import ReachMemo
from auditor.resolve import Link, Node, ReachOfTest, Resolver, link_of, reach_of, target_unit
from testdb.index import Index
from testdb.inventory.build import DEFAULT_DIRS
from testdb.inventory.model import params_text, params_with_value, value_counts, value_pieces


def test_file_id(path: str) -> str | None:
    """The test-list spelling of a test source path: the inventory's own mapping of test
    roots to id prefixes (``tests/integration/defs/x`` -> ``x``, ``tests/unittest/x`` ->
    ``unittest/x``)."""
    for base, prefix in DEFAULT_DIRS:
        if path.startswith(base + "/"):
            return prefix + path[len(base) + 1:]
    return None


def source_path(file_id: str) -> list[str]:
    """The candidate source paths of a test id's file (the inverse of test_file_id)."""
    return [base + "/" + file_id[len(prefix):] for base, prefix in DEFAULT_DIRS
            if file_id.startswith(prefix)]


class Candidates:
    """The checkout's tests as the linkers see them: ids, parameter values, importers."""

    def __init__(self, index: Index, root: str, graph: ImportGraph, inventory: Any,
                 texts: dict[str, str]) -> None:
        self.index = index
        self.root = root
        self.graph = graph
        self.inventory = inventory
        self.texts = texts  # head-side texts that override the checkout's files
        self._ids: set[str] | None = None
        self._by_base: dict[str, list[str]] | None = None
        self._items_memo: dict[tuple[str, str], list[str]] = {}
        self._importers: dict[str, tuple[dict[str, int], dict[str | None, int]]] = {}
        self._known: dict[str, bool] = {}
        self._params_by_module: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        self._param_index: dict[str, list[tuple[str, str | None]]] = {}
        self._values: Counter[str] | None = None
        self._listed_values: ValueCounts | None = None
        self._listed_only: list[str] | None = None  # listed ids the inventory lacks
        self._trees: dict[str, ast.Module | None] = {}
        self._bare_names: dict[tuple[str, str], str | None] = {}
        # (module, token) -> parametrizations naming the token whose test module does not
        # import the module: not linked (param_candidates)
        self.unreached: dict[tuple[str, str], int] = {}
        self._file_ids: dict[str, str | None] = {}
        self._resolver: Resolver | None = None
        self._targets: dict[tuple[str, str], str | None] = {}
        self._reach: dict[tuple[str, str], ReachOfTest] = {}
        self._indexed: set[str] = set()
        # the index of each test module's reach kept for this graph (None: not kept)
        self.reach_memo: ReachMemo | None = None
        self._by_unit: dict[str, set[str]] = {}  # unit -> test modules a test of which reaches it
        self._by_name: dict[str, set[str]] = {}  # ... calls it unresolved
        self._by_class: dict[str, set[str]] = {}  # ... names the class
        self._test_side_memo: dict[str, bool] = {}

    # ---- ids ---------------------------------------------------------------------------------
    def all_ids(self) -> set[str]:
        if self._ids is None:
            ids = set(self.index.schedule.placements)
            if self.inventory is not None:
                ids.update(self.inventory.ids())
            self._ids = ids
        return self._ids

    def listed_params(self, base: str) -> list[str]:
        """Listed parametrizations of ``file::Class::func`` (an index built once)."""
        if self._by_base is None:
            by_base: dict[str, list[str]] = defaultdict(list)
            for tid in self.all_ids():
                b = tid.find("[")
                if b > 0:
                    by_base[tid[:b]].append(tid)
            self._by_base = by_base
        return self._by_base.get(base, [])

    def value_count(self, tok: str) -> int:
        """How many parametrizations have ``tok`` as a value (an upper bound: one pass
        counts each value piece once per id)."""
        if self._values is None:
            # Every parameter value, counted once: most tokens name none and need no scan.
            # The inventory's counts come with it (cached); listed ids it lacks are counted
            # per token asked (``ValueCounts``).
            if self.inventory is None:
                self._values = Counter(value_counts(self.all_ids()))
            else:
                self._values = Counter(self.inventory.param_value_counts())
                self._listed_values = ValueCounts(self._listed_only_ids())
        listed = self._listed_values.count(tok) if self._listed_values is not None else 0
        return self._values.get(tok, 0) + listed

    def _listed_only_ids(self) -> list[str]:
        """Listed ids the inventory lacks (a test file not in the checkout, a typo)."""
        if self._listed_only is None:
            self._listed_only = self.inventory.lacking(self.index.schedule.placements)
        return self._listed_only

    def params_naming(self, tok: str) -> list[tuple[str, str | None]]:
        """(id, parameter name) of every parametrization one of whose values is ``tok``:
        the inventory's own index, and a scan of the listed ids it lacks."""
        if not self.value_count(tok):
            return []
        if tok not in self._param_index:
            if self.inventory is None:
                self._param_index[tok] = params_with_value(self.all_ids(), tok)
            else:
                self._param_index[tok] = [*self.inventory.params_with_value(tok),
                                          *params_with_value(self._listed_only_ids(), tok)]
        return self._param_index[tok]

    def items_of(self, file_id: str, qualname: str) -> list[str]:
        """The ids of a test function, class or (``""``) whole file."""
        key = (file_id, qualname)
        if key not in self._items_memo:
            self._items_memo[key] = self._find_items(file_id, qualname)
        return self._items_memo[key]

    def _find_items(self, file_id: str, qualname: str) -> list[str]:
        parts = qualname.split(".") if qualname else []
        if not parts and self.inventory is not None:
            # A whole file whose ids are all known: its ids (no item built for the module tier)
            found = self.inventory.determinate_ids(file_id)
            if found:
                return sorted(set(found))
        ids: list[str] = []
        if self.inventory is not None:
            listed = self.index.schedule.placements
            for it in self.inventory.by_file(file_id):
                q = [*it.classes, it.function]
                if q[: len(parts)] != parts or it.is_placeholder:
                    continue
                if it.indeterminate:
                    # Parametrized at run time: the listed ids of the function stand in for it.
                    found = [t for t in self.listed_params(it.base) if t in listed]
                    ids.extend(found or [it.nodeid])
                else:
                    ids.append(it.nodeid)
        if not ids:
            base = "::".join([file_id, *parts])
            if not parts:
                return sorted(t for t in self.index.schedule.placements
                              if t.startswith(file_id + "::"))
            ids = [t for t in self.index.schedule.placements
                   if t == base or t.startswith(base + "[") or t.startswith(base + "::")]
        return sorted(set(ids))

    # ---- the import graph --------------------------------------------------------------------
    def module_file_id(self, module: str) -> str | None:
        if module not in self._file_ids:
            info = self.graph.modules.get(module)
            self._file_ids[module] = test_file_id(info.path) if info else None
        return self._file_ids[module]

    def test_importers(self, module: str) -> tuple[dict[str, int], dict[str | None, int]]:
        """The test modules importing ``module`` and their test files, with the distance."""
        if module not in self._importers:
            test_mods = {m: d for m, d in self.graph.importers(module).items()
                         if self.module_file_id(m)}
            self._importers[module] = (test_mods, {self.module_file_id(m): d
                                                   for m, d in test_mods.items()})
        return self._importers[module]

    def param_candidates(self, module: str, tok: str) -> list[tuple[str, str | None]]:
        """Parametrizations naming ``tok`` whose test module can reach ``module`` (or whose
        source is not in the checkout, so nothing says it cannot)."""
        key = (module, tok)
        if key not in self._params_by_module:
            reach_files = self.test_importers(module)[1]
            out = []
            unreached = 0
            for tid, pname in self.params_naming(tok):
                fid = tid.split("::", 1)[0]
                if fid in reach_files or not self.source_known(fid):
                    out.append((tid, pname))
                else:
                    unreached += 1
            self._params_by_module[key] = out
            if unreached:  # said in the audit's notes: why the value links none of them
                self.unreached[key] = unreached
        return self._params_by_module[key]

    # ---- resolved names (the symbol tier) ------------------------------------------------------
    @property
    def resolver(self) -> Resolver:
        if self._resolver is None:
            self._resolver = Resolver(self.graph.modules, self.graph.definers())
        return self._resolver

    def test_functions(self, module: str) -> list[str]:
        """The test functions and methods of a test module (``test*``), as units."""
        info = self.graph.modules[module]
        return [q for q in info.code
                if q.rsplit(".", 1)[-1].startswith("test") and q not in info.bases]

    def target_unit(self, b: Behaviour) -> str | None:
        key = (b.module, b.qualname)
        if key not in self._targets:
            self._targets[key] = (None if b.qualname == "<module>" else
                                  target_unit(self.graph.modules, b.module, b.qualname))
        return self._targets[key]

    def test_reach(self, module: str, qualname: str) -> ReachOfTest:
        """What one test function reaches (memoized: every changed unit asks the same)."""
        key = (module, qualname)
        got = self._reach.get(key)
        if got is None:
            cls = qualname.rpartition(".")[0]
            own = f"{module}:{cls}" if cls in self.graph.modules[module].bases else ""
            got = self._reach[key] = reach_of(self.resolver, Node(module, qualname, own),
                                                self._test_side)
        return got

    def link_of(self, module: str, qualname: str, target: str) -> Link | None:
        return link_of(self.test_reach(module, qualname), target, self.resolver)

    def linkable(self, modules: Iterable[str], target: str) -> set[str]:
        """The test modules of ``modules`` some test of which can link ``target`` (a quick
        filter, as the tier's spelling filter was: most reach none of the changed units).
        Each module's tests are resolved once, into an index of what any of them reaches,
        calls unresolved or names (a class); the filter is then a look-up per changed unit."""
        for m in modules:
            if m not in self._indexed:
                self._index(m)
        leaf = target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        found = self._by_unit.get(target, set()) | self._by_name.get(leaf, set())
        for cls, mods in self._by_class.items():
            if self.resolver.method(cls, leaf) == target:
                found |= mods
        return found

    def _index(self, module: str) -> None:
        self._indexed.add(module)
        entry = self.reach_memo.get(module) if self.reach_memo is not None else None
        if entry is None:
            units: set[str] = set()
            unresolved: set[str] = set()
            classes: set[str] = set()
            for q in self.test_functions(module):
                r = self.test_reach(module, q)
                units.update(r.units)
                unresolved |= r.unresolved
                classes |= r.classes
            entry = (tuple(sorted(units)), tuple(sorted(unresolved)), tuple(sorted(classes)))
            if self.reach_memo is not None:
                self.reach_memo.put(module, entry)
        for u in entry[0]:
            self._by_unit.setdefault(u, set()).add(module)
        for name in entry[1]:
            self._by_name.setdefault(name, set()).add(module)
        for cls in entry[2]:
            self._by_class.setdefault(cls, set()).add(module)

    def _test_side(self, module: str) -> bool:
        """Whether a module is test-side code (under a test root: tests, conftest, helpers)."""
        got = self._test_side_memo.get(module)
        if got is None:
            info = self.graph.modules.get(module)
            got = self._test_side_memo[module] = bool(info and test_file_id(info.path))
        return got

    def source_known(self, file_id: str) -> bool:
        if file_id not in self._known:
            self._known[file_id] = any(p in self.graph.by_path for p in source_path(file_id))
        return self._known[file_id]

    # ---- parameter names of bare ids -----------------------------------------------------------
    def bare_param_name(self, test_id: str, value: str) -> str | None:
        """The parameter a bare id piece (``test_x[FLASHINFER]``) sets, from the test's own
        ``parametrize`` decorators when its source says so unambiguously; else None."""
        key = (test_id, value)
        if key not in self._bare_names:
            self._bare_names[key] = self._find_bare_name(test_id, value)
        return self._bare_names[key]

    def _find_bare_name(self, test_id: str, value: str) -> str | None:
        fid, _, rest = test_id.partition("::")
        path = next((p for p in source_path(fid) if p in self.graph.by_path), None)
        tree = self._tree(path) if path else None
        if tree is None:
            return None
        return parametrized_name(tree, rest.split("[", 1)[0].split("::"), value)

    def _tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            text = self.texts.get(path)
            try:
                if text is None:
                    with open(os.path.join(self.root, path), encoding="utf-8") as f:
                        text = f.read()
                self._trees[path] = ast.parse(text)
            except (OSError, SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]


class ValueCounts:
    """``value_counts(ids).get(tok, 0)`` for the few tokens a change asks about, without
    counting every value of every id (the listed ids the inventory lacks: all 4,500 of
    data/trtllm's plan in the benchmark tree, 7 ms to count; most tokens are in none of them,
    which one search of their joined parameter texts says)."""

    def __init__(self, ids: Iterable[str]) -> None:
        self._params = [p for p in map(params_text, ids) if p is not None]
        self._joined = "\0".join(self._params)
        self._memo: dict[str, int] = {}

    def count(self, tok: str) -> int:
        got = self._memo.get(tok)
        if got is None:
            got = self._memo[tok] = 0 if tok not in self._joined else sum(
                1 for p in self._params if tok in p and tok in value_pieces(p))
        return got


def parametrized_name(tree: ast.Module, qualname: list[str], value: str) -> str | None:
    """The argname of the ``parametrize`` decorator (on the function or its classes) that
    gives ``value``: the one single-name decorator listing ``value`` as a literal, else the
    only argname there is. Hand-written: pytest learns this only by importing the module."""
    body: list[ast.stmt] = tree.body
    decorators: list[ast.expr] = []
    for name in qualname:
        node = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef,
                                                        ast.AsyncFunctionDef))
                     and n.name == name), None)
        if node is None:
            return None
        decorators += node.decorator_list
        body = node.body if isinstance(node, ast.ClassDef) else []
    layers = [layer for d in decorators if (layer := _parametrize(d)) is not None]
    names = [n for argnames, _ in layers for n in argnames]
    listing = [argnames[0] for argnames, values in layers
               if len(argnames) == 1 and value in values]
    if len(listing) == 1:
        return listing[0]
    return names[0] if len(names) == 1 and not listing else None


def _parametrize(node: ast.expr) -> tuple[list[str], set[str]] | None:
    """(argnames, literal string values) of a ``pytest.mark.parametrize(...)`` call."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) != "parametrize":
        return None
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    first = node.args[0] if node.args else kw.get("argnames")
    second = node.args[1] if len(node.args) > 1 else kw.get("argvalues")
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        argnames = [n.strip() for n in first.value.split(",") if n.strip()]
    elif isinstance(first, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in first.elts):
        argnames = [str(e.value) for e in first.elts if isinstance(e, ast.Constant)]
    else:
        return None
    values = {n.value for n in ast.walk(second) if isinstance(n, ast.Constant)
              and isinstance(n.value, str)} if second is not None else set()
    return argnames, values
