"""Run items as Slurm batch jobs: submit, poll, and settle each job's outcome."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from auditor.launch.commands import NOT_FOUND, CommandRunner, Completed, SubprocessRunner
from auditor.launch.junit import decide_outcome, read_junit
from auditor.launch.model import (
    Outcome,
    ProgressCallback,
    RunItem,
    RunResult,
    RunResults,
    atomic_write_text,
    make_progress,
    no_progress,
    now_iso,
    run_paths,
    validate_items,
)
from auditor.launch.packing import order_items
from auditor.launch.slurmconfig import SlurmConfig, job_script, sbatch_argv, time_limit_minutes
from auditor.launch.slurmrun import Job, SlurmRun, load_state, publish, save_state
from auditor.launch.slurmstate import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    JobRecord,
    classify,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
)
from testdb.errors import ExternalError

BACKEND = "slurm"
_CMD_TIMEOUT_S = 120.0
_UNSATISFIABLE = "Requested node configuration is not available"


class _PollFailed(Exception):
    def __init__(self, done: Completed) -> None:
        super().__init__(done.describe())


class SlurmBackend:
    """Submits one batch job per item and follows them through squeue, sacct and scontrol.

    After submission the configuration stored in the run's state file governs the run, so
    ``status`` from another process behaves like the ``wait`` that would have run.
    """

    name = BACKEND

    def __init__(self, config: SlurmConfig | None = None, runner: CommandRunner | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config or SlurmConfig()
        self.runner = runner or SubprocessRunner()
        self._sleep = sleep
        self._clock = clock

    def run(self, items: Iterable[RunItem], run_dir: Path, *, wait: bool = True,
            progress: ProgressCallback = no_progress,
            max_wait_s: float | None = None) -> RunResults:
        """Submit every item; with ``wait`` poll until all jobs ended (or ``max_wait_s``)."""
        submitted = self.submit(items, run_dir, progress)
        if not wait or submitted.interrupted:
            return submitted
        return self.wait(run_dir, progress, max_wait_s=max_wait_s)

    def submit(self, items: Iterable[RunItem], run_dir: Path,
               progress: ProgressCallback = no_progress) -> RunResults:
        """Write each job script and sbatch it, longest first; the state file follows each job."""
        plan = validate_items(items)
        root = Path(run_dir).resolve()
        jobs = {i.key: Job(i, RunResult(i.key, i.test_id, "pending", BACKEND,
                                        detail="not submitted yet")) for i in plan}

        def state() -> SlurmRun:
            return SlurmRun(str(root), self.config, tuple(jobs[i.key] for i in plan))

        try:
            for item in order_items(plan):
                jobs[item.key] = self._submit_one(item, root)
                save_state(state())
                progress(make_progress("submitted", (j.result for j in jobs.values()),
                                       len(plan), key=item.key, result=jobs[item.key].result,
                                       message=jobs[item.key].result.where))
        except KeyboardInterrupt:
            for key, job in jobs.items():
                if job.job_id is None and not job.result.finished:
                    jobs[key] = replace(job, result=replace(
                        job.result, outcome="cancelled", detail="interrupted before submission"))
            save_state(state())
            return publish(state(), interrupted=True)
        return publish(state())

    def wait(self, run_dir: Path, progress: ProgressCallback = no_progress,
             max_wait_s: float | None = None) -> RunResults:
        """Poll until every job has ended; Ctrl-C leaves the jobs running and returns a snapshot."""
        run = load_state(Path(run_dir))
        started = self._clock()
        failures = 0
        try:
            while True:
                try:
                    run = self._refresh(run, progress)
                    failures = 0
                except _PollFailed as exc:
                    failures += 1
                    if failures > run.config.max_poll_failures:
                        raise ExternalError(f"Slurm stopped answering: {exc}",
                                            hint=f"resume later with status({run.run_dir!r})"
                                            ) from exc
                save_state(run)
                results = publish(run)
                progress(make_progress("polled", results.results, len(run.jobs),
                                       running=_count(run, "running")))
                if results.finished or (
                        max_wait_s is not None and self._clock() - started >= max_wait_s):
                    return results
                self._sleep(run.config.poll_interval_s)
        except KeyboardInterrupt:
            save_state(run)
            return publish(run, interrupted=True)

    def status(self, run_dir: Path) -> RunResults:
        """Refresh a run submitted earlier (perhaps by another process) once and return it."""
        run = load_state(Path(run_dir))
        try:
            run = self._refresh(run, no_progress)
        except _PollFailed as exc:
            raise ExternalError(f"cannot ask Slurm about run {run.run_dir}: {exc}") from exc
        save_state(run)
        return publish(run)

    def cancel(self, run_dir: Path) -> RunResults:
        """scancel every job of the run that has not ended, then refresh."""
        run = load_state(Path(run_dir))
        ids = [j.job_id for j in run.jobs if j.job_id and not j.result.finished]
        if ids:
            done = self.runner.run(("scancel", *ids), timeout=_CMD_TIMEOUT_S)
            if not done.ok:
                raise ExternalError(f"cannot cancel jobs of {run.run_dir}: {done.describe()}")
        return self.status(run_dir)

    # ------------------------------------------------------------------ submission

    def _submit_one(self, item: RunItem, root: Path) -> Job:
        paths = run_paths(root, item.key)
        script = root / "scripts" / f"{item.key}.sh"
        for folder in (paths.log.parent, paths.junit.parent, script.parent):
            folder.mkdir(parents=True, exist_ok=True)
        # Leftovers of an earlier run in this directory must not pass for this job's output.
        paths.junit.unlink(missing_ok=True)
        paths.log.unlink(missing_ok=True)
        atomic_write_text(script, job_script(item, paths.junit))
        script.chmod(0o755)
        done = self.runner.run(sbatch_argv(item, self.config, script, paths.log),
                               timeout=_CMD_TIMEOUT_S)
        base = RunResult(item.key, item.test_id, "pending", BACKEND, log_path=str(paths.log))
        if done.returncode == NOT_FOUND:
            raise ExternalError("sbatch is not available on this machine",
                                hint="install the Slurm client or use the local backend")
        if not done.ok:
            outcome: Outcome = "not-runnable" if _UNSATISFIABLE in done.stderr else "error"
            why = (done.stderr.strip() or done.stdout.strip()).splitlines() or [
                f"exit {done.returncode}"]
            return Job(item, replace(base, outcome=outcome, log_path=None,
                                     detail=f"sbatch refused it: {why[-1]}"))
        job_id = done.stdout.strip().split(";")[0].strip()
        if not job_id.isdigit():
            return Job(item, replace(base, outcome="error", log_path=None,
                                     detail=f"sbatch printed no job id: {done.stdout.strip()!r}"))
        return Job(item, replace(base, where=f"slurm job {job_id}",
                                 detail=f"submitted, --time={time_limit_minutes(item, self.config)}"
                                        " min"), job_id=job_id)

    # ------------------------------------------------------------------ polling

    def _refresh(self, run: SlurmRun, progress: ProgressCallback) -> SlurmRun:
        active = {j.job_id: j for j in run.jobs if j.job_id and not j.result.finished}
        if not active:
            return run
        done = self.runner.run(("squeue", "-h", "-j", ",".join(active), "-o", SQUEUE_FORMAT),
                               timeout=_CMD_TIMEOUT_S)
        if done.ok:
            listed = {k: v for k, v in parse_squeue(done.stdout).items() if v.active}
        elif "invalid job id" in (done.stderr + done.stdout).lower():
            listed = {}  # squeue fails like this only when it knows none of the ids
        else:
            raise _PollFailed(done)
        ended = [i for i in active if i not in listed]
        finals, accounting = self._final_records(run, [active[i] for i in ended])
        events: list[tuple[str, Job]] = []
        updated: dict[str, Job] = {}
        for job_id, job in active.items():
            if job_id in listed:
                updated[job_id] = self._snapshot(job, listed[job_id])
            elif job_id not in finals:  # sacct has not caught up yet
                updated[job_id] = replace(job, sacct_misses=job.sacct_misses + 1, result=replace(
                    job.result, outcome="running", detail="ended; waiting for its accounting"))
            elif (record := finals[job_id]) is not None and record.active:
                updated[job_id] = self._snapshot(job, record)
            else:
                event, updated[job_id] = self._settle(run, job, record)
                events.append((event, updated[job_id]))
        run = replace(run, accounting=accounting,
                      jobs=tuple(updated.get(j.job_id or "", j) for j in run.jobs))
        for event, job in events:
            progress(make_progress(
                "requeued" if event == "requeued" else "finished",
                (j.result for j in run.jobs), len(run.jobs), running=_count(run, "running"),
                key=job.item.key, result=job.result, message=job.result.detail))
        return run

    def _final_records(self, run: SlurmRun, jobs: Sequence[Job]
                       ) -> tuple[dict[str, JobRecord | None], bool | None]:
        """The records of jobs squeue no longer shows: sacct first, scontrol where it cannot.

        An id maps to None when neither knows the job any more (purged after MinJobAge), and
        is absent while sacct may still be catching up (its records arrive asynchronously).
        """
        ids = [j.job_id for j in jobs if j.job_id]
        found: dict[str, JobRecord | None] = {}
        accounting = run.accounting
        if ids and accounting is not False:
            done = self.runner.run(("sacct", "-j", ",".join(ids), "-n", "-P", "-o",
                                    SACCT_FIELDS), timeout=_CMD_TIMEOUT_S)
            if done.ok:
                accounting = True
                found.update(parse_sacct(done.stdout, ids))
            elif done.returncode == NOT_FOUND or "accounting storage is disabled" in (
                    done.stderr + done.stdout).lower():
                accounting = False
        for job in jobs:
            if not job.job_id or job.job_id in found:
                continue
            if accounting is False or job.sacct_misses + 1 >= run.config.sacct_grace_polls:
                shown = self.runner.run(("scontrol", "show", "job", "-o", job.job_id),
                                        timeout=_CMD_TIMEOUT_S)
                found[job.job_id] = parse_scontrol(shown.stdout) if shown.ok else None
        return found, accounting

    def _snapshot(self, job: Job, record: JobRecord) -> Job:
        outcome: Outcome = "running" if classify(record.state)[1] == "running" else "pending"
        started = job.result.started_at or (now_iso() if outcome == "running" else None)
        reason = f" ({record.reason})" if record.reason and record.reason != "None" else ""
        return replace(job, result=replace(job.result, outcome=outcome, where=_where(job, record),
                                           started_at=started, detail=record.raw_state + reason))

    def _settle(self, run: SlurmRun, job: Job, record: JobRecord | None) -> tuple[str, Job]:
        """``("finished"|"requeued"|"waiting", job)`` for a job that left the queue."""
        item, config = job.item, run.config
        paths = run_paths(Path(run.run_dir), item.key)
        junit = read_junit(paths.junit)
        base = replace(job.result, finished_at=now_iso(),
                       junit_path=str(paths.junit) if junit is not None else None)
        if record is None:
            if junit is not None:
                outcome, detail = decide_outcome(junit, None, expect_junit=True)
                detail += "; Slurm no longer has a record of the job"
            else:
                outcome, detail = "error", f"Slurm has no record of job {job.job_id} any more"
            return "finished", replace(job, result=replace(base, outcome=outcome, detail=detail))
        known, fixed = classify(record.state)
        base = replace(base, where=_where(job, record), returncode=record.returncode,
                       duration_s=record.elapsed_s,
                       started_at=record.start or job.result.started_at,
                       finished_at=record.end or base.finished_at)
        if fixed is None:  # COMPLETED or FAILED: the test's own evidence decides
            if junit is None and item.wants_junit:
                first = job.ended_seen if job.ended_seen is not None else self._clock()
                if self._clock() - first < config.junit_grace_s:
                    return "waiting", replace(job, ended_seen=first, result=replace(
                        job.result, outcome="running",
                        detail=f"{record.raw_state}; waiting for its JUnit file"))
            rc = record.returncode if record.state == "FAILED" else (record.returncode or 0)
            outcome, detail = decide_outcome(junit, rc, expect_junit=item.wants_junit)
            if record.state == "FAILED" and outcome == "passed":
                outcome = "failed"  # Slurm saw a failure; never report it as a pass
            return "finished", replace(job, ended_seen=None, result=replace(
                base, outcome=outcome, detail=f"{record.raw_state}: {detail}"))
        note = ""
        if fixed == "preempted" and config.requeue_preempted and job.requeues == 0:
            done = self.runner.run(("scontrol", "requeue", job.job_id or ""),
                                   timeout=_CMD_TIMEOUT_S)
            if done.ok:
                return "requeued", replace(
                    job, requeues=job.requeues + 1, sacct_misses=0, ended_seen=None,
                    result=replace(job.result, outcome="pending",
                                   detail="preempted; requeued once"))
            note = f"; requeue failed: {done.describe()}"
        return "finished", replace(job, ended_seen=None, result=replace(
            base, outcome=fixed, detail=_describe(record, known, job) + note))


def _describe(record: JobRecord, known: bool, job: Job) -> str:
    if not known:
        return f"unknown Slurm state {record.raw_state!r}"
    text = {
        "timeout": "Slurm stopped it at its time limit",
        "cancelled": "cancelled",
        "node-fail": "its node failed",
        "oom": "ran out of memory",
        "preempted": "preempted" + (" again after one requeue" if job.requeues else ""),
    }.get(str(classify(record.state)[1]), "ended")
    code = "" if record.exit_code is None else f", exit {record.exit_code}:{record.signal or 0}"
    return f"{text} ({record.raw_state}{code})"


def _where(job: Job, record: JobRecord) -> str:
    return f"slurm job {job.job_id}" + (f" on {record.nodes}" if record.nodes else "")


def _count(run: SlurmRun, outcome: str) -> int:
    return sum(1 for j in run.jobs if j.result.outcome == outcome)


def status(run_dir: Path, runner: CommandRunner | None = None) -> RunResults:
    """Refresh and return the results of a run submitted with ``wait=False``."""
    return SlurmBackend(runner=runner).status(run_dir)


def cancel(run_dir: Path, runner: CommandRunner | None = None) -> RunResults:
    """Cancel the unfinished jobs of a run and return the refreshed results."""
    return SlurmBackend(runner=runner).cancel(run_dir)
