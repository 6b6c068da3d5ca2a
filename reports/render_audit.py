"""The audit as JSON (the interchange the comment, report and launch read) and as text."""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from typing import Any

from auditor.evidence import CAN_GUARD, LEVEL_TITLES, Level
from auditor.model import AUDIT_SCHEMA, TIER_TITLES, TIERS, Audit, BehaviourResult, Finding, Guard
from reports.common import VERDICT_COLOURS, paint
from reports.words import WEAK_PRE_MERGE, level_lead, with_legend
from testdb.stages import MULTI_GPU_RE


def audit_json(a: Audit) -> dict[str, Any]:
    return {
        "schema": AUDIT_SCHEMA,
        "provenance": a.provenance,
        "summary": summary(a),
        "gates": a.gates,
        "pipeline": a.pipeline,
        "findings": [asdict(f) for f in a.findings],
        "behaviours": [{
            "path": b.path, "module": b.module, "function": b.qualname, "kind": b.kind,
            "status": b.status, "line": b.line, "added_lines": list(b.added),
            "removed_lines": list(b.removed), "tokens": list(b.tokens), "tier": b.tier,
            "rank": b.rank, "decided_by": _decided_by(b),
            "verdict": b.verdict, "pre_merge_guards": b.pre_merge_guards[:MAX_TIER_GUARDS],
            "pre_merge_guard_count": len(b.pre_merge_guards),
            "weak_links": b.weak_links[:MAX_TIER_GUARDS], "weak_link_count": len(b.weak_links),
            "guards": {t: [_guard_json(g, b.decides(g)) for g in _top(gs, b)]
                       for t, gs in b.guards.items()},
            "guard_counts": b.guard_counts or {t: len(gs) for t, gs in b.guards.items()},
        } for b in a.behaviours],
        "changed_tests": a.changed_tests,
        "list_changes": a.list_changes,
        "unlinked": a.unlinked,
        "notes": a.notes,
        "missing_stages": a.missing_stages(),
        "suggestion": a.suggestion,
    }


# Guards per tier in the JSON (the deciding tier, then context tiers); the weak tiers of a
# large checkout hold thousands, all counted in "guard_counts" and all used for the verdict.
MAX_TIER_GUARDS = 50
MAX_CONTEXT_GUARDS = 10
_RANK = {v: i for i, v in enumerate(("pre-merge", "gated", "post-merge-only", "qa-only",
                                      "waived", "unscheduled"))}


def _decided_by(b: BehaviourResult) -> dict[str, Any] | None:
    """The level whose links decide the verdict, and how many it counts."""
    if b.tier is None:
        return None
    level = Level(b.tier, b.rank or 1)
    return {"tier": b.tier, "rank": level.rank, "title": LEVEL_TITLES.get(level, ""),
            "guards": b.deciding_count, "can_guard": CAN_GUARD.get(level, True)}


def _top(guards: list[Guard], b: BehaviourResult) -> list[Guard]:
    """The guards of a tier worth writing: the deciding ones first, then context."""
    cap = MAX_TIER_GUARDS if guards and guards[0].tier == b.tier else MAX_CONTEXT_GUARDS
    if len(guards) <= cap:
        return guards
    return sorted(guards, key=lambda g: (not b.decides(g), g.rank, _RANK.get(g.effective, 9),
                                         g.test_id))[:cap]


def _guard_json(g: Guard, decides: bool) -> dict[str, Any]:
    # Hand-written rather than dataclasses.asdict, which deep-copies and dominated large audits.
    return {"test_id": g.test_id, "tier": g.tier, "rank": g.rank, "decides": decides,
            "reason": g.reason, "strength": g.strength,
            "verdict": g.verdict, "effective": g.effective, "via": g.via,
            "distance": g.distance, "path": g.path, "line": g.line,
            "runs": [{"stage": r.stage, "kind": r.kind, "shard": r.shard,
                      "splits": r.splits, "path": r.path, "line": r.line,
                      "block_line": r.block_line, "waived": r.waived,
                      "placement": r.placement, "started": r.started, "why": r.why}
                     for r in g.runs]}


def summary(a: Audit) -> dict[str, Any]:
    n = len(a.behaviours)
    unguarded = sum(1 for b in a.behaviours if not b.guarded)
    # testdb.pipeline caveats (gate rules unknown, CBTS may narrow): in the first line, so no
    # headline reads green on an assumption
    caveats = list((a.pipeline or {}).get("headline_caveats") or [])
    out: dict[str, Any] = {"behaviours": n, "unguarded": unguarded, "errors": len(a.errors),
                           "warnings": len(a.warnings), "caveats": caveats}
    sentence = verdict_sentence(n, unguarded)
    if "map" in a.provenance:  # a measured map was read (auditor.measured)
        from auditor.measured import summary_counts, summary_phrase

        out["measured"], out["static_only"] = summary_counts(b.tier for b in a.behaviours)
        sentence += summary_phrase(out["measured"], out["static_only"])
    sentence = with_warnings(sentence, [warning_phrase(f) for f in a.warnings])
    out["sentence"] = sentence + (f" ({'; '.join(caveats)})" if caveats else "")
    return out


