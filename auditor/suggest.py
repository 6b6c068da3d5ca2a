"""The one ``/bot run`` line that starts the missing guards at the lowest GPU cost, what it costs
(GPU-minutes, and wall minutes beside them), and the runner-up when it costs about as much.

Every face asks :func:`choose`: ``audit`` (text and JSON) through :func:`suggest`, ``comment`` and
the HTML report through the audit's ``suggestion``, ``launch --backend bot`` through
:func:`needs_of_findings` (``--from audit.json``) or :func:`needs_of_tests` (a pattern). The rules
are small functions over the records below, each with a table test
(tests/auditor/test_suggest.py):

- a need is met only by a stage that runs one of its guards there: not waived there, not a QA
  list, a stage of the stage table that ``--extra-stage`` can start (:func:`startable`: not
  disabled), and not one the pipeline starts already (:func:`need_from_runs`, :func:`needs`);
- a shard costs its minutes x the stage's GPUs x its nodes (:class:`ShardCost`);
- the cheapest irredundant set of stages meeting every need wins; ties go to fewer wall minutes,
  fewer shards, then names (:func:`cheapest_covers`, :func:`rank`);
- the runner-up is shown when it costs at most 20% more GPU-minutes (:func:`pick`).

``--add-multi-gpu-test`` is never a candidate: it starts every multi-GPU stage, and naming the
needed ones with ``--extra-stage`` meets the same needs for at most as many GPU-minutes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from auditor.model import Finding
from testdb.botcmd import BotCommand, render
from testdb.index import Index
from testdb.pipeline import PrPipeline
from testdb.stages import Stage

# A runner-up within this share of the cheapest's GPU-minutes is shown beside it: the reviewer
# may prefer its wall time or its stages.
RUNNER_UP_WITHIN = 0.20
# Set cover is NP-hard; the exact search below stops after this many expansions and keeps the
# cheapest covers found (the greedy one among them), saying so (``exact: false``). Audits meet
# a handful of needs with a few stages each (a few dozen expansions); 100 needs of 10 stages
# each out of 60 stop at it in ~70 ms here (benchmarks/bench_suggest.py).
SEARCH_BUDGET = 5_000


@dataclass(frozen=True)
class Need:
    """Something a suggestion must start: any one of ``stages`` runs a guard of it."""

    what: str  # the finding (rule at path:line) or the test id
    stages: frozenset[str]


@dataclass(frozen=True)
class GuardRun:
    """One place a guard is scheduled: a stage (or a QA list) and whether it is waived there."""

    stage: str
    waived: bool = False
    qa: bool = False


@dataclass(frozen=True)
class ShardCost:
    """What starting one shard stage costs: its estimated wall minutes (``.test_durations``,
    pytest-split's average of the known ones for the rest) on ``gpus`` x ``nodes`` GPUs."""

    stage: str
    minutes: float | None
    tests: int = 0
    timed: int = 0
    gpus: int = 1
    nodes: int = 1

    @property
    def gpu_minutes(self) -> float | None:
        return None if self.minutes is None else self.minutes * self.gpus * self.nodes

    def to_json(self) -> dict[str, Any]:
        gm = self.gpu_minutes
        return {"stage": self.stage, "minutes": self.minutes, "tests": self.tests,
                "timed": self.timed, "gpus": self.gpus, "nodes": self.nodes,
                "gpu_minutes": None if gm is None else round(gm, 1)}


@dataclass(frozen=True)
class Candidate:
    """One stage set that meets every need, with its cost."""

    shards: tuple[ShardCost, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.stage for s in self.shards)

    @property
    def gpu_minutes(self) -> float:
        """Unknown minutes count as infinite: such a set is never cheaper than a known one."""
        return sum(math.inf if s.gpu_minutes is None else s.gpu_minutes for s in self.shards)

    @property
    def wall_minutes(self) -> float:
        """The stages run in parallel: the longest shard."""
        return max((math.inf if s.minutes is None else s.minutes for s in self.shards),
                   default=0.0)

    @property
    def minutes(self) -> float:
        return sum(s.minutes or 0.0 for s in self.shards)

    def key(self) -> tuple[float, float, int, tuple[str, ...]]:
        return (self.gpu_minutes, self.wall_minutes, len(self.shards), self.names)


def startable(stage: Stage) -> bool:
    """Whether ``--extra-stage`` / ``--stage-list`` can start the stage: every stage of the
    table but a disabled one (checkStageNameSet rejects names it does not know)."""
    return not stage.disabled


def need_from_runs(what: str, runs: Iterable[GuardRun], started: frozenset[str] = frozenset(),
                   replace_all: bool = False) -> Need:
    """The stages that would run a guard scheduled at ``runs``: not where it is waived, not QA
    lists (the bot starts no release testing), not those already started (all of them when
    the command replaces the stage set, ``--stage-list``)."""
    return Need(what, frozenset(r.stage for r in runs if not r.waived and not r.qa
                                and (replace_all or r.stage not in started)))


def needs(findings: Iterable[tuple[str, str, Iterable[str]]], started: frozenset[str]
          ) -> list[Need]:
    """Per error or warning finding ``(what, severity, stages)``: the stages any one of which,
    started, runs a guard it names (a finding's ``stages`` are exactly those that run its
    deciding guards unwaived; see linking.Judgement), less those already started."""
    out = []
    for what, severity, stages in findings:
        if severity in ("error", "warning"):
            options = frozenset(s for s in stages if s not in started)
            if options:
                out.append(Need(what, options))
    return out


def _finding_rows(findings: Iterable[Finding]) -> list[tuple[str, str, Iterable[str]]]:
    return [(f"{f.rule} at {f.path}:{f.line}", f.severity, f.stages) for f in findings]


def needs_of_findings(data: Mapping[str, Any], started: frozenset[str]) -> list[Need]:
    """The needs of an audit JSON's findings (``launch --from audit.json``): the same as the
    audit's own."""
    return needs([(f"{f.get('rule')} at {f.get('path')}:{f.get('line')}",
                   str(f.get("severity")), f.get("stages") or ())
                  for f in data.get("findings") or ()], started)


def needs_of_tests(index: Index, tests: Iterable[tuple[str, tuple[str, ...]]],
                   started: frozenset[str], replace_all: bool = False) -> list[Need]:
    """One need per test ``(id, ids of the list lines that place it)``: the stages its
    schedule runs it in, unwaived (``launch PATTERN --backend bot``)."""
    out = []
    for tid, placed_as in tests:
        runs = [GuardRun(r.stage, bool(r.waived_by))
                for t in dict.fromkeys((tid, *placed_as))
                for p in index.schedule.placements.get(t, ()) if p.kind == "test-db"
                for r in p.runs]
        need = need_from_runs(tid, runs, started, replace_all)
        if need.stages:
            out.append(need)
    return out


def shard_costs(index: Index, names: Iterable[str]) -> dict[str, ShardCost]:
    """Each shard's cost from its stage record (GPUs, nodes) and its schedule (minutes)."""
    records = {s.name: s for s in index.stages}
    known = index.durations
    out = {}
    for name in names:
        ss = index.schedule.stages.get(name)
        st = records.get(name)
        timed = sum(1 for e in ss.entries if e.test in known or e.ci_node_id in known) if ss else 0
        out[name] = ShardCost(name, round(ss.duration_s / 60, 1) if ss else None,
                              len(ss.entries) if ss else 0, timed,
                              max(1, st.gpu_count) if st else 1,
                              max(1, st.node_count) if st else 1)
    return out


def _greedy(wants: list[frozenset[str]], cost: Mapping[str, float]) -> frozenset[str]:
    """The weighted set-cover heuristic (cost per need met): the search's first bound."""
    left = list(wants)
    chosen: set[str] = set()
    while left:
        counts: dict[str, int] = {}
        for w in left:
            for s in w:
                counts[s] = counts.get(s, 0) + 1
        best = min(counts, key=lambda s: (cost[s] / counts[s], cost[s], s))
        chosen.add(best)
        left = [w for w in left if best not in w]
    return _irredundant(frozenset(chosen), wants, cost)


def _irredundant(chosen: frozenset[str], wants: list[frozenset[str]],
                 cost: Mapping[str, float]) -> frozenset[str]:
    """Drop stages every need can do without, dearest first."""
    for s in sorted(chosen, key=lambda s: (-cost[s], s)):
        rest = chosen - {s}
        if all(w & rest for w in wants):
            chosen = rest
    return chosen


def _minimal(wants: list[frozenset[str]]) -> list[frozenset[str]]:
    """The needs that matter: one whose stages include all of another's is met whenever that
    one is, so it is dropped (fewest stages first, then by name, for a stable order)."""
    out: list[frozenset[str]] = []
    for w in sorted(set(wants), key=lambda w: (len(w), sorted(w))):
        if not any(k <= w for k in out):
            out.append(w)
    return out


def cheapest_covers(wants: list[frozenset[str]], cost: Mapping[str, float], keep: int = 2,
                    budget: int = SEARCH_BUDGET) -> tuple[list[frozenset[str]], bool]:
    """The ``keep`` cheapest irredundant stage sets meeting every need, cheapest first, and
    whether the search was exhaustive. Branch and bound: branch on the options of the unmet
    need with the fewest; prune a partial set whose cost plus the dearest of the unmet needs'
    cheapest options (a lower bound of any completion) reaches the ``keep``-th best."""
    wants = _minimal(wants)
    if not wants:
        return [], True
    cheapest = {w: min(cost[s] for s in w) for w in wants}

    def total(c: frozenset[str]) -> float:
        return sum(cost[s] for s in c)

    found: dict[frozenset[str], float] = {}
    seed = _greedy(wants, cost)
    found[seed] = total(seed)
    tops = [found[seed]]  # the keep cheapest costs found, ascending

    def record(c: frozenset[str], spent: float) -> None:
        if c not in found:
            found[c] = spent
            tops.append(spent)
            tops.sort()
            del tops[keep:]

    seen: set[frozenset[str]] = set()
    # (stages chosen, their cost, the needs they leave unmet: narrowed as stages are added)
    stack: list[tuple[frozenset[str], float, list[frozenset[str]]]] = [
        (frozenset(), 0.0, wants)]
    steps = 0
    while stack:
        steps += 1
        if steps > budget:
            break
        chosen, spent, unmet = stack.pop()
        if not unmet:
            # a stage added early may be made redundant by later ones: keep the set without it
            lean = _irredundant(chosen, wants, cost)
            record(lean, total(lean))
            continue
        bound = tops[-1] if len(tops) >= keep else math.inf
        if spent + max(cheapest[w] for w in unmet) > bound:
            continue
        fewest = min(unmet, key=len)
        # dearest pushed first, so the cheapest option is expanded first
        for s in sorted(fewest, key=lambda s: (cost[s], s), reverse=True):
            nxt = chosen | {s}
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, spent + cost[s], [w for w in unmet if s not in w]))
    ranked = sorted(found, key=lambda c: (found[c], sorted(c)))
    return ranked[:keep], steps <= budget


