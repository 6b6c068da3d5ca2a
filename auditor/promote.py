"""Move test-db entries between a context's post-merge and pre-merge blocks, by a verified edit."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from auditor import promote_journal
from auditor.promote_edit import BOM, FileEdit, LineMove, body_of, edit_file, read, split_lines
from testdb.errors import Diagnostic, InputError, Severity, SourceLoc, UsageError
from testdb.grammar import Entry
from testdb.index import Index, load_sources
from testdb.model import Block, Condition, Context
from testdb.query import match_ids
from testdb.schedule import Placement, Schedule, StageSchedule, build_schedule, duration_key
from testdb.shards import average_duration
from testdb.testdb_yaml import load_testdb_text

SCHEMA = "testdb-audit/promote@1"
DEFAULT_BUDGET_MINUTES = 120.0
# direction -> (the stage term entries leave, the stage term they join)
DIRECTIONS = {"promote": ("post_merge", "pre_merge"), "demote": ("pre_merge", "post_merge")}


@dataclass(frozen=True)
class Move:
    """One entry line leaving ``source`` for ``target`` (``None``: a block ``--create-block``
    adds right after ``source``); ``target_index`` is the target's index after the edit."""

    context: str
    entries: tuple[Entry, ...]  # the tests the line names (one, except old multi-path lines)
    source: Block
    target: Block | None
    target_index: int
    text: str  # the line as written, without its indentation and line break
    # the entry lines around it in the source block (the journal's record of where it was)
    around: tuple[str | None, str | None] = (None, None)

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(e.test for e in self.entries)

    @property
    def loc(self) -> SourceLoc:
        return self.entries[0].loc


@dataclass(frozen=True)
class ShardBudget:
    stage: str
    shard: int
    before_s: float
    after_s: float


@dataclass(frozen=True)
class StageBudget:
    """The shards of one pre-merge stage (``DGX_H100-PyTorch-1..6``) before and after the move."""

    stage: str  # the stage name without its split number
    context: str
    placement: str  # pre-merge | gated | post-merge-only (testdb.pipeline.stage_placements)
    shards: tuple[ShardBudget, ...]
    average_s: float  # what a test without a recorded duration counts for (pytest-split)

    @property
    def largest_before_s(self) -> float:
        return max((s.before_s for s in self.shards), default=0.0)

    @property
    def largest_after_s(self) -> float:
        return max((s.after_s for s in self.shards), default=0.0)

    @property
    def growth_s(self) -> float:
        return self.largest_after_s - self.largest_before_s


@dataclass(frozen=True)
class Plan:
    direction: str
    moves: tuple[Move, ...]
    edits: tuple[FileEdit, ...]
    budget: tuple[StageBudget, ...]
    budget_minutes: float
    missing_durations: tuple[str, ...]  # duration keys of moved tests with no recorded duration
    verdicts: tuple[tuple[str, str, str], ...]  # (test, verdict before, verdict after)
    created: tuple[tuple[str, int], ...] = ()  # (context, source block index) of new blocks
    warnings: tuple[str, ...] = ()

    def over_budget(self) -> list[StageBudget]:
        limit = self.budget_minutes * 60
        return [b for b in self.budget if b.largest_after_s > limit and b.growth_s > 0]


