"""A replay run's analysis in one call: totals, the chart series, scoring and the plan."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from auditor.replay.options import ReplayOptions
from auditor.replay.outcomes import Outcomes, read_outcomes
from auditor.replay.promotion import PromotionPlan, plan_promotions
from auditor.replay.runner import ReplayRun
from auditor.replay.scoring import (
    OUTCOMES,
    WAIVES,
    Score,
    breaks_from_outcomes,
    breaks_from_waives,
    score,
)
from auditor.replay.totals import LeanedOn, Point, Totals, leaned_on, share_series, totals
from auditor.replay.worker import plan_at
from testdb.errors import UsageError


@dataclass
class Analysis:
    totals: Totals
    series: list[Point]
    leaned: list[LeanedOn]
    score: Score
    source: str  # the outcomes given, or "" when the waive list was the signal
    outcomes: Outcomes | None
    plan: PromotionPlan | None
    end: str  # the range end (the last replayed first-parent commit)


def analyze(run: ReplayRun, options: ReplayOptions, *, outcomes: str | None = None,
            budget_minutes: float | None = None) -> Analysis:
    records = run.records
    order = [r.sha for r in records]
    if not run.commits:
        raise UsageError(f"the range {run.rev_range} has no commits",
                         hint="give A..B with B ahead of A")
    end = run.commits[-1]
    oc: Outcomes | None = None
    with contextlib.ExitStack() as stack:
        index: Any = None
        if budget_minutes is not None or (outcomes is not None and not outcomes.endswith(
                (".jsonl", ".json", ".ndjson"))):
            index = stack.enter_context(plan_at(run.repo, options, end))
        if outcomes is not None:
            known = {g.test_id for r in records for b in r.behaviours
                     for gs in b.guards.values() for g in gs}
            if index is not None:
                known |= set(index.schedule.placements)
            oc = read_outcomes(outcomes, order, known)
            breaks = breaks_from_outcomes(order, oc.results)
            sc = score(records, breaks, OUTCOMES, [o.commit for o in oc.results])
        else:
            sc = score(records, breaks_from_waives(records), WAIVES)
        plan = None
        if budget_minutes is not None:
            if run.interrupted or run.missing:
                raise UsageError("the replay did not finish; a plan needs every commit",
                                 hint="run it again (done commits come from the cache)")
            plan = plan_promotions(index, end.sha, records, sc.faulty, budget_minutes)
    return Analysis(totals(records), share_series(records), leaned_on(records), sc,
                    outcomes or "", oc, plan, end.sha)
