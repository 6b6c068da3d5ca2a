"""Linking a behaviour change to its guards: one linker per evidence tier (coverage, parameter,
symbol, declared, module), each returning Evidence; the verdict is auditor.verdict's."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from auditor.behaviour import Behaviour
from auditor.candidates import Candidates, source_path, test_file_id
from auditor.diff import Change
from auditor.evidence import Evidence, parameter_rank, parameter_reason, strongest
from auditor.graph import ImportGraph, start_graph
from auditor.guards import _ORDER, GuardLocator
from auditor.model import TIERS, Guard
from auditor.part_memo import Part, PartMemo, module_links
from auditor.reach_memo import ReachMemo
from auditor.verdict import Decision, combine, decide, thin_guard
from testdb.botcmd import BotCommand
from testdb.gcpause import gc_paused
from testdb.pipeline import pr_stages

__all__ = ["MAX_FINDING_GUARDS", "MAX_TOKEN_PARAMS", "Auditor", "Judgement", "source_path",
           "test_file_id"]

MAX_FINDING_GUARDS = 50  # a finding names at most this many guards; the behaviour has all
# A token that names more parametrizations than this (`True`-like values, a backend used by
# half the suite) says nothing specific about a change: it is left out of the parameter tier.
MAX_TOKEN_PARAMS = 1000
CONTEXT_GUARDS = 10  # module-tier guards kept when the tier is only context
MAX_SHOWN_GUARDS = 50  # Guard records kept per tier (pre-merge ones first); all are judged


class Judgement:
    """A behaviour's decision, its guards by tier (the ones worth showing) and every tier's
    full count."""

    __slots__ = ("counts", "decision", "guards", "stages", "thin")

    def __init__(self, decision: Decision, guards: dict[str, list[Guard]],
                 counts: dict[str, int], stages: list[str]) -> None:
        self.decision = decision
        self.guards = guards
        self.counts = counts
        self.stages = stages  # CI stages of the deciding guards that do not run pre-merge
        self.thin = thin_guard(decision)  # integration guards missing when only units run


def head_side(change: Change) -> tuple[dict[str, str], set[str]]:
    """The head side of a change over its checkout: the head texts of the files it changes (a
    diff applied to a base-side checkout) and the files it removes."""
    texts = {f.new_path: f.new_text for f in change.files
             if f.new_path and f.new_text is not None}
    gone = {f.old_path for f in change.files if f.old_path and f.old_path != f.new_path}
    return texts, gone


def start_head_graph(change: Change) -> Callable[[], ImportGraph]:
    """``start_graph`` of the change's head side: its scans start now (``Auditor``'s
    ``graph``), so a caller can parse the plan meanwhile."""
    texts, gone = head_side(change)
    return start_graph(change.root, texts, exclude=gone)


def start_head_inventory(change: Change) -> Callable[[], Any]:
    """``start_static_inventory`` of the change's head side (``Auditor``'s ``inventory``)."""
    texts, gone = head_side(change)
    return start_static_inventory(change.root, texts, gone)


class Auditor(Candidates):
    def __init__(self, index: Any, change: Change, inventory: Any = None,
                 graph: ImportGraph | Callable[[], ImportGraph] | None = None,
                 coverage: str | None = None, bot: BotCommand | None = None,
                 measured: Any = None) -> None:
        """``graph``: the import graph, one started by ``start_head_graph``, or None (built
        here); ``inventory``: likewise, or one started by ``start_head_inventory``;
        ``measured``: the test-to-code map (``auditor.measured.Measured``), or None."""
        self.change = change
        # The stages this PR's pipeline starts: its changed files and its /bot run command.
        self.pipeline = pr_stages(index.stages, index.triggers, change.paths, bot)
        texts, gone = head_side(change)
        with gc_paused(freeze=True):  # the graph and the inventory live as long as the Auditor too
            # Both builds run at once (when cold and large, each in a child process).
            finish = start_graph(change.root, texts, exclude=gone) if graph is None else graph
            started = (start_static_inventory(change.root, texts, gone) if inventory is None
                       else inventory)
            inventory = started() if callable(started) else started
            built = finish() if callable(finish) else finish
        super().__init__(index, change.root, built, inventory, texts)
        from testdb.inventory.cache import default_cache_dir

        cache_dir = str(default_cache_dir())
        self.locator = GuardLocator.build(index, self.pipeline, self.inventory, cache_dir)
        # The module tier's file parts of earlier audits of this plan and pipeline.
        self._memo = (PartMemo.open(cache_dir, index.key, self.pipeline.started,
                                    self.inventory.file_key)
                      if index.key and self.inventory is not None else None)
        if built.key is not None:  # a graph kept as a plain form: its symbol-tier index too
            self.reach_memo = ReachMemo.open(cache_dir, built.key)
        self.coverage = coverage
        self.measured = measured
        self.common_tokens: set[str] = set()
        self._guards: dict[Evidence, Guard] = {}
        self._guard_cache: dict[str, tuple[str, str, Any, str]] = {}
        self._module_ev: dict[tuple[str, int], Evidence] = {}
        self._module_tier: dict[tuple[str, int | None], list[Evidence]] = {}
        self._module_counts: dict[str, int] = {}
        self._module_judgements: dict[str, Judgement] = {}
        self._file_parts: dict[str, Part] = {}
        self._effective: dict[str, str] = {}
        self._import_index: Any = None  # auditor.removed.ImportIndex, for removed modules
        self._removals: dict[str, Any] = {}

    def save(self) -> None:
        """Keep what this audit learnt that the next one can use (unit-test selections, the
        module tier's file parts)."""
        self.locator.save()
        if self._memo is not None:
            self._memo.save()
        if self.reach_memo is not None:
            self.reach_memo.save()

    # ---- the judgement -----------------------------------------------------------------------
    def judge(self, b: Behaviour, changed_test_ids: dict[str, str]) -> Judgement:
        """The evidence of every tier, and the decision it supports. With no specific link
        the module tier decides; that depends only on the module, so it is judged once."""
        with gc_paused(freeze=True):
            return self._judge(b, changed_test_ids)

    def _judge(self, b: Behaviour, changed_test_ids: dict[str, str]) -> Judgement:
        specific = self.specific_links(b, changed_test_ids)
        if self.measured is not None:  # the map's links added, the links it refutes dropped
            specific = self.measured.apply(b, specific)
        if not specific:
            if b.module not in self._module_judgements:
                self._module_judgements[b.module] = self._module_judgement(b.module)
            return self._module_judgements[b.module]
        return self.judge_links([*specific, *self.module_links(b.module, CONTEXT_GUARDS)],
                                {"module": self._module_count(b.module)})

    def judge_links(self, evidence: list[Evidence], counts: dict[str, int] | None = None
                    ) -> Judgement:
        decision = (decide(evidence, self.effective) if self.measured is None
                    else self.measured.decide(evidence, self.effective))
        by_tier: dict[str, list[Evidence]] = {}
        for e in evidence:
            by_tier.setdefault(e.tier, []).append(e)
        guards: dict[str, list[Guard]] = {}
        all_counts: dict[str, int] = {}
        for tier in TIERS:
            if tier in by_tier:
                links = strongest(by_tier[tier])
                all_counts[tier] = (counts or {}).get(tier, len(links))
                guards[tier] = [self.guard(e) for e in self._shown(links)]
        return Judgement(decision, guards, all_counts, sorted(self._stages(decision)))

    def _stages(self, decision: Decision) -> set[str]:
        """The CI stages that run the deciding guards that do not run pre-merge."""
        return {r.stage for t in decision.not_pre_merge for r in self.runs_of(t)[2]
                if not r.waived and r.kind != "qa"}

    def _module_judgement(self, module: str) -> Judgement:
        """The module tier deciding: thousands of links, judged test file by test file (a
        file's links recur in every module it imports) and combined (``combine`` is exact:
        no test is in two files)."""
        files = self._module_files(module)
        parts = [self._file_part(fid) for _, fid in files]
        decision = combine(p[0] for p in parts)
        # The first of the files' shown ids, each file's already in order: merged, not sorted.
        top = itertools.islice(heapq.merge(*(_tagged(p[1], dist) for (dist, _), p
                                             in zip(files, parts, strict=True))),
                               MAX_SHOWN_GUARDS)
        shown = sorted((self._module_link(tid, dist) for _, tid, dist in top),
                       key=lambda e: e.test_id)
        guards = {"module": [self.guard(e) for e in shown]} if shown else {}
        # Every id of each file once (_module_count's figure, without asking for the ids again):
        # a part decides on all of its file's ids but those that name no test.
        per_file = {fid: len(p[0].deciding) + len(p[0].invalid)
                    for (_, fid), p in zip(files, parts, strict=True)}
        counts = {"module": sum(per_file.values())} if shown else {}
        return Judgement(decision, guards, counts, sorted(set().union(*(p[2] for p in parts))))

    def _file_part(self, file_id: str) -> Part:
        """One test file's module-tier links judged once, whatever module reaches it: their
        decision (links without the distance, which differs per module), the ids worth
        showing (with their verdict's order: pre-merge first), and the stages of those not
        pre-merge."""
        if file_id not in self._file_parts:
            part = self._memo.get(file_id) if self._memo is not None else None
            if part is None:
                d = decide(module_links(self.items_of(file_id, "")), self.effective)
                top = heapq.nsmallest(MAX_SHOWN_GUARDS,
                                      ((_ORDER.get(self.effective(e.test_id), 99), e.test_id)
                                       for e in d.deciding))
                part = (d, top, frozenset(self._stages(d)))
                if self._memo is not None:
                    self._memo.put(file_id, part)
            self._file_parts[file_id] = part
        return self._file_parts[file_id]

    def _module_files(self, module: str) -> list[tuple[int, str]]:
        """(distance, test file id) of every test module importing ``module``, nearest first."""
        return [(dist, self.module_file_id(mod) or "") for mod, dist in
                sorted(self.test_importers(module)[0].items(), key=lambda kv: (kv[1], kv[0]))]

    def effective(self, test_id: str) -> str:
        """The verdict of one test for this change (its schedule, the gates this PR opens)."""
        v = self._effective.get(test_id)
        if v is None:
            v = self._effective[test_id] = self.runs_of(test_id)[1]
        return v

    def _shown(self, links: list[Evidence]) -> list[Evidence]:
        """The links worth a Guard record: all, or the strongest and pre-merge ones first."""
        if len(links) <= MAX_SHOWN_GUARDS:
            return links
        top = heapq.nsmallest(MAX_SHOWN_GUARDS, ((e.rank, _ORDER.get(self.effective(e.test_id),
                                                                        99), e.test_id, i)
                                                 for i, e in enumerate(links)))
        return sorted((links[i] for *_, i in top), key=lambda e: e.test_id)

    # ---- guard records -----------------------------------------------------------------------
    def guard(self, e: Evidence) -> Guard:
        # Guards are immutable and recur across behaviour changes of one module: share them.
        hit = self._guards.get(e)
        if hit is None:
            verdict, effective, runs, via = self.runs_of(e.test_id)
            path, line = "", 0
            if self.inventory is not None:
                # A listed id of a function parametrized at run time is no item of its own:
                # the function's (indeterminate) item says where it is.
                it = self.inventory.get(e.test_id) or next(
                    iter(self.inventory.by_base(e.test_id.split("[", 1)[0])), None)
                if it is not None:
                    path, line = it.path or it.file, it.line
            hit = self._guards[e] = Guard(e.test_id, e.tier, e.reason, e.strength, verdict,
                                          effective, runs, via, e.distance, path, line, e.rank)
        return hit

    def runs_of(self, test_id: str) -> tuple[str, str, Any, str]:
        """(schedule verdict, effective verdict, runs, via), computed once per test id."""
        if test_id not in self._guard_cache:
            self._guard_cache[test_id] = self.locator.runs(test_id)
        return self._guard_cache[test_id]

    # ---- linkers, one per tier ---------------------------------------------------------------
    def specific_links(self, b: Behaviour, changed_test_ids: dict[str, str]) -> list[Evidence]:
        """Every link more specific than the module tier."""
        symbol = self.symbol_links(b)
        reached = {e.test_id for e in symbol if e.can_guard}
        return [*self.coverage_links(b), *self.parameter_links(b, reached), *symbol,
                *self.declared_links(b, changed_test_ids)]

    def coverage_links(self, b: Behaviour) -> list[Evidence]:
        if not self.coverage:
            return []
        from auditor.coverage_link import covering_tests

        return [Evidence(tid, "coverage", 1, "ran the changed lines")
                for tid in covering_tests(self.coverage, self.change.root, b.path,
                                          set(b.added), self.all_ids())]

    def parameter_links(self, b: Behaviour, reached: set[str]) -> list[Evidence]:
        """Parametrizations one of whose values is a changed token, ranked by
        ``parameter_rank``; ``reached``: the tests that reach the changed unit (symbol)."""
        names_on_lines = set(b.tokens)
        reach = self.test_importers(b.module)[1]  # the import distance, where the source is
        out: list[Evidence] = []
        for tok in b.tokens:
            if self.value_count(tok) > MAX_TOKEN_PARAMS:
                self.common_tokens.add(tok)
                continue
            for tid, pname in self.param_candidates(b.module, tok):
                pname = pname or self.bare_param_name(tid, tok)
                rank = parameter_rank(pname is not None and pname in names_on_lines,
                                      tid in reached)
                out.append(Evidence(tid, "parameter", rank, parameter_reason(pname, tok, rank),
                                    reach.get(tid.split("::", 1)[0]), value=tok))
        return out

    def symbol_links(self, b: Behaviour) -> list[Evidence]:
        """Test functions whose names resolve to the changed unit (``auditor.resolve``):
        through their imports and receivers, fixtures and helpers, and the project's call
        graph (``symbol``); or that only call its name on a receiver resolving to nothing,
        or name its class (``symbol/2``, weak). In test modules that import the changed
        module."""
        target = self.target_unit(b)
        if target is None:
            return []
        out: list[Evidence] = []
        importers = self.test_importers(b.module)[0]
        linkable = self.linkable(importers, target)
        for mod, dist in importers.items():
            if mod not in linkable:
                continue
            fid = self.module_file_id(mod) or ""
            for q in self.test_functions(mod):
                link = self.link_of(mod, q, target)
                if link is not None:
                    out += [Evidence(tid, "symbol", link.rank, link.reason, dist)
                            for tid in self.items_of(fid, q)]
        return out

    def removal(self, old_module: str) -> Any:
        """What removing ``old_module`` breaks (``auditor.removed.removal``): its importers on
        the head side and the links of the tests that would fail."""
        from auditor.removed import ImportIndex, removal

        if old_module not in self._removals:
            if self._import_index is None:
                self._import_index = ImportIndex(self)
            self._removals[old_module] = removal(self, self._import_index, old_module)
        return self._removals[old_module]

    def declared_links(self, b: Behaviour, changed_test_ids: dict[str, str]) -> list[Evidence]:
        """Tests this diff changes whose module reaches the changed module."""
        reach_files = self.test_importers(b.module)[1]
        return [Evidence(tid, "declared", 1, "changed in this diff", reach_files[fid])
                for tid, fid in changed_test_ids.items() if fid in reach_files]

    def module_links(self, module: str, limit: int | None = None) -> list[Evidence]:
        """Every test of every test module importing ``module`` (nearest first); as context
        (``limit``) only the nearest few. Built once per module and limit."""
        key = (module, limit)
        if key not in self._module_tier:
            test_mods = self.test_importers(module)[0]
            out: list[Evidence] = []
            for mod, dist in sorted(test_mods.items(), key=lambda kv: (kv[1], kv[0])):
                ids = self.items_of(self.module_file_id(mod) or "", "")
                out += [self._module_link(t, dist) for t in ids[:None if limit is None
                                                                 else limit - len(out)]]
                if limit is not None and len(out) >= limit:
                    break
            self._module_tier[key] = out
        return self._module_tier[key]

    def _module_link(self, tid: str, dist: int) -> Evidence:
        # One record per (test, distance), shared by every module that reaches the test.
        key = (tid, dist)
        e = self._module_ev.get(key)
        if e is None:
            e = self._module_ev[key] = Evidence(
                tid, "module", 1, f"imports the changed module (distance {dist})", dist)
        return e

    def _module_count(self, module: str) -> int:
        if module not in self._module_counts:
            fids = {self.module_file_id(mod) or "" for mod in self.test_importers(module)[0]}
            self._module_counts[module] = sum(len(self.items_of(f, "")) for f in fids)
        return self._module_counts[module]


def _tagged(keys: list[tuple[int, str]], dist: int) -> Iterator[tuple[int, str, int]]:
    """A file's shown ids (in order) with the distance of the module that reaches it."""
    for order, tid in keys:
        yield order, tid, dist


def start_static_inventory(root: str, texts: dict[str, str], gone: set[str]
                           ) -> Callable[[], Any]:
    """The static inventory of the change's head side, in two steps (``start_static``): its
    scans start now; the function returned collects them and overlays the changed files."""
    from testdb.inventory import start_static

    built = start_static(root)
    overlay = {p: test_file_id(p) for p in [*texts, *gone]}
    stale = {fid for fid in overlay.values() if fid}
    if not stale:
        return built

    def finish() -> Any:
        from testdb.inventory import scan_source  # the scanner: only for test files changed

        items = []
        for path, text in texts.items():
            fid = overlay[path]
            name = path.rsplit("/", 1)[-1]
            if fid and name.startswith("test_") and name.endswith(".py"):
                dirs = tuple(fid.split("/")[:-1])
                dirs = dirs[1:] if fid.startswith("unittest/") else dirs
                items += scan_source(text, fid, path=path, dirs=dirs)
        return built().without_files(stale, items)

    return finish