def warning_phrase(f: Finding) -> str:
    """A warning in a few words: its headline, else the message up to its first colon."""
    text = f.headline or f.message.split(": ", 1)[0]
    return text if len(text) <= 100 else text[:99] + "…"


def with_warnings(sentence: str, phrases: list[str], shown: int = 2) -> str:
    """The first line never reads green when warnings exist: it names them."""
    if not phrases:
        return sentence
    n = len(phrases)
    more = f"; +{n - shown} more" if n > shown else ""
    return f"{sentence}, {n} warning{'s' if n > 1 else ''}: {'; '.join(phrases[:shown])}{more}"


def verdict_sentence(n: int, unguarded: int) -> str:
    if n == 0:
        return "No behaviour change found in this diff"
    noun = "behaviour change" if n == 1 else "behaviour changes"
    if unguarded == 0:
        return (f"The {noun} is guarded pre-merge" if n == 1
                else f"All {n} {noun} are guarded pre-merge")
    verb = "has" if unguarded == 1 else "have"
    return f"{unguarded} of {n} {noun} {verb} no pre-merge guard"


def headline_colour(s: dict[str, Any]) -> str:
    """Green only for a clean audit; warnings make it yellow, anything unguarded red."""
    if s["unguarded"] or s["errors"]:
        return "red"
    return "yellow" if s["warnings"] or s.get("caveats") else "green"


def head_words(p: dict[str, Any]) -> str:
    """The head side as the header names it: ``audit --base B`` without ``--head`` diffs B
    against the work tree, so the head is the work tree (uncommitted changes included), not
    the HEAD commit whose sha the provenance records beside it."""
    sha = str(p.get("head") or "-")[:12]
    if p.get("diff") == "git" and p.get("plan_from") == "work tree":
        return f"work tree (uncommitted changes; HEAD {sha})"
    return sha


def audit_text(data: dict[str, Any], colour: bool = False, max_guards: int = 6,
               width: int = 100) -> str:
    s = data["summary"]
    p = data["provenance"]
    out = [paint(s["sentence"], headline_colour(s), colour, bold=True)]
    plan = p.get("plan_from")
    where = ([f"diff {p['diff']}"] if p.get("diff") and p.get("diff") != "git" else
             [f"base {str(p.get('base') or '-')[:12]}", f"head {head_words(p)}"])
    if plan and plan != "work tree":
        where.append(f"test plan and sources from {plan[:12]}")
    out.append("  ".join(where))
    out.extend(_wrap(pipeline_words(data), width, ""))
    if data["findings"]:
        out.append("")
        out.append(paint("Findings", None, colour, bold=True))
        for f in data["findings"]:
            sev = paint(f["severity"].upper(), {"error": "red", "warning": "yellow"}
                        .get(f["severity"]), colour, bold=True)
            loc = f"{f['path']}:{f['line']}" if f["line"] else f["path"]
            out.append(f"  {sev} {loc}  [{f['rule']}]")
            out.extend(_wrap(f["message"], width, "    "))
    for b in data["behaviours"]:
        out.append("")
        v = paint(b["verdict"].upper(), VERDICT_COLOURS.get(b["verdict"], "red"), colour,
                  bold=True)
        out.append(f"{b['function']}  ({b['path']}:{b['line']}, {b['status']})  {v}")
        out.extend(_wrap(f"changed tokens: {', '.join(b['tokens'][:12]) or '-'}", width, "  "))
        if b["pre_merge_guards"]:
            pm = b["pre_merge_guards"]
            n = b.get("pre_merge_guard_count", len(pm))
            out.extend(_wrap("pre-merge guards: " + ", ".join(short_id(t) for t in pm[:4])
                             + (f" +{n - 4}" if n > 4 else ""), width, "  "))
        if b.get("weak_links"):  # a level that cannot guard decided: no guard, weak links
            wl = b["weak_links"]
            n = b.get("weak_link_count", len(wl))
            out.extend(_wrap(f"{WEAK_PRE_MERGE}: " + ", ".join(
                short_id(t) for t in wl[:4]) + (f" +{n - 4}" if n > 4 else ""), width, "  "))
        can_guard = (b.get("decided_by") or {}).get("can_guard") is not False
        levels = _levels(b)
        home, weaker = strongest_levels([[g["test_id"] for g in gs] for _, gs, _, _ in levels])
        for at, (level, gs, total, invalid) in enumerate(levels):
            decides = any(g.get("decides", level.tier == b["tier"]) for g in gs)
            lead = level_lead(decides, can_guard)
            bad = (f"; +{invalid} invalid listed id{'s' * (invalid != 1)}, not counted"
                   if invalid else "")
            mine = [g for g in gs if home[g["test_id"]] == at]
            above = len(gs) - len(mine)
            again = f"; {above} shown above, at a stronger level" if above else ""
            out.extend(_wrap(f"{lead}: {level_title(level)} ({total}{bad}{again})", width,
                             "  "))
            for g in mine[:max_guards]:
                gv = paint(g["effective"], VERDICT_COLOURS.get(g["effective"]), colour)
                out.append(f"     {short_id(g['test_id'])}  {gv}")
                stages = sorted({r["stage"] for r in g["runs"] if not r["waived"]})
                detail = f"       {g['reason']}"
                if g.get("via"):
                    detail += f"; runs via `{g['via']}`"
                if stages:
                    detail += f"; stages: {', '.join(stages[:4])}" + (
                        f" +{len(stages) - 4}" if len(stages) > 4 else "")
                n_weaker = weaker[g["test_id"]]
                if n_weaker:
                    detail += f"; also linked by {n_weaker} weaker level{'s' * (n_weaker != 1)}"
                out.extend(_wrap(detail.strip(), width, "       "))
            if total - above > max_guards:
                out.append(f"     ... {total - above - max_guards} more (see --format json)")
    for lc in data["list_changes"]:
        out.append(f"list change: {lc['kind']} {lc['test']} ({lc['path']}:{lc['line']})")
    for n in [*(data.get("pipeline") or {}).get("caveats", []), *data["notes"]]:
        out.extend(_wrap(f"note: {n}", width, ""))
    sug = data.get("suggestion") or {}
    if sug:
        out.append("")
        out.append("Run the missing guards before merge:")
        out.append(f"  {sug['command']}")
        out.append(f"    {cost_text(sug)}")
        alt = sug.get("runner_up")
        if alt:
            out.append(f"  runner-up, {RUNNER_UP_WORDS}: {alt['command']}")
            out.append(f"    {cost_text(alt)}")
    return with_legend("\n".join(out), width, AUDIT_VERDICT_TEXT)


