"""Tests of the Slurm backend against a scripted Slurm (every state, accounting on and off)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.launch.model import Progress, RunItem, RunResult, RunResults, read_results
from auditor.launch.slurm import SlurmBackend, cancel, status
from auditor.launch.slurmconfig import SlurmConfig, job_script, sbatch_argv
from auditor.launch.slurmrun import STATE_FILE, load_state
from testdb.errors import ExternalError, InputError

from .fake_slurm import FAIL_XML, PASS_XML, FakeSlurm, Plan

GPU_TYPES = {"*h100*": {"partition": "hopper", "constraint": "h100", "account": "ci"},
             "A10": {"partition": "ampere"}}


def item(key: str, gpus: int = 2, gpu_type: str | None = "H100_PCIe", timeout: int = 60,
         duration: float | None = 10.0) -> RunItem:
    return RunItem(key, f"accuracy/test_x.py::{key}[tp2]", gpus, gpu_type, timeout, False,
                   "/work/defs", ("python", "-m", "pytest", "-x", "--junit-xml={junit}"),
                   duration, ("DGX_H100-PyTorch-Post-Merge-1",), (("A", "1"),))


def config(**kw: object) -> SlurmConfig:
    base: dict[str, object] = {"poll_interval_s": 0.0, "junit_grace_s": 0.0}
    base.update(kw)
    return SlurmConfig.from_mapping(GPU_TYPES, **base)


def run(tmp_path: Path, plans: dict[str, Plan], items: list[RunItem] | None = None, *,
        accounting: bool = True, **kw: object) -> tuple[RunResults, FakeSlurm]:
    fake = FakeSlurm(tmp_path, plans, accounting=accounting)
    backend = SlurmBackend(config(**kw), fake, sleep=lambda s: None)
    plan_items = items if items is not None else [item(k) for k in plans]
    return backend.run(plan_items, tmp_path), fake


def only(results: RunResults) -> RunResult:
    assert len(results.results) == 1
    return results.results[0]


# ---------------------------------------------------------------------- submission

def test_sbatch_options(tmp_path: Path) -> None:
    cfg = config(time_margin_minutes=15, extra_args=("--qos=ci",))
    argv = sbatch_argv(item("k", gpus=4, timeout=90), cfg, tmp_path / "k.sh", tmp_path / "k.log")
    assert argv == ("sbatch", "--parsable", "--job-name=testdb-k", f"--output={tmp_path}/k.log",
                    "--time=105", "--gres=gpu:4", "--partition=hopper", "--constraint=h100",
                    "--account=ci", "--qos=ci", f"{tmp_path}/k.sh")


@pytest.mark.parametrize(("gpu_type", "expected"), [
    ("a10", ["--partition=ampere"]),       # patterns match case-insensitively
    ("DGX_H100", ["--partition=hopper", "--constraint=h100", "--account=ci"]),
    ("B200", []),                          # no rule: the cluster's defaults
    (None, []),
])
def test_gpu_type_picks_partition_constraint_account(gpu_type: str | None,
                                                     expected: list[str]) -> None:
    argv = sbatch_argv(item("k", gpu_type=gpu_type), config(), Path("/s"), Path("/l"))
    assert [a for a in argv if a.startswith(("--partition", "--constraint", "--account"))] \
        == expected


def test_cpu_only_items_ask_for_no_gres() -> None:
    argv = sbatch_argv(item("k", gpus=0), config(), Path("/s"), Path("/l"))
    assert not [a for a in argv if a.startswith("--gres")]


def test_job_script_runs_the_command_with_env_and_junit(tmp_path: Path) -> None:
    work = tmp_path / "it's a dir"
    work.mkdir()
    it = RunItem("k", "t::k", 1, None, 5, False, str(work),
                 (sys.executable, "-c", "import os,sys; print(os.getcwd(), os.environ['V'], "
                  "sys.argv[1:])", "--junit-xml={junit}"), None, (), (("V", "a 'b' $c"),))
    script = tmp_path / "k.sh"
    script.write_text(job_script(it, tmp_path / "j.xml"))
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# testdb-audit: job ?")
    assert lines[1] == f"{work} a 'b' $c ['--junit-xml={tmp_path}/j.xml']"


def test_job_script_fails_when_the_directory_is_missing(tmp_path: Path) -> None:
    it = RunItem("k", "t::k", 1, None, 5, False, str(tmp_path / "gone"), ("true",), None)
    script = tmp_path / "k.sh"
    script.write_text(job_script(it, tmp_path / "j.xml"))
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert out.returncode == 97 and "cannot cd" in out.stdout


def test_submission_writes_scripts_state_and_pending_results(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {})
    backend = SlurmBackend(config(), fake)
    items = [item("short", duration=1.0), item("long", duration=100.0)]
    results = backend.run(items, tmp_path, wait=False)
    assert [r.key for r in results.results] == ["short", "long"]  # plan order
    assert {r.outcome for r in results.results} == {"pending"}
    assert [c[2] for c in fake.commands("sbatch")] == ["--job-name=testdb-long",
                                                       "--job-name=testdb-short"]  # longest first
    assert results.results[1].where == "slurm job 100"
    script = tmp_path / "scripts" / "long.sh"
    assert script.stat().st_mode & 0o111
    assert f"--junit-xml={tmp_path}/junit/long.xml" in script.read_text()
    state = load_state(tmp_path)
    assert {j.job_id for j in state.jobs} == {"100", "101"}
    assert read_results(tmp_path) == results
    assert fake.commands("squeue") == []  # wait=False does not poll


def test_sbatch_refusals(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {})
    fake.sbatch_errors = {
        "huge": "sbatch: error: Batch job submission failed: Requested node configuration is "
                "not available",
        "badpart": "sbatch: error: invalid partition specified: hopper",
    }
    results = SlurmBackend(config(), fake, sleep=lambda s: None).run(
        [item("huge", gpus=16), item("badpart"), item("fine")], tmp_path)
    got = {r.key: r.outcome for r in results.results}
    assert got == {"huge": "not-runnable", "badpart": "error", "fine": "passed"}
    assert "invalid partition" in results.results[1].detail


def test_stale_junit_of_an_earlier_run_is_removed_at_submission(tmp_path: Path) -> None:
    (tmp_path / "junit").mkdir()
    (tmp_path / "junit" / "a.xml").write_text(PASS_XML)
    results, _ = run(tmp_path, {"a": Plan(junit=None)})
    assert only(results).outcome == "error" and "no JUnit" in only(results).detail


def test_missing_sbatch_is_an_external_error(tmp_path: Path) -> None:
    class NoSlurm:
        def run(self, argv: object, *, timeout: float | None = None) -> object:
            from auditor.launch.commands import Completed
            return Completed(("sbatch",), 127, "", "sbatch: command not found")

    with pytest.raises(ExternalError, match="sbatch is not available"):
        SlurmBackend(config(), NoSlurm()).run([item("a")], tmp_path)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- final states

STATES = [
    ("completed-pass", Plan(), "passed", "COMPLETED"),
    ("completed-fail", Plan(exit="1:0", final="FAILED", junit=FAIL_XML), "failed", "test_bad"),
    ("completed-junit-fail", Plan(junit=FAIL_XML), "failed", "test_bad"),
    ("failed-clean-junit", Plan(final="FAILED", exit="1:0"), "failed", "although JUnit"),
    ("failed-exit-zero", Plan(final="FAILED", exit="0:0"), "failed", "FAILED"),
    ("failed-no-junit", Plan(final="FAILED", exit="2:0", junit=None), "error", "interrupted"),
    ("completed-no-junit", Plan(junit=None), "error", "no JUnit"),
    ("timeout", Plan(final="TIMEOUT", exit="0:15", junit=None), "timeout", "time limit"),
    ("deadline", Plan(final="DEADLINE", junit=None), "timeout", "DEADLINE"),
    ("cancelled-by", Plan(final="CANCELLED by 1000", exit="0:15", junit=None), "cancelled",
     "CANCELLED by 1000"),
    ("cancelled-plus", Plan(final="CANCELLED+", junit=None), "cancelled", "CANCELLED+"),
    ("node-fail", Plan(final="NODE_FAIL", junit=None), "node-fail", "NODE_FAIL"),
    ("boot-fail", Plan(final="BOOT_FAIL", junit=None), "node-fail", "BOOT_FAIL"),
    ("oom", Plan(final="OUT_OF_MEMORY", exit="0:125", junit=None), "oom", "memory"),
    ("preempted", Plan(final="PREEMPTED", exit="0:15", junit=PASS_XML), "preempted", "PREEMPTED"),
    ("weird", Plan(final="FROBNICATED", junit=None), "error", "unknown Slurm state"),
]


@pytest.mark.parametrize("accounting", [True, False], ids=["sacct", "scontrol"])
@pytest.mark.parametrize(("key", "plan", "outcome", "words"), STATES,
                         ids=[s[0] for s in STATES])
def test_final_state_maps_to_outcome(tmp_path: Path, key: str, plan: Plan, outcome: str,
                                     words: str, accounting: bool) -> None:
    results, fake = run(tmp_path, {key: plan}, accounting=accounting)
    result = only(results)
    assert result.outcome == outcome
    if accounting or "CANCELLED" not in words:  # scontrol never shows "by N" or "+"
        assert words in result.detail
    assert result.where == "slurm job 100 on gpu-node-7"
    assert result.duration_s == 65.0
    used = {c[0] for c in fake.calls} - {"sbatch", "squeue"}
    assert used == ({"sacct"} if accounting else {"sacct", "scontrol"})
    assert read_results(tmp_path) == results


def test_accounting_off_is_remembered(tmp_path: Path) -> None:
    plans = {"a": Plan(queue=["RUNNING"]), "b": Plan(queue=["RUNNING"] * 4)}
    results, fake = run(tmp_path, plans, accounting=False)
    assert [r.outcome for r in results.results] == ["passed", "passed"]
    assert len(fake.commands("sacct")) == 1
    assert load_state(tmp_path).accounting is False


def test_sacct_lag_waits_then_falls_back_to_scontrol(tmp_path: Path) -> None:
    results, fake = run(tmp_path, {"a": Plan(sacct_delay=1)})
    assert only(results).outcome == "passed"
    assert not fake.commands("scontrol")
    results, fake = run(tmp_path / "2", {"a": Plan(sacct_delay=50)}, sacct_grace_polls=3)
    assert only(results).outcome == "passed"
    assert len(fake.commands("sacct")) == 3 and len(fake.commands("scontrol")) == 1


def test_running_and_pending_are_reported_while_waiting(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan(queue=["PENDING", "RUNNING", "RUNNING"])})
    backend = SlurmBackend(config(), fake)
    backend.run([item("a")], tmp_path, wait=False)
    first = only(backend.status(tmp_path))
    assert (first.outcome, first.detail) == ("pending", "PENDING (Priority)")
    second = only(backend.status(tmp_path))
    assert second.outcome == "running" and second.where == "slurm job 100 on gpu-node-7"
    assert second.started_at is not None


def test_status_from_another_process_finishes_the_run(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan(), "b": Plan(final="FAILED", exit="1:0",
                                                       junit=FAIL_XML)})
    SlurmBackend(config(), fake).run([item("a"), item("b")], tmp_path, wait=False)
    outcomes = []
    for _ in range(5):
        results = status(tmp_path, runner=fake)  # no config given: the state file's is used
        outcomes.append([r.outcome for r in results.results])
    assert outcomes[0] == ["pending", "pending"]
    assert outcomes[-1] == ["passed", "failed"]
    assert read_results(tmp_path) == results
    calls = len(fake.calls)
    status(tmp_path, runner=fake)
    assert len(fake.calls) == calls  # a finished run asks Slurm nothing


def test_status_without_a_run_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no Slurm run here"):
        status(tmp_path, runner=FakeSlurm(tmp_path))


@pytest.mark.parametrize("content", [
    b"\xfe\xff not utf-8", b"{not json", b"[" * 100_000, b'{"schema": ' + b"9" * 5000 + b"}",
    b'{"schema": "x"}', b"{}", b"\x00\x01",
], ids=["bytes", "broken", "deep", "huge-int", "schema", "empty", "binary"])
def test_a_damaged_state_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / STATE_FILE).write_bytes(content)
    with pytest.raises(InputError) as info:
        load_state(tmp_path)
    assert STATE_FILE in str(info.value)


@pytest.mark.parametrize("content", [
    b"\xfe\xff", b"[" * 100_000, b'{"schema": ' + b"9" * 5000 + b"}",
    b'{"schema": "testdb-audit/run-results@1", "results": [{"key": "k", "test_id": "t", '
    b'"outcome": "passed", "backend": "local", "returncode": 1e999}]}',
], ids=["bytes", "deep", "huge-int", "infinite-returncode"])
def test_a_damaged_results_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "results.json").write_bytes(content)
    with pytest.raises(InputError) as info:
        read_results(tmp_path)
    assert "results.json" in str(info.value)


def test_preempted_job_is_requeued_once_then_judged(tmp_path: Path) -> None:
    plans = {"lucky": Plan(final="PREEMPTED", then=Plan()),
             "unlucky": Plan(final="PREEMPTED", then=Plan(final="PREEMPTED"))}
    events: list[Progress] = []
    fake = FakeSlurm(tmp_path, plans)
    results = SlurmBackend(config(requeue_preempted=True), fake, sleep=lambda s: None).run(
        [item("lucky"), item("unlucky")], tmp_path, progress=events.append)
    got = {r.key: r for r in results.results}
    assert got["lucky"].outcome == "passed"
    assert got["unlucky"].outcome == "preempted" and "after one requeue" in got["unlucky"].detail
    assert sorted(c[2] for c in fake.commands("scontrol") if c[1] == "requeue") == ["100", "101"]
    assert sorted(e.key or "" for e in events if e.event == "requeued") == ["lucky", "unlucky"]


def test_failed_requeue_reports_preempted(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan(final="PREEMPTED", then=Plan())})
    fake.requeue_fails = True
    result = only(SlurmBackend(config(requeue_preempted=True), fake, sleep=lambda s: None).run(
        [item("a")], tmp_path))
    assert result.outcome == "preempted" and "requeue failed" in result.detail


def test_late_junit_is_waited_for(tmp_path: Path) -> None:
    clock = iter(range(1000))
    fake = FakeSlurm(tmp_path, {"a": Plan(junit_delay=2)})
    backend = SlurmBackend(config(junit_grace_s=10.0), fake, sleep=lambda s: None,
                           clock=lambda: float(next(clock)))
    assert only(backend.run([item("a")], tmp_path)).outcome == "passed"
    fake = FakeSlurm(tmp_path / "2", {"a": Plan(junit_delay=99)})
    clock = iter(range(1000))
    backend = SlurmBackend(config(junit_grace_s=3.0), fake, sleep=lambda s: None,
                           clock=lambda: float(next(clock)))
    late = only(backend.run([item("a")], tmp_path / "2"))
    assert late.outcome == "error" and "no JUnit" in late.detail


def test_purged_job_is_judged_by_its_junit_or_is_an_error(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan(), "b": Plan(junit=None)}, accounting=False)
    fake.forget_after_end = {"a", "b"}
    results = SlurmBackend(config(), fake, sleep=lambda s: None).run(
        [item("a"), item("b")], tmp_path)
    a, b = results.results
    assert a.outcome == "passed" and "no longer has a record" in a.detail
    assert b.outcome == "error" and "no record of job 101" in b.detail


def test_squeue_hiccups_are_tolerated_but_not_forever(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan()})
    fake.squeue_failures = 2
    backend = SlurmBackend(config(max_poll_failures=2), fake, sleep=lambda s: None)
    assert only(backend.run([item("a")], tmp_path)).outcome == "passed"
    fake = FakeSlurm(tmp_path / "2", {"a": Plan()})
    fake.squeue_failures = 3
    backend = SlurmBackend(config(max_poll_failures=2), fake, sleep=lambda s: None)
    with pytest.raises(ExternalError, match="Unable to contact slurm controller"):
        backend.run([item("a")], tmp_path / "2")
    assert only(read_results(tmp_path / "2")).outcome == "pending"  # state kept for status()


def test_all_jobs_gone_from_squeue_is_not_an_error(tmp_path: Path) -> None:
    # squeue exits 1 with "Invalid job id specified" when it knows none of the ids
    fake = FakeSlurm(tmp_path, {"a": Plan()})
    backend = SlurmBackend(config(), fake)
    backend.run([item("a")], tmp_path, wait=False)
    fake.jobs["999"] = fake.jobs.pop("100")  # Slurm forgot 100 entirely
    fake.jobs["999"].job_id = "999"
    seen = [only(backend.status(tmp_path)) for _ in range(3)]
    assert fake.calls[1][0] == "squeue" and fake.calls[2][0] == "sacct"
    # sacct may lag behind, so the first polls wait; then scontrol has nothing either
    assert [r.outcome for r in seen] == ["running", "running", "error"]
    assert "no record of job 100" in seen[-1].detail


def test_max_wait_returns_a_snapshot(tmp_path: Path) -> None:
    clock = iter(range(1000))
    fake = FakeSlurm(tmp_path, {"a": Plan(queue=["RUNNING"] * 100)})
    backend = SlurmBackend(config(), fake, sleep=lambda s: None,
                           clock=lambda: float(next(clock)))
    result = only(backend.run([item("a")], tmp_path, max_wait_s=5))
    assert result.outcome == "running"


def test_progress_events(tmp_path: Path) -> None:
    events: list[Progress] = []
    fake = FakeSlurm(tmp_path, {"a": Plan(), "b": Plan(queue=["RUNNING"] * 3)})
    SlurmBackend(config(), fake, sleep=lambda s: None).run(
        [item("a"), item("b")], tmp_path, progress=events.append)
    kinds = [e.event for e in events]
    assert kinds[:2] == ["submitted", "submitted"]
    assert sorted(e.key or "" for e in events if e.event == "finished") == ["a", "b"]
    assert events[-1].event == "polled" and events[-1].done == events[-1].total == 2


def test_ctrl_c_while_waiting_keeps_jobs_and_state(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan(queue=["RUNNING"] * 10)})

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    results = SlurmBackend(config(), fake, sleep=interrupt).run([item("a")], tmp_path)
    assert results.interrupted and only(results).outcome == "running"
    assert not fake.commands("scancel")  # the jobs stay; status() can pick them up
    assert read_results(tmp_path).interrupted


def test_cancel_scancels_unfinished_jobs(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"a": Plan(queue=["RUNNING"] * 10), "b": Plan(queue=[])})
    backend = SlurmBackend(config(), fake)
    backend.run([item("a"), item("b")], tmp_path, wait=False)
    backend.status(tmp_path)  # b ends
    results = cancel(tmp_path, runner=fake)
    assert fake.commands("scancel") == [("scancel", "100")]
    assert [r.outcome for r in results.results] == ["cancelled", "passed"]


def test_state_file_is_json_with_schema(tmp_path: Path) -> None:
    run(tmp_path, {"a": Plan()})
    doc = json.loads((tmp_path / STATE_FILE).read_text())
    assert doc["schema"] == "testdb-audit/slurm-state@1"
    assert doc["config"]["gpu_types"]["*h100*"]["partition"] == "hopper"
    assert doc["jobs"][0]["job_id"] == "100"


def test_config_from_mapping_checks_its_input() -> None:
    with pytest.raises(InputError, match="unknown key"):
        SlurmConfig.from_mapping({"*": {"queue": "x"}})
    with pytest.raises(InputError, match="unknown slurm option"):
        SlurmConfig.from_mapping({}, poll_seconds=3)
    with pytest.raises(InputError, match="expected a mapping"):
        SlurmConfig.from_mapping({"*": "gpu"})  # type: ignore[dict-item]
    cfg = config(extra_args=["--qos=x"], requeue_preempted=True)
    assert SlurmConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
