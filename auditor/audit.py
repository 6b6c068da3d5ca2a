"""The audit: a change -> behaviour changes -> guards by evidence tier -> verdicts and findings."""

from __future__ import annotations

import ast
from collections import defaultdict
from typing import Any

import testdb
from auditor.behaviour import Behaviour, behaviours, code_units, unit_at
from auditor.diff import Change, FileChange, is_test_path
from auditor.evidence import CAN_GUARD, Evidence, cannot_guard_why, level_phrase, weak_why
from auditor.linking import (
    MAX_FINDING_GUARDS,
    MAX_TOKEN_PARAMS,
    Auditor,
    Judgement,
    test_file_id,
)
from auditor.lists_diff import list_changes
from auditor.model import Audit, BehaviourResult, Finding, Guard, Run
from auditor.path_rules import PathRule, find_rules
from auditor.suggest import suggest
from testdb.botcmd import BotCommand
from testdb.index import Index

LISTS_DIR = "tests/integration/test_lists/"


def _changed_tests(aud: Auditor, files: list[FileChange]) -> tuple[dict[str, str], list[dict[str,
                                                                                       Any]]]:
    ids: dict[str, str] = {}
    out: list[dict[str, Any]] = []

    for fc in files:
        fid = test_file_id(fc.path)
        if fid is None or fc.new_text is None:
            continue
        try:
            units = code_units(ast.parse(fc.new_text))
        except SyntaxError:
            continue
        touched: dict[str, list[int]] = defaultdict(list)
        for ln in sorted(fc.added):
            u = unit_at(units, ln)
            while u and not (u.qualname.rsplit(".", 1)[-1].startswith(("test", "Test"))):
                outer = u.qualname.rsplit(".", 1)[0] if "." in u.qualname else None
                u = next((x for x in units if x.qualname == outer), None)
            if u:
                touched[u.qualname].append(ln)
        for q, lines in touched.items():
            tids = aud.items_of(fid, q)
            for t in tids:
                ids[t] = fid
            out.append({"path": fc.path, "function": q, "lines": lines, "status": fc.status,
                        "ids": tids})
    return ids, out


def run_audit(index: Index, change: Change, *, inventory: Any = None, graph: Any = None,
              coverage: str | None = None, rules: str | None = None,
              bot: BotCommand | None = None) -> Audit:
    """``rules``: a path-rules file (default: ci/audit-rules.yml under the checkout);
    ``bot``: the PR's ``/bot run`` command (default: a plain ``/bot run``); ``graph``: see
    ``Auditor``."""
    aud = Auditor(index, change, inventory, graph, coverage=coverage, bot=bot)
    path_rules = find_rules(change.root, rules)
    result = Audit(provenance={
        "tool": "testdb-audit", "version": testdb.__version__, "root": change.root,
        "base": change.base, "head": change.head, "diff": change.source,
        "checkout_side": change.checkout_side, "bot_command": bot.text if bot else None,
        "data_files": dict(sorted(index.files.items())),
    }, gates=aud.pipeline.gates.to_json(), pipeline=aud.pipeline.to_json())
    if not change.files:
        result.notes.append("the change is empty: no file differs")
    if change.outside_root:
        result.notes.append(f"{len(change.outside_root)} changed file(s) outside --root "
                            f"{change.root} are not audited (e.g. {change.outside_root[0]})")
    py_src = [f for f in change.files if f.path.endswith(".py") and not is_test_path(f.path)]
    py_tests = [f for f in change.files if f.path.endswith(".py") and is_test_path(f.path)]
    lists = [f for f in change.files if f.path.startswith(LISTS_DIR)]
    other = [f for f in change.files if f not in py_src and f not in py_tests and f not in lists]
    changed_ids, result.changed_tests = _changed_tests(aud, py_tests)
    for fc in other:
        matched = [r for r in path_rules if r.matches(fc.path)]
        if matched:
            result.behaviours.append(_judge_file(aud, fc, matched, result))
            continue
        result.unlinked.append({"path": fc.path, "status": fc.status,
                                "why": "no path rule links this file to tests"})
        result.findings.append(Finding("info", "unlinked-file", fc.path, 0,
                                       f"{fc.path} ({fc.status}) is not Python; no rule links it "
                                       "to tests, so its guards are unknown"))
    for fc in py_src:
        bs, notes = behaviours(fc)
        result.notes += notes
        for b in bs:
            result.behaviours.append(_judge(aud, b, changed_ids, result))
    for lc in list_changes(lists):
        result.list_changes.append(lc)
        if lc["kind"] == "moved-to-post-merge":
            result.findings.append(Finding(
                "warning", "guard-demoted", lc["path"], lc["line"],
                f"{lc['test']} moved from a pre_merge to a post_merge block of {lc['context']}: "
                "it no longer reports before merge", guards=(lc["test"],),
                headline=f"{lc['test']} moved to post-merge"))
    for (mod, tok), n in sorted(aud.unreached.items()):
        result.notes.append(f"{n} parametrization(s) name {tok} but their test modules do not "
                            f"import {mod}; not linked")
    for tok in sorted(aud.common_tokens):
        result.notes.append(f"token {tok!r} names {aud.value_count(tok)} parametrizations, "
                            f"more than {MAX_TOKEN_PARAMS}: too common to link by parameter")
    result.findings.sort(key=lambda f: ({"error": 0, "warning": 1, "info": 2}[f.severity],
                                        f.path, f.line))
    result.suggestion = suggest(index, aud.pipeline, result.findings)
    aud.save()  # what the next audit can reuse (unit-test selections)
    return result


