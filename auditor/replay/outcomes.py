"""Post-merge results to score a replay against: JUnit XML per commit, or JSON lines."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from testdb.errors import InputError, SourceLoc
from testdb.files import read_text

_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_UNIT = re.compile(r"^(?:.*::)?test_unittests_v2\[(unittest/.*)\]$")
_HINT = ('give a directory of <sha>.xml files (or <sha>/ directories of JUnit XML), or JSON '
         'lines {"commit": sha, "test": node id, "outcome": "failed|passed"}')


@dataclass(frozen=True)
class Outcome:
    commit: str  # the full sha of a replayed commit
    test: str  # a node id, or a unit-test selection line
    outcome: str  # "passed" | "failed"
    loc: SourceLoc


@dataclass(frozen=True)
class Outcomes:
    results: tuple[Outcome, ...]
    outside: int  # results naming commits that are not in the replayed range
    unknown_tests: tuple[str, ...] = ()  # JUnit cases not resolved to a known test id


def normalize_test(test: str) -> str:
    """CI runs a unit-test selection as ``test_unittests.py::test_unittests_v2[<line>]``: the
    line itself is the test the plan names."""
    m = _UNIT.match(test)
    return m.group(1) if m else test


class _Commits:
    def __init__(self, shas: Sequence[str]) -> None:
        self.shas = list(shas)

    def resolve(self, given: str, loc: SourceLoc) -> str | None:
        """A full sha of the range, None when the commit is outside it."""
        if not _SHA.match(given):
            raise InputError(f"{given!r} is not a commit sha", loc, _HINT)
        hits = [s for s in self.shas if s.startswith(given.lower())]
        if len(hits) > 1:
            raise InputError(f"{given!r} names {len(hits)} commits of the range", loc,
                             "give more digits of the sha")
        return hits[0] if hits else None


def read_outcomes(path: str, commits: Sequence[str], known_tests: Iterable[str] = ()
                  ) -> Outcomes:
    if os.path.isdir(path):
        return _read_junit_dir(path, _Commits(commits), set(known_tests))
    return _read_jsonl(path, _Commits(commits))


def _read_jsonl(path: str, commits: _Commits) -> Outcomes:
    out: list[Outcome] = []
    outside = 0
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        loc = SourceLoc(path, n)
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not a JSON line: {exc}", loc, _HINT) from None
        if not isinstance(doc, dict):
            raise InputError("expected an object", loc, _HINT)
        vals = [doc.get(k) for k in ("commit", "test", "outcome")]
        if not all(isinstance(v, str) and v for v in vals):
            raise InputError('expected string fields "commit", "test" and "outcome"', loc, _HINT)
        commit, test, outcome = (str(v) for v in vals)
        if outcome == "error":
            outcome = "failed"
        if outcome in ("skipped", "not-runnable"):
            continue
        if outcome not in ("passed", "failed"):
            raise InputError(f"outcome {outcome!r} is not passed or failed", loc, _HINT)
        sha = commits.resolve(commit, loc)
        if sha is None:
            outside += 1
            continue
        out.append(Outcome(sha, normalize_test(test), outcome, loc))
    return Outcomes(tuple(out), outside)


def _read_junit_dir(path: str, commits: _Commits, known: set[str]) -> Outcomes:
    index = _junit_index(known)
    out: list[Outcome] = []
    unknown: list[str] = []
    outside = 0
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isdir(full):
            files = sorted(os.path.join(d, f) for d, _, fs in os.walk(full) for f in fs
                           if f.endswith(".xml"))
            given = name
        elif name.endswith(".xml"):
            files, given = [full], name[:-4]
        else:
            continue
        sha = commits.resolve(given, SourceLoc(full))
        if sha is None:
            outside += 1
            continue
        for f in files:
            for case, outcome in _cases(f):
                tid = _resolve(index, case)
                if tid is None:
                    tid = _guess(case)
                    unknown.append(normalize_test(tid))
                out.append(Outcome(sha, normalize_test(tid), outcome, SourceLoc(f)))
    return Outcomes(tuple(out), outside, tuple(dict.fromkeys(unknown)))


def _cases(path: str) -> list[tuple[tuple[str, str], str]]:
    """((classname, name), outcome) per testcase that ran (skipped ones are left out)."""
    try:
        root = ET.fromstring(read_text(path))
    except ET.ParseError as exc:
        raise InputError(f"not JUnit XML: {exc}", SourceLoc(path, exc.position[0]),
                         _HINT) from None
    rows = []
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            continue
        failed = case.find("failure") is not None or case.find("error") is not None
        rows.append(((case.get("classname", ""), case.get("name", "")),
                     "failed" if failed else "passed"))
    return rows


_Index = dict[str, list[tuple[str, str]]]  # case name -> [(dotted classname, node id)]


def _junit_index(known: set[str]) -> _Index:
    """JUnit's (classname, name) of every known node id: pytest writes the file path with
    dots and without ``.py``, then the classes; CI puts the stage name in front
    (``--test-prefix``), so a classname matches when it ends with the dotted path."""
    idx: _Index = {}
    for tid in sorted(known):
        # as pytest's junitxml.mangle_test_address: split before the [params], which may
        # hold "::" themselves
        path, bracket, params = tid.partition("[")
        if "::" not in path:
            continue
        *heads, name = path.split("::")
        heads[0] = heads[0][:-3] if heads[0].endswith(".py") else heads[0]
        idx.setdefault(name + bracket + params, []).append(
            (".".join([heads[0].replace("/", "."), *heads[1:]]), tid))
    return idx


def _resolve(index: _Index, case: tuple[str, str]) -> str | None:
    classname, name = case
    for dotted, tid in index.get(name, ()):
        if classname == dotted or classname.endswith("." + dotted):
            return tid
    return None


def _guess(case: tuple[str, str]) -> str:
    """A node id from a JUnit case no known id matched: drop a stage prefix (a part with a
    ``-``), take the last ``test_*`` part as the module and the rest as classes."""
    classname, name = case
    parts = [p for p in classname.split(".") if p]
    while parts and "-" in parts[0]:
        parts.pop(0)
    mods = [i for i, p in enumerate(parts) if p.startswith("test")]
    if not mods:
        return "::".join([*parts, name]) if parts else name
    m = mods[-1] if not parts[mods[-1]][:1].isupper() else mods[0]
    return "::".join(["/".join(parts[:m + 1]) + ".py", *parts[m + 1:], name])
