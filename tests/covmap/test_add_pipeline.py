"""`testdb map add` reads coverage data files in worker processes while it stores what they
read (``auditor.covmap.add.add_files``); the map it writes must hold exactly what a plain,
serial reading gives: the same tests, commits and times, links, scans and functions.

The reference here is written from the rules alone (docs/map.md "coverage.py data files"):
each context's lines through coverage.py's ``contexts_by_lineno``, each line the innermost
unit whose body holds it (a plain search over ``units()``' spans, no line table), then
``MapStore.add`` of the whole ingest at once. The data files are real coverage.py files
written through its ``CoverageData`` API, with what real runs have: ``|setup``/``|run``
phases, import-time lines (the empty context), a test measured by two data files, test code
and a file outside the checkout."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from auditor.covmap import ingest as covingest
from auditor.covmap.add import add_files
from auditor.covmap.fingerprint import units
from auditor.covmap.store import AddResult, FuncRef, MapStore, unpack
from tests.gitrepo import git, new_repo

MOD_A = '''"""a"""
import os


def load(x):
    if x:
        return os.sep
    return None


class Cache:
    size = 3

    def get(self, k):
        return k

    def put(self, k, v):
        def inner():
            return v
        return inner()
'''
MOD_B = "def run():\n    return 1\n\n\ndef stop():\n    return 2\n"
MOD_B2 = "def run():\n    return 10\n\n\ndef stop():\n    return 2\n\n\ndef new():\n    return 3\n"
TEST = "def test_x():\n    assert True\n"
# (test context, {file: lines}) of each data file; file "" is an import-time block
RUN1 = [
    [("tests/unit/test_a.py::test_load|setup", {"pkg/a.py": [5]}),
     ("tests/unit/test_a.py::test_load|run", {"pkg/a.py": [6, 7, 8], "tests/unit/test_a.py": [2]}),
     ("", {"pkg/a.py": [1, 2, 5, 11, 12, 14, 17]}),
     ("tests/unit/test_a.py::test_cache[1]|run", {"pkg/a.py": [15, 18, 19, 20],
                                                  "/elsewhere/lib/other.py": [1]})],
    [("tests/unit/test_b.py::test_run|run", {"pkg/b.py": [2]}),
     ("tests/unit/test_a.py::test_load|run", {"pkg/b.py": [5, 6]}),  # measured by two files
     ("tests/unit/test_b.py::test_none|run", {"pkg/a.py": [1]})],
    [("tests/integration/defs/accuracy/test_llm.py::T::t[x]|run", {"pkg/a.py": [6, 8],
                                                                   "pkg/b.py": [2, 6]})],
]
RUN2 = [  # at the next commit: pkg/b.py changed; test_run replaced, a new test
    [("tests/unit/test_b.py::test_run|run", {"pkg/b.py": [10]}),
     ("tests/unit/test_b.py::test_new|run", {"pkg/b.py": [2, 6, 10], "pkg/a.py": [15]})],
    [("tests/unit/test_b.py::test_run|teardown", {"pkg/b.py": [6]})],
]


def write_data(where: Path, name: str, root: Path,
               blocks: list[tuple[str, dict[str, list[int]]]]) -> str:
    from coverage import CoverageData

    where.mkdir(parents=True, exist_ok=True)
    path = where / name
    d = CoverageData(basename=str(path))
    for ctx, lines in blocks:
        d.set_context(ctx)
        d.add_lines({(f if os.path.isabs(f) else str(root / f)): ls for f, ls in lines.items()})
    d.write()
    return str(path)


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, Any]:
    root = new_repo(tmp_path / "repo", {"pkg/a.py": MOD_A, "pkg/b.py": MOD_B,
                                        "tests/unit/test_a.py": TEST})
    c1 = git(root, "rev-parse", "HEAD").strip()
    (root / "pkg/b.py").write_text(MOD_B2)
    git(root, "commit", "-qam", "b changes")
    c2 = git(root, "rev-parse", "HEAD").strip()
    runs = {}
    for tag, run in (("r1", RUN1), ("r2", RUN2)):
        runs[tag] = [write_data(tmp_path / "data", f".coverage.{tag}.{i}", root, blocks)
                     for i, blocks in enumerate(run)]
    return {"root": root, "c1": c1, "c2": c2, "runs": runs}


def reference_add(store: MapStore, files: list[str], root: Path, commit: str,
                  when: int) -> AddResult:
    """The rules, plainly: every executed line to the innermost unit body holding it."""
    from coverage import CoverageData

    sha = covingest.resolve_commit(str(root), commit) or commit
    tests: dict[str, set[FuncRef]] = {}
    scanned: set[FuncRef] = set()
    for path in files:
        data = CoverageData(basename=path)
        data.read()
        for ctx in data.measured_contexts():
            if covingest.test_id(ctx):
                tests.setdefault(covingest.test_id(ctx), set())
        for measured in data.measured_files():
            if not measured.startswith(str(root) + "/"):
                continue
            rel = os.path.relpath(measured, root)
            if covingest.is_test_file(rel):
                continue
            us = units(git(root, "show", f"{sha}:{rel}"))
            refs = [FuncRef(rel, u.qualname, u.kind, u.fp) for u in us]
            scanned.update(refs)
            for line, ctxs in data.contexts_by_lineno(measured).items():
                holders = [i for i, u in enumerate(us) if u.body[0] <= line <= u.body[1]]
                owner = refs[max(holders, key=lambda i: us[i].body[0])]
                for ctx in ctxs:
                    if covingest.test_id(ctx):
                        tests[covingest.test_id(ctx)].add(owner)
    return store.add(sha, when, tests, scanned)


def dump(path: str) -> dict[str, Any]:
    """The map's contents by name, whatever ids the writes gave (SQL over our own schema)."""
    db = sqlite3.connect(path)
    funcs = {i: (p, q, k, bytes(fp)) for i, p, q, k, fp in db.execute(
        "SELECT f.id, fi.path, f.qualname, f.kind, f.fp FROM funcs f "
        "JOIN files fi ON fi.id = f.file_id")}
    tests = {}
    for tid, name, sha, when, blob in db.execute(
            "SELECT t.id, t.name, c.sha, t.measured_at, t.funcs FROM tests t "
            "JOIN commits c ON c.id = t.commit_id"):
        tests[name] = (sha, when, sorted(funcs[f] for f in unpack(blob)))
        rows = sorted(funcs[f] for (f,) in db.execute(
            "SELECT func_id FROM links WHERE test_id = ?", (tid,)))
        assert rows == tests[name][2], name  # the two directions agree
    out = {"tests": tests,
           "scans": sorted((*funcs[f], sha) for f, sha in db.execute(
               "SELECT s.func_id, c.sha FROM scans s JOIN commits c ON c.id = s.commit_id")),
           "funcs": sorted(funcs.values()),
           "commits": sorted(r[0] for r in db.execute("SELECT sha FROM commits"))}
    db.close()
    return out


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_pipelined_add_stores_what_a_serial_reading_gives(repo: dict[str, Any],
                                                          tmp_path: Path,
                                                          workers: int) -> None:
    root = repo["root"]
    ref_map, new_map = str(tmp_path / "ref.sqlite"), str(tmp_path / "new.sqlite")
    steps = [("r1", repo["c1"], 100), ("r2", repo["c2"], 200),
             ("r1", repo["c1"], 50)]  # an older measurement arriving late: ignored
    for tag, commit, when in steps:
        with MapStore.open_or_create(ref_map) as store:
            want = reference_add(store, repo["runs"][tag], root, commit, when)
        got = add_files(repo["runs"][tag], str(root), commit, new_map, measured_at=when,
                        workers=workers)
        assert got.result == want, (tag, commit)
        assert got.commit == repo[{"r1": "c1", "r2": "c2"}[tag]]
        assert dump(new_map) == dump(ref_map)
    d = dump(new_map)
    # what the fixture is made to hold (so the comparison compares something)
    assert set(d["tests"]) == {"unit/test_a.py::test_load", "unit/test_a.py::test_cache[1]",
                               "unit/test_b.py::test_run", "unit/test_b.py::test_none",
                               "unit/test_b.py::test_new", "accuracy/test_llm.py::T::t[x]"}
    load = d["tests"]["unit/test_a.py::test_load"]
    assert load[0] == repo["c1"] and load[1] == 100  # the late older run changed nothing
    assert [(p, q) for p, q, _, _ in load[2]] == [  # setup ran a.py's def line: its module
        ("pkg/a.py", "<module>"), ("pkg/a.py", "load"), ("pkg/b.py", "<module>"),
        ("pkg/b.py", "stop")]
    run = d["tests"]["unit/test_b.py::test_run"]
    assert run[0] == repo["c2"] and [q for _, q, _, _ in run[2]] == ["new", "stop"]
    none = d["tests"]["unit/test_b.py::test_none"][2]  # ran only a module-level line
    assert [(p, q) for p, q, _, _ in none] == [("pkg/a.py", "<module>")]
    cache = {q for _, q, _, _ in d["tests"]["unit/test_a.py::test_cache[1]"][2]}
    assert cache == {"Cache.get", "Cache.put", "Cache.put.inner"}


def test_a_file_that_cannot_be_read_leaves_the_map_as_it_was(repo: dict[str, Any],
                                                             tmp_path: Path) -> None:
    """Atomic: a bad data file among good ones (read by another worker) writes nothing, and a
    first add that fails leaves no map file behind."""
    from testdb.errors import InputError

    bad = tmp_path / "data" / ".coverage.bad"
    bad.write_bytes(b"SQLite format 3\x00 but not really")
    m = str(tmp_path / "m.sqlite")
    with pytest.raises(InputError, match="not a readable coverage data file"):
        add_files([*repo["runs"]["r1"], str(bad)], str(repo["root"]), repo["c1"], m, workers=2)
    assert sorted(os.listdir(tmp_path)) == ["data", "repo"]  # no map, no temporary file
    add_files(repo["runs"]["r1"], str(repo["root"]), repo["c1"], m, measured_at=100)
    before = dump(m)
    with pytest.raises(InputError, match="not a readable coverage data file"):
        add_files([*repo["runs"]["r2"], str(bad)], str(repo["root"]), repo["c2"], m,
                  measured_at=200, workers=2)
    assert dump(m) == before
