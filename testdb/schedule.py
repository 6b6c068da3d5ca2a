"""Where each list entry runs: stages, shards, PR classes, waives, QA; a verdict per test."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from testdb.grammar import Entry
from testdb.index import Index
from testdb.matching import match
from testdb.model import Block, Context
from testdb.shards import least_duration, shard_durations
from testdb.stages import Stage, pr_class, stage_facts

VERDICTS = ("pre-merge", "gated", "post-merge-only", "qa-only", "waived", "unscheduled")
_CLASS_RANK = {"pre-merge": 0, "perf": 0, "gated": 1, "post-merge": 2}


def verdict_of_class(cls: str) -> str:
    """Map a stage's PR class to the verdict word a placement on it earns."""
    if cls in ("pre-merge", "perf"):
        return "pre-merge"
    if cls.startswith("gated"):
        return "gated"
    return "post-merge-only"


@dataclass(frozen=True)
class StageRun:
    """One stage that renders the entry: its shard, its PR class, and waives in force there."""

    stage: str
    pr_class: str
    shard: int
    splits: int
    assumed: tuple[str, ...] = ()
    waived_by: tuple[Entry, ...] = ()

    @property
    def verdict(self) -> str:
        return verdict_of_class(self.pr_class)


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
    pr_class: str
    entries: list[Entry] = field(default_factory=list)  # this shard's entries, in list order
    context_entries: int = 0  # entries of the whole (unsplit) rendered list
    duration_s: float = 0.0  # estimated duration of this shard
    assumed: tuple[str, ...] = ()
    missing_context: bool = False


@dataclass
class Schedule:
    placements: dict[str, list[Placement]] = field(default_factory=dict)
    stages: dict[str, StageSchedule] = field(default_factory=dict)
    unreached_blocks: list[Block] = field(default_factory=list)
    unreached_contexts: list[Context] = field(default_factory=list)

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
    """Waives by the test they name; ``full:GPU/`` waives apply only in matching stages."""

    def __init__(self, waives: tuple[Entry, ...]) -> None:
        self.by_test: dict[str, list[Entry]] = defaultdict(list)
        for w in waives:
            self.by_test[w.test].append(w)

    def matching(self, entry: Entry) -> list[Entry]:
        found = list(self.by_test.get(entry.test, ()))
        node = entry.node
        if node is not None and node.params is not None:
            found += self.by_test.get(node.base, ())  # a waive of the function covers its params
        return found

    @staticmethod
    def applies(waive: Entry, stage: Stage | None) -> bool:
        if waive.gpu_prefix is None:
            return True
        # The stage's GPU type (first `-` token of its name) must occur in the prefix.
        return stage is not None and stage.gpu_type in waive.gpu_prefix


def duration_key(entry: Entry, durations: dict[str, float]) -> str:
    if entry.test in durations or not entry.is_unittest:
        return entry.test
    return entry.ci_node_id if entry.ci_node_id in durations else entry.test


def build_schedule(index: Index) -> Schedule:
    sched = Schedule()
    waives = WaiveIndex(index.waives)
    tags = index.triggers.tags
    placements: dict[str, list[Placement]] = defaultdict(list)
    runs_of: dict[tuple[int, int], list[StageRun]] = defaultdict(list)  # id(entry) -> runs
    reached_blocks: set[tuple[str, int]] = set()
    rendered_cache: dict[tuple[str, tuple[int, ...]], tuple[list[Entry], list[list[int]]]] = {}
    entry_ref: dict[int, Entry] = {}

    for stage in index.stages:
        if stage.disabled:
            continue
        cls = pr_class(stage, tags)
        ss = StageSchedule(stage, cls)
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
        key = (ctx.name, tuple(b.index for b, _ in matched))
        if (key, stage.splits) not in rendered_cache:
            seen: set[str] = set()
            rendered: list[Entry] = []
            for block, _ in matched:
                for e in block.entries:
                    if e.test not in seen:  # pytest runs a repeated id once
                        seen.add(e.test)
                        rendered.append(e)
            ids = [duration_key(e, index.durations) for e in rendered]
            groups = least_duration(ids, index.durations, stage.splits)
            rendered_cache[(key, stage.splits)] = (rendered, groups)  # type: ignore[index]
        rendered, groups = rendered_cache[(key, stage.splits)]  # type: ignore[index]
        ss.context_entries = len(rendered)
        if not 1 <= stage.split_id <= stage.splits:
            continue
        shard = groups[stage.split_id - 1]
        ss.entries = [rendered[i] for i in shard]
        ids = [duration_key(e, index.durations) for e in rendered]
        ss.duration_s = shard_durations(ids, index.durations, [shard])[0]
        assumed_of = {id(e): a for b, a in matched for e in b.entries}
        for e in ss.entries:
            waived = tuple(w for w in waives.matching(e) if waives.applies(w, stage))
            run = StageRun(stage.name, cls, stage.split_id, stage.splits,
                           assumed_of.get(id(e), ()), waived)
            runs_of[(id(e), 0)].append(run)
            entry_ref[id(e)] = e

    for ctx in index.contexts.values():
        reached_any = False
        for block in ctx.blocks:
            if ctx.kind == "l0" and (ctx.name, block.index) not in reached_blocks:
                sched.unreached_blocks.append(block)
            else:
                reached_any = True
            for e in block.entries:
                if ctx.kind == "qa":
                    plain = tuple(w for w in waives.matching(e) if w.gpu_prefix is None)
                    placements[e.test].append(Placement("qa", e, ctx.name, block, (), plain))
                else:
                    runs = tuple(runs_of.get((id(e), 0), ()))
                    placements[e.test].append(Placement("test-db", e, ctx.name, block, runs))
        if ctx.kind == "l0" and not reached_any:
            sched.unreached_contexts.append(ctx)
    for qa in index.qa_lists:
        for e in qa.entries:
            plain = tuple(w for w in waives.matching(e) if w.gpu_prefix is None)
            placements[e.test].append(Placement("qa", e, qa.name, None, (), plain))
    sched.placements = dict(placements)
    return sched
