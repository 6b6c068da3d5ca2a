"""CBTS touch DBs as map input, on hand-made DBs of the v1 and v3 shapes (docs/map.md names
the TensorRT-LLM files they imitate) against a real git checkout."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from auditor.covmap.cbts import shape
from auditor.covmap.ingest import ingest
from auditor.covmap.store import MapStore
from tests.gitrepo import git, new_repo

SRC = '''\
class PyExecutor:
    def step(self):
        def inner():
            return 1
        return inner()

    def idle(self):
        return 0


def create(backend):
    return PyExecutor()
'''
STEP = "accuracy/test_llm.py::TestLlama::test_fp8"
IDLE = "unittest/_torch/test_executor.py::test_idle"


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    root = new_repo(tmp_path / "trtllm", {"tensorrt_llm/executor.py": SRC,
                                          "tests/integration/defs/accuracy/test_llm.py": "x = 1\n"})
    return root, git(root, "rev-parse", "HEAD").strip()


def v1(path: Path, rows: list[tuple[str, str, str]], meta: dict[str, str],
       stage_col: bool = False) -> Path:
    db = sqlite3.connect(path)
    extra = ", stage TEXT" if stage_col else ""
    db.execute(f"CREATE TABLE touch (test TEXT, file TEXT, qualname TEXT{extra}, "
               "UNIQUE(test, file, qualname))")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE INDEX ix_func ON touch(file, qualname)")
    if stage_col:
        db.executemany("INSERT INTO touch VALUES (?, ?, ?, ?)",
                       [(f"A10-PyTorch-1/{t}" if t else t, f, q, "A10-PyTorch-1")
                        for t, f, q in rows])
    else:
        db.executemany("INSERT INTO touch VALUES (?, ?, ?)", rows)
    db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    db.commit()
    db.close()
    return path


def v3(path: Path, rows: list[tuple[str, str, str, str]], meta: dict[str, str]) -> Path:
    """rows: (stage, bare test, file, qualname)."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE stage (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
        CREATE TABLE case_stage (id INTEGER PRIMARY KEY, test TEXT NOT NULL,
                                 stage_id INTEGER NOT NULL, UNIQUE(test, stage_id));
        CREATE TABLE file (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
        CREATE TABLE symbol (id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL,
                             qualname TEXT NOT NULL, UNIQUE(file_id, qualname));
        CREATE TABLE touch (case_stage_id INTEGER NOT NULL, symbol_id INTEGER NOT NULL,
                            PRIMARY KEY(case_stage_id, symbol_id)) WITHOUT ROWID;
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
    """)
    for st, test, file, qual in rows:
        db.execute("INSERT OR IGNORE INTO stage(name) VALUES (?)", (st,))
        sid = db.execute("SELECT id FROM stage WHERE name = ?", (st,)).fetchone()[0]
        db.execute("INSERT OR IGNORE INTO case_stage(test, stage_id) VALUES (?, ?)", (test, sid))
        cid = db.execute("SELECT id FROM case_stage WHERE test = ? AND stage_id = ?",
                         (test, sid)).fetchone()[0]
        db.execute("INSERT OR IGNORE INTO file(path) VALUES (?)", (file,))
        fid = db.execute("SELECT id FROM file WHERE path = ?", (file,)).fetchone()[0]
        db.execute("INSERT OR IGNORE INTO symbol(file_id, qualname) VALUES (?, ?)", (fid, qual))
        yid = db.execute("SELECT id FROM symbol WHERE file_id = ? AND qualname = ?",
                         (fid, qual)).fetchone()[0]
        db.execute("INSERT OR IGNORE INTO touch VALUES (?, ?)", (cid, yid))
    db.executemany("INSERT INTO meta VALUES (?, ?)", {"schema_version": "3", **meta}.items())
    db.commit()
    db.close()
    return path


F = "tensorrt_llm/executor.py"
ROWS = [(STEP, F, "PyExecutor.step"), (STEP, F, "create"), (IDLE, F, "PyExecutor.idle"),
        ("", F, "<module>"), (IDLE, F, "PyExecutor.gone")]


@pytest.mark.parametrize("make", ["v1", "v1-stage", "v3"])
def test_touch_db_shapes(tmp_path: Path, repo: tuple[Path, str], make: str) -> None:
    root, sha = repo
    meta = {"commit": sha, "tests": "2"}
    if make == "v3":
        db = v3(tmp_path / "t.sqlite", [("A10-PyTorch-1", t, f, q) for t, f, q in ROWS if t]
                + [("A10-PyTorch-1", "", F, "<module>")], meta)
    else:
        db = v1(tmp_path / "t.sqlite", ROWS, meta, stage_col=make == "v1-stage")
    assert shape(str(db)) == make[:2]
    got, at = ingest([str(db)], str(root), None)
    assert at == sha
    by_test = {t: sorted(r.qualname for r in fs) for t, fs in got.tests.items()}
    # the stage prefix is gone; the import-time row ('') is no test
    assert by_test == {STEP: ["PyExecutor.step", "create"], IDLE: ["PyExecutor.idle"]}
    assert got.unknown_functions == 1  # PyExecutor.gone: not in the source at that commit
    # CBTS never records nested functions: their silence is not evidence
    assert "PyExecutor.step.inner" not in {r.qualname for r in got.scanned}
    assert "PyExecutor.idle" in {r.qualname for r in got.scanned}


def test_meta_without_commit_needs_one(tmp_path: Path, repo: tuple[Path, str], run_cli: Any,
                                       ) -> None:
    root, sha = repo
    db = v1(tmp_path / "t.sqlite", ROWS, {"tests": "2"})
    r = run_cli("--root", str(root), "map", "add", str(db), "--map", str(tmp_path / "m.sqlite"))
    assert r.code == 2 and "names no commit" in r.err
    r = run_cli("--root", str(root), "map", "add", str(db), "--commit", sha,
                "--map", str(tmp_path / "m.sqlite"))
    assert r.code == 0, r.err
    with MapStore.open(str(tmp_path / "m.sqlite")) as s:
        assert {ln.test_id for ln in s.tests_executing(F, "create")} == {STEP}
        assert s.tests_not_executing(F, "create") == {IDLE}


def test_meta_commit_disagreeing_with_commit_is_an_error(tmp_path: Path, repo: tuple[Path, str],
                                                         run_cli: Any) -> None:
    root, sha = repo
    db = v1(tmp_path / "t.sqlite", ROWS, {"commit": sha})
    r = run_cli("--root", str(root), "map", "add", str(db), "--commit", "0" * 40,
                "--map", str(tmp_path / "m.sqlite"))
    assert r.code == 2 and "meta says" in r.err


def test_damaged_touch_db_is_an_error(tmp_path: Path, repo: tuple[Path, str],
                                      run_cli: Any) -> None:
    root, sha = repo
    db = tmp_path / "t.sqlite"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE touch (case_stage_id INTEGER, symbol_id INTEGER)")
    c.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    c.commit()
    c.close()
    r = run_cli("--root", str(root), "map", "add", str(db), "--commit", sha,
                "--map", str(tmp_path / "m.sqlite"))
    assert r.code == 2 and "not a readable CBTS touch DB" in r.err
    assert not (tmp_path / "m.sqlite").exists()  # nothing half-written
