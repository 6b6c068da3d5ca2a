"""Render ``where`` answers as text (100 columns), JSON and markdown."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from reports.common import VERDICT_COLOURS, paint

WHERE_SCHEMA = "testdb-audit/where@1"
_LISTS = "tests/integration/test_lists/"


def short(path: str) -> str:
    return path[len(_LISTS):] if path.startswith(_LISTS) else path


def where_json(pattern: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """``records`` are ``testdb.query.test_record`` dicts (the text and markdown views read
    the same records, so every view shows the same facts)."""
    return {"schema": WHERE_SCHEMA, "pattern": pattern, "tests": records}


def _head_params(test_id: str) -> tuple[str, str]:
    b = test_id.find("[")
    return (test_id, "") if b < 0 else (test_id[:b], test_id[b:])


def where_text(tests: list[dict[str, Any]], colour: bool = False, width: int = 100) -> str:
    if not tests:
        return "no test matches"
    out: list[str] = []
    for head, group in groupby(tests, key=lambda t: _head_params(t["id"])[0]):
        out.append(paint(head, None, colour, bold=True))
        for t in group:
            params = _head_params(t["id"])[1] or "(no parameters)"
            v = paint(t["verdict"].upper(), VERDICT_COLOURS.get(t["verdict"]), colour, bold=True)
            out.append(f"  {params}  {v}" + (f"  (via {t['via']})" if t.get("via") else ""))
            qa = []
            for p in t["placements"]:
                if p["kind"] == "qa":
                    qa.append(f"{short(p['path'])}:{p['line']}"
                              + (" (waived)" if p["waived_by"] else ""))
                    continue
                term = p["stage_term"] or "any stage"
                out.append(f"    {short(p['path'])}:{p['line']}  block :{p['block_line']} "
                           f"{term}  context {p['context']}")
                if not p["stages"]:
                    out.append("      " + paint("no stage runs this block", "red", colour))
                w = max((len(r["name"]) for r in p["stages"]), default=0)
                for r in p["stages"]:
                    line = (f"      {r['name']:<{w}}  shard {r['shard']}/{r['splits']}  "
                            f"{paint(r['class'], VERDICT_COLOURS.get(r['verdict']), colour)}")
                    if r["waived_by"]:
                        line += "  WAIVED " + ", ".join(f"{short(x['path'])}:{x['line']}"
                                                        for x in r["waived_by"])
                    if r["assumed"]:
                        line += "  assumed: " + ",".join(r["assumed"])
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


def where_markdown(pattern: str, tests: list[dict[str, Any]]) -> str:
    out = [f"### `testdb where {pattern}`", ""]
    if not tests:
        return "\n".join([*out, "No test matches."])
    out += ["| test | verdict | stages (shard) | lines |", "|---|---|---|---|"]
    for t in tests:
        stages = sorted({f"{r['name']} ({r['shard']}/{r['splits']}, {r['class']}"
                         + (", waived" if r["waived_by"] else "") + ")"
                         for p in t["placements"] for r in p["stages"]})
        lines = [f"{short(p['path'])}:{p['line']}" for p in t["placements"]]
        out.append(f"| `{t['id']}` | **{t['verdict']}** | {'<br>'.join(stages) or '-'} | "
                   f"{', '.join(lines)} |")
    return "\n".join(out)
