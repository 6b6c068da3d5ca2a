"""Run plans: which parametrizations to run, on how many GPUs of which type, with which command."""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from auditor.launch.model import JUNIT_PLACEHOLDER, RunItem, make_key
from testdb.errors import InputError, SourceLoc, UsageError
from testdb.grammar import Entry
from testdb.index import DEFS_DIR, WAIVES, Index
from testdb.model import Block
from testdb.query import match_ids
from testdb.schedule import Placement, verdict_for

_GPU_NAME = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class PlanRow:
    """One planned run with the evidence it came from (for --dry-run and the report)."""

    item: RunItem
    entry: Entry
    block: Block | None
    verdict: str
    why: str


def gpu_needs(block: Block | None) -> tuple[int, str | None]:
    """GPU count from ``system_gpu_count`` (the lowest it allows) and a GPU type from the
    ``gpu`` wildcard (``*h100*`` -> ``H100``)."""
    if block is None:
        return 1, None
    rng = block.condition.range("system_gpu_count")
    count = 1
    if rng is not None:
        low = rng.gte if rng.gte is not None else (rng.gt + 1 if rng.gt is not None else None)
        count = int(low) if low is not None else int(rng.lte or 1)
    pats = block.condition.wildcard("gpu") or ()
    names = [m.group(0).upper() for p in pats for m in [_GPU_NAME.search(p)] if m]
    return max(count, 0), ("|".join(dict.fromkeys(names)) or None)


def _uses_trtllm_options(root: str) -> bool:
    """TensorRT-LLM's defs/conftest.py adds --test-list/--waives-file; plain suites don't."""
    try:
        with open(os.path.join(root, DEFS_DIR, "conftest.py"), encoding="utf-8") as f:
            return "--test-list" in f.read()
    except OSError:
        return False


def command_for(index: Index, entry: Entry, test_id: str, list_file: str) -> tuple[str, tuple[
        str, ...]]:
    """(cwd, argv) that run one parametrization the way CI does (trtllm-ci.md section 8)."""
    root = os.path.abspath(index.root)
    py = sys.executable
    if test_id.startswith("unittest/"):
        # A unit-test selection runs as its own inner pytest rooted at tests/.
        args = [test_id] if "::" in test_id else [entry.unittest_path, *entry.unittest_args]
        return (os.path.join(root, "tests"),
                (py, "-m", "pytest", "-v", *args, "--junit-xml", JUNIT_PLACEHOLDER))
    defs = os.path.join(root, DEFS_DIR)
    if _uses_trtllm_options(root):
        argv = [py, "-m", "pytest", "-vv", "--timeout-method=thread",
                f"--timeout={entry.timeout * 60}", "--rootdir", defs, f"--test-list={list_file}",
                "--output-dir", os.path.dirname(list_file) or ".", "--junit-xml",
                JUNIT_PLACEHOLDER]
        waives = os.path.join(root, WAIVES)
        if os.path.isfile(waives):
            argv.insert(-2, f"--waives-file={waives}")
        return defs, tuple(argv)
    return defs, (py, "-m", "pytest", "-v", test_id, "--junit-xml", JUNIT_PLACEHOLDER)


def _best_placement(placements: list[Placement]) -> Placement | None:
    """The test-db placement a pre-merge run would stand in for: a non-pre-merge stage run."""
    # Prefer a placement some stage runs but not pre-merge, then the one needing fewest GPUs:
    # the cheapest way to get this parametrization's result before merge.
    ranked = sorted((p for p in placements if p.kind == "test-db"),
                    key=lambda p: (all(r.verdict == "pre-merge" for r in p.runs), not p.runs,
                                   gpu_needs(p.block)[0]))
    return ranked[0] if ranked else next(iter(placements), None)


@dataclass(frozen=True)
class Skipped:
    """A selected parametrization that is not launched, why, and how to run it by hand."""

    test_id: str
    verdict: str
    why: str  # why it was selected
    reason: str  # why it is not launched
    shell: str  # a line that runs it by hand, in the checkout


@dataclass(frozen=True)
class LaunchPlan:
    rows: list[PlanRow]
    skipped: list[Skipped]


# A parametrization in no test list (an audit's unscheduled guard) is skipped, never run by its
# node id alone: no line says how many GPUs it needs, its timeout or isolation, and a run on too
# few GPUs skips itself (skip_less_device), which would read as a result. docs/launch.md.
NO_LIST = ("in no test list: no CI stage runs it, and no line says how to run it "
           "(GPU count, timeout)")


