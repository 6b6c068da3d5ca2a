"""Tests of parsing squeue/sacct/scontrol output and of the state-to-outcome map."""

from __future__ import annotations

import pytest

from auditor.launch.slurmstate import (
    STATE_OUTCOMES,
    classify,
    normalise_state,
    parse_elapsed,
    parse_exit_code,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
)

# Captured from Slurm 22.05 (Debian 12) on the CI cluster that .ci/start-slurm.sh starts.
SCONTROL = (
    "JobId=2 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 "
    "Nice=0 Account=(null) QOS=(null) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) "
    "Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:24 "
    "TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-11-30T06:19:56 "
    "EligibleTime=2026-11-30T06:19:56 AccrueTime=2026-11-30T06:19:56 "
    "StartTime=2026-11-30T06:19:56 EndTime=2026-11-30T06:20:20 Deadline=N/A "
    "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-30T06:19:56 Scheduler=Backfill "
    "Partition=debug AllocNode:Sid=localhost:3110 ReqNodeList=(null) ExcNodeList=(null) "
    "NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=256M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
    "Command=/tmp/my run/job.sh WorkDir=/tmp StdErr=/tmp/t2.out StdIn=/dev/null "
    "StdOut=/tmp/t2.out Power= TresPerNode=gres:gpu:1 \n"
)


def test_parse_scontrol_line() -> None:
    rec = parse_scontrol(SCONTROL)
    assert rec is not None
    assert (rec.job_id, rec.state, rec.exit_code, rec.signal) == ("2", "TIMEOUT", 0, 15)
    assert rec.returncode == -15
    assert (rec.elapsed_s, rec.nodes, rec.reason) == (24.0, "vm", "TimeLimit")
    assert (rec.start, rec.end) == ("2026-11-30T06:19:56", "2026-11-30T06:20:20")
    assert not rec.active


def test_parse_scontrol_of_a_pending_job_and_garbage() -> None:
    rec = parse_scontrol("JobId=7 JobState=PENDING Reason=Resources NodeList=(null) "
                         "StartTime=Unknown EndTime=Unknown ExitCode=0:0")
    assert rec is not None and rec.active and rec.nodes == "" and rec.start is None
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None


def test_parse_sacct_keeps_whole_jobs_only() -> None:
    text = ("12|CANCELLED by 0|0:0|00:00:05|vm\n12.batch|CANCELLED|0:15|00:00:05|vm\n"
            "12.extern|COMPLETED|0:0|00:00:05|vm\n13|FAILED|3:0|1-02:03:04|node[1-2]\n"
            "14|PENDING|0:0|00:00:00|None assigned\n99|COMPLETED|0:0|00:00:01|vm\n")
    recs = parse_sacct(text, ["12", "13", "14"])
    assert sorted(recs) == ["12", "13", "14"]
    assert (recs["12"].state, recs["12"].raw_state) == ("CANCELLED", "CANCELLED by 0")
    assert (recs["13"].exit_code, recs["13"].elapsed_s) == (3, 93784.0)
    assert recs["13"].nodes == "node[1-2]" and recs["14"].nodes == ""
    assert recs["14"].active


def test_parse_squeue() -> None:
    recs = parse_squeue("3|PENDING|Priority|\n4|RUNNING|None|vm\n\n")
    assert recs["3"].active and recs["3"].reason == "Priority"
    assert recs["4"].nodes == "vm" and recs["4"].state == "RUNNING"


@pytest.mark.parametrize(("text", "state"), [
    ("CANCELLED by 1000", "CANCELLED"), ("CANCELLED+", "CANCELLED"), (" running ", "RUNNING"),
    ("", "UNKNOWN"), ("OUT_OF_MEMORY", "OUT_OF_MEMORY"),
])
def test_normalise_state(text: str, state: str) -> None:
    assert normalise_state(text) == state


@pytest.mark.parametrize(("state", "outcome"), [
    ("COMPLETED", None), ("FAILED", None), ("TIMEOUT", "timeout"), ("CANCELLED", "cancelled"),
    ("NODE_FAIL", "node-fail"), ("OUT_OF_MEMORY", "oom"), ("PREEMPTED", "preempted"),
    ("PENDING", "pending"), ("REQUEUED", "pending"), ("RUNNING", "running"),
    ("COMPLETING", "running"), ("BOOT_FAIL", "node-fail"), ("DEADLINE", "timeout"),
])
def test_classify(state: str, outcome: str | None) -> None:
    assert classify(state) == (True, outcome)


def test_no_slurm_state_maps_to_passed_and_unknown_ones_are_errors() -> None:
    assert "passed" not in STATE_OUTCOMES.values()
    assert classify("SOMETHING_NEW") == (False, "error")


@pytest.mark.parametrize(("text", "seconds"), [
    ("00:00:24", 24.0), ("1-00:00:01", 86401.0), ("05:30", 330.0), ("7", 7.0),
    ("INVALID", None), ("", None), ("x-00:00:01", None),
])
def test_parse_elapsed(text: str, seconds: float | None) -> None:
    assert parse_elapsed(text) == seconds


def test_parse_exit_code() -> None:
    assert parse_exit_code("3:0") == (3, 0)
    assert parse_exit_code("0:15") == (0, 15)
    assert parse_exit_code("") == (None, None)
