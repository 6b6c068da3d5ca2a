"""The audit: a change -> behaviour changes -> guards by evidence tier -> verdicts and findings."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import testdb
from auditor.behaviour import Behaviour, UnitIndex, behaviours, code_units, module_name
from auditor.behaviour_memo import behaviours_of
from auditor.diff import Change, FileChange, is_test_path
from auditor.evidence import CAN_GUARD, Evidence, Level, cannot_guard_why, level_phrase, weak_why
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
from auditor.stale_names import (
    file_ids,
    list_lines,
    listed_test_removed,
    removed_by_change,
    stale_guard_name,
)
from auditor.suggest import suggest
from testdb.botcmd import BotCommand
from testdb.index import Index
from testdb.stamp import cache_dir

LISTS_DIR = "tests/integration/test_lists/"
# (behaviour changes judged, of how many): called after each one. The library never prints;
# the CLI shows a bar on a terminal when a change is large (reports/cmd_audit.py).
Progress = Callable[[int, int], None]


def _changed_tests(aud: Auditor, files: list[FileChange]) -> tuple[dict[str, str], list[dict[str,
                                                                                       Any]]]:
    ids: dict[str, str] = {}
    out: list[dict[str, Any]] = []

    for fc in files:
        fid = test_file_id(fc.path)
        if fid is None or fc.new_text is None:
            continue
        try:
            units = UnitIndex(code_units(ast.parse(fc.new_text)))
        except (SyntaxError, ValueError):
            continue
        touched: dict[str, list[int]] = defaultdict(list)
        for ln in sorted(fc.added):
            u = units.at(ln)
            while u and not (u.qualname.rsplit(".", 1)[-1].startswith(("test", "Test"))):
                outer = u.qualname.rsplit(".", 1)[0] if "." in u.qualname else None
                u = units.by_name.get(outer) if outer else None
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
              bot: BotCommand | None = None, progress: Progress | None = None,
              measured_map: str | None = None) -> Audit:
    """``rules``: a path-rules file (default: ci/audit-rules.yml under the checkout);
    ``bot``: the PR's ``/bot run`` command (default: a plain ``/bot run``); ``graph``: see
    ``Auditor``; ``progress``: told of each behaviour change judged; ``measured_map``: a
    test-to-code map file (auditor.measured)."""
    measured = None
    if measured_map:
        from auditor.measured import Measured

        measured = Measured(measured_map, change)
    aud = Auditor(index, change, inventory, graph, coverage=coverage, bot=bot,
                  measured=measured)
    path_rules = find_rules(change.root, rules)
    result = Audit(provenance={
        "tool": "testdb-audit", "version": testdb.__version__, "root": change.root,
        "base": change.base, "head": change.head, "diff": change.source,
        "checkout_side": change.checkout_side, "bot_command": bot.text if bot else None,
        "data_files": dict(sorted(index.files.items())),
        **({"map": measured.provenance()} if measured is not None else {}),
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
    found: list[Behaviour] = []
    # every file's behaviour changes, kept between audits of the same change
    kept = iter(behaviours_of([fc for fc in py_src if fc.status != "deleted"], behaviours,
                              cache_dir()))
    for fc in py_src:
        gone = _gone_module(aud, fc, result)
        bs, notes = next(kept) if fc.status != "deleted" else ([], [])
        result.notes += notes
        found += [*([gone] if gone else []), *bs]
    for n, b in enumerate(found, 1):
        judged = aud.judge_links(list(aud.removal(b.module).links)) if b.gone else None
        result.behaviours.append(_judge(aud, b, changed_ids, result, judged))
        if progress is not None:
            progress(n, len(found))
    result.findings += _stale_guard_names(aud, result)
    result.findings += _removed_listed_tests(aud, py_tests)
    for lc in list_changes(lists):
        result.list_changes.append(lc)
        if lc["kind"] == "moved-to-post-merge":
            result.findings.append(Finding(
                "warning", "guard-demoted", lc["path"], lc["line"],
                f"{lc['test']} moved from a pre_merge to a post_merge block of {lc['context']}: "
                + demoted_phrase(aud.runs_of(lc["test"])[0]), guards=(lc["test"],),
                headline=f"{lc['test']} moved to post-merge"))
    for (mod, tok), n in sorted(aud.unreached.items()):
        result.notes.append(f"{n} parametrization(s) name {tok} but their test modules do not "
                            f"import {mod}; not linked")
    for tok in sorted(aud.common_tokens):
        result.notes.append(f"token {tok!r} names {aud.value_count(tok)} parametrizations, "
                            f"more than {MAX_TOKEN_PARAMS}: too common to link by parameter")
    if measured is not None:
        result.notes += measured.notes
    result.findings.sort(key=lambda f: ({"error": 0, "warning": 1, "info": 2}[f.severity],
                                        f.path, f.line))
    result.suggestion = suggest(index, aud.pipeline, result.findings)
    aud.save()  # what the next audit can reuse (unit-test selections)
    return result


def _stale_guard_names(aud: Auditor, result: Audit) -> list[Finding]:
    """``stale-guard-name``: a listed name in a block this PR's pipeline starts before merge
    that names no test, while its nearest real id (``testdb.names``) is a guard of this change
    (a link of a level that can guard): the line meant to guard the change runs nothing."""
    guards: dict[str, tuple[str, str]] = {}  # test id -> (its verdict, what it is linked to)
    for br in result.behaviours:
        shown = br.module if br.qualname == "<module>" else br.qualname
        for gs in br.guards.values():
            for g in gs:
                if CAN_GUARD.get(Level(g.tier, g.rank), False) and g.effective != "invalid":
                    guards.setdefault(g.test_id, (g.effective, shown))
    if not guards or aud.inventory is None:
        return []
    from testdb.names import INVALID, NameChecker

    files = {t.split("::", 1)[0] for t in guards}
    checker = NameChecker(aud.inventory)
    placements = aud.index.schedule.placements
    out: list[Finding] = []
    for tid in placements:
        if tid in guards or tid.startswith("unittest/") or tid.split("::", 1)[0] not in files:
            continue
        check = checker.check(tid)
        near = next((n for n in check.nearest if n in guards), None)
        if check.status != INVALID or near is None:
            continue
        for line in list_lines(tid, placements[tid], aud.pipeline):
            f = stale_guard_name(line, near, *guards[near])
            if f is not None:
                out.append(f)
    return out


def _removed_listed_tests(aud: Auditor, files: list[FileChange]) -> list[Finding]:
    """``listed-test-removed``: each list line naming an id that was a test before the change
    and names none after it (a test function deleted, a test file emptied, deleted or
    renamed): CI ignores the line from now on."""
    by_file: dict[str, list[str]] | None = None
    out: list[Finding] = []
    for fc in files:
        fid = test_file_id(fc.old_path) if fc.old_path else None
        if fid is None or fc.old_path is None or fc.old_text is None:
            continue
        if by_file is None:
            by_file = defaultdict(list)
            for tid in aud.index.schedule.placements:
                by_file[tid.split("::", 1)[0]].append(tid)
        listed = by_file.get(fid, [])
        if not listed:
            continue
        # here: the scanner's imports (~10 ms) only for a changed test file that lists ids
        from testdb.inventory import scan_source

        base = file_ids(scan_source(fc.old_text, fid, path=fc.old_path))
        same = fc.new_path is not None and test_file_id(fc.new_path) == fid
        head = (file_ids(scan_source(fc.new_text, fid, path=fc.new_path or ""))
                if same and fc.new_text is not None else None)
        for tid in sorted(listed):
            if not removed_by_change(tid, base, head):
                continue
            fn = tid.split("[", 1)[0]
            why = ("its test file is deleted" if fc.new_path is None else
                   f"its test file is renamed to {fc.new_path}" if head is None else
                   "its test file is emptied" if not head.functions else
                   f"{fn.split('::', 1)[1]} is deleted" if fn not in head.functions else
                   "that parametrization is removed")
            out += [listed_test_removed(line, why)
                    for line in list_lines(tid, aud.index.schedule.placements[tid],
                                           aud.pipeline)]
    return out


def _gone_module(aud: Auditor, fc: FileChange, result: Audit) -> Behaviour | None:
    """The behaviour change of a module path that goes away (deleted, or the old path of a
    rename): its guards are the tests whose imports still reach the old path, which fail at
    collection (``auditor.removed``). Nothing importing it is no behaviour change, and the
    audit says so."""
    if fc.old_path is None or fc.old_path == fc.new_path:
        return None
    old = module_name(fc.old_path)
    if fc.new_path is not None and module_name(fc.new_path) == old:
        return None
    how = "deleted" if fc.new_path is None else f"renamed to {fc.new_path}"
    if old in aud.graph.modules:  # another file (a package's __init__.py) is that module now
        result.notes.append(f"{fc.old_path} {how}, but {old} is still a module "
                            f"({aud.graph.modules[old].path}): its importers are unchanged")
        return None
    if not aud.removal(old).importers:
        result.notes.append(f"{fc.old_path} {how}: nothing in the checkout imports {old} any "
                            "more, so no test can fail for its absence: no behaviour change "
                            "(an import by a computed name, importlib or an entry point, is "
                            "not seen)")
        return None
    return Behaviour(fc.old_path, old, "<module>", "module",
                     "deleted" if fc.new_path is None else "renamed", 1, (),
                     tuple(sorted(fc.removed)), (), gone=how)


def _removed_where(aud: Auditor, b: Behaviour) -> str:
    """A removed module as a finding names it: the old path, how, and who imports it."""
    imps = aud.removal(b.module).importers
    shown = ", ".join(f"{i.path}:{i.line}" for i in imps[:3])
    more = f" and {len(imps) - 3} more" if len(imps) > 3 else ""
    return f"module {b.module} ({b.path}, {b.gone}; still imported at {shown}{more})"


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
    where = _removed_where(aud, b) if b.gone else f"{b.qualname} ({b.path}:{b.line})"
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


def demoted_phrase(verdict: str) -> str:
    """What a test moved to a post_merge block still does before merge, by its verdict in
    the plan after the move (other blocks may still run it: a gated stage, another context)."""
    return {"pre-merge": "another block still runs it in every PR's pipeline (pre-merge)",
            "gated": "before merge it now runs only in gated stages (gated), when a PR opens them",
            }.get(verdict, f"it no longer reports before merge ({verdict})")
