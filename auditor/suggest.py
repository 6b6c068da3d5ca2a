"""The ``/bot run`` line that starts the missing guards, with what it costs, and the
``--add-multi-gpu-test`` alternative where one exists."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from auditor.model import Finding
from testdb.botcmd import BotCommand, render
from testdb.index import Index
from testdb.pipeline import PrPipeline, pr_stages


def needs(findings: list[Finding], pipeline: PrPipeline) -> list[frozenset[str]]:
    """Per error or warning finding with stages: the stages any one of which, started, runs
    a guard it names (a finding's ``stages`` are exactly those; see linking.Judgement)."""
    out = []
    for f in findings:
        if f.severity in ("error", "warning"):
            options = frozenset(s for s in f.stages if not pipeline.starts(s))
            if options:
                out.append(options)
    return out


def cover(wants: list[frozenset[str]], minutes: dict[str, float]) -> list[str]:
    """Stages that meet every need, chosen greedily by minutes per need met (the weighted
    set-cover heuristic; ties: fewer minutes, then name)."""
    left = list(wants)
    chosen: list[str] = []
    while left:
        counts: dict[str, int] = {}
        for w in left:
            for s in w:
                counts[s] = counts.get(s, 0) + 1
        best = min(counts, key=lambda s: (minutes.get(s, 0.0) / counts[s], minutes.get(s, 0.0),
                                          s))
        chosen.append(best)
        left = [w for w in left if best not in w]
    return sorted(chosen)


def shard_cost(index: Index, stages: list[str]) -> list[dict[str, Any]]:
    """Each shard's estimated minutes: its items' ``.test_durations``, pytest-split's average
    of the known ones for the rest (testdb.shards, as the schedule computed it)."""
    out = []
    for name in stages:
        ss = index.schedule.stages.get(name)
        known = index.durations
        timed = sum(1 for e in ss.entries if e.test in known or e.ci_node_id in known) if ss else 0
        out.append({"stage": name, "minutes": round(ss.duration_s / 60, 1) if ss else None,
                    "tests": len(ss.entries) if ss else 0, "timed": timed})
    return out


def _minutes(rows: list[dict[str, Any]]) -> float:
    return round(sum(r["minutes"] or 0.0 for r in rows), 1)


def with_extra_stages(base: BotCommand, extra: list[str], add_multi_gpu: bool = False) -> str:
    """The PR's own command (its other flags kept, so nothing it started stops) plus the
    extra stages."""
    stages = tuple(dict.fromkeys([*(base.extra_stage or ()), *extra])) or None
    return render(replace(base, extra_stage=stages,
                          add_multi_gpu=base.add_multi_gpu or add_multi_gpu))


def suggest(index: Index, pipeline: PrPipeline, findings: list[Finding]) -> dict[str, Any]:
    """``command``: the cheapest ``--extra-stage`` line found that starts, for every finding,
    a stage running one of its guards; ``alternative``: ``--add-multi-gpu-test`` (plus what
    it leaves), when that starts any of them. Empty when nothing is missing."""
    wants = needs(findings, pipeline)
    if not wants:
        return {}
    options = sorted(set().union(*wants))
    cost = {r["stage"]: r["minutes"] or 0.0 for r in shard_cost(index, options)}
    chosen = cover(wants, cost)
    rows = shard_cost(index, chosen)
    base = pipeline.bot or BotCommand()
    out: dict[str, Any] = {"command": with_extra_stages(base, chosen), "stages": rows,
                           "shards": len(rows), "minutes": _minutes(rows)}
    if not base.add_multi_gpu:
        multi = pr_stages(index.stages, index.triggers, pipeline.changed,
                          replace(base, add_multi_gpu=True))
        added = sorted(multi.started - pipeline.started)
        if any(s in w for w in wants for s in added) and set(added) != set(chosen):
            rest = cover([w for w in wants if not w & set(added)], cost)
            alt = shard_cost(index, [*added, *rest])
            out["alternative"] = {"command": with_extra_stages(base, rest, add_multi_gpu=True),
                                  "stages": alt, "shards": len(alt), "minutes": _minutes(alt)}
    return out
