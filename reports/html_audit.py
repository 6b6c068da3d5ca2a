"""The HTML report's views of an audit and of launch results (``reports/html.py`` draws them)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from reports import charts
from reports.comment import audit_caveats, decided_words, guards_by_id, is_work_tree
from reports.render_audit import RUNNER_UP_WORDS, cost_text
from testdb.schedule import VERDICTS

WORK_TREE = "the work tree (uncommitted changes)"
WEAK_LINK = "weak-link"  # runs pre-merge, guards nothing (auditor.evidence.CAN_GUARD)


def _cost(s: dict[str, Any]) -> str:
    return cost_text(s) if s else ""


def shown_verdict(b: dict[str, Any], g: dict[str, Any]) -> str:
    """A deciding guard's verdict as the report draws it: a link of a level that cannot guard
    (only imports the module, only shares a value) that runs pre-merge is a ``weak-link``, never
    drawn as a pre-merge guard of a behaviour that is unguarded."""
    v = str(g.get("effective", "?"))
    weak = (b.get("decided_by") or {}).get("can_guard") is False
    return WEAK_LINK if weak and v == "pre-merge" else v


def _href(where: dict[str, list[Any]], test_id: str, via: str = "") -> str | None:
    from urllib.parse import quote

    hit = where.get(test_id) or (where.get(via) if via else None)
    if hit is None:
        return None
    return f"function.html#f={hit[0]}&n={hit[1]}&p={quote(str(hit[2]), safe='')}"


def audit_view(audit: dict[str, Any], where: dict[str, list[Any]]) -> dict[str, Any]:
    guards = guards_by_id(audit)

    def guard(tid: str, own: dict[str, Any] | None = None) -> dict[str, Any]:
        g = own or guards.get(tid, {})
        return {"id": tid, "verdict": g.get("effective", "?"),
                "href": _href(where, tid, str(g.get("via") or ""))}

    rank = {"error": 0, "warning": 1, "info": 2}
    findings = [{"severity": f["severity"], "rule": f.get("rule", ""), "path": f["path"],
                 "line": f["line"], "message": f["message"], "function": f.get("function", ""),
                 "guards": [guard(t) for t in f.get("guards") or []]}
                for f in sorted(audit["findings"], key=lambda f: rank.get(f["severity"], 3))]
    behaviours = [{"function": b["function"], "path": b["path"], "line": b["line"],
                   "verdict": b["verdict"], "tier": b.get("tier") or "none",
                   "evidence": _evidence_words(b),
                   "guards": [{**guard(g["test_id"], g), "verdict": shown_verdict(b, g)}
                              for g in b["guards"].get(b.get("tier") or "", [])
                              if g.get("decides") is not False]}  # weaker ranks: context
                  for b in audit["behaviours"]]
    p = audit.get("provenance") or {}
    sug = audit.get("suggestion") or {}
    caveats = audit_caveats(audit)
    return {"sentence": audit["summary"]["sentence"], "caveats": caveats,
            "caveat_pieces": [code_pieces(c) for c in caveats],
            "status": audit_status({**audit["summary"], "caveats": caveats}),
            "findings": findings, "behaviours": behaviours,
            "chart": charts.guards_chart(behaviours, (VERDICTS[0], WEAK_LINK, *VERDICTS[1:])),
            "weak_links": any(g["verdict"] == WEAK_LINK for b in behaviours for g in b["guards"]),
            "bot": sug.get("command", ""),
            "bot_cost": _cost(sug),
            "bot_runner_up": (sug.get("runner_up") or {}).get("command", ""),
            "bot_runner_up_cost": _cost(sug.get("runner_up") or {}),
            "runner_up_words": RUNNER_UP_WORDS,
            "prov": provenance_items(p)}


def code_pieces(text: str) -> list[tuple[str, bool]]:
    """A caveat's words with its backquoted spans (markdown's code, as the comment shows them)
    marked, so the page draws them as ``<code>`` instead of printing the backquotes; an
    unpaired backquote stays as it is."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # odd number of backquotes: no pairing to trust
        return [(text, False)]
    return [(p, i % 2 == 1) for i, p in enumerate(parts) if p]


def audit_status(summary: dict[str, Any]) -> str:
    """The card's colour, as the terminal's headline (render_audit.headline_colour): red with
    errors or an unguarded change, yellow with warnings or a pipeline caveat (a green that
    rests on unknown gates or on stages CBTS may drop is no green), green otherwise."""
    if summary.get("errors") or summary.get("unguarded"):
        return "bad"
    return "warn" if summary.get("warnings") or summary.get("caveats") else "ok"


def provenance_items(p: dict[str, Any]) -> list[tuple[str, str]]:
    """What was audited: the commits of a range (``head``, ``base``), the diff file of
    ``--diff``, or the work tree; never a ``-`` for what the audit did not have."""
    out = [(k, str(p[k])[:12]) for k in ("head", "base") if p.get(k)]
    if is_work_tree(p) and p.get("head"):  # base against the work tree; HEAD's sha beside it
        out[0] = ("head", f"{WORK_TREE.removesuffix(')')}; HEAD {str(p['head'])[:12]})")
    elif p.get("base") and not p.get("head"):
        out.insert(0, ("head", WORK_TREE))
    if p.get("diff") and p["diff"] != "git":  # "git": the range above
        out.append(("diff", str(p["diff"])))
    return out or [("audited", WORK_TREE)]


def _evidence_words(b: dict[str, Any]) -> str:
    """What decides a behaviour's verdict, in words (the tier and rank codes stay in JSON)."""
    return decided_words(b).removeprefix("decided by: ")


def results_view(results: list[dict[str, Any]], where: dict[str, list[Any]]
                 ) -> dict[str, Any]:
    counts = Counter(str(r["outcome"]) for r in results)
    rows = [{"id": r["test_id"], "outcome": r["outcome"], "backend": r.get("backend") or "-",
             "where": r.get("where") or "-", "started": r.get("started_at") or "-",
             "duration": f"{r['duration_s']:.0f} s" if r.get("duration_s") is not None else "-",
             "href": _href(where, str(r["test_id"]))}
            for r in sorted(results, key=lambda r: (r["outcome"] == "passed", r["test_id"]))]
    return {"rows": rows, "summary": ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))}
