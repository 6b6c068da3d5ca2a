"""The replay as one JSON document (what `report --replay` reads) and as text."""

from __future__ import annotations

from typing import Any

import testdb
from auditor.replay.analysis import Analysis
from auditor.replay.model import REPLAY_SCHEMA, SHARE_TITLES, SHARES, record_json
from auditor.replay.runner import ReplayRun
from auditor.replay.scoring import WAIVES, FaultyChange
from reports.common import paint, plural

WEAKER = ("no results were given, so the waive list is the signal: a waive line added for a "
          "test (SKIP/XFAIL with a reason) says it broke, somewhere since the test's waive line "
          "last changed. This is weaker than post-merge results: waives come late, and not "
          "every break is waived")


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 1)


def _faulty_json(f: FaultyChange) -> dict[str, Any]:
    b = f.brk
    return {"test": b.test, "signal": b.signal, "seen_at": b.seen_at, "since": b.since,
            "window": list(b.window), "culprit": f.culprit, "function": f.function,
            "tier": f.tier, "suspects": list(f.suspects), "flagged": f.flagged,
            "reason": f.reason}


def replay_json(run: ReplayRun, a: Analysis) -> dict[str, Any]:
    t, sc = a.totals, a.score
    doc: dict[str, Any] = {
        "schema": REPLAY_SCHEMA, "version": testdb.__version__, "root": run.repo,
        "range": run.rev_range, "end": a.end, "commits_in_range": len(run.commits),
        "replayed": len(run.records), "cached": run.cached, "interrupted": run.interrupted,
        "totals": {"commits": t.commits, "audited": t.audited, "not_checked": t.failed,
                   "roots": t.roots, "behaviours": t.behaviours,
                   "shares": {s: {"title": SHARE_TITLES[s], "count": t.count(s),
                                  "percent": _pct(t.share(s))} for s in SHARES}},
        "series": [{"sha": p.sha, "subject": p.subject, "behaviours": p.behaviours,
                    "guarded": p.guarded, "percent": _pct(p.share),
                    "running_percent": _pct(p.running_share)} for p in a.series],
        "leaned_on": [{"test": x.test, "only": x.only, "changes": x.changes,
                       "commits": list(x.commits)} for x in a.leaned],
        "scoring": {
            "signal": sc.signal, "source": a.source, "weaker": sc.signal == WAIVES,
            "note": WEAKER if sc.signal == WAIVES else "",
            "faulty_changes": len(sc.faulty), "flagged": sc.flagged,
            "recall_percent": _pct(sc.recall), "errors": sc.errors, "confirmed": sc.confirmed,
            "precision_percent": _pct(sc.precision), "scored_commits": sc.scored_commits,
            "results_outside_range": a.outcomes.outside if a.outcomes else 0,
            "unresolved_junit_cases": list(a.outcomes.unknown_tests) if a.outcomes else [],
            "faulty": [_faulty_json(f) for f in sc.faulty]},
        "plan": _plan_json(a) if a.plan else None,
        "commits": [record_json(r) for r in run.records],
    }
    return doc


def guarded_counts(covers: frozenset[str], culprits: dict[str, str | None]) -> dict[str, int]:
    """What a move would have guarded, each change once: ``changes`` (behaviour changes),
    ``faulty`` (faulty changes), ``faulty_among_changes`` (faulty changes whose culprit commit
    has one of those behaviour changes: the same change, counted once) and ``guards``, the
    distinct total. A move's covers hold a faulty change both as its behaviour change and as
    its broken test (auditor.replay.promotion.items_of), so their sum counted it twice."""
    change_keys = [k for k in covers if k.startswith("change ")]
    shas = {k.split(" ", 2)[1] for k in change_keys}
    faults = [k for k in covers if k.startswith("fault ")]
    among = sum(1 for k in faults if culprits.get(k) in shas)
    return {"guards": len(change_keys) + len(faults) - among, "changes": len(change_keys),
            "faulty": len(faults), "faulty_among_changes": among}


def guarded_words(m: dict[str, Any]) -> str:
    """``3 behaviour changes (1 of them faulty)``, ``1 faulty change``, ... (guarded_counts)."""
    among, outside = m.get("faulty_among_changes", 0), m["faulty"] - m.get(
        "faulty_among_changes", 0)
    parts = []
    if m["changes"]:
        parts.append(plural(m["changes"], "behaviour change")
                     + (f" ({among} of them faulty)" if among else ""))
    if outside:
        parts.append(plural(outside, "faulty change"))
    return " and ".join(parts) or "nothing"


