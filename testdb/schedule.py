"""Where each list entry runs: stages, shards, placements, waives, QA; a verdict per test."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from testdb.grammar import Entry
from testdb.matching import match
from testdb.model import Block, Context, QaList
from testdb.pipeline import stage_placements
from testdb.shards import item_sort_name, least_duration, shard_durations
from testdb.stages import Stage, stage_facts
from testdb.triggers import Triggers


class Plan(Protocol):
    """What a schedule is built from: a ``testdb.index.Index`` (named by shape, not imported:
    the index imports this module to build its schedule, and no import cycle may form)."""

    @property
    def waives(self) -> tuple[Entry, ...]: ...
    @property
    def stages(self) -> tuple[Stage, ...]: ...
    @property
    def triggers(self) -> Triggers: ...
    @property
    def durations(self) -> dict[str, float]: ...
    @property
    def platform_facts(self) -> dict[str, dict[str, object]]: ...
    @property
    def qa_lists(self) -> tuple[QaList, ...]: ...
    @property
    def contexts(self) -> dict[str, Context]: ...
    def l0_contexts(self) -> list[Context]: ...

# `invalid` (last: worse than any): a listed name that names no test of the checkout, which
# CI ignores (testdb.names); the schedule never gives it, a check against the sources does.
VERDICTS = ("pre-merge", "gated", "post-merge-only", "qa-only", "waived", "unscheduled",
            "invalid")


@dataclass(frozen=True)
class StageRun:
    """One stage that renders the entry: its shard, its placement (pre-merge / gated /
    post-merge-only for a PR that opens nothing, and why), and waives in force there."""

    stage: str
    placement: str
    shard: int
    splits: int
    assumed: tuple[str, ...] = ()
    waived_by: tuple[Entry, ...] = ()
    why: str = ""

    @property
    def verdict(self) -> str:
        return self.placement


@dataclass(frozen=True)
class Placement:
    """One line that names the test: a test-db entry (with the stages running it) or a QA line."""

    kind: str  # "test-db" | "qa"
    entry: Entry
    context: str  # context name, or the QA list name
    block: Block | None
    runs: tuple[StageRun, ...] = ()
    waived_by: tuple[Entry, ...] = ()  # waives that apply outside stages (QA: plain waives)

    @property
    def assumed(self) -> bool:
        return bool(self.runs) and all(r.assumed for r in self.runs)


@dataclass
class StageSchedule:
    stage: Stage
    placement: str  # testdb.pipeline.stage_placements: pre-merge | gated | post-merge-only
    why: str = ""
    entries: list[Entry] = field(default_factory=list)  # this shard's entries, in list order
    context_entries: int = 0  # entries of the whole (unsplit) rendered list
    duration_s: float = 0.0  # estimated duration of this shard
    assumed: tuple[str, ...] = ()
    missing_context: bool = False


@dataclass
class Schedule:
    stages: dict[str, StageSchedule] = field(default_factory=dict)
    unreached_blocks: list[Block] = field(default_factory=list)
    unreached_contexts: list[Context] = field(default_factory=list)
    placements: Placements = field(default_factory=lambda: Placements({}, (), ()))

    def verdict(self, test: str) -> str:
        return verdict_for(self.placements.get(test, []))


def verdict_for(placements: list[Placement]) -> str:
    """Best placement wins: pre-merge > gated > post-merge-only > qa-only > unscheduled;
    ``waived`` when every placement that would run the test is waived."""
    best: str | None = None
    would_run = False
    qa_open = False
    for p in placements:
        for r in p.runs:
            would_run = True
            if not r.waived_by:
                v = r.verdict
                if best is None or VERDICTS.index(v) < VERDICTS.index(best):
                    best = v
        if p.kind == "qa":
            would_run = True
            qa_open = qa_open or not p.waived_by
    if best:
        return best
    if qa_open:
        return "qa-only"
    return "waived" if would_run else "unscheduled"


class WaiveIndex:
    """Waives as CI's ``apply_waives`` applies them (tests/integration/defs/test_list_parser.py):
    an item is marked only when its node id is exactly a waived name, so a waive without
    ``[params]`` does not waive the function's parametrizations; a ``full:GPU/`` waive applies
    in a stage only as ``parse_test_name`` rewrites it (see ``full_waive_applies``)."""

    def __init__(self, waives: tuple[Entry, ...]) -> None:
        self.by_test: dict[str, list[Entry]] = defaultdict(list)
        for w in waives:
            self.by_test[w.test].append(w)

    def matching(self, entry: Entry) -> list[Entry]:
        """The waives naming exactly this entry's test (a unit-test line: exactly its text,
        which is its item ``test_unittests_v2[LINE]``)."""
        return list(self.by_test.get(entry.test, ()))

    @staticmethod
    def applies(waive: Entry, stage: Stage | None) -> bool:
        if waive.gpu_prefix is None:
            return True  # `"/".join([test_prefix, s])`: the item's own prefixed id, every stage
        return stage is not None and full_waive_applies(waive.gpu_prefix, waive.ci_node_id,
                                                        stage.name)


def full_waive_applies(gpu: str, ci_node_id: str, stage: str) -> bool:
    """Whether ``full:GPU/ID`` waives item ID in stage ``stage`` (``--test-prefix=<stage>``).

    ``parse_test_name`` strips ``full:`` with ``str.lstrip`` (a character set), then, if the
    stage name's first ``-`` token occurs anywhere in the rest, replaces every occurrence of it
    by the stage name; the waive marks the item only if that gives the item's own id
    ``<stage>/<ID>``. So ``full:A100X/`` does not apply in ``A10-...`` (``A10`` occurs but the
    rewrite is ``A10-PyTorch-10X/...``) and ``full:H100/`` does not apply in ``DGX_H100-...``.
    """
    token = stage.split("-")[0]
    # CI's own character-set strip, kept on purpose: `full:l40s/x` becomes `40s/x` there.
    text = f"full:{gpu}/{ci_node_id}".lstrip("ful:")
    return token in text and text.replace(token, stage) == f"{stage}/{ci_node_id}"


def duration_key(entry: Entry, durations: dict[str, float]) -> str:
    """The key the entry's recorded duration is under: ``.test_durations`` records a unit-test
    line by its text (the CI item id is accepted too), every other line by its node id."""
    if entry.test in durations or not entry.is_unittest:
        return entry.test
    return entry.ci_node_id if entry.ci_node_id in durations else entry.test


def item_name(entry: Entry) -> str:
    """``str()`` of the entry's CI item, which pytest-split sorts ties by: a unit-test line is
    the item ``test_unittests.py::test_unittests_v2[LINE]``, so ``<Function test_unittests_v2[
    LINE]>`` (not the text after the last ``::`` of LINE)."""
    return item_sort_name(entry.ci_node_id)


class Placements(Mapping[str, list[Placement]]):
    """Test id -> every line that names it, in file order.

    Built per test on first use: a cached schedule then loads without creating ~15k records
    that a query mostly never looks at. ``runs`` holds, per test-db block, the stage runs of
    each of its entries (parallel to ``block.entries``).
    """

    def __init__(self, contexts: dict[str, Context], qa_lists: tuple[QaList, ...],
                 waives: tuple[Entry, ...],
                 runs: dict[tuple[str, int], list[tuple[StageRun, ...]]] | None = None) -> None:
        self.contexts = contexts
        self.qa_lists = qa_lists
        self.waives = waives
        self.runs = runs or {}
        self._lines: dict[str, list[tuple[Context | QaList, Block | None, int]]] | None = None
        self._made: dict[str, list[Placement]] = {}

    def __reduce__(self) -> tuple[object, ...]:
        return (Placements, (self.contexts, self.qa_lists, self.waives, self.runs))

    def _by_test(self) -> dict[str, list[tuple[Context | QaList, Block | None, int]]]:
        if self._lines is None:
            lines: dict[str, list[tuple[Context | QaList, Block | None, int]]] = defaultdict(list)
            for ctx in self.contexts.values():
                for block in ctx.blocks:
                    for pos, e in enumerate(block.entries):
                        lines[e.test].append((ctx, block, pos))
            for qa in self.qa_lists:
                for pos, e in enumerate(qa.entries):
                    lines[e.test].append((qa, None, pos))
            self._lines = dict(lines)
        return self._lines

    def __getitem__(self, test: str) -> list[Placement]:
        made = self._made.get(test)
        if made is None:
            made = self._made[test] = [self._placement(*ref) for ref in self._by_test()[test]]
        return made

    def _placement(self, owner: Context | QaList, block: Block | None, pos: int) -> Placement:
        if block is None:
            e = owner.entries[pos]
        else:
            e = block.entries[pos]
            if isinstance(owner, Context) and owner.kind == "l0":
                runs = self.runs.get((owner.name, block.index))
                return Placement("test-db", e, owner.name, block, runs[pos] if runs else ())
        plain = tuple(w for w in self._waive_index().matching(e) if w.gpu_prefix is None)
        return Placement("qa", e, owner.name, block, (), plain)

    def _waive_index(self) -> WaiveIndex:
        if "_waive_idx" not in self.__dict__:
            self._waive_idx = WaiveIndex(self.waives)
        return self._waive_idx

    def __contains__(self, test: object) -> bool:
        return test in self._by_test()

    def get(self, test: str, default: Any = None) -> Any:
        # Mapping.get goes through a KeyError per unlisted id: an audit asks of thousands.
        return self[test] if test in self._by_test() else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_test())

    def __len__(self) -> int:
        return len(self._by_test())


def build_schedule(index: Plan) -> Schedule:
    sched = Schedule()
    waives = WaiveIndex(index.waives)
    placements = stage_placements(index.stages, index.triggers)
    runs: dict[tuple[str, int], list[list[StageRun]]] = {
        (c.name, b.index): [[] for _ in b.entries] for c in index.l0_contexts() for b in c.blocks}
    reached_blocks: set[tuple[str, int]] = set()
    # (context, matched blocks, splits) -> the rendered list as (block, position) and its shards
    rendered_cache: dict[tuple[str, tuple[int, ...], int],
                         tuple[list[tuple[Block, int]], list[str], list[list[int]]]] = {}

    for stage in index.stages:
        if stage.disabled:
            continue
        cls = placements[stage.name]
        ss = StageSchedule(stage, cls.verdict, cls.why)
        sched.stages[stage.name] = ss
        ctx = index.contexts.get(stage.context)
        if ctx is None or ctx.kind != "l0":
            ss.missing_context = True
            continue
        facts = stage_facts(stage, index.platform_facts)
        matched: list[tuple[Block, tuple[str, ...]]] = []
        for block in ctx.blocks:
            m = match(block.condition, facts)
            if m.ok:
                matched.append((block, m.assumed))
                reached_blocks.add((ctx.name, block.index))
        ss.assumed = tuple(sorted({k for _, a in matched for k in a}))
        key = (ctx.name, tuple(b.index for b, _ in matched), stage.splits)
        if key not in rendered_cache:
            seen: set[str] = set()
            rendered: list[tuple[Block, int]] = []
            for block, _ in matched:
                for pos, e in enumerate(block.entries):
                    if e.test not in seen:  # pytest runs a repeated id once
                        seen.add(e.test)
                        rendered.append((block, pos))
            ids = [duration_key(b.entries[p], index.durations) for b, p in rendered]
            names = [item_name(b.entries[p]) for b, p in rendered]
            rendered_cache[key] = (rendered, ids, least_duration(ids, index.durations,
                                                                 stage.splits, names))
        rendered, ids, groups = rendered_cache[key]
        ss.context_entries = len(rendered)
        if not 1 <= stage.split_id <= stage.splits:
            continue
        shard = groups[stage.split_id - 1]
        ss.entries = [rendered[i][0].entries[rendered[i][1]] for i in shard]
        ss.duration_s = shard_durations(ids, index.durations, [shard])[0]
        assumed_of = {b.index: a for b, a in matched}
        for i in shard:
            block, pos = rendered[i]
            e = block.entries[pos]
            waived = tuple(w for w in waives.matching(e) if waives.applies(w, stage))
            runs[(ctx.name, block.index)][pos].append(
                StageRun(stage.name, cls.verdict, stage.split_id, stage.splits,
                         assumed_of[block.index], waived, cls.why))

    for ctx in index.l0_contexts():
        unreached = [b for b in ctx.blocks if (ctx.name, b.index) not in reached_blocks]
        sched.unreached_blocks.extend(unreached)
        if len(unreached) == len(ctx.blocks):
            sched.unreached_contexts.append(ctx)
    sched.placements = Placements(
        index.contexts, index.qa_lists, index.waives,
        {k: [tuple(r) for r in per_entry] for k, per_entry in runs.items()})
    return sched