def _judge_file(aud: Auditor, fc: FileChange, rules: list[PathRule], result: Audit
                ) -> BehaviourResult:
    """A non-Python file a path rule links: its guards are the tests the rule names."""
    from testdb.query import match_ids  # here: most audits have no path rule to match

    b = Behaviour(fc.path, "", "<file>", "file", fc.status if fc.status != "renamed"
                  else "modified", 1, tuple(sorted(fc.added)), tuple(sorted(fc.removed)), ())
    links: dict[str, Evidence] = {}
    listed = list(aud.index.schedule.placements)
    for rule in rules:
        for pattern in rule.tests:
            ids = match_ids(listed, pattern)
            if not ids:
                result.notes.append(f"path rule {rule.loc}: {pattern!r} names no listed test")
            for tid in ids:
                links.setdefault(tid, Evidence(tid, "path-rule", 1, f"path rule {rule.loc}"))
    return _judge(aud, b, {}, result, aud.judge_links(list(links.values())))


def _judge(aud: Auditor, b: Behaviour, changed_ids: dict[str, str], result: Audit,
           judged: Judgement | None = None) -> BehaviourResult:
    """The verdict is the deciding level's (auditor.verdict.decide); findings follow it."""
    br = BehaviourResult(b.path, b.module, b.qualname, b.kind, b.status, b.line, b.added,
                         b.removed, b.tokens)
    if b.parse_error:
        result.findings.append(Finding(
            "error", "unparsable-change", b.path, b.line,
            f"{b.path}:{b.line}: the changed file does not parse "
            f"({b.parse_error.split(': ', 1)[-1]}); its behaviour cannot be judged. Fix the "
            "syntax error: pytest could not import the tests that import it either",
            function=b.qualname))
        return br  # verdict "unguarded": nothing links what cannot be read
    j = judged if judged is not None else aud.judge(b, changed_ids)
    d = j.decision
    br.guards, br.guard_counts = j.guards, j.counts
    where = f"{b.qualname} ({b.path}:{b.line})"
    if d.level is None:
        br.verdict = "unguarded"
        bad = (f"; the {len(d.invalid)} listed id(s) linked to it name no test in this "
               "checkout" if d.invalid else "")
        result.findings.append(Finding("error", "no-guard", b.path, b.line,
                                       f"{where} changed and no test is linked to it" + bad
                                       + _unreached(aud, b), function=b.qualname))
        return br
    br.tier, br.rank = d.level
    br.verdict, br.deciding_count = d.verdict, len(d.deciding)
    br.pre_merge_guards, br.weak_links = list(d.pre_merge), list(d.weak)
    deciding = [g.test_id for gs in br.guards.values() for g in gs if br.decides(g)]
    if d.weak:
        result.findings.append(Finding(
            "error", "weak-evidence-only", b.path, b.line,
            f"{where} is linked to pre-merge tests only because "
            f"{weak_why(d.level, d.deciding, d.weak)}; no test is shown to exercise it, so "
            "none guards it. Run the audit with --coverage (coverage contexts), or add a test "
            f"that calls {b.name}" + (" or names its parameter" if d.level.tier == "parameter"
                                      else "")
            + "; no /bot run line is suggested: more stages would only start more such tests",
            function=b.qualname))
    elif not br.guarded:
        weaker = sorted({g.test_id for t, gs in br.guards.items() if t != "module" for g in gs
                         if not br.decides(g) and g.effective == "pre-merge"})
        context = (f"; {len(weaker)} weaker link(s) that run pre-merge are context, not guards "
                   f"(e.g. {weaker[0]})" if weaker else "")
        can_guard = CAN_GUARD[d.level]
        cannot = ("" if can_guard else "; they could not guard even where they ran pre-merge ("
                  + cannot_guard_why(d.level) + "), so no stage is suggested")
        result.findings.append(Finding(
            "error", "no-pre-merge-guard", b.path, b.line,
            f"{where} has no pre-merge guard: its {level_phrase(d.level, len(d.deciding))} "
            f"run at best {br.verdict}" + ("" if j.stages else "; no CI stage runs them")
            + cannot + context, function=b.qualname,
            guards=tuple(deciding[:MAX_FINDING_GUARDS]),
            stages=tuple(j.stages) if can_guard else ()))
    elif j.thin:
        result.findings.append(Finding(
            "info", "thin-pre-merge-guard", b.path, b.line,
            f"{where} is guarded pre-merge only by unit tests "
            f"({', '.join(br.pre_merge_guards[:3])}); its {j.thin} integration guard(s) "
            "of the same evidence do not run pre-merge", function=b.qualname,
            guards=tuple(br.pre_merge_guards[:MAX_FINDING_GUARDS])))
    for g in br.guards.get("parameter", []):
        if g.test_id in changed_ids and g.effective not in ("pre-merge", "invalid"):
            _warn_half_guard(aud, b, g, result)
    return br


