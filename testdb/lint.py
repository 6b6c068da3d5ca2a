"""``lint``: what is wrong or worth knowing in a test plan, each with file:line and a fix."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from testdb.errors import Severity, SourceLoc
from testdb.index import Index
from testdb.names import INVALID, NameCheck, NameChecker
from testdb.schedule import full_waive_applies, verdict_for

LINT_SCHEMA = "testdb-audit/lint@1"
RULES = {
    "unknown-test": "a list entry names no test in the inventory",
    "unparsable-test-file": "a test file that does not parse: CI runs none of its tests",
    "duplicate-entry": "the same test twice in one context or QA list",
    "unmatched-waive": "a waive names a test no list runs",
    "duplicate-waive": "the same waive twice",
    "unknown-gpu-prefix": "a full:GPU/ prefix that matches no stage",
    "unreached-block": "a block no stage's facts match",
    "unreached-context": "a context no stage runs",
    "missing-context": "a stage whose context exists in no test-db file",
    "dark-parametrization": "tests in the inventory that no list names (one finding a function)",
    "half-guarded-function": "a function with some parametrizations pre-merge, others post-merge",
    "input": "a problem found while reading the inputs",
}


@dataclass(frozen=True)
class LintFinding:
    loc: SourceLoc
    rule: str
    severity: Severity
    message: str


def lint(index: Index, inventory: Any = None) -> list[LintFinding]:
    out: list[LintFinding] = []
    add = out.append
    sched = index.schedule
    names = NameChecker(inventory) if inventory is not None and len(inventory) else None
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
    stale: dict[SourceLoc, list[str]] = {}
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
            stale.setdefault(w.loc, []).append(w.test)  # one finding per line, below
        if w.gpu_prefix and active and not any(
                full_waive_applies(w.gpu_prefix, w.ci_node_id, s.name) for s in active):
            add(LintFinding(w.loc, "unknown-gpu-prefix", Severity.WARNING,
                            f"full:{w.gpu_prefix}/ applies in no stage (CI rewrites a stage's "
                            "first name token in it to the stage name and needs the item's own "
                            f"id back; known: {', '.join(sorted(gpu_types)[:8])}...); "
                            "this waive applies nowhere in L0"))
    for loc, tests in stale.items():
        add(LintFinding(loc, "unmatched-waive", Severity.INFO, _stale_waives(tests, names)))
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
    if names is not None:
        out += _inventory_rules(index, inventory, names)
    return sorted(one_per_place(out), key=lambda f: (-f.severity.rank, f.loc, f.rule))


def one_per_place(findings: list[LintFinding]) -> list[LintFinding]:
    """One finding per (rule, place): a line holding several entries (a waives.txt line may)
    gets one finding, its distinct messages joined, at the worst of their severities."""
    groups: dict[tuple[str, SourceLoc], list[LintFinding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.loc), []).append(f)
    out = []
    for (rule, loc), fs in groups.items():
        messages = list(dict.fromkeys(f.message for f in fs))
        worst = max((f.severity for f in fs), key=lambda s: s.rank)
        out.append(fs[0] if len(fs) == 1 else LintFinding(loc, rule, worst, "; ".join(messages)))
    return out


def _stale_waives(tests: list[str], names: NameChecker | None) -> str:
    """The message for one waives.txt line whose waives match no entry of any list."""
    tests = list(dict.fromkeys(tests))
    if len(tests) > 1:
        return (f"waives of {', '.join(tests)} ({len(tests)} on this line) match no entry of "
                "any list; the tests may have been renamed or removed: fix the ids or delete "
                "the waives")
    check = names.check(tests[0]) if names is not None else None
    if check is not None and check.status == INVALID:
        return (f"waive of {tests[0]} matches no entry of any list and {check.reason}"
                f"{did_you_mean(check)}")
    return (f"waive of {tests[0]} matches no entry of any list; the test may have been renamed "
            "or removed: fix the id or delete the waive")


def did_you_mean(check: NameCheck) -> str:
    """``; did you mean A, B?`` from a name check's nearest ids (empty without any)."""
    if not check.nearest:
        return ""
    more = f" (and {check.more} more)" if check.more else ""
    return f"; did you mean {', '.join(check.nearest)}{more}?"


def _inventory_rules(index: Index, inventory: Any, names: NameChecker) -> list[LintFinding]:
    out = _unparsable(index, inventory)
    broken_files = {p.file for p in inventory.unparsable()}
    for tid, pls in index.schedule.placements.items():
        if pls[0].entry.kind != "nodeid":
            continue
        if tid.partition("::")[0] in broken_files:
            continue  # the file's one finding says it; its listed lines are not what is wrong
        check = names.check(tid)
        if check.status != INVALID:
            continue  # valid, or not checkable here (computed ids, no sources)
        for p in pls:
            out.append(LintFinding(p.entry.loc, "unknown-test", Severity.ERROR,
                                   f"{tid} {check.reason}{did_you_mean(check)}"))
    listed = index.schedule.placements
    dark: dict[str, list[Any]] = {}  # function id -> its unlisted items (one place: its def)
    for item in inventory:
        if item.is_placeholder or item.indeterminate or item.nodeid in listed:
            continue
        if item.nodeid.startswith("unittest/"):
            continue  # unit tests run through selections, not by id
        dark.setdefault(item.base, []).append(item)
    for base, items in dark.items():
        if len(items) == 1:
            text = f"{items[0].nodeid} is in no test list: it never runs in CI"
        else:
            params = [i.nodeid[len(base):] for i in items]
            text = (f"{base}: {len(items)} parametrizations are in no test list "
                    f"({', '.join(params[:3])}{', ...' if len(params) > 3 else ''}): they "
                    "never run in CI")
        out.append(LintFinding(items[0].loc, "dark-parametrization", Severity.INFO, text))
    return out


def _unparsable(index: Index, inventory: Any) -> list[LintFinding]:
    """One error per test file that does not parse, where the parser stopped: pytest cannot
    import it, so a stage listing its ids gets a collection error and runs none of them."""
    out = []
    for p in inventory.unparsable():
        listed = sum(1 for t in index.schedule.placements if t.partition("::")[0] == p.file)
        out.append(LintFinding(p.loc, "unparsable-test-file", Severity.ERROR,
                               f"{p.error}: pytest cannot collect {p.file}, so CI runs none of "
                               f"its tests ({listed} listed id(s) run nowhere); fix it"))
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
