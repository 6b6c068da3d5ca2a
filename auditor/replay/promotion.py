"""The promotion plan: which post-merge tests, moved pre-merge in the range end's plan, would
have guarded the most historical changes, priced and checked by `testdb promote` itself."""

from __future__ import annotations

import dataclasses
import shlex
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from auditor.promote import plan_moves
from auditor.replay.model import CommitRecord, is_specific
from auditor.replay.planner import Candidate, Selection, greedy
from auditor.replay.scoring import FaultyChange
from testdb.errors import TestDbError, UsageError

# A guard that ran somewhere at its commit; moving it would have made it run before merge.
# (A guard waived, unscheduled or naming no test at its commit stays so: moving it helps not.)
RAN = ("gated", "post-merge-only", "qa-only")
RULE = ("greedy by value per added minute (value: the historical behaviour changes and faulty "
        "changes a move would have guarded; minutes: what it adds to the pre-merge shards, as "
        "`testdb promote` prices it), run from no move and from each single move that fits; "
        "the best set wins (within (1 - 1/e)/2 of the optimum: Khuller, Moss and Naor 1999)")


@dataclass(frozen=True)
class Item:
    """Something a move could have guarded: a behaviour change or a faulty change."""

    key: str
    kind: str  # "change" | "fault"
    tests: tuple[str, ...]  # list entries (node ids or unit-test selection lines) that guard it
    opened: frozenset[str]  # what its commit's pipeline opened (gated stages that count)


@dataclass(frozen=True)
class Move:
    context: str
    test: str
    minutes: float
    covers: frozenset[str]
    create_block: bool = False

    @property
    def key(self) -> str:
        return f"{self.context}\t{self.test}"


@dataclass
class PromotionPlan:
    commit: str  # the range end whose plan the moves edit
    budget_minutes: float
    items: list[Item]
    moves: list[Move]  # every priced candidate
    selection: Selection
    commands: list[str] = field(default_factory=list)
    budget: list[dict[str, Any]] = field(default_factory=list)
    guarded: frozenset[str] = frozenset()  # items guarded after the chosen moves, re-judged
    skipped: list[str] = field(default_factory=list)  # candidates left out, and why
    rule: str = RULE

    @property
    def chosen(self) -> list[Move]:
        by = {m.key: m for m in self.moves}
        return [by[k] for k in self.selection.keys]


def items_of(records: Sequence[CommitRecord], faulty: Sequence[FaultyChange] = ()) -> list[Item]:
    """Behaviour changes not guarded pre-merge whose deciding guards are specific, recorded
    in full and ran somewhere; faulty changes (their failing test)."""
    opened = {r.sha: frozenset(r.opened) for r in records}
    out = []
    for r in records:
        if not r.audited:
            continue
        for b in r.behaviours:
            if b.share == "pre-merge" or not is_specific(b.tier) or not b.complete:
                continue
            # A weak link (it only shares a value) would not guard the change even pre-merge
            # (auditor.evidence.CAN_GUARD): moving it guards nothing.
            tests = [t for g in b.deciding if g.effective in RAN and g.strength != "weak"
                     for t in ([g.test_id, g.via] if g.via else [g.test_id])]
            if tests:
                out.append(Item(f"change {r.sha} {b.key}", "change", tuple(dict.fromkeys(tests)),
                                opened[r.sha]))
    for f in faulty:
        out.append(Item(f"fault {f.brk.test} {f.brk.seen_at}", "fault", (f.brk.test,),
                        opened.get(f.culprit or "", frozenset())))
    return out


def runs_for(schedule: Any, test: str, opened: frozenset[str]) -> bool:
    """Whether ``test`` runs, unwaived, in a stage a PR with ``opened`` starts: a pre-merge
    stage, or a gated one its commit opened."""
    for p in schedule.placements.get(test, ()):
        for r in p.runs:
            if r.waived_by:
                continue
            v = r.verdict
            if v == "pre-merge" or (v == "gated" and (r.stage in opened or
                                                      getattr(r, "pr_class", None) in opened)):
                return True
    return False


def _moved_schedule(index: Any, edits: Sequence[Any]) -> Any:
    """The schedule of the plan with the edited test-db files' new texts (not written)."""
    from testdb.schedule import build_schedule
    from testdb.testdb_yaml import load_testdb_text

    contexts = dict(index.contexts)
    for e in edits:
        for ctx in load_testdb_text(e.new, e.path, "l0").contexts:
            if ctx.name in contexts and contexts[ctx.name].loc.path == e.path:
                contexts[ctx.name] = ctx
    return build_schedule(dataclasses.replace(index, contexts=contexts, schedule=None))


def _added_minutes(plan: Any) -> float:
    return float(sum(sum(s.after_s for s in b.shards) - sum(s.before_s for s in b.shards)
               for b in plan.budget) / 60)


def context_index(index: Any, context: str) -> Any:
    """The plan cut down to one context and its stages: a move inside a context changes only
    that context's stages, so `testdb promote` prices it the same on this, in a fraction of
    the time (the search prices hundreds of sets)."""
    from testdb.schedule import build_schedule

    sub = dataclasses.replace(index, contexts={context: index.contexts[context]}, qa_lists=(),
                              stages=tuple(s for s in index.stages if s.context == context),
                              schedule=None)
    sub.schedule = build_schedule(sub)
    return sub


