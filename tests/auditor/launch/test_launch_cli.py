"""`testdb launch` end to end on a tiny checkout of real pytest tests: exit codes when tests
cannot run here, progress counts, JSON for every path, and dry-run lines that a shell runs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

TESTS = """\
import pytest


@pytest.mark.parametrize("x", ["a", "b"])
def test_p(x):
    assert x in "ab"


def test_fail():
    assert 1 == 2, "fails on purpose"


@pytest.mark.parametrize("n", [1, 2])
def test_big(n):
    pass


def test_pre():
    pass
"""

TESTDB = """\
l0_tiny:
- condition:
    ranges:
      system_gpu_count:
        gte: 0
        lte: 0
    terms:
      stage: pre_merge
  tests:
  - test_tiny.py::test_pre
- condition:
    ranges:
      system_gpu_count:
        gte: 0
        lte: 0
    terms:
      stage: post_merge
  tests:
  - test_tiny.py::test_p[a]
  - test_tiny.py::test_p[b]
  - test_tiny.py::test_fail
- condition:
    ranges:
      system_gpu_count:
        gte: 64
        lte: 64
    terms:
      stage: post_merge
  tests:
  - test_tiny.py::test_big[1]
  - test_tiny.py::test_big[2]
"""

STAGES = """\
stages:
- {name: CPU-PyTorch-1, platform: cpu, context: l0_tiny, gpu_count: 0}
- {name: CPU-PyTorch-Post-Merge-1, platform: cpu, context: l0_tiny, gpu_count: 0}
- {name: DGX_B200-64_GPUs-PyTorch-Post-Merge-1, platform: b200, context: l0_tiny, gpu_count: 64}
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A checkout in the TensorRT-LLM layout whose tests are plain pytest (no test-list
    option): the launch runs `python -m pytest NODE_ID`. No machine has 64 GPUs."""
    root = tmp_path / "tiny"
    for rel, text in {"tests/integration/defs/test_tiny.py": TESTS,
                      "tests/integration/test_lists/test-db/l0_tiny.yml": TESTDB,
                      "ci/stages.yml": STAGES}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# ---- exit codes -----------------------------------------------------------------------------

@pytest.mark.parametrize("outcomes, interrupted, allow, code, why", [
    (["passed", "passed"], False, False, 0, ""),
    (["passed", "failed"], False, False, 1, ""),
    (["timeout"], False, False, 1, ""),
    (["not-runnable", "not-runnable"], False, False, 1,
     "none of the 2 planned tests ran: not runnable here"),
    (["not-runnable", "not-runnable"], False, True, 0, ""),
    (["passed", "not-runnable"], False, False, 0,  # it says so, as a warning
     "1 of the 2 planned tests did not run: not runnable here"),
    (["passed", "not-runnable"], False, True, 0, ""),
    (["failed", "not-runnable"], False, True, 1, ""),
    (["pending", "pending"], False, False, 0, ""),  # --no-wait: submitted, not judged yet
    (["passed", "cancelled"], True, False, 130, ""),
    ([], False, False, 0, ""),
])
def test_launch_exit_rule(outcomes: list[str], interrupted: bool, allow: bool, code: int,
                          why: str) -> None:
    from reports.cmd_launch import launch_exit

    assert launch_exit(outcomes, interrupted, allow) == (code, why)


def test_no_test_ran_here_is_exit_1_with_the_reason(run_cli, tiny: Path,  # type: ignore[no-untyped-def]
                                                    tmp_path: Path) -> None:
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_big", "--run-dir",
                  str(tmp_path / "run"))
    assert res.code == 1, res.err
    assert "error: none of the 2 planned tests ran: not runnable here: test_tiny.py::test_big" \
           in res.err and "needs 64 GPU(s)" in res.err and "--allow-not-runnable" in res.err
    ok = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_big", "--run-dir",
                 str(tmp_path / "run2"), "--allow-not-runnable")
    assert ok.code == 0 and "error:" not in ok.err


def test_progress_counts_each_test_once(run_cli, tiny: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_big", "--run-dir",
                  str(tmp_path / "run"), "--allow-not-runnable")
    counts = re.findall(r"^\[(\d+)/(\d+)\] not-runnable", res.err, re.M)
    assert counts == [("1", "2"), ("2", "2")]


def test_a_failed_test_is_exit_1(run_cli, tiny: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    failed = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_fail", "--run-dir",
                     str(tmp_path / "f"), "--format", "json")
    assert failed.code == 1
    assert [r["outcome"] for r in json.loads(failed.out)["results"]] == ["failed"]


# ---- JSON on every path ---------------------------------------------------------------------

def test_bot_backend_prints_json(run_cli, tiny: Path) -> None:  # type: ignore[no-untyped-def]
    text = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_p", "--backend", "bot")
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_p", "--backend", "bot",
                  "--format", "json")
    assert res.code == 0 == text.code, res.err
    doc = json.loads(res.out)
    assert doc["schema"] == "testdb-audit/bot-command@1"
    assert doc["command"] == text.out.strip()
    assert doc["stages"] == ["CPU-PyTorch-Post-Merge-1"]
    assert doc["tests"] == ["test_tiny.py::test_p[a]", "test_tiny.py::test_p[b]"]
    assert doc["posted"] is None


def test_nothing_to_launch_prints_json(run_cli, tiny: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_pre", "--format", "json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["schema"] == "testdb-audit/launch-plan@1" and doc["items"] == []
    assert "already runs pre-merge" in doc["note"]


# ---- dry runs paste into a shell ------------------------------------------------------------

def _run_line(out: str) -> str:
    """The one command line of a single-item dry run (its last line)."""
    return out.rstrip("\n").splitlines()[-1].strip()


def test_local_dry_run_line_runs_in_a_shell(run_cli, tiny: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A file the unquoted id would glob to: `test_tiny.py::test_p[a]` matches `...test_pa`.
    defs = tiny / "tests/integration/defs"
    (defs / "test_tiny.py::test_pa").write_text("")
    run_dir = tmp_path / "run"
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_p[a]", "--dry-run",
                  "--run-dir", str(run_dir))
    assert res.code == 0, res.err
    assert "{junit}" not in res.out
    line = _run_line(res.out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(["bash", "-c", line], cwd=elsewhere, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    [junit] = (run_dir / "junit").glob("*.xml")
    assert 'name="test_p[a]"' in junit.read_text()
    doc = json.loads(run_cli("--root", str(tiny), "launch", "test_tiny.py::test_p[a]",
                             "--dry-run", "--run-dir", str(run_dir), "--format", "json").out)
    [item] = doc["items"]
    assert item["shell"] == line and item["junit"] == str(junit)


def test_slurm_dry_run_shows_the_sbatch_flags(run_cli, tiny: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "slurm.yml"
    cfg.write_text("gpu_types:\n  '*': {partition: gpuq, account: ci}\ntime_margin_minutes: 5\n")
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_big[1]", "--dry-run",
                  "--backend", "slurm", "--slurm-config", str(cfg), "--run-dir",
                  str(tmp_path / "run"))
    assert res.code == 0, res.err
    argv = shlex.split(_run_line(res.out))
    assert argv[0] == "sbatch"
    assert {"--partition=gpuq", "--account=ci", "--gres=gpu:64", "--time=65"} <= set(argv)
    wrap = next(a for a in argv if a.startswith("--wrap="))[len("--wrap="):]
    assert "'test_tiny.py::test_big[1]'" in wrap and "{junit}" not in wrap


@pytest.mark.slurm
def test_slurm_dry_run_line_submits_on_a_real_cluster(run_cli, tiny: Path,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path) -> None:
    from tests.auditor.launch.test_slurm_real import _cluster_problem
    from tests.conftest import unavailable

    problem = _cluster_problem()
    if problem:
        unavailable(problem, "TESTDB_REQUIRE_SLURM")
    run_dir = tmp_path / "run"
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_p[b]", "--dry-run",
                  "--backend", "slurm", "--run-dir", str(run_dir))
    assert res.code == 0, res.err
    (run_dir / "logs").mkdir(parents=True)
    done = subprocess.run(["bash", "-c", _run_line(res.out)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip().split(";")[0].isdigit(), done.stderr
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list(run_dir.glob("junit/*.xml")):
        time.sleep(1)
    [junit] = run_dir.glob("junit/*.xml")
    assert 'name="test_p[b]"' in junit.read_text()