def _unreached(aud: Auditor, b: Behaviour) -> str:
    """Why a changed value links no parametrization that carries it (candidates.unreached)."""
    missed = [(tok, aud.unreached[(b.module, tok)]) for tok in b.tokens
              if (b.module, tok) in aud.unreached]
    return "".join(f"; {n} parametrization(s) name {tok} but their test modules do not "
                   f"import {b.module}" for tok, n in missed)


def _run_label(r: Run) -> str:
    """A stage run as the reviewer reads it: the stage and why this PR's pipeline starts it
    or not (the pipeline's own reason, testdb.pipeline.pr_stages)."""
    if r.kind == "qa":
        return r.stage  # "QA <list>"
    return f"{r.stage} ({'started' if r.started else 'not started'}: {r.why})"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _warn_half_guard(aud: Auditor, b: Behaviour, g: Guard, result: Audit) -> None:
    base = g.test_id.split("[", 1)[0]
    siblings = [t for t in aud.listed_params(base) if t != g.test_id]
    sib_text = "; ".join(f"{t[len(base):]} runs {aud.runs_of(t)[1]}"
                         for t in sorted(siblings)[:4])
    labels = sorted({_run_label(r) for r in g.runs if not r.waived})
    where = _and(labels[:6] + ([f"{len(labels) - 6} more"] if len(labels) > 6 else [])
                 ) if labels else "no CI stage"
    stages = tuple(sorted({r.stage for r in g.runs if not r.waived and r.kind != "qa"}))
    token = g.reason.split("=", 1)[-1].split(" ", 1)[0]
    msg = (f"the {token} half of your guard {base} won't report in this PR's pipeline: "
           f"{g.test_id[len(base):]} runs only in {where}")
    if sib_text:
        msg += f"; its sibling {sib_text}" if len(siblings) == 1 else f"; siblings: {sib_text}"
    # Point at the line that keeps it out of pre-merge: a post-merge entry before a gated one.
    worst = sorted((r for r in g.runs if not r.waived and r.kind != "qa"),
                   key=lambda r: (r.placement != "post-merge-only", r.path, r.line))
    path, line = (worst[0].path, worst[0].line) if worst else (b.path, b.line)
    key = (path, line, g.test_id)
    if any((f.path, f.line, f.guards[:1]) == (key[0], key[1], (key[2],)) for f in result.findings):
        return
    result.findings.append(Finding("warning", "post-merge-guard", path, line, msg,
                                   function=b.qualname, guards=(g.test_id,), stages=stages,
                                   headline=f"the {token} half of the guard {_only(g)}"))


def _only(g: Guard) -> str:
    """Where a guard that misses this PR's pipeline does run, in a few words."""
    classes = {r.placement or r.kind for r in g.runs if not r.waived}
    if "post-merge-only" in classes:
        return "runs only post-merge"
    return "runs only in QA" if classes == {"qa"} else "does not run in this PR's pipeline"