def plan_launch(index: Index, test_ids: list[tuple[str, str, str]], run_dir: str,
                unit_selections: dict[str, list[Entry]] | None = None) -> LaunchPlan:
    """``test_ids``: (id, verdict, why); an empty verdict is the test's own (as ``where``
    says it). Unit-test ids run through their selection's block; ids in no test list are
    ``skipped``."""
    rows: list[PlanRow] = []
    skipped: list[Skipped] = []
    taken: set[str] = set()
    sched = index.schedule
    for tid, verdict, why in test_ids:
        placements = list(sched.placements.get(tid, ()))
        for sel in (unit_selections or {}).get(tid, ()):
            placements += sched.placements.get(sel.test, ())
        verdict = verdict or verdict_for(placements)
        p = _best_placement(placements)
        if p is None:
            skipped.append(Skipped(tid, verdict, why, NO_LIST, by_hand(index.root, tid)))
            continue
        gpus, gpu_type = gpu_needs(p.block)
        key = make_key(tid, taken)
        taken.add(key)
        list_file = os.path.join(os.path.abspath(run_dir), "lists", f"{key}.txt")
        cwd, argv = command_for(index, p.entry, tid, list_file)
        stages = tuple(sorted({r.stage for r in p.runs}))
        dur = index.durations.get(tid, index.durations.get(p.entry.test))
        item = RunItem(key, tid, gpus, gpu_type, p.entry.timeout, p.entry.isolation, cwd,
                       argv, dur, stages)
        rows.append(PlanRow(item, p.entry, p.block, verdict, why))
    return LaunchPlan(rows, skipped)


def plan(index: Index, test_ids: list[tuple[str, str, str]], run_dir: str,
         unit_selections: dict[str, list[Entry]] | None = None) -> list[PlanRow]:
    """The rows of ``plan_launch``; an id in no test list is an error here."""
    got = plan_launch(index, test_ids, run_dir, unit_selections)
    if got.skipped:
        s = got.skipped[0]
        raise InputError(f"{s.test_id} is {s.reason}", hint="check the id with `testdb where`")
    return got.rows


def by_hand(root: str, test_id: str) -> str:
    """A shell line that runs one node id with plain pytest where CI's pytest would run it."""
    where = "tests" if test_id.startswith("unittest/") else DEFS_DIR
    return (f"cd {shlex.quote(os.path.join(os.path.abspath(root), where))} && "
            f"python -m pytest -v {shlex.quote(test_id)}")


def ids_from_audit(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The guard parametrizations of the audit's findings that do not run pre-merge, with this
    PR's verdict of each; "" for a test the audit names but did not judge (``plan_launch``
    then labels it with its own verdict, as ``where`` does)."""
    if not isinstance(data, dict) or "findings" not in data or "behaviours" not in data:
        raise InputError("not an audit JSON (no findings/behaviours)", SourceLoc("--from"),
                         "write one with `testdb audit --format json -o audit.json`")
    effective: dict[str, str] = {}  # this PR's verdict of each guard the audit judged
    for b in data["behaviours"]:
        for gs in b.get("guards", {}).values():
            for g in gs:
                effective.setdefault(g["test_id"], g["effective"])
    out: dict[str, tuple[str, str, str]] = {}
    for f in data["findings"]:
        if f.get("severity") not in ("error", "warning"):
            continue
        for tid in f.get("guards", []):
            v = effective.get(tid, "")  # not judged (a demoted line): the test's own verdict
            if v != "pre-merge" and tid not in out:
                out[tid] = (tid, v, f"{f.get('rule', 'finding')} at {f['path']}:{f['line']}")
    return list(out.values())


def ids_from_pattern(index: Index, pattern: str, include_pre_merge: bool) -> list[tuple[str, str,
                                                                                       str]]:
    sched = index.schedule
    ids = match_ids(list(sched.placements), pattern)
    if not ids:
        raise UsageError(f"no test matches {pattern!r}", hint="try `testdb where PATTERN`")
    rows = [(t, sched.verdict(t), f"matches {pattern!r}") for t in ids]
    return [r for r in rows if include_pre_merge or r[1] != "pre-merge"]
