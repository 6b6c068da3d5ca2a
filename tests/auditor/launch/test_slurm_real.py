"""The Slurm backend against a real Slurm cluster (start one with ``.ci/start-slurm.sh``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from auditor.launch.model import RunItem, RunResult, RunResults
from auditor.launch.slurm import SlurmBackend
from auditor.launch.slurmconfig import SlurmConfig
from auditor.launch.slurmrun import load_state
from tests.conftest import unavailable

pytestmark = pytest.mark.slurm

PY = sys.executable
DEADLINE_S = 80.0
TESTS = textwrap.dedent("""
    import os

    def test_gpus(record_property):
        record_property("cvd", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
        record_property("job_gpus", os.environ.get("SLURM_JOB_GPUS", ""))

    def test_fails():
        assert 1 == 2, "fails on purpose"
""")


def _cluster_problem() -> str | None:
    """Why these tests cannot run here, or None when a cluster with 2+ GPUs answers."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "no Slurm client (sbatch/sinfo) on PATH; start a cluster with .ci/start-slurm.sh"
    try:
        info = subprocess.run(["sinfo", "-h", "-o", "%T %G"], capture_output=True, text=True,
                              timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 15 s: no Slurm cluster is reachable"
    if info.returncode != 0:
        last = (info.stderr.strip().splitlines() or ["(no message)"])[-1]
        return f"sinfo fails, no Slurm cluster answers: {last}"
    gpus = [int(n) for n in re.findall(r"gpu(?::[^:\s(]+)?:(\d+)", info.stdout)]
    if not gpus or max(gpus) < 2:
        return f"the cluster has no node with 2 GPU GRES (sinfo: {info.stdout.strip()!r})"
    return None


@dataclass(frozen=True)
class RealRun:
    run_dir: Path
    results: dict[str, RunResult]
    waited: RunResults
    shortened: bool
    seconds: float


def item(key: str, gpus: int, argv: list[str], cwd: Path, timeout: int = 5) -> RunItem:
    return RunItem(key, f"real::{key}", gpus, None, timeout, False, str(cwd), tuple(argv),
                   None)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealRun]:
    """Submit every job at once so that the slow ones (timeout, cancel) overlap the rest.

    Slurm enforces time limits in whole minutes and checks them every 30 s, so a real
    ``--time=1`` kill costs 60-90 s. Instead the running job's limit is cut to "now" with
    ``scontrol update EndTime=now``; slurmctld then kills it through its ordinary time-limit
    path within 30 s, and the job ends in TIMEOUT like any other.
    """
    problem = _cluster_problem()
    if problem:
        unavailable(problem, "TESTDB_REQUIRE_SLURM")
    root = tmp_path_factory.mktemp("slurm-real")
    work = root / "work"
    work.mkdir()
    (work / "test_real.py").write_text(TESTS)
    pytest_cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                  "--junit-xml={junit}"]
    items = [
        item("gpus2", 2, [*pytest_cmd, "test_real.py::test_gpus"], work),
        item("fails", 1, [*pytest_cmd, "test_real.py::test_fails"], work),
        item("overtime", 0, [PY, "-c", "import time; time.sleep(300)"], work, timeout=1),
        item("cancelme", 0, [PY, "-c", "import time; time.sleep(300)"], work),
        item("toobig", 64, [PY, "-c", "pass"], work),
    ]
    config = SlurmConfig(poll_interval_s=0.5, junit_grace_s=5.0, time_margin_minutes=0)
    backend = SlurmBackend(config)
    start = time.monotonic()
    run_dir = root / "run"
    backend.run(items, run_dir, wait=False)
    jobs = {j.item.key: j.job_id for j in load_state(run_dir).jobs}
    try:
        # the wait=True path, while the jobs above run
        waited = backend.run([item("quick", 1, [*pytest_cmd, "test_real.py::test_gpus"], work)],
                             root / "run-wait")
        shortened = cancelled = False
        results: dict[str, RunResult] = {}
        while time.monotonic() - start < DEADLINE_S:
            results = {r.key: r for r in backend.status(run_dir).results}
            if not shortened and results["overtime"].outcome == "running":
                shortened = _slurm("scontrol", "update", f"JobId={jobs['overtime']}",
                                   "EndTime=now") == 0
                if not shortened:  # not allowed here: do not wait a minute and more for it
                    _slurm("scancel", str(jobs["overtime"]))
            if not cancelled and results["cancelme"].outcome == "running":
                cancelled = _slurm("scancel", str(jobs["cancelme"])) == 0
            if all(r.finished for r in results.values()):
                break
            time.sleep(0.5)
        yield RealRun(run_dir, results, waited, shortened, time.monotonic() - start)
    finally:
        leftover = [j for j in jobs.values() if j]
        subprocess.run(["scancel", *leftover], capture_output=True, check=False)


def _slurm(*argv: str) -> int:
    return subprocess.run(argv, capture_output=True, check=False, timeout=30).returncode


def test_everything_finished_in_time(real_run: RealRun) -> None:
    assert all(r.finished for r in real_run.results.values()), real_run.results
    assert real_run.seconds < DEADLINE_S


def test_passing_job_gets_two_gpus_and_passes(real_run: RealRun) -> None:
    result = real_run.results["gpus2"]
    assert result.outcome == "passed", result
    assert result.returncode == 0
    assert re.fullmatch(r"slurm job \d+ on \S+", result.where)
    assert result.junit_path is not None
    props = {p.get("name"): p.get("value", "") for p in
             ET.parse(result.junit_path).iter("property")}
    assert len(props["cvd"].split(",")) == 2, props  # --gres=gpu:2 is what the job got
    assert len(set(props["cvd"].split(","))) == 2
    assert len(props["job_gpus"].split(",")) == 2
    assert result.log_path is not None
    assert "# testdb-audit: job" in Path(result.log_path).read_text()


def test_failing_job_fails(real_run: RealRun) -> None:
    result = real_run.results["fails"]
    assert result.outcome == "failed", result
    assert "test_fails" in result.detail and result.returncode == 1


def test_job_over_its_time_limit_times_out(real_run: RealRun) -> None:
    if not real_run.shortened:
        pytest.skip("scontrol update EndTime=now was refused (needs a Slurm operator); a real "
                    "--time=1 kill takes 60-90 s")
    result = real_run.results["overtime"]
    assert result.outcome == "timeout", result
    assert "time limit" in result.detail


def test_scancelled_job_is_cancelled(real_run: RealRun) -> None:
    result = real_run.results["cancelme"]
    assert result.outcome == "cancelled", result


def test_job_asking_more_gpus_than_any_node_has_is_not_runnable(real_run: RealRun) -> None:
    result = real_run.results["toobig"]
    assert result.outcome == "not-runnable", result
    assert "Requested node configuration is not available" in result.detail


def test_waiting_run_returns_final_results(real_run: RealRun) -> None:
    (result,) = real_run.waited.results
    assert result.outcome == "passed", result