def plan_moves(index: Index, patterns: Sequence[str], direction: str = "promote", *,
               contexts: Sequence[str] = (), create_block: bool = False,
               budget_minutes: float = DEFAULT_BUDGET_MINUTES) -> Plan:
    """Plan the edit, build the schedule it would give, check it and price it; write nothing.

    An id that sits in the leaving stage in several contexts is refused unless ``contexts``
    names the ones to move it in (moving a test pre-merge everywhere multiplies its cost)."""
    if direction not in DIRECTIONS:
        raise UsageError(f"unknown direction {direction!r}; use promote or demote")
    if budget_minutes <= 0:
        raise UsageError("the budget must be a positive number of minutes")
    for c in contexts:
        if c not in index.contexts or index.contexts[c].kind != "l0":
            raise UsageError(f"no test-db context {c!r}", hint="`testdb stats` lists them")
    src, dst = DIRECTIONS[direction]
    old: Schedule = index.schedule
    planned, created = _moves(index, _select(old, patterns, src, contexts), src, dst, create_block)
    edits: list[FileEdit] = []
    moves: list[Move] = []
    journal = promote_journal.load()
    for path in dict.fromkeys(m.loc.path for m in planned):
        mine = [m for m in planned if m.loc.path == path]
        line_moves = []
        for m in mine:
            # A line an earlier move took out of the target block goes back between its old
            # neighbours (when they are still there), not to the end of the block.
            was = promote_journal.origin_of(journal, path, _line_text(index, m), m.context, dst)
            line_moves.append(LineMove(m.loc.line, m.source, m.target,
                                       was.before if was else None, was.after if was else None))
        edit, texts, around = edit_file(index, path, line_moves, src, dst)
        edits.append(edit)
        moves += [dataclasses.replace(m, text=t, around=a)
                  for m, t, a in zip(mine, texts, around, strict=True)]
    new = _schedule_of(index, {e.path: e.new for e in edits})
    _verify(old, new, moves, created, _named_in(index, {e.path for e in edits}))
    tests = list(dict.fromkeys(t for m in moves for t in m.tests))
    keys = (duration_key(e, index.durations) for m in moves for e in m.entries)
    missing = tuple(dict.fromkeys(k for k in keys if k not in index.durations))
    plan = Plan(direction, tuple(moves), tuple(edits), _budget(index, old, new), budget_minutes,
                missing, tuple((t, old.verdict(t), new.verdict(t)) for t in tests), tuple(created))
    warnings = [f"{b.stage} ({b.context}): the largest shard grows to "
                f"{b.largest_after_s / 60:.1f} min, past the {budget_minutes:g} min budget"
                for b in plan.over_budget()]
    unreached = {(b.context, b.index) for b in new.unreached_blocks}
    for m in moves:
        if (m.context, m.target_index) in unreached:
            warnings.append(f"{', '.join(m.tests)}: its new {dst} block in {m.context} is rendered "
                            "by no stage of the stage table, so it will run nowhere")
    emptied = Counter((m.context, m.source.index) for m in moves for _ in m.entries)
    warnings += [f"the {src} block at {m.source.loc} is left with no tests; delete it by hand if "
                 "it is no longer wanted" for m in moves
                 if emptied[(m.context, m.source.index)] == len(m.source.entries)]
    return dataclasses.replace(plan, warnings=tuple(dict.fromkeys(warnings)))


def apply_plan(index: Index, plan: Plan) -> None:
    """Write each edited file atomically once a reload of the written bytes (no cache) gives
    exactly the planned schedule; otherwise leave every file untouched and raise."""
    if index.sources is None:
        raise UsageError("this index was not loaded from a checkout; nothing to edit")
    temps: dict[str, str] = {}
    try:
        for ed in plan.edits:
            if read(index, ed.path)[0] != ed.old:
                raise InputError("the file changed since the move was planned", SourceLoc(ed.path),
                                 "rerun the command")
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(ed.full) or ".", suffix=".tmp",
                                       prefix=f".{os.path.basename(ed.full)}.")
            temps[ed.path] = tmp
            with os.fdopen(fd, "wb") as fh:
                fh.write((BOM if ed.bom else b"") + ed.new.encode("utf-8"))
            os.chmod(tmp, stat.S_IMODE(os.stat(ed.full).st_mode))
        shown = {p: t if os.path.isabs(p) else os.path.join(os.path.dirname(p),
                                                             os.path.basename(t))
                 for p, t in temps.items()}
        src = dataclasses.replace(index.sources,
                                  testdb=tuple(shown.get(p, p) for p in index.sources.testdb))
        reloaded = load_sources(src, use_cache=False)
        for p, t in shown.items():
            _no_new_errors(index, p, [d for d in reloaded.diagnostics if d.loc.path == t])
        _verify(index.schedule, reloaded.schedule, plan.moves, plan.created,
                _named_in(index, {e.path for e in plan.edits}))
        for ed in plan.edits:
            os.replace(temps.pop(ed.path), ed.full)
    finally:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    src_stage = DIRECTIONS[plan.direction][0]
    promote_journal.record(promote_journal.Origin(m.loc.path, m.text, m.context, src_stage,
                                                  *m.around) for m in plan.moves)


