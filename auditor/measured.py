"""Measured links in the audit: the map (auditor.covmap) says which tests executed the changed
function; that is the coverage tier, and it also says which tests of the map did not.

The rules (docs/map.md), each a pure function below:
- ``measured_links``: a test that executed the changed function, as the map holds it at the
  function's base-side fingerprint, is a ``coverage`` link of rank 1 ("executed the changed
  function at 1a2b3c4, 3 days ago"); one that executed an older fingerprint of it, rank 2.
- ``not_executing``: a test of the map, measured at a commit whose source held the function,
  that did not execute it is no guard of it by any static tier: its static links are dropped
  (``without_refuted``). Only functions: class and module bodies run at import, which per-test
  contexts do not see, so a test's silence about them says nothing.
- ``decide``: the coverage tier decides when it guards; else the static links of the tests
  the map does not know are judged as today (``auditor.verdict.decide``), and guard when they
  do; else the coverage tier's verdict stands.
- tests not in the map keep their static links."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from auditor.behaviour import Behaviour
from auditor.covmap.fingerprint import units
from auditor.covmap.store import Link, MapStore, age
from auditor.diff import Change
from auditor.evidence import Evidence
from auditor.verdict import PRE_MERGE, Decision, decide


def measured_links(links: Iterable[Link], base_fp: bytes | None, now: int | None = None,
                   head_fp: bytes | None = None) -> list[Evidence]:
    """The coverage tier's links of one changed function: rank 1 where the map's fingerprint
    is the function's base-side one (or its head-side one: measured on the change itself),
    rank 2 (an older version) where it is neither."""
    out: dict[str, Evidence] = {}
    current_fps = {fp for fp in (base_fp, head_fp) if fp is not None}
    for ln in sorted(links, key=lambda x: (x.test_id, x.fp not in current_fps)):
        if ln.test_id in out:
            continue
        current = ln.fp in current_fps
        what = ("the changed function" if ln.fp == base_fp else
                "the changed function as this change leaves it," if current else
                "an older version of the changed function")
        out[ln.test_id] = Evidence(ln.test_id, "coverage", 1 if current else 2,
                                   f"executed {what} at {ln.commit[:7]}, "
                                   f"{age(ln.measured_at, now)} (measured map)")
    return list(out.values())


def not_executing(kind: str, in_map_silent: set[str]) -> frozenset[str]:
    """The tests whose silence refutes a static link: only for functions (see above)."""
    return frozenset(in_map_silent) if kind == "function" else frozenset()


def without_refuted(evidence: Iterable[Evidence], refuted: frozenset[str]) -> list[Evidence]:
    """Static links of tests the map shows did not execute the function are no links."""
    return [e for e in evidence if e.tier == "coverage" or e.test_id not in refuted]


def decide_measured(evidence: list[Evidence], effective: Callable[[str], str],
                    in_map: Callable[[str], bool]) -> Decision:
    """``decide`` with the map's precedence (module docstring)."""
    measured = [e for e in evidence if e.tier == "coverage"]
    first = decide(evidence, effective)
    if not measured or first.verdict == PRE_MERGE:
        return first
    unmapped = [e for e in evidence if e.tier != "coverage" and not in_map(e.test_id)]
    if unmapped:
        static = decide(unmapped, effective)
        if static.verdict == PRE_MERGE:
            return static
    return first


def refuted_note(qualname: str, dropped: list[str]) -> str:
    return (f"{qualname}: {len(dropped)} test(s) linked to it statically ran, in the measured "
            f"map, without executing it; those links are not counted (e.g. {dropped[0]})")


def summary_counts(tiers: Iterable[str | None]) -> tuple[int, int]:
    """(decided by measured links, decided only by static links) of the judged behaviours
    (None: nothing linked, not counted)."""
    ts = [t for t in tiers if t is not None]
    measured = sum(1 for t in ts if t == "coverage")
    return measured, len(ts) - measured


