"""Tests of run items, keys, validation and the run-results file."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.launch.model import (
    OUTCOMES,
    RESULTS_SCHEMA,
    RunItem,
    RunResult,
    RunResults,
    atomic_write_text,
    item_from_dict,
    item_to_dict,
    make_key,
    make_progress,
    read_results,
    validate_items,
    write_results,
)
from testdb.errors import InputError, TestDbError


def item(key: str = "k", **kw: object) -> RunItem:
    base = RunItem(key=key, test_id=f"t.py::{key}", gpus=1, gpu_type="H100", timeout_minutes=60,
                   isolation=False, cwd="/tmp", argv=("python", "-m", "pytest", "{junit}"),
                   duration_s=1.0)
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("test_id", [
    "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_fp8[attn_backend=TRTLLM-x]",
    'unittest/_torch/speculative -k "eagle3 and not slow"',
    "test_e2e.py::test_a[../../etc/passwd]",
    "x" * 500,
    "///",
])
def test_make_key_is_a_safe_bounded_file_name(test_id: str) -> None:
    key = make_key(test_id)
    assert key == make_key(test_id)  # stable across runs
    assert len(key) <= 90
    assert all(c.isalnum() or c in "._-" for c in key)
    assert key not in {".", ".."} and not key.startswith(".")
    validate_items([item(key)])


def test_make_key_keeps_the_test_name_readable() -> None:
    key = make_key("accuracy/test_x.py::TestA::test_fp8[tp4]")
    assert "test_fp8_tp4" in key


def test_make_key_separates_ids_that_sanitise_alike() -> None:
    a, b = make_key("t.py::f[a b]"), make_key("t.py::f[a/b]")
    assert a != b
    assert make_key("t.py::f[a b]", taken=[a]) != a


def test_validate_items_accepts_a_good_plan_and_keeps_order() -> None:
    plan = [item("b"), item("a", gpus=0)]
    assert validate_items(plan) == tuple(plan)


@pytest.mark.parametrize(("bad", "message"), [
    ({"key": "a/b"}, "not a safe file name"),
    ({"key": ""}, "not a safe file name"),
    ({"key": ".."}, "not a safe file name"),
    ({"gpus": -1}, "negative GPU count"),
    ({"timeout_minutes": 0}, "timeout must be positive"),
    ({"argv": ()}, "empty command"),
])
def test_validate_items_rejects_bad_items(bad: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        validate_items([item(**bad)])


def test_validate_items_rejects_duplicate_keys() -> None:
    with pytest.raises(InputError, match="duplicate key"):
        validate_items([item("a"), item("a")])


def test_command_replaces_every_junit_placeholder() -> None:
    it = item(argv=("pytest", "--junit-xml={junit}", "--junitxml", "{junit}", "x"))
    assert it.command("/r/j.xml") == ("pytest", "--junit-xml=/r/j.xml", "--junitxml",
                                      "/r/j.xml", "x")
    assert it.wants_junit
    assert not item(argv=("true",)).wants_junit


def test_item_dict_round_trip() -> None:
    it = item(env=(("A", "1"), ("B", "x y")), stages=("DGX_H100-PyTorch-1",), gpu_type=None,
              duration_s=None)
    data = json.loads(json.dumps(item_to_dict(it)))
    assert item_from_dict(data) == it


def test_item_from_dict_reports_missing_fields() -> None:
    with pytest.raises(InputError, match="malformed run item"):
        item_from_dict({"key": "a"})


def sample_results(run_dir: Path) -> RunResults:
    return RunResults(str(run_dir), (
        RunResult("a", "t::a", "passed", "local", "vm GPU 0", "2024-01-01T00:00:00+00:00",
                  "2024-01-01T00:00:05+00:00", 5.0, str(run_dir / "junit/a.xml"),
                  str(run_dir / "logs/a.log"), 0, "1 passed"),
        RunResult("b", "t::b", "not-runnable", "local", detail="needs 8 GPU(s)"),
    ))


def test_results_round_trip_and_schema(tmp_path: Path) -> None:
    results = sample_results(tmp_path)
    path = write_results(results)
    assert path == tmp_path / "results.json"
    doc = json.loads(path.read_text())
    assert doc["schema"] == RESULTS_SCHEMA == "testdb-audit/run-results@1"
    assert doc["run_dir"] == str(tmp_path)
    assert [r["outcome"] for r in doc["results"]] == ["passed", "not-runnable"]
    assert read_results(path) == results
    assert read_results(tmp_path) == results  # a run directory works too


def test_write_results_leaves_no_temp_files(tmp_path: Path) -> None:
    write_results(sample_results(tmp_path))
    write_results(sample_results(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_atomic_write_keeps_the_old_file_when_the_write_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "results.json"
    target.write_text("old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_write_results_replaces_the_file_atomically(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = write_results(sample_results(tmp_path))
    before = first.read_text()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_results(RunResults(str(tmp_path), ()))
    assert first.read_text() == before


@pytest.mark.parametrize(("text", "message"), [
    ('{"schema": "other@1", "results": []}', "not a run-results file"),
    ("[1, 2]", "not a run-results file"),
    ("{", "not JSON"),
    ('{"schema": "testdb-audit/run-results@1", "results": [{"key": "a", "test_id": "x",'
     ' "outcome": "green", "backend": "local"}]}', "unknown outcome 'green'"),
    ('{"schema": "testdb-audit/run-results@1", "results": {}}', "must be a list"),
])
def test_read_results_rejects_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_results(path)


def test_read_results_of_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(TestDbError, match="cannot read run results"):
        read_results(tmp_path / "nope.json")


def test_outcome_vocabulary() -> None:
    assert set(OUTCOMES) == {"passed", "failed", "error", "timeout", "cancelled", "not-runnable",
                             "preempted", "node-fail", "oom", "pending", "running"}
    results = sample_results(Path("/r"))
    assert results.finished
    assert not replace(results, results=(
        *results.results, RunResult("c", "t::c", "running", "slurm"))).finished


def test_progress_counts_only_finished_results() -> None:
    rows = [RunResult("a", "a", "passed", "x"), RunResult("b", "b", "failed", "x"),
            RunResult("c", "c", "pending", "x"), RunResult("d", "d", "passed", "x")]
    p = make_progress("finished", rows, total=5, running=1, key="d")
    assert (p.done, p.total, p.running, p.key) == (3, 5, 1, "d")
    assert dict(p.counts) == {"passed": 2, "failed": 1}