def _line_text(index: Index, m: Move) -> str:
    """The moved line's text as the journal keys it (without indentation and line break)."""
    lines = split_lines(read(index, m.loc.path)[0])
    return body_of(lines[m.loc.line - 1]) if 0 < m.loc.line <= len(lines) else ""


# ---- choosing what moves where ------------------------------------------------------------------

def _select(sched: Schedule, patterns: Sequence[str], src: str, contexts: Sequence[str]
            ) -> list[Placement]:
    ids = list(sched.placements)
    chosen: dict[tuple[SourceLoc, str], Placement] = {}
    for pat in patterns:
        found: list[Placement] = []
        for tid in match_ids(ids, pat):
            here = [p for p in sched.placements[tid] if p.kind == "test-db" and p.block
                    and p.block.stage_term == src and (not contexts or p.context in contexts)]
            if len({p.context for p in here}) > 1 and not contexts:
                where = ", ".join(f"{p.context} ({p.entry.loc})" for p in here)
                raise UsageError(f"{tid} is {src} in several contexts: {where}",
                                 hint="name the ones to change with --context CTX (repeatable)")
            found += here
        if not found:
            scope = f" of context {', '.join(contexts)}" if contexts else ""
            raise UsageError(f"no entry of a {src} test-db block{scope} matches {pat!r}",
                             hint=f"`testdb where {pat!r}` shows where it runs")
        chosen.update(((p.entry.loc, p.entry.test), p) for p in found)
    return sorted(chosen.values(), key=lambda p: (p.entry.loc, p.entry.test))


def _same_condition(a: Condition, b: Condition) -> bool:
    def norm(c: Condition) -> tuple[object, ...]:
        return (frozenset((k, v) for k, v in c.terms if k != "stage"), frozenset(c.ranges),
                frozenset((k, tuple(sorted(p))) for k, p in c.wildcards))

    return norm(a) == norm(b)


def _moves(index: Index, chosen: list[Placement], src: str, dst: str, create: bool
           ) -> tuple[list[Move], list[tuple[str, int]]]:
    by_line: dict[SourceLoc, list[Placement]] = defaultdict(list)
    for p in chosen:
        by_line[p.entry.loc].append(p)
    created: list[tuple[str, int]] = []
    moves: list[Move] = []
    for loc, ps in by_line.items():
        block = ps[0].block
        assert block is not None
        left = [e.test for e in block.entries if e.loc == loc and e not in [p.entry for p in ps]]
        if left:
            raise UsageError(f"the line also names {', '.join(left)}, which was not asked for",
                             loc, "split the line, or name every test on it")
        ctx = index.contexts[block.context]
        target = next((b for b in ctx.blocks if b.stage_term == dst
                       and _same_condition(b.condition, block.condition)), None)
        if target is None and not create:
            raise UsageError(f"context {ctx.name} has no {dst} block with the same condition as "
                             f"this {src} block", block.loc, "pass --create-block to add one "
                             "right after it")
        if target is not None:
            already = next((e for e in target.entries if e.test in {p.entry.test for p in ps}),
                           None)
            if already is not None:
                raise UsageError(f"{already.test} is already in the {dst} block at {already.loc}",
                                 loc, "delete this line by hand instead")
        elif (ctx.name, block.index) not in created:
            created.append((ctx.name, block.index))
        moves.append(Move(ctx.name, tuple(p.entry for p in ps), block, target, -1, ""))
    return [dataclasses.replace(m, target_index=_target_index(m, created)) for m in moves], created


def _remap(created: Sequence[tuple[str, int]], context: str, index: int) -> int:
    """A block's index after new blocks were inserted after the ``created`` source blocks."""
    return index + sum(1 for c, i in created if c == context and i < index)


def _target_index(m: Move, created: list[tuple[str, int]]) -> int:
    if m.target is not None:
        return _remap(created, m.context, m.target.index)
    return _remap(created, m.context, m.source.index) + 1


# ---- the schedule the edit gives, checked -------------------------------------------------------

def _no_new_errors(index: Index, path: str, diags: Sequence[Diagnostic]) -> None:
    errs = [d for d in diags if d.severity is Severity.ERROR]
    if len(errs) > sum(1 for d in index.errors if d.loc.path == path):
        raise InputError(f"the edited file would not parse cleanly: {errs[0].message}",
                         SourceLoc(path, errs[0].loc.line), "nothing was written")


