"""``lint``: what is wrong or worth knowing in a test plan, each with file:line and a fix."""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from testdb.errors import Severity, SourceLoc
from testdb.index import Index
from testdb.schedule import full_waive_applies, verdict_for

LINT_SCHEMA = "testdb-audit/lint@1"
RULES = {
    "unknown-test": "a list entry names no test in the inventory",
    "duplicate-entry": "the same test twice in one context or QA list",
    "unmatched-waive": "a waive names a test no list runs",
    "duplicate-waive": "the same waive twice",
    "unknown-gpu-prefix": "a full:GPU/ prefix that matches no stage",
    "unreached-block": "a block no stage's facts match",
    "unreached-context": "a context no stage runs",
    "missing-context": "a stage whose context exists in no test-db file",
    "dark-parametrization": "a test in the inventory that no list names",
    "half-guarded-function": "a function with some parametrizations pre-merge, others post-merge",
    "input": "a problem found while reading the inputs",
}


@dataclass(frozen=True)
class LintFinding:
    loc: SourceLoc
    rule: str
    severity: Severity
    message: str


def _nearest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    # Compare within the same file first: most mistakes are a wrong parameter or function.
    file = name.split("::", 1)[0]
    pool = [c for c in candidates if c.startswith(file + "::")] or candidates
    return difflib.get_close_matches(name, pool, n=n, cutoff=0.6)


def lint(index: Index, inventory: Any = None) -> list[LintFinding]:
    out: list[LintFinding] = []
    add = out.append
    sched = index.schedule
    for d in index.diagnostics:
        add(LintFinding(d.loc, "input", d.severity, d.message))
    # duplicates within one context / one QA list
    for name, entries in [*((c.name, c.entries) for c in index.contexts.values()),
                          *((q.name, q.entries) for q in index.qa_lists)]:
        seen: dict[str, SourceLoc] = {}
        for e in entries:
            if e.test in seen:
                add(LintFinding(e.loc, "duplicate-entry", Severity.WARNING,
                                f"{e.test} is already listed in {name} at {seen[e.test]}; "
                                "remove one of the lines"))
            else:
                seen[e.test] = e.loc
    # waives
    listed = set(sched.placements)
    listed_params: dict[str, int] = defaultdict(int)  # function id -> its listed [params] ids
    for t in listed:
        if "[" in t:
            listed_params[t.split("[", 1)[0]] += 1
    active = [s for s in index.stages if not s.disabled]
    gpu_types = {s.gpu_type for s in active}
    seen_w: dict[tuple[str | None, str], SourceLoc] = {}
    for w in index.waives:
        key = (w.gpu_prefix, w.test)
        if key in seen_w:
            add(LintFinding(w.loc, "duplicate-waive", Severity.WARNING,
                            f"this waive repeats {seen_w[key]}; remove one"))
        seen_w.setdefault(key, w.loc)
        if w.test not in listed and listed_params.get(w.test):
            # CI's apply_waives marks an item only when its node id is exactly a waived name.
            add(LintFinding(w.loc, "unmatched-waive", Severity.WARNING,
                            f"waive of {w.test} names the function, not a listed test: CI waives "
                            f"exact node ids only, so none of its {listed_params[w.test]} listed "
                            "parametrization(s) is waived; waive each `[params]` id instead"))
        elif w.test not in listed:
            add(LintFinding(w.loc, "unmatched-waive", Severity.INFO,
                            f"waive of {w.test} matches no entry of any list; the test may have "
                            "been renamed or removed: fix the id or delete the waive"))
        if w.gpu_prefix and active and not any(
                full_waive_applies(w.gpu_prefix, w.ci_node_id, s.name) for s in active):
            add(LintFinding(w.loc, "unknown-gpu-prefix", Severity.WARNING,
                            f"full:{w.gpu_prefix}/ applies in no stage (CI rewrites a stage's "
                            "first name token in it to the stage name and needs the item's own "
                            f"id back; known: {', '.join(sorted(gpu_types)[:8])}...); "
                            "this waive applies nowhere in L0"))
    # reachability
    for block in sched.unreached_blocks:
        if block.context in {c.name for c in sched.unreached_contexts}:
            continue
        add(LintFinding(block.loc, "unreached-block", Severity.WARNING,
                        f"no stage of {block.context} matches this block "
                        f"({block.condition.describe()}); its {len(block.entries)} test(s) "
                        "never run in L0"))
    for ctx in sched.unreached_contexts:
        add(LintFinding(ctx.loc, "unreached-context", Severity.INFO if not index.stages
                        else Severity.WARNING,
                        f"no stage runs context {ctx.name}; add a stage or delete the file"))
    for name, ss in sched.stages.items():
        if ss.missing_context:
            add(LintFinding(ss.stage.loc, "missing-context", Severity.ERROR,
                            f"stage {name} runs context {ss.stage.context}, which no test-db file "
                            "defines: the stage runs nothing"))
    # half-guarded functions
    by_base: dict[str, dict[str, str]] = defaultdict(dict)
    for tid, pl in sched.placements.items():
        if "[" in tid:
            by_base[tid.split("[", 1)[0]][tid] = verdict_for(pl)
    for base, vs in by_base.items():
        kinds = set(vs.values())
        if "pre-merge" in kinds and "post-merge-only" in kinds:
            post = sorted(t[len(base):] for t, v in vs.items() if v == "post-merge-only")
            first = sched.placements[next(t for t, v in vs.items() if v == "post-merge-only")][0]
            add(LintFinding(first.entry.loc, "half-guarded-function", Severity.INFO,
                            f"{base}: {len(post)} parametrization(s) run only post-merge "
                            f"({', '.join(post[:3])}{'...' if len(post) > 3 else ''}) while "
                            "others run pre-merge"))
    if inventory is not None and len(inventory):
        out += _inventory_rules(index, inventory)
    return sorted(out, key=lambda f: (-f.severity.rank, f.loc, f.rule))


