"""The offline HTML coverage report: a view model built here, rendered by jinja2 templates.

One self-contained directory: ``index.html`` and ``function.html`` (templates), ``static/``
(CSS and vanilla JS, no CDN), ``data.js`` (the index rows as JSON, rendered page by page in the
browser) and ``detail/fN.js`` (per test file: the parametrization x stage matrices).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import testdb
from reports import charts
from reports.comment import data_digest
from reports.words import VERDICT_TEXT  # the legend's and the tiles' meanings, as in text
from testdb.caveats import verdict_caveats
from testdb.errors import UsageError
from testdb.index import Index
from testdb.names import INVALID, NameCheck, NameChecker
from testdb.schedule import VERDICTS, Placement, verdict_for

REPORT_SCHEMA = "testdb-audit/report@1"
MARKER_FILE = ".testdb-report"
UNIT_FUNCTION = "(unit-test selection)"
_LINT_LIMIT = 5000  # drawn a page at a time in the browser; all of them with JS off


@dataclass
class ReportView:
    """What the templates and the data files get; everything decided here, nothing in them."""

    page: dict[str, Any]  # for the jinja templates
    data: dict[str, Any]  # becomes data.js
    details: dict[int, dict[str, Any]]  # file index -> detail/f<N>.js


def split_test_id(test_id: str) -> tuple[str, str, str]:
    """``file::Class::func[params]`` -> (file, ``Class::func``, ``[params]``); unit-test
    selections (``unittest/path -k "x"``) -> (path, UNIT_FUNCTION, the options)."""
    bracket = test_id.find("[")
    head = test_id if bracket < 0 else test_id[:bracket]
    if "::" not in head:
        path, _, args = test_id.partition(" ")
        return path, UNIT_FUNCTION, args.strip()
    file, _, function = head.partition("::")
    return file, function, "" if bracket < 0 else test_id[bracket:]


class _Paths:
    """Interns evidence paths per detail file (most cells share a handful of list files)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._idx: dict[str, int] = {}

    def __call__(self, path: str) -> int:
        if path not in self._idx:
            self._idx[path] = len(self.items)
            self.items.append(path)  # as recorded: relative to the root, openable as path:line
        return self._idx[path]


def _param_detail(test_id: str, params: str, placements: list[Placement], verdict: str,
                  stage_idx: dict[str, int], paths: _Paths) -> dict[str, Any]:
    cells: dict[int, list[list[Any]]] = defaultdict(list)
    qa: list[list[Any]] = []
    lines: list[list[Any]] = []
    for p in placements:
        pi, ln = paths(p.entry.loc.path), p.entry.loc.line
        if p.kind == "qa":
            qa.append([pi, ln, p.context, 1 if p.waived_by else 0])
            continue
        term = p.block.stage_term if p.block else None
        lines.append([pi, ln, p.context, p.block.loc.line if p.block else 0, term or "any",
                      p.block.condition.describe() if p.block else "", p.entry.marker or ""])
        for r in p.runs:
            waived = bool(r.waived_by)
            cells[stage_idx[r.stage]].append([pi, ln, r.shard, r.splits,
                                              "waived" if waived else r.verdict,
                                              ",".join(r.assumed)])
    return {"id": test_id, "params": params, "verdict": verdict,
            "cells": {str(k): v for k, v in sorted(cells.items())}, "qa": qa, "lines": lines}


def _check(checker: NameChecker | None, test_id: str) -> NameCheck | None:
    """The id checked against the sources; unit-test ids are selections, not node ids."""
    return None if checker is None or test_id.startswith("unittest/") else checker.check(test_id)


def _lint_rows(index: Index, inventory: Any = None) -> list[dict[str, Any]]:
    """`testdb lint`'s findings (the index's diagnostics among them, rule `input`), so the
    report counts and names them as `testdb lint` does."""
    from testdb.lint import lint

    rows: dict[str, dict[str, Any]] = {}
    for d in lint(index, inventory):
        row = {"path": d.loc.path, "line": d.loc.line, "severity": d.severity.value,
               "rule": d.rule, "message": d.message}
        rows.setdefault(f"{row['path']}:{row['line']}:{row['message']}", row)
    rank = {"error": 0, "warning": 1}
    return sorted(rows.values(), key=lambda r: (rank.get(r["severity"], 2), r["path"], r["line"]))


