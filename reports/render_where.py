"""Render ``where`` answers as text (100 columns), JSON and markdown."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from reports.common import VERDICT_COLOURS, paint
from reports.words import with_legend

WHERE_SCHEMA = "testdb-audit/where@2"
INVALID_WORDS = "names no test in this checkout; CI ignores it"  # testdb.names.INVALID_MEANING


def where_json(pattern: str, records: list[dict[str, Any]],
               nearest: list[str] | None = None, caveats: tuple[str, ...] = ()
               ) -> dict[str, Any]:
    """``records`` are ``testdb.query.test_record`` dicts, checked by
    ``testdb.whole.whole_functions`` (the text and markdown views read the same records, so
    every view shows the same facts)."""
    from testdb.whole import not_checked_reason, verdict_counts

    return {"schema": WHERE_SCHEMA, "pattern": pattern, "summary": verdict_counts(records),
            "not_checked": not_checked_reason(records), "did_you_mean": list(nearest or []),
            "caveats": list(caveats), "tests": records}


def summary_line(tests: list[dict[str, Any]]) -> str:
    """``4 parametrizations of 1 function: pre-merge 1, unscheduled 2, invalid 1``."""
    from testdb.whole import verdict_counts

    functions = len({_head_params(t["id"])[0] for t in tests})
    counts = ", ".join(f"{v} {n}" for v, n in verdict_counts(tests).items())
    return (f"{len(tests)} parametrization{'s' * (len(tests) != 1)} of {functions} "
            f"function{'s' * (functions != 1)}: {counts}")


def _no_match(nearest: list[str] | None) -> str:
    return "no test matches" + (f"; did you mean {', '.join(nearest)}?" if nearest else "")


def _head_params(test_id: str) -> tuple[str, str]:
    b = test_id.find("[")
    return (test_id, "") if b < 0 else (test_id[:b], test_id[b:])


def where_text(tests: list[dict[str, Any]], colour: bool = False, width: int = 100,
               nearest: list[str] | None = None, caveats: tuple[str, ...] = ()) -> str:
    if not tests:
        return _no_match(nearest)
    from testdb.whole import not_checked_reason

    out: list[str] = [summary_line(tests)]
    unchecked = not_checked_reason(tests)
    if unchecked:
        out[0] += f" ({unchecked})"
    out[0] += "".join(f" ({c})" for c in caveats)  # gate rules unknown: testdb.triggers
    for head, group in groupby(tests, key=lambda t: _head_params(t["id"])[0]):
        out.append(paint(head, None, colour, bold=True))
        for t in group:
            params = _head_params(t["id"])[1] or "(no parameters)"
            v = paint(t["verdict"].upper(), VERDICT_COLOURS.get(t["verdict"]), colour, bold=True)
            out.append(f"  {params}  {v}" + (f"  (via {t['via']})" if t.get("via") else "")
                       + _note(t))
            out.extend(_check_lines(t))
            qa = []
            for p in t["placements"]:
                if p["kind"] == "qa":
                    qa.append(f"{p['path']}:{p['line']}"
                              + (" (waived)" if p["waived_by"] else ""))
                    continue
                out.append(f"    {p['path']}:{p['line']}  {block_words(p)}")
                if t["verdict"] == "invalid":
                    continue  # CI ignores the line: no stage runs it
                if not p["stages"]:
                    out.append("      " + paint("no stage runs this block", "red", colour))
                common = common_assumed(p["stages"])
                w = max((len(r["name"]) for r in p["stages"]), default=0)
                for r in p["stages"]:
                    line = (f"      {r['name']:<{w}}  shard {r['shard']}/{r['splits']}  "
                            f"{paint(r['class'], VERDICT_COLOURS.get(r['verdict']), colour)}"
                            + _why(r))
                    if r["waived_by"]:
                        line += "  WAIVED " + ", ".join(f"{x['path']}:{x['line']}"
                                                        for x in r["waived_by"])
                    extra = [k for k in r["assumed"] if k not in common]
                    if extra:  # only what this stage assumes beyond the block's shared line
                        line += "  also assumed: " + ", ".join(extra)
                    out.append(line)
                if common:
                    out.append("      assumed: " + ", ".join(common))
            if qa:
                out.extend(_wrap("    QA: ", qa, width))
    return with_legend("\n".join(out), width)


def block_words(p: dict[str, Any]) -> str:
    """``in the pre_merge block at line 3``; the context only when it is not the file's stem
    (the usual case says nothing new)."""
    term = p.get("stage_term")
    words = (f"in the {term} block at line {p['block_line']}" if term
             else f"in the block at line {p['block_line']} (every stage)")
    stem = str(p["path"]).rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return words + (f", context {p['context']}" if p.get("context") != stem else "")


def common_assumed(stages: list[dict[str, Any]]) -> list[str]:
    """The facts every stage of a block assumes: said once under the block, not per stage."""
    if not stages:
        return []
    shared = set(stages[0]["assumed"]).intersection(*(r["assumed"] for r in stages[1:]))
    return [k for k in stages[0]["assumed"] if k in shared]


def _note(t: dict[str, Any]) -> str:
    """What the verdict word means when it needs saying: invalid, unlisted, unchecked."""
    check = t.get("check") or {}
    if t["verdict"] == "invalid":
        reason = str(check.get("reason") or "")
        # the usual meaning, or a reason of its own (a test file that does not parse)
        return "  " + (reason if reason and not reason.startswith(INVALID_WORDS)
                       else INVALID_WORDS)
    if t.get("listed") is False:
        return f"  {check.get('reason', '')} (defined at {_at(t['defined_at'])})"
    if check.get("status") == "not-checked" and "no test sources" not in check.get("reason", ""):
        return f"  ({check['reason']})"
    return ""


def _check_lines(t: dict[str, Any]) -> list[str]:
    check = t.get("check") or {}
    reason = str(check.get("reason", ""))
    if t["verdict"] != "invalid" or not reason.startswith(INVALID_WORDS):
        return []  # a reason of its own is the note itself (_note)
    why = reason.split(": ", 1)[-1]
    lines = [f"    {why}"] if why else []
    head = _head_params(t["id"])[0]
    near = [n[len(head):] if n.startswith(head + "[") else n for n in check.get("nearest", [])]
    for i, n in enumerate(near):  # the same function's ids as their [params], one a line
        lead = "    did you mean " if i == 0 else "                 "
        more = f" (and {check['more']} more)" if check.get("more") and i == len(near) - 1 else ""
        lines.append(f"{lead}{n}{more}" + ("?" if i == len(near) - 1 else ""))
    return lines


def _at(loc: dict[str, Any]) -> str:
    return f"{loc['path']}:{loc['line']}"


def _why(r: dict[str, Any]) -> str:
    """Which gates open a gated stage (testdb.pipeline); the other classes say it all."""
    why = str(r.get("why") or "").removeprefix("gated: ")
    return f" ({why})" if why and r["class"] == "gated" else ""


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


def where_markdown(pattern: str, tests: list[dict[str, Any]],
                   nearest: list[str] | None = None, caveats: tuple[str, ...] = ()) -> str:
    out = [f"### `testdb where {pattern}`", ""]
    if not tests:
        return "\n".join([*out, _no_match([f"`{n}`" for n in nearest or []]).capitalize()
                          + "."])
    from testdb.whole import not_checked_reason

    unchecked = not_checked_reason(tests)
    out += [summary_line(tests) + (f" ({unchecked})" if unchecked else "")
            + "".join(f" ({c})" for c in caveats) + ".", "",
            "| test | verdict | stages (shard) | lines |", "|---|---|---|---|"]
    for t in tests:
        stages = sorted({f"{r['name']} ({r['shard']}/{r['splits']}, {r['class']}"
                         + (", waived" if r["waived_by"] else "") + ")"
                         for p in t["placements"] for r in p["stages"]})
        lines = [f"{p['path']}:{p['line']}" for p in t["placements"]]
        if t.get("listed") is False:
            lines = [f"defined at {_at(t['defined_at'])}"]
        verdict = f"**{t['verdict']}**"
        reason = str((t.get("check") or {}).get("reason") or "")
        if t["verdict"] == "invalid" and reason and not reason.startswith(INVALID_WORDS):
            verdict += f" ({reason})"  # a test file that does not parse
        elif t["verdict"] == "invalid":
            near = (t.get("check") or {}).get("nearest") or []
            verdict += " (CI ignores it" + (
                "; did you mean " + ", ".join(f"`{n}`" for n in near) if near else "") + ")"
        out.append(f"| `{t['id']}` | {verdict} | {'<br>'.join(stages) or '-'} | "
                   f"{', '.join(lines)} |")
    return "\n".join(out)


def measured_text(measured: dict[str, Any], width: int = 100) -> str:
    """``where --map``: the functions each test executed, its top modules first."""
    out = ["Measured (test-to-code map)"]
    for tid, m in measured.items():
        if m is None:
            out.append(f"  {tid}: not in the map")
            continue
        out.append(f"  {tid}")
        out.append(f"    executed {m['functions']} function(s), measured at {m['commit'][:7]}, "
                   f"{m['age']}")
        for mod in m["modules"]:
            out += _wrap(f"      {mod['module']} ({len(mod['functions'])}): ",
                         mod["functions"], width)
        if m["more_modules"]:
            out.append(f"      ... {m['more_modules']} more module(s)")
    return "\n".join(out)