def _plan_json(a: Analysis) -> dict[str, Any]:
    p = a.plan
    assert p is not None
    n = a.totals.behaviours
    before = a.totals.count("pre-merge")
    flipped = sum(1 for k in p.guarded if k.startswith("change "))
    faults = sum(1 for it in p.items if it.kind == "fault")
    culprits = {f"fault {f.brk.test} {f.brk.seen_at}": f.culprit for f in a.score.faulty}
    return {
        "commit": p.commit, "budget_minutes": p.budget_minutes, "rule": p.rule,
        "selection_rule": p.selection.rule,
        "moves": [{"context": m.context, "test": m.test, "minutes": m.minutes,
                   "guards": guarded_counts(m.covers, culprits)["guards"],
                   "create_block": m.create_block,
                   "chosen": m.key in p.selection.keys} for m in p.moves],
        "chosen": [{"context": m.context, "test": m.test, "minutes": m.minutes,
                    **guarded_counts(m.covers, culprits)} for m in p.chosen],
        "commands": p.commands, "budget": p.budget, "skipped": p.skipped,
        "behaviours": n, "guarded_before": before, "guarded_after": before + flipped,
        "percent_before": _pct(before / n if n else None),
        "percent_after": _pct((before + flipped) / n if n else None),
        "faulty_changes": faults,
        "faulty_guarded_after": sum(1 for k in p.guarded if k.startswith("fault ")),
    }


# ---- text ------------------------------------------------------------------------------------

def _commit_lines(c: dict[str, Any], colour: bool) -> list[str]:
    head = f"{c['sha'][:10]} {c['subject']}"
    if c["status"] != "audited":
        word = "not checked" if c["status"] == "failed" else "root"
        return [head, "  " + paint(f"{word}: {c['error']}", "yellow", colour)]
    out = [head]
    for b in c["behaviours"]:
        deciding = [g[0] for g in b["guards"].get(b["tier"] or "", []) if g[4]]
        shown = ", ".join(deciding[:2]) + (f" +{len(deciding) - 2}" if len(deciding) > 2 else "")
        why = f" ({b['tier']}: {shown})" if b["tier"] else ""
        out.append(f"  {b['path']}::{b['function']}  {b['verdict']}{why}")
    for f in c["findings"]:
        if f["severity"] == "info":
            continue
        extra = []
        if f["guards"]:
            extra.append("guards " + ", ".join(f["guards"][:3])
                         + (f" +{len(f['guards']) - 3}" if len(f["guards"]) > 3 else ""))
        if f["stages"]:
            extra.append("stages " + ", ".join(f["stages"][:3]))
        fg = "red" if f["severity"] == "error" else "yellow"
        out.append("  " + paint(f"{f['severity']} {f['rule']}", fg, colour)
                   + (f"  {'; '.join(extra)}" if extra else ""))
    for lc in c["list_changes"]:
        if lc.get("kind", "").startswith("moved"):
            out.append(f"  list {lc['kind']} {lc.get('test', '')} ({lc.get('context', '')})")
    for w in c["waive_changes"]:
        out.append(f"  waive {w['change']} {w['test']} {w['marker']} ({w['reason']})")
    return out


def replay_text(doc: dict[str, Any], colour: bool = False, *, all_commits: bool = False
                ) -> str:
    t = doc["totals"]
    out = [paint(f"Replay {doc['range']}: {doc['commits_in_range']} first-parent commits "
                 f"({t['audited']} audited, {doc['cached']} from the cache, "
                 f"{t['not_checked']} not checked)", None, colour, bold=True)]
    if doc["interrupted"]:
        out.append(paint(f"interrupted: {doc['replayed']} of {doc['commits_in_range']} commits "
                         "done (kept in the cache; run again to go on)", "yellow", colour))
    out.append("")
    for c in doc["commits"]:
        lines = _commit_lines(c, colour)
        if len(lines) > 1 or all_commits:
            out += lines
    out += ["", paint(f"Totals: {t['behaviours']} behaviour changes in {t['audited']} audited "
                      "commits", None, colour, bold=True)]
    for row in t["shares"].values():
        pct = "-" if row["percent"] is None else f"{row['percent']:.1f}%"
        out.append(f"  {row['title']:<28}{row['count']:>5}  {pct:>6}")
    if doc["leaned_on"]:
        out += ["", paint("Tests most often a change's only specific guard, running post-merge "
                          "only", None, colour, bold=True),
                f"  {'only':>4}  {'of':>4}  test"]
        out += [f"  {x['only']:>4}  {x['changes']:>4}  {x['test']}" for x in doc["leaned_on"]]
    out += ["", *_scoring_text(doc["scoring"], colour)]
    if doc.get("plan"):
        out += ["", *_plan_text(doc["plan"], colour)]
    return "\n".join(out)