def _schedule_of(index: Index, texts: dict[str, str]) -> Schedule:
    contexts: dict[str, Context] = dict(index.contexts)
    for path, text in texts.items():
        res = load_testdb_text(text, path, "l0")
        _no_new_errors(index, path, res.diagnostics)
        for ctx in res.contexts:
            if ctx.name in contexts and contexts[ctx.name].loc.path == path:
                contexts[ctx.name] = ctx
    return build_schedule(dataclasses.replace(index, contexts=contexts, schedule=None))


def _sig(p: Placement, block_index: int, runs: bool) -> tuple[object, ...]:
    e = p.entry
    # the stage without its split number: a move may re-balance other tests between shards
    stages = tuple(sorted({_unsplit(r.stage, r.shard) for r in p.runs})) if runs else None
    return (p.kind, p.context, block_index, e.test, e.kind, e.gpu_prefix, e.marker, e.reason,
            e.timeout_minutes, e.isolation, e.comment, stages)


def _named_in(index: Index, paths: set[str]) -> set[str]:
    return {e.test for c in index.contexts.values() if c.loc.path in paths for e in c.entries}


def _verify(old: Schedule, new: Schedule, moves: Sequence[Move],
            created: Sequence[tuple[str, int]], named: set[str]) -> None:
    """The new schedule must differ from the old exactly by the moves: each moved line's tests
    now sit in the target block; every other placement keeps its block and its stages.

    Placements are compared for every test the edited files name (``named``); a test named
    only elsewhere keeps the very same records and stages, so only the set of ids is compared
    for those."""
    dest = {(e.loc, e.test): m.target_index for m in moves for e in m.entries}
    landed = {(t, m.context, m.target_index) for m in moves for t in m.tests}
    bad = sorted(set(old.placements) ^ set(new.placements))
    for tid in sorted(named & set(old.placements)):
        ps = old.placements[tid]
        want: Counter[tuple[object, ...]] = Counter()
        for p in ps:
            idx = -1 if p.block is None else _remap(created, p.context, p.block.index)
            moved = (p.entry.loc, tid) in dest and p.kind == "test-db"
            want[_sig(p, dest[(p.entry.loc, tid)] if moved else idx, not moved)] += 1
        got = Counter(_sig(p, -1 if p.block is None else p.block.index,
                           (tid, p.context, -1 if p.block is None else p.block.index) not in landed)
                      for p in new.placements.get(tid, ()))
        if want != got:
            bad.append(tid)
    if bad:
        where = moves[0].loc.path if moves else ""
        raise InputError(f"verification failed: the edit would change where {len(bad)} test(s) "
                         f"run beyond the intended moves, e.g. {bad[0]}", SourceLoc(where),
                         "nothing was written; edit the file by hand")


# ---- budget -------------------------------------------------------------------------------------

def _unsplit(name: str, split_id: int) -> str:
    suffix = f"-{split_id}"
    return name[: -len(suffix)] if name.endswith(suffix) else name


def _changed(a: StageSchedule | None, b: StageSchedule) -> bool:
    return (a is None or a.context_entries != b.context_entries
            or [e.test for e in a.entries] != [e.test for e in b.entries])


def _budget(index: Index, old: Schedule, new: Schedule) -> tuple[StageBudget, ...]:
    """Pre-merge stages whose rendered list changes: every shard's duration before and after."""
    groups: dict[tuple[str, str], list[StageSchedule]] = defaultdict(list)
    for ss in new.stages.values():
        if not ss.stage.is_post_merge and not ss.missing_context:
            groups[(ss.stage.context, _unsplit(ss.stage.name, ss.stage.split_id))].append(ss)
    out = []
    for (ctx, name), shards in groups.items():
        if not any(_changed(old.stages.get(s.stage.name), s) for s in shards):
            continue
        shards.sort(key=lambda s: s.stage.split_id)
        ids = [duration_key(e, index.durations) for s in shards for e in s.entries]
        rows = tuple(ShardBudget(s.stage.name, s.stage.split_id,
                                 old.stages[s.stage.name].duration_s
                                 if s.stage.name in old.stages else 0.0, s.duration_s)
                     for s in shards)
        out.append(StageBudget(name, ctx, shards[0].placement, rows,
                               average_duration(ids, index.durations)))
    return tuple(out)