def build_view(index: Index, audit: dict[str, Any] | None = None,
               results: list[dict[str, Any]] | None = None,
               budget_minutes: float = charts.DEFAULT_BUDGET_MINUTES,
               inventory: Any = None) -> ReportView:
    """Everything the report shows, from the index (and an audit and launch results).
    ``inventory``: the checkout's tests (``testdb.inventory``); a listed id that names none of
    them is ``invalid`` (no stage runs it: CI ignores it). Without one, ids are not checked."""
    sched = index.schedule
    checker = NameChecker(inventory) if inventory is not None and len(inventory) else None
    stage_names = sorted(sched.stages)
    stage_idx = {n: i for i, n in enumerate(stage_names)}
    known = index.durations
    stages = []
    for n in stage_names:
        ss = sched.stages[n]
        st = ss.stage
        with_duration = sum(1 for e in ss.entries if e.test in known or e.ci_node_id in known)
        stages.append([n, st.context, st.split_id, st.splits, ss.why or ss.placement,
                       ss.placement, len(ss.entries), round(ss.duration_s),
                       with_duration, st.platform, st.gpu_count,
                       1 if ss.missing_context else 0])

    def stage_order(i: int) -> tuple[int, str]:
        return _class_rank(str(stages[i][5])), stage_names[i]

    grouped: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for tid in sched.placements:
        file, function, params = split_test_id(tid)
        grouped[file][function].append((params, tid))
    files = sorted(grouped)
    vix = {v: i for i, v in enumerate(VERDICTS)}
    functions: list[list[Any]] = []
    file_rows: list[list[Any]] = []
    details: dict[int, dict[str, Any]] = {}
    where: dict[str, list[Any]] = {}  # test id -> [file idx, function idx, params]
    totals: Counter[str] = Counter()
    for fi, file in enumerate(files):
        paths = _Paths()
        fcounts = [0] * len(VERDICTS)
        fdetail: list[dict[str, Any]] = []
        for ni, function in enumerate(sorted(grouped[file])):
            counts = [0] * len(VERDICTS)
            params_out: list[dict[str, Any]] = []
            used: set[int] = set()
            for params, tid in sorted(grouped[file][function]):
                pl = list(sched.placements[tid])
                check = _check(checker, tid)
                v = INVALID if check and check.status == INVALID else verdict_for(pl)
                counts[vix[v]] += 1
                totals[v] += 1
                pd = _param_detail(tid, params, pl, v, stage_idx, paths)
                if check and check.status == INVALID:  # its lines stay, to be fixed; no stage
                    pd.update(cells={}, nearest=list(check.nearest), reason=check.reason)
                used.update(int(k) for k in pd["cells"])
                params_out.append(pd)
                where[tid] = [fi, ni, params]
            fcounts = [a + b for a, b in zip(fcounts, counts, strict=True)]
            functions.append([fi, function, ni, *counts])
            fdetail.append({"name": function, "stages": sorted(used, key=stage_order),
                            "params": params_out})
        file_rows.append([fi, len(grouped[file]), *fcounts])
        details[fi] = {"schema": REPORT_SCHEMA, "file": fi, "name": file, "paths": paths.items,
                       "functions": fdetail}
    if audit or results:
        from reports import html_audit  # imports the audit's records
    outcome = {str(r["test_id"]): str(r["outcome"]) for r in results or []}
    total = sum(totals.values())
    files_digest = data_digest(index.files)
    data = {
        "schema": REPORT_SCHEMA, "verdicts": list(VERDICTS), "files": files,
        "functions": functions, "file_rows": file_rows, "stages": stages,
        "stage_fields": ["name", "context", "shard", "splits", "why", "verdict", "tests",
                         "duration_s", "with_duration", "platform", "gpus", "missing_context"],
        "function_fields": ["file", "function", "index", *VERDICTS],
        "results": outcome, "tests": {t: where[t] for t in sorted(set(outcome) & set(where))},
    }
    page = {
        "title": f"testdb-audit coverage: {os.path.basename(os.path.abspath(index.root))}",
        "version": testdb.__version__, "root": index.root, "digest": files_digest,
        "n_files": len(index.files),
        # as `stats` and `where` say it: a post-merge-only count may be wrong without gate rules
        "caveats": list(verdict_caveats(index.triggers.source, [v for v, n in totals.items()
                                                                 if n])),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "totals": [{"verdict": v, "count": totals[v], "text": VERDICT_TEXT.get(v, v),
                    "share": f"{100 * totals[v] / total:.1f}" if total else "0.0"}
                   for v in shown_verdicts(checker is not None)],
        "total": total, "n_test_files": len(files), "n_functions": len(functions),
        "n_stages": len(stages), "verdicts": list(VERDICTS),
        "legend": [{"verdict": v, "text": VERDICT_TEXT.get(v, v)}
                   for v in shown_verdicts(checker is not None)],
        "stage_charts": charts.stage_groups(sched, known, budget_minutes),
        "budget_minutes": f"{budget_minutes:g}",
        "file_chart": charts.file_chart(((files[r[0]], r[2:]) for r in file_rows), VERDICTS),
        "audit": html_audit.audit_view(audit, where) if audit else None,
        "results": html_audit.results_view(results, where) if results else None,
        "names": ("listed ids checked against the checkout's tests" if checker else
                  "listed ids not checked against sources (no test sources under the root)"),
        "lint": (lint := _lint_rows(index, inventory))[:_LINT_LIMIT], "lint_total": len(lint),
        "lint_more": max(0, len(lint) - _LINT_LIMIT),
        "lint_rules": [{"rule": r, "count": n}
                       for r, n in sorted(Counter(d["rule"] for d in lint).items())],
        "lint_severities": [{"severity": v, "count": n}
                            for v, n in Counter(d["severity"] for d in lint).items()],
    }
    return ReportView(page, data, details)