def _scoring_text(s: dict[str, Any], colour: bool) -> list[str]:
    src = f"post-merge results ({s['source']})" if s["signal"] == "outcomes" else "waive lines"
    out = [paint(f"Scored against {src}: {s['faulty_changes']} faulty change(s)", None, colour,
                 bold=True)]
    if s["weaker"]:
        out.append(f"  note: {s['note']}")
    rec = "-" if s["recall_percent"] is None else f"{s['recall_percent']:.1f}%"
    pre = "-" if s["precision_percent"] is None else f"{s['precision_percent']:.1f}%"
    out.append(f"  recall per faulty change: {s['flagged']} of {s['faulty_changes']} flagged "
               f"({rec})")
    out.append(f"  precision of error findings: {s['confirmed']} of {s['errors']} at the "
               f"{s['scored_commits']} scored commits confirmed by a break ({pre}); a lower "
               "bound: nothing observed the tests most errors name")
    if s["results_outside_range"]:
        out.append(f"  {s['results_outside_range']} result(s) name commits outside the range")
    for f in s["faulty"]:
        word = paint("flagged", "green", colour) if f["flagged"] else paint("missed ", "red",
                                                                           colour)
        where = (f"culprit {f['culprit'][:10]} ({f['function']}, {f['tier']} tier)"
                 if f["culprit"] else "unattributed")
        seen = (f"waived at {f['seen_at'][:10]}" if f["signal"] == WAIVES else
                f"failed at {f['seen_at'][:10]}, passed at {(f['since'] or '?')[:10]}")
        out.append(f"  {word} {f['test']}  {seen}; {where}")
        out.append(f"          {f['reason']}")
    return out


def _plan_text(p: dict[str, Any], colour: bool) -> list[str]:
    out = [paint(f"Promotion plan: no pre-merge shard past {p['budget_minutes']:g} min "
                 f"(the plan of {p['commit'][:10]}, the range end)", None, colour, bold=True),
           f"  rule: {p['rule']}; chosen by: {p['selection_rule']}"]
    if not p["chosen"]:
        out.append("  no move fits the budget and guards anything")
    for i, m in enumerate(p["chosen"], 1):
        out.append(f"  {i}. {m['test']} ({m['context']}): +{m['minutes']:.1f} min, would have "
                   f"guarded {guarded_words(m)}")
    for b in p["budget"]:
        out.append(f"  {b['stage']} ({b['context']}, {b['shards']} shard(s)): largest shard "
                   f"{b['largest_before_s'] / 60:.1f} -> {b['largest_after_s'] / 60:.1f} min")
    if p["commands"]:
        out.append("  apply in a checkout of the range end:")
        out += [f"    {c}" for c in p["commands"]]

    def share(n: int, pct: float | None) -> str:
        return f"{n} of {p['behaviours']}" + ("" if pct is None else f" ({pct:.1f}%)")

    before = share(p["guarded_before"], p["percent_before"])
    after = share(p["guarded_after"], p["percent_after"])
    out.append(f"  behaviour changes guarded pre-merge: {before} -> {after}, re-judged with the "
               "moves")
    if p["faulty_changes"]:
        out.append(f"  faulty changes guarded pre-merge: 0 of {p['faulty_changes']} -> "
                   f"{p['faulty_guarded_after']} of {p['faulty_changes']}")
    others = [m for m in p["moves"] if not m["chosen"]]
    if others:
        out.append("  not chosen: " + "; ".join(f"{m['test']} ({m['context']}, "
                                                 f"{m['minutes']:.1f} min, {m['guards']})"
                                                 for m in others))
    out += [f"  left out: {s}" for s in p["skipped"]]
    return out
