"""The report's history page (``history.html``) from a replay JSON: the guarded share per
commit as an inline SVG line chart (geometry computed here, drawn by the template), the
faulty changes, flagged or missed, and the promotion plan."""

from __future__ import annotations

import json
from typing import Any

from auditor.replay.model import REPLAY_SCHEMA, record_from_json
from testdb.errors import InputError
from testdb.files import read_text

PAGE = "history.html"
TEMPLATE = "replay.html.j2"
_W, _H = 720.0, 220.0
_LEFT, _RIGHT, _TOP, _BOTTOM = 44.0, 12.0, 12.0, 28.0
_HINT = "write it with `testdb replay RANGE -o FILE`"


def read_replay(path: str) -> dict[str, Any]:
    """A replay JSON (``testdb replay ... -o FILE``), its shape checked; InputError naming the
    file and the place otherwise."""
    text = read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}", hint=_HINT) from None
    except (RecursionError, ValueError):
        raise InputError(f"{path}: unreadable JSON (nests too deeply or holds a huge number)",
                         hint=_HINT) from None
    if not isinstance(doc, dict) or doc.get("schema") != REPLAY_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise InputError(f"{path}: not a replay file (schema {got!r})",
                         hint=f"expected {REPLAY_SCHEMA!r}; {_HINT}")
    for key, kind in (("commits", list), ("series", list), ("totals", dict), ("scoring", dict),
                      ("range", str)):
        if not isinstance(doc.get(key), kind):
            what = {list: "a list", dict: "an object", str: "a string"}[kind]
            raise InputError(f"{path}: {key}: missing or not {what}", hint=_HINT)
    for i, c in enumerate(doc["commits"]):
        record_from_json(c, path, f"commits[{i}]")
    for i, p in enumerate(doc["series"]):
        if not (isinstance(p, dict) and isinstance(p.get("sha"), str)
                and isinstance(p.get("behaviours"), int) and isinstance(p.get("guarded"), int)):
            raise InputError(f"{path}: series[{i}]: expected sha, behaviours and guarded",
                             hint=_HINT)
    m = doc.get("map")
    if m is not None and not (isinstance(m, dict) and isinstance(m.get("path"), str)
                              and all(type(m.get(k)) is int for k in ("measured",
                                                                      "static_only"))):
        raise InputError(f"{path}: map: expected path, measured and static_only", hint=_HINT)
    return doc


def _y(percent: float) -> float:
    return round(_TOP + (_H - _TOP - _BOTTOM) * (1 - percent / 100), 2)


def chart(series: list[dict[str, Any]]) -> dict[str, Any]:
    """Points of the running guarded share (a line) and each commit's own share (dots)."""
    n = len(series)
    span = _W - _LEFT - _RIGHT

    def x(i: int) -> float:
        return round(_LEFT + (span * i / (n - 1) if n > 1 else span / 2), 2)

    line, dots = [], []
    for i, p in enumerate(series):
        if p.get("running_percent") is not None:
            line.append(f"{x(i)},{_y(p['running_percent'])}")
        if p["behaviours"]:
            pct = 100 * p["guarded"] / p["behaviours"]
            dots.append({"x": x(i), "y": _y(pct), "sha": p["sha"][:10],
                         "cls": "all" if pct == 100 else "none" if pct == 0 else "some",
                         "title": f"{p['sha'][:10]} {p.get('subject', '')}: {p['guarded']} of "
                                  f"{p['behaviours']} behaviour change(s) guarded pre-merge; "
                                  f"running share {p.get('running_percent')}%"})
    ticks = [{"y": _y(v), "label": f"{v}%"} for v in (0, 25, 50, 75, 100)]
    labels = []
    if n:
        labels = [{"x": x(0), "label": series[0]["sha"][:7], "anchor": "start"},
                  {"x": x(n - 1), "label": series[-1]["sha"][:7], "anchor": "end"}]
    return {"width": _W, "height": _H, "left": _LEFT, "right": _W - _RIGHT,
            "base": _y(0), "line": " ".join(line), "dots": dots, "ticks": ticks,
            "labels": labels, "label_y": _H - 8, "points": len(dots)}


def map_counts(doc: dict[str, Any]) -> dict[str, Any] | None:
    """What the measured map decided (docs/map.md), per commit and in total; None when the
    replay read no map (then every verdict is static and no count is shown: zero measured
    would read as "the map knew nothing"). Per commit the counts are the audit summary's
    (``auditor.measured.summary_counts`` of each record's deciding tiers); the total is the
    replay's own ``map`` part, which counts the same records."""
    m = doc.get("map")
    if m is None:
        return None
    from auditor.measured import summary_counts

    rows = []
    for c in doc["commits"]:
        if c.get("status") != "audited" or not c.get("behaviours"):
            continue
        measured, static_only = summary_counts(b.get("tier") for b in c["behaviours"])
        rows.append({"sha": c["sha"], "short": c["sha"][:10], "subject": c.get("subject", ""),
                     "behaviours": len(c["behaviours"]), "measured": measured,
                     "static_only": static_only})
    total = m["measured"] + m["static_only"]
    return {"path": m["path"], "measured": m["measured"], "static_only": m["static_only"],
            "decided": total,
            "percent": round(100 * m["measured"] / total, 1) if total else None,
            "commits": rows, "commits_measured": sum(1 for r in rows if r["measured"])}


def replay_page(doc: dict[str, Any]) -> dict[str, Any]:
    """Everything the history page shows; the template adds no logic."""
    subjects = {c["sha"]: c.get("subject", "") for c in doc["commits"]}
    sc = doc["scoring"]
    faulty = [{**f, "culprit_short": (f.get("culprit") or "")[:10],
               "culprit_subject": subjects.get(f.get("culprit") or "", ""),
               "seen_short": f["seen_at"][:10], "window_size": len(f.get("window", []))}
              for f in sc.get("faulty", [])]
    totals = doc["totals"]
    shares = [{"share": s, **row} for s, row in totals.get("shares", {}).items()]
    return {"range": doc["range"], "end": str(doc.get("end", ""))[:10],
            "commits": len(doc["commits"]), "interrupted": bool(doc.get("interrupted")),
            "totals": totals, "shares": shares, "chart": chart(doc["series"]),
            "scoring": sc, "faulty": faulty, "leaned_on": doc.get("leaned_on", []),
            "plan": doc.get("plan"), "map": map_counts(doc)}