def shown_verdicts(checked: bool) -> list[str]:
    """The verdicts the tiles and the legend name: ``invalid`` only when the listed ids were
    checked against the checkout's tests (unchecked, "invalid 0" would read as a finding)."""
    return [v for v in VERDICTS if checked or v != INVALID]


def _map_reach(index: Index, map_path: str) -> dict[str, Any]:
    from auditor.covmap.store import MapStore, age
    from auditor.measured import reach

    sched = index.schedule
    units = sorted((t for t in sched.placements if t.startswith("unittest/") and "::" not in t),
                   key=len, reverse=True)

    def verdict_of(tid: str) -> str:
        pl = sched.placements.get(tid)
        if pl is None and tid.startswith("unittest/"):
            # A unit test runs by the line that lists its file or folder (its -k/-m
            # selection is not applied here: the picture is of files, not of ids).
            f = tid.split("::", 1)[0]
            line = next((u for u in units if f == u or f.startswith(u.rstrip("/") + "/")), None)
            pl = sched.placements.get(line) if line else None
        return verdict_for(list(pl)) if pl else "unscheduled"

    rows = reach(map_path, verdict_of)
    with MapStore.open(map_path) as s:
        commits = s.commits()
    return {"path": os.path.basename(map_path), "tests": sum(r.tests for r in rows),
            "newest": f"{commits[0][0][:7]}, {age(commits[0][2])}" if commits else "-",
            "chart": charts.reach_chart(rows)}


def _class_rank(verdict: str) -> int:
    return VERDICTS.index(verdict) if verdict in VERDICTS else len(VERDICTS)


# ---- writing -------------------------------------------------------------------------------

def _js(prefix: str, payload: Any) -> str:
    # ASCII-only JSON is also valid JS; U+2028 and friends cannot break the script.
    return f"{prefix}({json.dumps(payload, ensure_ascii=True, separators=(',', ':'))});\n"


def _path_html(path: str) -> Any:
    """A root-relative path that a narrow column wraps after each ``/`` (``<wbr>``: copied
    text stays the path), never inside a name."""
    from markupsafe import Markup, escape

    return Markup("/<wbr>").join(escape(part) for part in str(path).split("/"))


# Where a long id may wrap: after ``::``, ``/``, ``-`` (in a word), ``=`` and ``,`` and before
# ``[`` (a ``<wbr>`` there; copied text stays the id). Never inside a name: the CSS keeps ``.tid``
# elements at ``word-break: normal`` (``overflow-wrap: anywhere`` or ``word-break:
# break-word`` split ``FLASHINFER`` as ``FLASHI NFER``). report.js's ``tid`` mirrors this.
_BREAK_AFTER = re.compile(r"(::|[/=,]|(?<=[^\s-])-)")  # not the "-" of an option: "-k"
_BREAK_BEFORE = re.compile(r"(?=\[)")


def id_breaks(text: str) -> list[str]:
    """``text`` cut at the points a line may wrap (joined, the pieces are ``text``)."""
    pieces: list[str] = []
    for part in _BREAK_BEFORE.split(text):
        # re.split with a group keeps the separators (odd places): each joins the piece before
        glued: list[str] = []
        for i, bit in enumerate(_BREAK_AFTER.split(part)):
            if i % 2 and glued:
                glued[-1] += bit
            elif bit:
                glued.append(bit)
        pieces.extend(glued)
    return pieces