def side_fingerprint(change: Change, b: Behaviour, side: str) -> bytes | None:
    """The changed function's fingerprint on the base side (what a map measured before this
    PR holds when the function is unchanged since) or the head side; None: it is not on that
    side, or its file does not parse there."""
    fc = next((f for f in change.files if (f.new_path or f.old_path) == b.path), None)
    if fc is None:
        return None
    text = fc.old_text if side == "base" else fc.new_text
    rel = fc.old_path if side == "base" else fc.new_path
    if text is None and rel and change.checkout_side == side:
        try:
            with open(os.path.join(change.root, rel), encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            text = None
    if text is None:
        return None
    try:
        us = units(text)
    except (SyntaxError, ValueError):
        return None
    return next((u.fp for u in us if u.qualname == b.qualname), None)


@dataclass(frozen=True)
class MeasuredJudgement:
    links: tuple[Evidence, ...]  # the coverage tier's
    refuted: frozenset[str]  # tests of the map that did not execute it


class Measured:
    """The map an audit reads; one look-up per changed function, kept."""

    def __init__(self, path: str, change: Change) -> None:
        self.path = path
        self.store = MapStore.open(path)
        self.change = change
        self._tests = self.store.test_names()
        self._memo: dict[tuple[str, str], MeasuredJudgement] = {}
        self.notes: list[str] = []  # the static links the map refuted, one line a behaviour

    def knows(self, test_id: str) -> bool:
        return test_id in self._tests

    def judge(self, b: Behaviour) -> MeasuredJudgement:
        key = (b.path, b.qualname)
        if key not in self._memo:
            links = self.store.tests_executing(b.path, b.qualname)
            silent = (self.store.tests_not_executing(b.path, b.qualname,
                                                     [ln.test_id for ln in links])
                      if b.kind == "function" else set())
            self._memo[key] = MeasuredJudgement(
                tuple(measured_links(links, side_fingerprint(self.change, b, "base"),
                                     head_fp=side_fingerprint(self.change, b, "head"))),
                not_executing(b.kind, silent))
        return self._memo[key]

    def apply(self, b: Behaviour, specific: list[Evidence]) -> list[Evidence]:
        """A behaviour's specific links with the map's: its coverage links added, the links of
        the tests it refutes dropped."""
        mj = self.judge(b)
        if not mj.links and not mj.refuted:
            return specific
        kept = without_refuted(specific, mj.refuted)
        dropped = sorted({e.test_id for e in specific} - {e.test_id for e in kept})
        if dropped:
            self.notes.append(refuted_note(b.qualname, dropped))
        return [*mj.links, *kept]

    def decide(self, evidence: list[Evidence], effective: Callable[[str], str]) -> Decision:
        return decide_measured(evidence, effective, self.knows)

    def memo_token(self) -> str:
        return f"{os.path.realpath(self.path)}:{self.store.generation()}"

    def provenance(self) -> dict[str, object]:
        commits = self.store.commits()  # cheap: the tests' rows, not the links
        return {"path": self.path, "tests": len(self._tests),
                "commits": [c for c, _, _ in commits[:5]],
                "newest": max((w for _, _, w in commits), default=0)}


def summary_phrase(measured: int, static_only: int) -> str:
    """`` (1 decided by measured links, 2 by static links only)`` for the headline."""
    if not measured and not static_only:
        return ""
    parts = []
    if measured:
        parts.append(f"{measured} decided by measured links")
    if static_only:
        parts.append(f"{static_only} {'by' if measured else 'decided by'} static links only")
    return " (" + ", ".join(parts) + ")"


def module_of(path: str) -> str:
    from auditor.behaviour import module_name

    return module_name(path)


def executed_by(path: str, test_ids: Iterable[str], top: int = 10) -> dict[str, object]:
    """``where TEST --map``: per test id, when it was measured and the functions it executed,
    grouped by module (most functions first, ``top`` modules)."""
    out: dict[str, object] = {}
    with MapStore.open(path) as store:
        for tid in test_ids:
            m = store.measurement(tid)
            if m is None:
                out[tid] = None
                continue
            by_mod: dict[str, list[str]] = {}
            for p, q, kind in store.functions_of(tid):
                if kind == "function":
                    by_mod.setdefault(module_of(p), []).append(q)
            mods = sorted(by_mod.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            out[tid] = {"commit": m[0], "measured_at": m[1], "age": age(m[1]),
                        "functions": sum(len(v) for v in by_mod.values()),
                        "modules": [{"module": k, "functions": v} for k, v in mods[:top]],
                        "more_modules": max(0, len(mods) - top)}
    return out


@dataclass(frozen=True)
class Reach:
    """One test file's reach: of the project's ``total`` functions the map knows, how many
    its pre-merge tests executed, and how many only its other tests did."""

    test_file: str
    pre_merge: int
    post_merge_only: int
    total: int
    tests: int


def reach(path: str, verdict_of: Callable[[str], str]) -> list[Reach]:
    """The map's reach per test file (the HTML report's picture); ``verdict_of``: a test id's
    verdict in the plan ("pre-merge" counts as pre-merge; anything else does not)."""
    with MapStore.open(path) as store:
        functions = store.scanned_functions()
        pre: dict[str, set[int]] = {}
        other: dict[str, set[int]] = {}
        tests: dict[str, int] = {}
        for tid, ids in store.each_test():
            f = tid.split("::", 1)[0]
            tests[f] = tests.get(f, 0) + 1
            target = pre if verdict_of(tid) == PRE_MERGE else other
            target.setdefault(f, set()).update(i for i in ids if i in functions)
    out = []
    for f in sorted(tests):
        p = pre.get(f, set())
        out.append(Reach(f, len(p), len(other.get(f, set()) - p), len(functions), tests[f]))
    return out