def _inventory_rules(index: Index, inventory: Any) -> list[LintFinding]:
    out: list[LintFinding] = []
    ids = {i.nodeid for i in inventory if not i.is_placeholder}
    indeterminate = {i.base for i in inventory if i.indeterminate}
    files = {i.file for i in inventory}
    candidates = sorted(ids)
    for tid, pls in index.schedule.placements.items():
        e = pls[0].entry
        if e.kind != "nodeid" or tid in ids or e.node is None:
            continue
        if e.node.base in indeterminate or e.node.file not in files:
            continue  # cannot be checked: computed ids, or a file outside the inventory
        near = _nearest(tid, candidates)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        for p in pls:
            out.append(LintFinding(p.entry.loc, "unknown-test", Severity.ERROR,
                                   f"{tid} is not a test of the inventory{hint}"))
    listed = set(index.schedule.placements)
    for item in inventory:
        if item.is_placeholder or item.indeterminate or item.nodeid in listed:
            continue
        if item.nodeid.startswith("unittest/"):
            continue  # unit tests run through selections, not by id
        out.append(LintFinding(item.loc, "dark-parametrization", Severity.INFO,
                               f"{item.nodeid} is in no test list: it never runs in CI"))
    return out


def sarif(findings: list[LintFinding], tool_version: str) -> dict[str, Any]:
    """SARIF 2.1.0, so GitHub code scanning shows the findings on the files."""
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "testdb-audit", "version": tool_version,
                "informationUri": "https://github.com/testdb-audit/testdb-audit",
                "rules": [{"id": r, "shortDescription": {"text": t}} for r, t in RULES.items()],
            }},
            "results": [{
                "ruleId": f.rule,
                "level": level[f.severity],
                "message": {"text": f.message},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": f.loc.path},
                    "region": {"startLine": max(f.loc.line, 1)},
                }}],
            } for f in findings],
        }],
    }