def _id_html(text: Any) -> Any:
    """A test id, stage name or message that a narrow column wraps only at safe points."""
    from markupsafe import Markup, escape

    return Markup("<wbr>").join(escape(p) for p in id_breaks(str(text)))


def render_files(view: ReportView) -> dict[str, str]:
    """Relative path -> text of every generated (non-static) file."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["path"] = _path_html
    env.filters["tid"] = _id_html
    out = {"index.html": env.get_template("index.html.j2").render(page=view.page),
           "function.html": env.get_template("function.html.j2").render(page=view.page),
           "data.js": _js("TESTDB_DATA", view.data)}
    for fi, d in view.details.items():
        out[f"detail/f{fi}.js"] = _js("TESTDB_DETAIL", d)
    if view.page.get("replay"):  # the history page (reports/replay_html.py)
        out["history.html"] = env.get_template("replay.html.j2").render(page=view.page)
    return out


def _copy_static(dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    for item in resources.files("reports").joinpath("static").iterdir():
        if item.is_file() and not item.name.startswith("."):
            with open(os.path.join(dest, item.name), "wb") as fh:
                fh.write(item.read_bytes())


def write_report(out_dir: str, view: ReportView) -> list[str]:
    """Write the report into a temp directory beside ``out_dir``, then rename it into place."""
    target = os.path.abspath(out_dir)
    if os.path.exists(target):
        if not os.path.isdir(target):
            raise UsageError(f"{out_dir} exists and is not a directory")
        if os.listdir(target) and not os.path.exists(os.path.join(target, MARKER_FILE)):
            raise UsageError(f"{out_dir} exists and is not a testdb report; refusing to replace it",
                             hint="give a new or empty directory")
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(target)}.new-")
    old = None
    try:
        written = []
        for rel, text in render_files(view).items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            written.append(rel)
        _copy_static(os.path.join(tmp, "static"))
        with open(os.path.join(tmp, MARKER_FILE), "w", encoding="utf-8") as fh:
            fh.write(REPORT_SCHEMA + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a report is for sharing
        if os.path.exists(target):
            old = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(target)}.old-")
            os.replace(target, os.path.join(old, "report"))
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old and not os.path.exists(target) and os.path.exists(os.path.join(old, "report")):
            os.replace(os.path.join(old, "report"), target)
        raise
    finally:
        # Only once a report is in place: if putting the old one back failed too, it is the
        # only copy left (in .NAME.old-*/report), so keep it.
        if old and os.path.exists(target):
            shutil.rmtree(old, ignore_errors=True)
    return written


def budget_for(given: float | None, replay: dict[str, Any] | None) -> float:
    """The budget the shard charts draw: the one given, else the replay's plan's (the budget
    its history page names), else ``promote``'s default."""
    if given is not None:
        return given
    plan = (replay or {}).get("plan") or {}
    own = plan.get("budget_minutes") if isinstance(plan, dict) else None
    if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0:
        return float(own)
    return charts.DEFAULT_BUDGET_MINUTES


def generate(index: Index, out_dir: str, audit: dict[str, Any] | None = None,
             results: list[dict[str, Any]] | None = None,
             budget_minutes: float | None = None,
             replay: dict[str, Any] | None = None,
             check_names: bool = True, map_path: str | None = None) -> dict[str, Any]:
    """Build and write the report; returns a small summary for the CLI. ``replay``: a
    replay JSON (`testdb replay -o`), drawn as ``history.html``. ``check_names``: check the
    listed ids against the checkout's test sources (when it has any). ``budget_minutes``:
    the budget line of the shard charts; by default the replay's own (its promotion plan's),
    else ``promote``'s default."""
    budget_minutes = budget_for(budget_minutes, replay)
    inventory = None
    if check_names:
        from testdb.whole import has_test_sources

        if has_test_sources(index.root):
            from testdb.inventory import build_static

            inventory = build_static(index.root)
    view = build_view(index, audit, results, budget_minutes, inventory)
    if replay is not None:
        from reports.replay_html import replay_page

        view.page["replay"] = replay_page(replay)
    # the measured map's reach (auditor.measured, docs/map.md)
    view.page["map_reach"] = _map_reach(index, map_path) if map_path is not None else None
    files = write_report(out_dir, view)
    return {"schema": REPORT_SCHEMA, "dir": out_dir, "index": os.path.join(out_dir, "index.html"),
            "files": len(files), "test_ids": view.page["total"],
            "functions": view.page["n_functions"], "stages": view.page["n_stages"]}