# A guard's verdict in an audit is for this PR's pipeline (gates open or closed as this PR
# leaves them), not the test's verdict across all PRs that `where` prints.
AUDIT_VERDICT_TEXT = {
    "pre-merge": "runs in a stage this PR's pipeline starts",
    "gated": "runs before merge only in a gated stage this PR's pipeline does not start",
}


def strongest_levels(levels: list[list[str]]) -> tuple[dict[str, int], dict[str, int]]:
    """For tests linked at several evidence levels (strongest first): the level each is shown
    at (its strongest) and how many weaker levels also link it. The text shows a test once;
    the JSON keeps every link at every level."""
    home: dict[str, int] = {}
    weaker: dict[str, int] = {}
    for at, ids in enumerate(levels):
        for t in dict.fromkeys(ids):
            if t in home:
                weaker[t] += 1
            else:
                home[t], weaker[t] = at, 0
    return home, weaker


def level_title(level: Level) -> str:
    """An evidence level in words (``a parameter value and its name are on the changed
    lines``); its code (tier and rank) is in the JSON only."""
    return LEVEL_TITLES.get(level) or TIER_TITLES.get(level.tier, level.tier)


def pipeline_words(data: dict[str, Any]) -> str:
    """What this PR's pipeline starts, in words: ``2 stages start; multi-GPU stages do not
    (no changed file is on the multi-GPU path list)``; with a bot command that starts some
    (``--extra-stage``), which ones and why."""
    gates = data.get("gates") or {}
    pipe = data.get("pipeline") or {}
    started = pipe.get("started") or {}
    bits = [(f"{len(started)} stages start" if len(started) != 1 else "1 stage starts")
            if pipe else ""]
    multi = [n for n in started if MULTI_GPU_RE.search(n)]  # Stage.is_multi_gpu, by name
    hit = gates.get("multi_gpu_paths_hit") or []
    if multi:
        whys = (f"{', '.join(hit[:3])} on their path list" if gates.get("multi_gpu") and hit
                else "; ".join(list(dict.fromkeys(str(started[n]) for n in multi))[:2]))
        more = f" +{len(multi) - 3}" if len(multi) > 3 else ""
        bits.append(f"{len(multi)} multi-GPU stage{'s' * (len(multi) != 1)} "
                    f"start{'s' * (len(multi) == 1)}: {', '.join(multi[:3])}{more} ({whys})")
    elif gates.get("multi_gpu") and not pipe:  # an audit JSON without its pipeline
        bits.append("multi-GPU stages start" + (f" ({', '.join(hit[:3])} on their path list)"
                                                 if hit else ""))
    elif gates.get("multi_gpu"):
        bits.append("multi-GPU stages do not start (their path list is hit, but the bot "
                    "command or the changed files' group keeps them out)")
    elif any(c.startswith("gate rules unknown") for c in pipe.get("caveats") or ()):
        bits.append("multi-GPU stages do not (gate rules unknown: none are read)")
    else:
        bits.append("multi-GPU stages do not (no changed file is on their path list)")
    tags = gates.get("auto_trigger_tags") or []
    if tags:
        bits.append(f"auto-trigger stages start for {', '.join(tags)}")
    p = data.get("provenance") or {}
    if p.get("bot_command"):
        bits.append(f"judged under {p['bot_command']}")
    return "this PR's pipeline: " + "; ".join(b for b in bits if b)


