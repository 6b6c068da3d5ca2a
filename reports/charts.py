"""Build-time SVG chart geometry for the HTML report; the templates only draw what is here.

Hand-written on purpose: the report must work offline and with JavaScript off, so no chart
library (they draw in the browser); three kinds of bar chart need only rectangles and text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from auditor.promote import DEFAULT_BUDGET_MINUTES
from auditor.promote import _unsplit as unsplit  # the budget's own stage groups
from testdb.schedule import Schedule, StageSchedule

__all__ = ["DEFAULT_BUDGET_MINUTES", "Rect", "file_chart", "guards_chart", "reach_chart",
           "stacked", "stage_groups", "value_baseline"]

FILES_SHOWN = 25  # file rows drawn open; the rest sit in a folded <details>
CHAR_W = 6.7  # px per character of the 11 px monospace labels
_MAX_LABEL = 64  # characters of a file label before it is cut from the left


@dataclass(frozen=True)
class Rect:
    """One bar or bar segment: geometry, the CSS class that colours it, its tooltip."""

    x: float
    y: float
    w: float
    h: float
    cls: str
    title: str
    label: str = ""  # drawn on or beside the bar when there is room
    value: float = 0.0  # the number the bar stands for (tests read it from data-value)

    @property
    def cx(self) -> float:
        return round(self.x + self.w / 2, 2)

    @property
    def end(self) -> float:
        return round(self.x + self.w, 2)

    @property
    def above(self) -> float:
        return round(self.y - 3, 2)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


# ---- stage groups: each shard's estimated minutes, with the pre-merge budget line ------------

def _group_of(ss: StageSchedule) -> tuple[str, str]:
    return ss.stage.context, unsplit(ss.stage.name, ss.stage.split_id)


def stage_groups(sched: Schedule, durations: Mapping[str, float],
                 budget_minutes: float = DEFAULT_BUDGET_MINUTES) -> list[dict[str, Any]]:
    """One card per stage group (``A10-PyTorch-1..3``): a bar per shard, in the shards that
    ``where`` reports (the schedule's own), sized by its estimated duration
    (``StageSchedule.duration_s``: recorded durations, the average for the rest, as
    pytest-split). Groups that run before merge carry the budget line ``promote`` checks."""
    groups: dict[tuple[str, str], list[StageSchedule]] = defaultdict(list)
    for ss in sched.stages.values():
        groups[_group_of(ss)].append(ss)
    cards = [_stage_card(ctx, name, sorted(shards, key=lambda s: s.stage.split_id), durations,
                         budget_minutes) for (ctx, name), shards in groups.items()]
    rank = {"pre-merge": 0, "gated": 1, "post-merge-only": 2}
    cards.sort(key=lambda c: (rank.get(c["verdict"], 3), c["name"]))
    return cards


VALUE_FONT = 10.0  # px: svg text.val in report.css
_ASCENT, _DESCENT = 0.8 * VALUE_FONT, 0.25 * VALUE_FONT  # of the glyphs, from the baseline
_CLEAR = 1.5  # px kept between a label's glyphs and the dashed line (its stroke is 1.5 px)


def value_baseline(bar_top: float, budget_y: float | None) -> float:
    """Where a bar's minutes label sits: 3 px above the bar, unless the dashed budget line
    would cross its glyphs (a bar whose top is just under the line); then just above the line.
    A bar over the budget has its top above the line, so its label is clear of it."""
    base = bar_top - 3
    if budget_y is None:
        return base
    top, bottom = base - _ASCENT - _CLEAR, base + _DESCENT + _CLEAR
    if top <= budget_y <= bottom:
        return round(budget_y - _DESCENT - _CLEAR - 0.5, 2)
    return round(base, 2)


def _stage_card(context: str, name: str, shards: list[StageSchedule],
                durations: Mapping[str, float], budget_minutes: float) -> dict[str, Any]:
    budgeted = not shards[0].stage.is_post_merge and not any(s.missing_context for s in shards)
    budget_s = budget_minutes * 60
    largest = max(s.duration_s for s in shards)
    top = max(largest, budget_s if budgeted else 60.0) * 1.12
    budget_label = f"{budget_minutes:g} min"
    # the budget's label sits left of the axis, clear of the line's start
    left = max(40.0, round(len(budget_label) * CHAR_W * VALUE_FONT / 11 + 8, 1))
    plot_h, top_pad, bar_w, gap = 64.0, 14.0, 18.0 if len(shards) <= 6 else 13.0, 6.0
    width = left + len(shards) * (bar_w + gap) + gap

    def y_of(seconds: float) -> float:
        return top_pad + plot_h - plot_h * seconds / top

    bars = []
    for i, s in enumerate(shards):
        known = sum(1 for e in s.entries if e.test in durations or e.ci_node_id in durations)
        h = round(max(plot_h * s.duration_s / top, 1.0 if s.duration_s else 0.0), 2)
        over = budgeted and s.duration_s > budget_s
        cls = "f-post-merge-only over" if over else f"f-{s.placement}"
        if s.missing_context:
            cls = "f-unscheduled"
        title = (f"{s.stage.name}: shard {s.stage.split_id}/{s.stage.splits}, "
                 f"{minutes(s.duration_s)} min estimated, {len(s.entries)} tests "
                 f"({known} with a recorded duration)"
                 + (f"; past the {budget_minutes:g} min budget" if over else "")
                 + ("; its context is missing" if s.missing_context else ""))
        bars.append(Rect(left + gap + i * (bar_w + gap), round(top_pad + plot_h - h, 2), bar_w,
                         h, cls, title, f"{s.duration_s / 60:.0f}", round(s.duration_s / 60, 1)))
    budget_y = round(y_of(budget_s), 2) if budgeted else None
    labels = [value_baseline(b.y, budget_y) for b in bars]
    return {"name": name, "context": context, "verdict": shards[0].placement,
            "why": shards[0].why, "budgeted": budgeted, "shards": len(shards),
            "largest_min": minutes(largest), "over": budgeted and largest > budget_s,
            "empty": not any(s.entries for s in shards),
            "width": round(width, 1), "height": top_pad + plot_h + 16,
            "bars": bars, "label_ys": labels,
            "base_y": top_pad + plot_h, "tick_y": top_pad + plot_h + 12, "left": left,
            "budget_y": budget_y,
            "budget_ty": round(budget_y + 3, 2) if budget_y is not None else None,
            "budget_lx": round(left - 4, 1), "budget_label": budget_label}


# ---- stacked bars of verdicts ------------------------------------------------------------------

def stacked(counts: Sequence[int], verdicts: Sequence[str], x: float, y: float, width: float,
            height: float, what: str, scale: float | None = None) -> list[Rect]:
    """Segments of one bar, in verdict order. ``scale``: px per unit (absolute bars);
    without it the bar fills ``width`` (shares)."""
    total = sum(counts)
    if not total:
        return []
    per = scale if scale is not None else width / total
    out, at = [], x
    for v, n in zip(verdicts, counts, strict=True):
        if not n:
            continue
        w = n * per
        long, short = f"{n} {v}", str(n)
        label = long if w >= 6 * len(long) + 6 else short if w >= 6 * len(short) + 6 else ""
        out.append(Rect(round(at, 1), y, round(w, 1), height, f"f-{v}",
                        f"{what}{': ' if what else ''}{n} {v} ({100 * n / total:.1f} %)",
                        label, n))
        at += w
    return out


def _cut(label: str) -> str:
    return label if len(label) <= _MAX_LABEL else "…" + label[-(_MAX_LABEL - 1):]


def file_chart(rows: Iterable[tuple[str, Sequence[int]]], verdicts: Sequence[str],
               bar_w: float = 360.0, row_h: float = 16.0) -> dict[str, Any]:
    """Per test file, a bar of its test ids' verdicts (shares; the count beside it), the
    largest files first; split into the rows drawn open and the rest."""
    ordered = sorted(rows, key=lambda r: (-sum(r[1]), r[0]))
    label_w = min(_MAX_LABEL, max((len(f) for f, _ in ordered), default=8)) * CHAR_W + 8

    def svg(part: list[tuple[str, Sequence[int]]]) -> dict[str, Any]:
        out = []
        for i, (file, counts) in enumerate(part):
            y = i * row_h + 2
            segs = stacked(counts, verdicts, label_w, y, bar_w, row_h - 4, "")
            title = f"{file}: {sum(counts)} test ids; " + ", ".join(s.title for s in segs)
            out.append({"file": file, "label": _cut(file), "y": y, "ty": y + row_h / 2 + 2,
                        "title": title,
                        "total": sum(counts), "segments": segs,
                        "end": (segs[-1].end if segs else label_w) + 6})
        return {"rows": out, "height": len(part) * row_h + 4}

    return {"label_w": label_w, "label_x": label_w - 6, "bar_w": bar_w,
            "width": label_w + bar_w + 70,
            "open": svg(ordered[:FILES_SHOWN]), "folded": svg(ordered[FILES_SHOWN:]),
            "n_files": len(ordered), "n_folded": max(0, len(ordered) - FILES_SHOWN)}


def guards_chart(behaviours: Sequence[dict[str, Any]], verdicts: Sequence[str],
                 bar_w: float = 300.0, row_h: float = 18.0) -> dict[str, Any]:
    """Per behaviour change, its deciding tier's guards by verdict, on one scale (px per guard)
    so that a behaviour with two guards looks thinner than one with twenty."""
    # A word this version does not know (an audit from a newer tool) still gets its segment.
    words = [*verdicts, *sorted({g["verdict"] for b in behaviours for g in b["guards"]}
                                 - set(verdicts))]
    rows = [(b, [sum(1 for g in b["guards"] if g["verdict"] == v) for v in words])
            for b in behaviours]
    most = max((sum(c) for _, c in rows), default=0)
    label_w = min(48, max((len(b["function"]) for b, _ in rows), default=8)) * CHAR_W + 8
    out = []
    for i, (b, counts) in enumerate(rows):
        y = i * row_h + 2
        segs = stacked(counts, words, label_w, y, bar_w, row_h - 5, f"{b['function']} guards",
                       scale=bar_w / most if most else None)
        out.append({"function": b["function"], "label": b["function"][-48:], "y": y,
                    "ty": y + row_h / 2 + 3, "total": sum(counts), "verdict": b["verdict"],
                    "segments": segs, "end": (segs[-1].end if segs else label_w) + 6})
    return {"rows": out, "label_w": label_w, "label_x": label_w - 6, "bar_w": bar_w,
            "width": label_w + bar_w + 110,
            "height": len(out) * row_h + 4}


def reach_chart(rows: Iterable[Any], bar_w: float = 360.0, row_h: float = 16.0
                ) -> dict[str, Any]:
    """The measured map's reach per test file (``auditor.measured.Reach`` rows): a bar of the
    project's functions the map knows, its share executed by the file's pre-merge tests, then
    the share executed only by its other tests (post-merge, gated, QA); the rest unfilled.
    The files that reach most first; FILES_SHOWN of them drawn, the rest counted."""
    ordered = sorted(rows, key=lambda r: (-(r.pre_merge + r.post_merge_only), r.test_file))
    shown = ordered[:FILES_SHOWN]
    label_w = min(_MAX_LABEL, max((len(r.test_file) for r in shown), default=8)) * CHAR_W + 8
    out = []
    for i, r in enumerate(shown):
        y = i * row_h + 2
        per = bar_w / r.total if r.total else 0.0
        segs = []
        at = label_w
        for n, cls, what in ((r.pre_merge, "f-pre-merge", "executed by its pre-merge tests"),
                             (r.post_merge_only, "f-post-merge-only",
                              "executed only by its tests that do not run pre-merge")):
            if n:
                pct = 100 * n / r.total
                segs.append(Rect(round(at, 1), y, round(n * per, 1), row_h - 4, cls,
                                 f"{r.test_file}: {n} of {r.total} functions ({pct:.1f} %) "
                                 f"{what}", "", n))
                at += n * per
        pre_pct = 100 * r.pre_merge / r.total if r.total else 0.0
        post_pct = 100 * r.post_merge_only / r.total if r.total else 0.0
        out.append({"file": r.test_file, "label": _cut(r.test_file), "y": y,
                    "ty": y + row_h / 2 + 2, "segments": segs, "tests": r.tests,
                    "pre": r.pre_merge, "post": r.post_merge_only,
                    "text": f"{pre_pct:.0f} % pre-merge, {post_pct:.0f} % post-merge only",
                    "frame_x": label_w, "end": label_w + bar_w + 6})
    return {"rows": out, "label_w": label_w, "label_x": label_w - 6, "bar_w": bar_w,
            "width": label_w + bar_w + 230, "height": len(out) * row_h + 4,
            "n_files": len(ordered), "n_more": max(0, len(ordered) - len(shown)),
            "functions": ordered[0].total if ordered else 0}