class _Pricer:
    """`testdb promote`'s own planning, memoized: prices a set of moves and checks its budget."""

    def __init__(self, index: Any, budget: float) -> None:
        self.index, self.budget = index, budget
        self._plans: dict[tuple[str, frozenset[str], bool], Any] = {}
        self._subs: dict[str, Any] = {}

    def sub(self, context: str) -> Any:
        if context not in self._subs:
            self._subs[context] = context_index(self.index, context)
        return self._subs[context]

    def plan(self, context: str, tests: frozenset[str], create: bool) -> Any:
        key = (context, tests, create)
        if key not in self._plans:
            self._plans[key] = plan_moves(self.sub(context), sorted(tests), "promote",
                                          contexts=[context], create_block=create,
                                          budget_minutes=self.budget)
        return self._plans[key]


def plan_promotions(index: Any, commit: str, records: Sequence[CommitRecord],
                    faulty: Sequence[FaultyChange], budget_minutes: float) -> PromotionPlan:
    if budget_minutes <= 0:
        raise UsageError("the budget must be a positive number of minutes")
    sched = index.schedule
    items = items_of(records, faulty)
    wanting: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        for t in it.tests:
            wanting[t].append(it)
    pricer = _Pricer(index, budget_minutes)
    moves: list[Move] = []
    skipped: list[str] = []
    for test in sorted(wanting):
        contexts = sorted({p.context for p in sched.placements.get(test, ())
                           if p.kind == "test-db" and p.block is not None
                           and p.block.stage_term == "post_merge"})
        if not contexts:
            continue  # not a post-merge entry of the range end's plan: nothing to promote
        for ctx in contexts:
            move = _price(pricer, index, ctx, test, wanting[test], skipped)
            if move is not None:
                moves.append(move)
    create = {m.key for m in moves if m.create_block}

    def fits(keys: frozenset[str]) -> bool:
        by_ctx: dict[str, set[str]] = defaultdict(set)
        for k in keys:
            ctx, test = k.split("\t", 1)
            by_ctx[ctx].add(test)
        try:
            return all(not pricer.plan(ctx, frozenset(ts), any(f"{ctx}\t{t}" in create
                                                               for t in ts)).over_budget()
                       for ctx, ts in by_ctx.items())
        except TestDbError:
            return False

    selection = greedy([Candidate(m.key, m.minutes, m.covers) for m in moves], fits)
    plan = PromotionPlan(commit, budget_minutes, items, moves, selection, skipped=skipped)
    _finish(plan, pricer, index)
    return plan


def _price(pricer: _Pricer, index: Any, ctx: str, test: str, wanted: list[Item],
           skipped: list[str]) -> Move | None:
    for create in (False, True):
        try:
            plan = pricer.plan(ctx, frozenset([test]), create)
            break
        except UsageError as exc:
            if create or "--create-block" not in str(exc):
                skipped.append(f"{test} ({ctx}): {exc}")
                return None
        except TestDbError as exc:
            skipped.append(f"{test} ({ctx}): {exc}")
            return None
    after = _moved_schedule(pricer.sub(ctx), plan.edits)
    covers = frozenset(it.key for it in wanted if runs_for(after, test, it.opened))
    if not covers:
        skipped.append(f"{test} ({ctx}): moved, it would still run in no stage those changes' "
                       "pipelines start")
        return None
    return Move(ctx, test, round(_added_minutes(plan), 3), covers, create)


def _finish(plan: PromotionPlan, pricer: _Pricer, index: Any) -> None:
    """Price the chosen moves together, write the commands, and re-judge every item on the
    plan with all of them applied."""
    by_ctx: dict[str, list[Move]] = defaultdict(list)
    for m in plan.chosen:
        by_ctx[m.context].append(m)
    edits: dict[str, Any] = {}
    for ctx, ms in sorted(by_ctx.items()):
        create = any(m.create_block for m in ms)
        p = pricer.plan(ctx, frozenset(m.test for m in ms), create)
        for e in p.edits:
            if e.path in edits:  # two contexts in one file: apply one command after the other
                plan.skipped.append(f"{e.path} holds several contexts of the plan; the moves "
                                    "are re-judged one context at a time")
            edits[e.path] = e
        plan.commands.append(" ".join(
            ["testdb", "promote", "--context", shlex.quote(ctx),
             "--budget-minutes", f"{plan.budget_minutes:g}",
             *(["--create-block"] if create else []),
             *(shlex.quote(m.test) for m in sorted(ms, key=lambda m: m.test))]))
        for b in p.budget:
            plan.budget.append({"stage": b.stage, "context": b.context,
                                "largest_before_s": b.largest_before_s,
                                "largest_after_s": b.largest_after_s,
                                "shards": len(b.shards)})
    after = _moved_schedule(index, list(edits.values())) if edits else index.schedule
    moved = {m.test for m in plan.chosen}
    plan.guarded = frozenset(it.key for it in plan.items
                             if any(t in moved and runs_for(after, t, it.opened)
                                    for t in it.tests))