# auditor.suggest.RUNNER_UP_WITHIN, in words (render modules do not import the auditor)
RUNNER_UP_WORDS = "within 20% of its GPU-minutes"


def _min(v: Any) -> str:
    """Minutes as the suggestion rounds them (0.1): a shard of a few seconds is ``<0.1 min``,
    not ``~0 min`` beside a total that counts it."""
    if not isinstance(v, (int, float)):
        return "duration unknown"
    return "<0.1 min" if v < 0.05 else f"~{v:g} min"


def shard_text(r: dict[str, Any]) -> str:
    """``A (4 GPUs x ~22.6 min)``: one shard, what it holds for how long (an audit from
    before GPU costs: ``A (~22.6 min)``)."""
    if "gpus" not in r:
        return f"{r['stage']} ({_min(r.get('minutes'))})"
    gpus, nodes = int(r.get("gpus") or 1), int(r.get("nodes") or 1)
    size = (f"{nodes} nodes x " if nodes > 1 else "") + f"{gpus} GPU{'s' * (gpus != 1)}"
    return f"{r['stage']} ({size} x {_min(r.get('minutes'))})"


def cost_text(s: dict[str, Any], shown: int = 4) -> str:
    """``2 extra shards, ~113.4 GPU-min, ~23.4 min wall: A (4 GPUs x ~22.6 min), B (1 GPU x
    ~23.4 min)``: what a suggested command starts (minutes from .test_durations, pytest-split's
    average for the unknown ones; GPU-minutes are minutes x GPUs x nodes; the shards run in
    parallel, so the wall time is the longest). An audit from before GPU costs: minutes only."""
    rows = s.get("stages") or []
    parts = [shard_text(r) for r in rows[:shown]]
    if len(rows) > shown:
        parts.append(f"+{len(rows) - shown} more")
    n = len(rows)
    if "gpu_minutes" in s:
        gm = s.get("gpu_minutes")
        total = (f", ~{gm:g} GPU-min" if isinstance(gm, (int, float))
                 else ", GPU-minutes unknown") + f", {_min(s.get('wall_minutes'))} wall"
    else:
        total = f", {_min(s.get('minutes'))}" if "minutes" in s else ""
    return f"{n} extra shard{'s' if n != 1 else ''}{total}: " + ", ".join(parts)


def _levels(b: dict[str, Any]) -> list[tuple[Level, list[dict[str, Any]], int, int]]:
    """A behaviour's guards by level (tier, then rank), with each level's full count (the
    deciding level's from ``decided_by``, a one-level tier's from ``guard_counts``) and how
    many of its shown links are invalid (they name no test: never counted)."""
    out = []
    decided = b.get("decided_by") or {}
    for tier in TIERS:
        by_rank: dict[int, list[dict[str, Any]]] = {}
        for g in b["guards"].get(tier) or []:
            by_rank.setdefault(int(g.get("rank", 1)), []).append(g)
        for rank, gs in sorted(by_rank.items()):
            invalid = sum(1 for g in gs if g.get("effective") == "invalid")
            total = len(gs) - invalid
            if (tier, rank) == (decided.get("tier"), decided.get("rank")):
                total = max(total, int(decided.get("guards") or 0))
            elif len(by_rank) == 1:
                total = max(total, int(b.get("guard_counts", {}).get(tier, 0)) - invalid)
            out.append((Level(tier, rank), gs, total, invalid))
    return out


def short_id(test_id: str) -> str:
    """``Class::func[params]`` without the file: the text view's width is for the parameters.
    JSON and markdown keep whole ids."""
    head, sep, params = test_id.partition("[")
    parts = head.split("::")
    return "::".join(parts[1:]) + sep + params if len(parts) > 1 else test_id


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False) or [indent]
