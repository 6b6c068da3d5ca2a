"""Linking a behaviour change to its guards, tier by tier (coverage, parameter, symbol,
declared, module), with the memos that keep a large checkout's audit fast."""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import Any, NamedTuple

from auditor.behaviour import Behaviour
from auditor.diff import Change
from auditor.graph import ImportGraph, build_graph
from auditor.guards import _ORDER, GuardLocator, best, compute_gates
from auditor.model import TIERS, Guard
from testdb.index import Index
from testdb.inventory.build import DEFAULT_DIRS
from testdb.inventory.model import params_with_value, value_counts

MAX_FINDING_GUARDS = 50  # a finding names at most this many guards; the behaviour has all
# A token that names more parametrizations than this (`True`-like values, a backend used by
# half the suite) says nothing specific about a change: it is left out of the parameter tier.
MAX_TOKEN_PARAMS = 1000
CONTEXT_GUARDS = 10  # module-tier guards kept when the tier is only context
MAX_DECIDING_MODULE_GUARDS = 50  # ... and when it decides (pre-merge ones first)


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


class Auditor:
    def __init__(self, index: Index, change: Change, inventory: Any = None,
                 graph: ImportGraph | None = None, coverage: str | None = None) -> None:
        self.index = index
        self.change = change
        self.gates = compute_gates(change.paths, index.triggers)
        # The head side: the checkout, overlaid with the change's head texts (a diff applied to
        # a base-side checkout) and without the files the change removes.
        texts = {f.new_path: f.new_text for f in change.files
                 if f.new_path and f.new_text is not None}
        gone = {f.old_path for f in change.files if f.old_path and f.old_path != f.new_path}
        self.graph = graph or build_graph(change.root, texts, exclude=gone)
        self.inventory = (inventory if inventory is not None
                          else _static_inventory(change.root, texts, gone))
        self.locator = GuardLocator.build(index, self.gates, self.inventory)
        self.coverage = coverage
        self._ids: set[str] | None = None
        self._by_base: dict[str, list[str]] | None = None
        self._module_tier: dict[tuple[str, int | None], list[Guard]] = {}
        self._module_counts: dict[str, int] = {}
        self._items_memo: dict[tuple[str, str], list[str]] = {}
        self._importers: dict[str, tuple[dict[str, int], dict[str | None, int]]] = {}
        self._module_names: dict[str, frozenset[str]] = {}
        self._guards: dict[tuple[str, str, str, str, int | None], Guard] = {}
        self._known: dict[str, bool] = {}
        self.common_tokens: set[str] = set()
        self._heavy: dict[tuple[str, int], tuple[list[Guard], int]] = {}
        self._file_summaries: dict[str, _FileSummary] = {}
        # id(list) -> (the list, kept alive so its id stays unique; its summary)
        self._summaries: dict[int, tuple[list[Guard], tuple[str, tuple[str, ...], list[str]]]] = {}
        self._params_by_module: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        self._param_index: dict[str, list[tuple[str, str | None]]] = {}
        self._values: Counter[str] | None = None
        self._listed_only: list[str] | None = None  # listed ids the inventory lacks
        self._guard_cache: dict[str, tuple[str, str, Any, str]] = {}

    # ---- candidates --------------------------------------------------------------------------
    def _all_ids(self) -> set[str]:
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
            for tid in self._all_ids():
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
            # The inventory's counts come with it (cached); listed ids it lacks are added.
            if self.inventory is None:
                self._values = Counter(value_counts(self._all_ids()))
            else:
                self._values = Counter(self.inventory.param_value_counts())
                self._values.update(value_counts(self._listed_only_ids()))
        return self._values.get(tok, 0)

    def _listed_only_ids(self) -> list[str]:
        """Listed ids the inventory lacks (a test file not in the checkout, a typo)."""
        if self._listed_only is None:
            self._listed_only = [t for t in self.index.schedule.placements
                                 if t not in self.inventory]
        return self._listed_only

    def params_naming(self, tok: str) -> list[tuple[str, str | None]]:
        """(id, parameter name) of every parametrization one of whose values is ``tok``:
        the inventory's own index, and a scan of the listed ids it lacks."""
        if not self.value_count(tok):
            return []
        if tok not in self._param_index:
            if self.inventory is None:
                self._param_index[tok] = params_with_value(self._all_ids(), tok)
            else:
                self._param_index[tok] = [*self.inventory.params_with_value(tok),
                                          *params_with_value(self._listed_only_ids(), tok)]
        return self._param_index[tok]

    def _items_of(self, file_id: str, qualname: str) -> list[str]:
        key = (file_id, qualname)
        if key not in self._items_memo:
            self._items_memo[key] = self._find_items(file_id, qualname)
        return self._items_memo[key]

    def _find_items(self, file_id: str, qualname: str) -> list[str]:
        parts = qualname.split(".") if qualname else []
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

    def _module_file_id(self, module: str) -> str | None:
        info = self.graph.modules.get(module)
        return test_file_id(info.path) if info else None

    def guard(self, test_id: str, tier: str, reason: str, strength: str,
              distance: int | None = None) -> Guard:
        # Guards are immutable and recur across behaviour changes of one module: share them.
        key = (test_id, tier, reason, strength, distance)
        hit = self._guards.get(key)
        if hit is None:
            hit = self._guards[key] = self._make_guard(*key)
        return hit

    def runs_of(self, test_id: str) -> tuple[str, str, Any, str]:
        """(schedule verdict, effective verdict, runs, via), computed once per test id."""
        if test_id not in self._guard_cache:
            self._guard_cache[test_id] = self.locator.runs(test_id)
        return self._guard_cache[test_id]

    def _make_guard(self, test_id: str, tier: str, reason: str, strength: str,
                    distance: int | None) -> Guard:
        verdict, effective, runs, via = self.runs_of(test_id)
        path, line = "", 0
        if self.inventory is not None:
            it = self.inventory.get(test_id)
            if it is not None:
                path, line = it.path or it.file, it.line
        return Guard(test_id, tier, reason, strength, verdict, effective, runs, via, distance,
                     path, line)

    # ---- tiers -------------------------------------------------------------------------------
    def link(self, b: Behaviour, changed_test_ids: dict[str, str]
             ) -> tuple[dict[str, list[Guard]], dict[str, int]]:
        """Guards by tier, and how many each tier has (the module tier may be cut short)."""
        tiers: dict[str, list[Guard]] = {t: [] for t in TIERS}
        test_mods, reach_files = self._test_importers(b.module)
        if self.coverage:
            from auditor.coverage_link import covering_tests

            for tid in covering_tests(self.coverage, self.change.root, b.path,
                                      set(b.added), self._all_ids()):
                tiers["coverage"].append(self.guard(tid, "coverage", "ran the changed lines",
                                                    "strong"))
        names_on_lines = set(b.tokens)
        for tok in b.tokens:
            if self.value_count(tok) > MAX_TOKEN_PARAMS:
                self.common_tokens.add(tok)
                continue
            for tid, pname in self._param_candidates(b.module, tok, reach_files):
                strong = pname is not None and pname in names_on_lines
                why = (f"parameter {pname}={tok}" if pname else f"parameter value {tok}")
                why += " (parameter name on the changed lines)" if strong else ""
                tiers["parameter"].append(self.guard(tid, "parameter", why,
                                                     "strong" if strong else "medium"))
        symbols = {b.name, b.qualname.split(".", 1)[0]} - {"<module>"}
        for mod, dist in test_mods.items():
            info = self.graph.modules[mod]
            if not symbols & self._names_in(mod):
                continue
            fid = self._module_file_id(mod) or ""
            for q, (_, _, names) in info.functions.items():
                leaf = q.rsplit(".", 1)[-1]
                if not leaf.startswith("test") or not (symbols & names):
                    continue
                used = ", ".join(sorted(symbols & names))
                for tid in self._items_of(fid, q):
                    tiers["symbol"].append(self.guard(tid, "symbol", f"uses {used}", "strong",
                                                      dist))
        for tid, fid in changed_test_ids.items():
            if fid in reach_files:
                tiers["declared"].append(self.guard(tid, "declared", "changed in this diff",
                                                    "medium", reach_files[fid]))
        out = {t: _dedupe(gs) for t, gs in tiers.items() if gs}
        counts = {t: len(gs) for t, gs in out.items()}
        # The module tier decides only when nothing more specific links; otherwise it is
        # context, and a large checkout has thousands of such guards: count them, keep a few.
        context = bool(out)
        module = self._module_guards(b.module, test_mods, limit=CONTEXT_GUARDS if context
                                     else None)
        if module:
            out["module"] = module
            counts["module"] = self._module_count(b.module, test_mods)
        return out, counts

    def _test_importers(self, module: str) -> tuple[dict[str, int], dict[str | None, int]]:
        """The test modules importing ``module`` and their test files, with the distance."""
        if module not in self._importers:
            test_mods = {m: d for m, d in self.graph.importers(module).items()
                         if self._module_file_id(m)}
            self._importers[module] = (test_mods, {self._module_file_id(m): d
                                                   for m, d in test_mods.items()})
        return self._importers[module]

    def _param_candidates(self, module: str, tok: str, reach_files: dict[str | None, int]
                          ) -> list[tuple[str, str | None]]:
        """Parametrizations naming ``tok`` whose test module can reach ``module`` (or whose
        source is not in the checkout, so nothing says it cannot)."""
        key = (module, tok)
        if key not in self._params_by_module:
            out = []
            for tid, pname in self.params_naming(tok):
                fid = tid.split("::", 1)[0]
                if fid in reach_files or not self._source_known(fid):
                    out.append((tid, pname))
            self._params_by_module[key] = out
        return self._params_by_module[key]

    def summarize(self, guards: list[Guard]) -> tuple[str, tuple[str, ...], list[str]]:
        """(best verdict for this change, pre-merge guard ids, stages of the others); the
        module tier's list is shared by every behaviour of a module, so this is memoized."""
        key = id(guards)
        if key not in self._summaries:
            verdict = best([g.effective for g in guards])
            pre = tuple(g.test_id for g in guards if g.effective == "pre-merge")
            stages = sorted({r.stage for g in guards for r in g.runs
                             if not r.waived and r.pr_class != "qa"})
            self._summaries[key] = (guards, (verdict, pre, stages))
        return self._summaries[key][1]

    def unit_tests_only(self, guards: list[Guard], pre_merge: list[str]) -> bool:
        """Whether every pre-merge guard of a tier (``pre_merge``) is a unit test; memoized
        like ``summarize``: the module tier's thousands recur in each behaviour of a module."""
        key = ("units", id(guards))
        if key not in self._heavy:
            self._heavy[key] = (guards, int(all(t.startswith("unittest/") for t in pre_merge)))
        return bool(self._heavy[key][1])

    def heavy_not_pre_merge(self, guards: list[Guard]) -> int:
        """How many integration (not unit-test) guards of a tier do not run pre-merge."""
        key = ("heavy", id(guards))
        if key not in self._heavy:
            self._heavy[key] = (guards, sum(1 for g in guards if g.effective != "pre-merge"
                                            and not g.test_id.startswith("unittest/")))
        return self._heavy[key][1]

    def _module_guards(self, module: str, test_mods: dict[str, int], limit: int | None = None
                       ) -> list[Guard]:
        """Tier 5 depends only on the changed module: built once per module (and size limit),
        shared by all behaviour changes in it. As context (``limit``) it keeps the nearest
        importers; deciding, it judges every importer but keeps Guard records only for the
        ones worth showing (the verdict summary covers them all)."""
        key = (module, limit)
        if key in self._module_tier:
            return self._module_tier[key]
        files = [(dist, self._module_file_id(mod) or "")
                 for mod, dist in sorted(test_mods.items(), key=lambda kv: (kv[1], kv[0]))]
        if limit is not None:
            shown: list[tuple[str, int]] = []
            for dist, fid in files:
                shown += [(tid, dist) for tid in self._items_of(fid, "")[:limit - len(shown)]]
                if len(shown) >= limit:
                    break
            guards = [self._module_guard(tid, dist) for tid, dist in shown]
        else:
            # Judged per test file (a file's guards recur in every module it imports), then
            # combined: the best verdict, every pre-merge guard, every stage, and the guards
            # to show, pre-merge ones first.
            sums = [(dist, self._file_summary(fid)) for dist, fid in files]
            verdict = best([fs.verdict for _, fs in sums])
            pre = tuple(t for _, fs in sums for t in fs.pre_merge)
            stages = sorted(set().union(*(fs.stages for _, fs in sums)))
            top = heapq.nsmallest(MAX_DECIDING_MODULE_GUARDS,
                                  ((rank, tid, dist) for dist, fs in sums for rank, tid in fs.top))
            guards = [self._module_guard(tid, dist) for _, tid, dist in top]
            self._summaries[id(guards)] = (guards, (verdict, pre, stages))
            self._heavy[("heavy", id(guards))] = (guards, sum(fs.heavy for _, fs in sums))
        self._module_tier[key] = guards
        return guards

    def _module_guard(self, tid: str, dist: int) -> Guard:
        return self.guard(tid, "module", f"imports the changed module (distance {dist})", "weak",
                          dist)

    def _file_summary(self, file_id: str) -> _FileSummary:
        """One test file's guards as the module tier sees them, judged once per audit."""
        got = self._file_summaries.get(file_id)
        if got is None:
            ids = self._items_of(file_id, "")
            runs = [self.runs_of(t) for t in ids]
            eff = [r[1] for r in runs]
            got = _FileSummary(
                best(eff) if ids else "unscheduled",
                tuple(t for t, v in zip(ids, eff, strict=True) if v == "pre-merge"),
                frozenset(r.stage for run in runs for r in run[2]
                          if not r.waived and r.pr_class != "qa"),
                sum(1 for t, v in zip(ids, eff, strict=True)
                    if v != "pre-merge" and not t.startswith("unittest/")),
                heapq.nsmallest(MAX_DECIDING_MODULE_GUARDS,
                                ((_ORDER.get(v, 9), t) for t, v in zip(ids, eff, strict=True))))
            self._file_summaries[file_id] = got
        return got

    def _module_count(self, module: str, test_mods: dict[str, int]) -> int:
        if module not in self._module_counts:
            fids = {self._module_file_id(mod) or "" for mod in test_mods}
            self._module_counts[module] = sum(len(self._items_of(f, "")) for f in fids)
        return self._module_counts[module]

    def _names_in(self, module: str) -> frozenset[str]:
        """Every name the module's functions use (a quick filter for the symbol tier)."""
        if module not in self._module_names:
            info = self.graph.modules[module]
            self._module_names[module] = frozenset().union(
                *(names for _, _, names in info.functions.values()))
        return self._module_names[module]

    def _source_known(self, file_id: str) -> bool:
        if file_id not in self._known:
            self._known[file_id] = any(p in self.graph.by_path for p in source_path(file_id))
        return self._known[file_id]


