"""Render ``where`` answers as text (100 columns), JSON and markdown."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from reports.common import VERDICT_COLOURS, paint
from testdb.query import TestWhere
from testdb.schedule import Placement

WHERE_SCHEMA = "testdb-audit/where@1"
_LISTS = "tests/integration/test_lists/"


def short(path: str) -> str:
    return path[len(_LISTS):] if path.startswith(_LISTS) else path


def placement_json(p: Placement) -> dict[str, Any]:
    assumed = sorted({k for r in p.runs for k in r.assumed})
    return {
        "kind": p.kind,
        "path": p.entry.loc.path,
        "line": p.entry.loc.line,
        "block_line": p.block.loc.line if p.block else None,
        "context": p.context,
        "stage_term": p.block.stage_term if p.block else None,
        "condition": p.block.condition.describe() if p.block else None,
        "marker": p.entry.marker,
        "timeout_minutes": p.entry.timeout,
        "isolation": p.entry.isolation,
        "stages": [{"name": r.stage, "class": r.pr_class, "shard": r.shard, "splits": r.splits,
                    "verdict": r.verdict, "assumed": list(r.assumed),
                    "waived_by": [{"path": w.loc.path, "line": w.loc.line} for w in r.waived_by]}
                   for r in p.runs],
        "waived_by": [{"path": w.loc.path, "line": w.loc.line}
                      for w in dict.fromkeys([*p.waived_by,
                                              *(w for r in p.runs for w in r.waived_by)])],
        "assumed": p.assumed,
        "assumed_keys": assumed,
    }


def where_json(pattern: str, tests: list[TestWhere]) -> dict[str, Any]:
    return {"schema": WHERE_SCHEMA, "pattern": pattern,
            "tests": [{"id": t.id, "verdict": t.verdict, "via": t.via or None,
                       "placements": [placement_json(p) for p in t.placements]}
                      for t in tests]}


def _head_params(test_id: str) -> tuple[str, str]:
    b = test_id.find("[")
    return (test_id, "") if b < 0 else (test_id[:b], test_id[b:])


def where_text(tests: list[TestWhere], colour: bool = False, width: int = 100) -> str:
    if not tests:
        return "no test matches"
    out: list[str] = []
    for head, group in groupby(tests, key=lambda t: _head_params(t.id)[0]):
        out.append(paint(head, None, colour, bold=True))
        for t in group:
            params = _head_params(t.id)[1] or "(no parameters)"
            v = paint(t.verdict.upper(), VERDICT_COLOURS.get(t.verdict), colour, bold=True)
            out.append(f"  {params}  {v}" + (f"  (via {t.via})" if t.via else ""))
            qa = []
            for p in t.placements:
                if p.kind == "qa":
                    qa.append(f"{short(p.entry.loc.path)}:{p.entry.loc.line}"
                              + (" (waived)" if p.waived_by else ""))
                    continue
                blk = p.block
                term = blk.stage_term or "any stage" if blk else "?"
                out.append(f"    {short(p.entry.loc.path)}:{p.entry.loc.line}  "
                           f"block :{blk.loc.line if blk else '?'} {term}  "
                           f"context {p.context}")
                if not p.runs:
                    out.append("      " + paint("no stage runs this block", "red", colour))
                w = max((len(r.stage) for r in p.runs), default=0)
                for r in p.runs:
                    line = (f"      {r.stage:<{w}}  shard {r.shard}/{r.splits}  "
                            f"{paint(r.pr_class, VERDICT_COLOURS.get(r.verdict), colour)}")
                    if r.waived_by:
                        line += "  WAIVED " + ", ".join(f"{short(x.loc.path)}:{x.loc.line}"
                                                        for x in r.waived_by)
                    if r.assumed:
                        line += "  assumed: " + ",".join(r.assumed)
                    out.append(line)
            if qa:
                out.extend(_wrap("    QA: ", qa, width))
    return "\n".join(out)


def _wrap(lead: str, items: list[str], width: int) -> list[str]:
    lines, cur = [], lead
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else "")
        if len(cur) + len(piece) > width and cur.strip():
            lines.append(cur.rstrip())
            cur = " " * len(lead)
        cur += piece
    lines.append(cur.rstrip())
    return lines


def where_markdown(pattern: str, tests: list[TestWhere]) -> str:
    out = [f"### `testdb where {pattern}`", ""]
    if not tests:
        return "\n".join([*out, "No test matches."])
    out += ["| test | verdict | stages (shard) | lines |", "|---|---|---|---|"]
    for t in tests:
        stages = sorted({f"{r.stage} ({r.shard}/{r.splits}, {r.pr_class}"
                         + (", waived" if r.waived_by else "") + ")"
                         for p in t.placements for r in p.runs})
        lines = [f"{short(p.entry.loc.path)}:{p.entry.loc.line}" for p in t.placements]
        out.append(f"| `{t.id}` | **{t.verdict}** | {'<br>'.join(stages) or '-'} | "
                   f"{', '.join(lines)} |")
    return "\n".join(out)
