"""A scripted stand-in for sbatch/squeue/sacct/scontrol/scancel, answering like Slurm 22.05."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from auditor.launch.commands import Completed

PASS_XML = '<testsuite><testcase classname="t" name="test_ok"/></testsuite>'
FAIL_XML = ('<testsuite><testcase classname="t" name="test_bad">'
            '<failure message="boom"/></testcase></testsuite>')


@dataclass
class Plan:
    """What one job does: the states squeue shows poll by poll, then how it ends."""

    queue: list[str] = field(default_factory=lambda: ["PENDING", "RUNNING"])
    final: str = "COMPLETED"
    exit: str = "0:0"
    junit: str | None = PASS_XML
    junit_delay: int = 0  # polls after the end before the JUnit file appears
    sacct_delay: int = 0  # polls after the end before sacct has the record
    then: Plan | None = None  # what happens after an `scontrol requeue`
    elapsed: str = "00:01:05"


@dataclass
class FakeJob:
    job_id: str
    key: str
    argv: tuple[str, ...]
    junit: Path
    plan: Plan
    polls: int = 0
    ended_polls: int = 0
    requeued: bool = False


class FakeSlurm:
    """Implements CommandRunner; ``plans`` maps item keys to plans (default: a clean pass)."""

    def __init__(self, run_dir: Path, plans: dict[str, Plan] | None = None, *,
                 accounting: bool = True, first_id: int = 100) -> None:
        self.run_dir = run_dir
        self.plans = plans or {}
        self.accounting = accounting
        self.next_id = first_id
        self.jobs: dict[str, FakeJob] = {}
        self.calls: list[tuple[str, ...]] = []
        self.sbatch_errors: dict[str, str] = {}
        self.squeue_failures = 0
        self.forget_after_end: set[str] = set()  # keys whose job scontrol no longer knows
        self.requeue_fails = False

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Completed:
        args = tuple(argv)
        self.calls.append(args)
        handler = getattr(self, "_" + args[0], None)
        if handler is None:
            return Completed(args, 127, "", f"{args[0]}: command not found")
        result: Completed = handler(args)
        return result

    def commands(self, name: str) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[0] == name]

    def job(self, key: str) -> FakeJob:
        return next(j for j in self.jobs.values() if j.key == key)

    # ------------------------------------------------------------------ commands

    def _sbatch(self, args: tuple[str, ...]) -> Completed:
        name = next(a.split("=", 1)[1] for a in args if a.startswith("--job-name="))
        key = name.removeprefix("testdb-")
        if key in self.sbatch_errors:
            return Completed(args, 1, "", self.sbatch_errors[key])
        job_id = str(self.next_id)
        self.next_id += 1
        self.jobs[job_id] = FakeJob(job_id, key, args, self.run_dir / "junit" / f"{key}.xml",
                                    self.plans.get(key, Plan()))
        return Completed(args, 0, f"{job_id}\n" if job_id != "999" else f"{job_id};cluster\n")

    def _squeue(self, args: tuple[str, ...]) -> Completed:
        if self.squeue_failures:
            self.squeue_failures -= 1
            return Completed(args, 1, "", "slurm_load_jobs error: Unable to contact slurm "
                                          "controller (connect failure)")
        ids = args[args.index("-j") + 1].split(",")
        lines = []
        for job_id in ids:
            job = self.jobs.get(job_id)
            if job is None:
                continue
            if job.polls < len(job.plan.queue):
                state = job.plan.queue[job.polls]
                reason = "Priority" if state == "PENDING" else "None"
                node = "" if state == "PENDING" else "gpu-node-7"
                lines.append(f"{job_id}|{state}|{reason}|{node}")
            else:
                self._end(job)
            job.polls += 1
        if not lines and not any(i in self.jobs for i in ids):
            return Completed(args, 1, "", "slurm_load_jobs error: Invalid job id specified")
        return Completed(args, 0, "".join(line + "\n" for line in lines))

    def _end(self, job: FakeJob) -> None:
        job.ended_polls += 1
        if job.plan.junit is not None and job.ended_polls > job.plan.junit_delay:
            job.junit.parent.mkdir(parents=True, exist_ok=True)
            job.junit.write_text(job.plan.junit)

    def _ended(self, job: FakeJob) -> bool:
        return job.polls > len(job.plan.queue)

    def _sacct(self, args: tuple[str, ...]) -> Completed:
        if not self.accounting:
            return Completed(args, 1, "", "Slurm accounting storage is disabled\n")
        assert args[-1] == "JobID,State,ExitCode,Elapsed,NodeList"
        lines = []
        for job_id in args[args.index("-j") + 1].split(","):
            job = self.jobs.get(job_id)
            if job is None or not self._ended(job) or job.ended_polls <= job.plan.sacct_delay:
                continue
            p = job.plan
            lines.append(f"{job_id}|{p.final}|{p.exit}|{p.elapsed}|gpu-node-7")
            lines.append(f"{job_id}.batch|{p.final.split()[0]}|{p.exit}|{p.elapsed}|gpu-node-7")
            lines.append(f"{job_id}.extern|COMPLETED|0:0|{p.elapsed}|gpu-node-7")
        return Completed(args, 0, "".join(line + "\n" for line in lines))

    def _scontrol(self, args: tuple[str, ...]) -> Completed:
        if args[1] == "requeue":
            job = self.jobs[args[2]]
            if self.requeue_fails:
                return Completed(args, 1, "", "Requested operation is presently disabled")
            job.requeued = True
            job.plan = job.plan.then or Plan()
            job.polls = job.ended_polls = 0
            return Completed(args, 0)
        assert args[1:4] == ("show", "job", "-o")
        job = self.jobs.get(args[4])
        if job is None or (job.key in self.forget_after_end and self._ended(job)):
            return Completed(args, 1, "", "slurm_load_jobs error: Invalid job id specified")
        p = job.plan
        state = p.final if self._ended(job) else p.queue[min(job.polls, len(p.queue) - 1)]
        state = state.split()[0]  # scontrol never says "CANCELLED by N"
        line = (f"JobId={job.job_id} JobName=testdb-{job.key} UserId=ci(1000) JobState={state} "
                f"Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 "
                f"ExitCode={p.exit} RunTime={p.elapsed} TimeLimit=01:10:00 "
                f"StartTime=2026-11-30T06:19:56 EndTime=2026-11-30T06:21:01 "
                f"Partition=debug NodeList=gpu-node-7 BatchHost=gpu-node-7 "
                f"Command=/runs/my dir/scripts/{job.key}.sh WorkDir=/tmp StdOut=/tmp/x.log "
                f"TresPerNode=gres:gpu:2\n")
        return Completed(args, 0, line)

    def _scancel(self, args: tuple[str, ...]) -> Completed:
        for job_id in args[1:]:
            job = self.jobs[job_id]
            job.plan = Plan(queue=[], final="CANCELLED by 1000", exit="0:15", junit=None)
            job.polls = 0
        return Completed(args, 0)