class _FileSummary(NamedTuple):
    verdict: str  # the best effective verdict of the file's guards
    pre_merge: tuple[str, ...]
    stages: frozenset[str]
    heavy: int  # integration guards that do not run pre-merge
    top: list[tuple[int, str]]  # (verdict rank, id): the first to show


def _dedupe(guards: list[Guard]) -> list[Guard]:
    seen: dict[str, Guard] = {}
    for g in guards:
        if g.test_id not in seen or g.strength == "strong":
            seen[g.test_id] = g
    return sorted(seen.values(), key=lambda g: g.test_id)


def _static_inventory(root: str, texts: dict[str, str], gone: set[str]) -> Any:
    from testdb.inventory import build_static, scan_source

    inv = build_static(root)
    overlay = {p: test_file_id(p) for p in [*texts, *gone]}
    stale = {fid for fid in overlay.values() if fid}
    if not stale:
        return inv
    items = []
    for path, text in texts.items():
        fid = overlay[path]
        name = path.rsplit("/", 1)[-1]
        if fid and name.startswith("test_") and name.endswith(".py"):
            dirs = tuple(fid.split("/")[:-1])
            dirs = dirs[1:] if fid.startswith("unittest/") else dirs
            items += scan_source(text, fid, path=path, dirs=dirs)
    return inv.without_files(stale, items)