def rank(wants: list[Need], costs: Mapping[str, ShardCost], keep: int = 2
         ) -> tuple[list[Candidate], bool]:
    """The cheapest candidates (fewest GPU-minutes, then wall minutes, shards, names) and
    whether the search was exhaustive. Only stages some need names are ever candidates."""
    gm = {s: (math.inf if c.gpu_minutes is None else c.gpu_minutes) for s, c in costs.items()}
    sets, exact = cheapest_covers([w.stages for w in wants], gm, keep)
    cands = [Candidate(tuple(costs[s] for s in sorted(c))) for c in sets]
    return sorted(cands, key=Candidate.key), exact


def pick(ranked: list[Candidate]) -> tuple[Candidate | None, Candidate | None]:
    """The cheapest, and the runner-up when it costs at most ``RUNNER_UP_WITHIN`` more."""
    if not ranked:
        return None, None
    best, rest = ranked[0], ranked[1:]
    if rest and rest[0].gpu_minutes <= best.gpu_minutes * (1 + RUNNER_UP_WITHIN):
        return best, rest[0]
    return best, None


def with_extra_stages(base: BotCommand, extra: list[str], add_multi_gpu: bool = False) -> str:
    """The PR's own command (its other flags kept, so nothing it started stops) plus the
    extra stages."""
    stages = tuple(dict.fromkeys([*(base.extra_stage or ()), *extra])) or None
    return render(replace(base, extra_stage=stages,
                          add_multi_gpu=base.add_multi_gpu or add_multi_gpu))


def command_for(base: BotCommand, stages: list[str], stage_list: bool = False) -> str:
    """``--extra-stage`` added to the PR's own command, or a ``--stage-list`` of them alone."""
    if stage_list:
        return f'/bot run --stage-list "{", ".join(stages)}"'
    return with_extra_stages(base, stages)


def _round(v: float) -> float | None:
    return None if math.isinf(v) else round(v, 1)


def _option(c: Candidate, base: BotCommand, stage_list: bool) -> dict[str, Any]:
    return {"command": command_for(base, list(c.names), stage_list),
            "stages": [s.to_json() for s in c.shards], "shards": len(c.shards),
            "gpu_minutes": _round(c.gpu_minutes), "wall_minutes": _round(c.wall_minutes),
            "minutes": round(c.minutes, 1)}


def choose(index: Index, wants: list[Need], base: BotCommand | None = None,
           stage_list: bool = False) -> dict[str, Any]:
    """The suggestion for every face: ``command`` (the cheapest stage set by GPU-minutes),
    its ``stages`` with their cost, ``gpu_minutes``, ``wall_minutes`` (the longest shard: the
    stages run in parallel), ``minutes`` (the shards' minutes added up), ``exact`` (whether
    the search was exhaustive) and ``runner_up`` when it is within 20%. Empty when nothing is
    missing or no need can be met."""
    records = {s.name: s for s in index.stages}
    usable = [Need(w.what, frozenset(s for s in w.stages
                                     if s in records and startable(records[s])))
              for w in wants]
    usable = [w for w in usable if w.stages]
    if not usable:
        return {}
    costs = shard_costs(index, sorted(set().union(*(w.stages for w in usable))))
    ranked, exact = rank(usable, costs)
    best, runner_up = pick(ranked)
    if best is None:
        return {}
    b = base or BotCommand()
    out = {**_option(best, b, stage_list), "exact": exact}
    if runner_up is not None:
        out["runner_up"] = _option(runner_up, b, stage_list)
    return out


def suggest(index: Index, pipeline: PrPipeline, findings: list[Finding]) -> dict[str, Any]:
    """The audit's suggestion: :func:`choose` over its error and warning findings."""
    return choose(index, needs(_finding_rows(findings), pipeline.started), pipeline.bot)
