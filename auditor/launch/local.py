"""Run items as concurrent processes on this machine's GPUs, each with its own GPU set."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from auditor.launch.gpus import GpuDetector, GpuInventory, detect_gpus
from auditor.launch.junit import decide_outcome, read_junit
from auditor.launch.model import (
    Outcome,
    ProgressCallback,
    RunItem,
    RunResult,
    RunResults,
    make_progress,
    no_progress,
    now_iso,
    run_paths,
    validate_items,
    write_results,
)
from auditor.launch.packing import Busy, choose, default_duration, expected, order_items

BACKEND = "local"


@dataclass(frozen=True)
class LocalConfig:
    cpu_slots: int = 1
    """How many items that need no GPU may run at once."""
    timeout_margin_s: float = 120.0
    """Added to each item's own timeout: pytest's --timeout should fire first and write JUnit."""
    timeout_cap_s: float | None = None
    """Upper bound on any item's wall time (margin included), whatever its list says."""
    kill_grace_s: float = 10.0
    """Between SIGTERM and SIGKILL when a timeout or an interrupt stops a run."""
    poll_interval_s: float = 0.1


class _Proc:
    """A started item: mutable bookkeeping that lives only while the run loop does."""

    def __init__(self, item: RunItem, popen: subprocess.Popen[bytes], gpus: tuple[str, ...],
                 log: IO[bytes], started: float, limit_s: float, expected_s: float) -> None:
        self.item = item
        self.popen = popen
        self.gpus = gpus
        self.log = log
        self.started = started
        self.started_at = now_iso()
        self.limit_s = limit_s
        self.expected_s = expected_s
        self.term_sent: float | None = None
        self.timed_out = False


class LocalBackend:
    """Packs items onto the GPUs this process may use and runs them concurrently."""

    name = BACKEND

    def __init__(self, config: LocalConfig | None = None,
                 detect: GpuDetector = detect_gpus) -> None:
        self.config = config or LocalConfig()
        self._detect = detect
        self._host = socket.gethostname()

    def run(self, items: Iterable[RunItem], run_dir: Path,
            progress: ProgressCallback = no_progress) -> RunResults:
        """Run every item; on Ctrl-C stop the children, keep what finished, and still write results.

        Returns the results in the order of ``items``; ``results.json`` in ``run_dir`` is
        rewritten after every finished item, so a crash of this process loses little.
        """
        plan = validate_items(items)
        run_dir = Path(run_dir).resolve()
        inventory = self._detect()
        results: dict[str, RunResult] = {}
        default = default_duration(plan)
        running: dict[str, _Proc] = {}
        total = len(plan)

        def save(interrupted: bool = False) -> RunResults:
            snap = tuple(results.get(i.key) or self._pending(i) for i in plan)
            out = RunResults(str(run_dir), snap, interrupted)
            write_results(out)
            return out

        def finish(result: RunResult) -> None:
            results[result.key] = result
            save()
            progress(make_progress("finished", results.values(), total, running=len(running),
                                   key=result.key, result=result))

        # One event per item as it is decided, so the count climbs 1/N, 2/N, ... even for
        # items that never start.
        for item in plan:
            if item.gpus > len(inventory):
                finish(self._not_runnable(item, inventory))
        pending = [i for i in order_items(plan) if i.key not in results]
        try:
            while pending or running:
                for key, proc in list(running.items()):
                    if self._exited(proc):
                        del running[key]
                        finish(self._collect(proc, run_dir))
                self._enforce_timeouts(running.values())
                busy_gpus = {g for p in running.values() for g in p.gpus}
                free = [g.token for g in inventory.gpus if g.token not in busy_gpus]
                busy = [Busy(p.gpus, p.started + p.expected_s) for p in running.values()]
                cpu_free = self.config.cpu_slots - sum(1 for p in running.values() if not p.gpus)
                now = time.monotonic()
                chosen = choose(pending, free, busy, now, default, cpu_free)
                if pending and not chosen and not running:
                    # Nothing runs and nothing can start: waiting would never end.
                    for item in pending:
                        finish(RunResult(item.key, item.test_id, "not-runnable", BACKEND,
                                         self._host, detail="could not be scheduled here "
                                         f"(needs {item.gpus} GPU(s), {len(inventory)} usable, "
                                         f"{self.config.cpu_slots} CPU slot(s))"))
                    pending.clear()
                for item, gpus in chosen:
                    pending.remove(item)
                    started = self._start(item, gpus, run_dir, expected(item, default))
                    if isinstance(started, RunResult):
                        finish(started)
                        continue
                    running[item.key] = started
                    progress(make_progress("started", results.values(), total,
                                           running=len(running), key=item.key,
                                           message=self._where(gpus)))
                if pending or running:
                    time.sleep(self.config.poll_interval_s)
        except KeyboardInterrupt:
            for key, proc in list(running.items()):
                if self._exited(proc):  # it ended on its own: report it as it ended
                    del running[key]
                    results[key] = self._collect(proc, run_dir)
            self._stop_all(running.values(), self.config.kill_grace_s)
            for proc in running.values():
                results[proc.item.key] = replace(self._collect(proc, run_dir),
                                                 outcome="cancelled", detail="interrupted by user")
            for item in pending:
                results[item.key] = RunResult(item.key, item.test_id, "cancelled", BACKEND,
                                              detail="interrupted before it started")
            return save(interrupted=True)
        return save()

    # ------------------------------------------------------------------ process handling

    def _start(self, item: RunItem, gpus: tuple[str, ...], run_dir: Path,
               expected_s: float) -> _Proc | RunResult:
        paths = run_paths(run_dir, item.key)
        paths.log.parent.mkdir(parents=True, exist_ok=True)
        paths.junit.parent.mkdir(parents=True, exist_ok=True)
        # A JUnit file left by an earlier run in the same directory would be taken for this one's.
        paths.junit.unlink(missing_ok=True)
        argv = item.command(str(paths.junit))
        env = dict(os.environ)
        env.update(item.env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        log = paths.log.open("wb")
        log.write(
            f"# testdb-audit local run of {item.test_id}\n# cwd: {item.cwd}\n"
            f"# CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}\n"
            f"# command: {shlex.join(argv)}\n".encode())
        log.flush()
        try:
            popen = subprocess.Popen(argv, cwd=item.cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        except OSError as exc:
            log.write(f"# could not start: {exc}\n".encode())
            log.close()
            return RunResult(item.key, item.test_id, "error", BACKEND, self._where(gpus),
                             now_iso(), now_iso(), 0.0, None, str(paths.log), None,
                             f"could not start {argv[0]!r}: {exc.strerror or exc}")
        limit = item.timeout_minutes * 60 + self.config.timeout_margin_s
        if self.config.timeout_cap_s is not None:
            limit = min(limit, self.config.timeout_cap_s)
        return _Proc(item, popen, gpus, log, time.monotonic(), limit, expected_s)

    @staticmethod
    def _exited(proc: _Proc) -> bool:
        """Whether the leader exited; its leftover children are killed before it is reaped.

        Test processes spawn workers (MPI ranks, dataloaders) that may outlive pytest and keep
        their GPUs busy into the next test's turn. While the leader is an unreaped zombie its
        pid (the group id) cannot be reused, so signalling the group then is safe.
        """
        pid = proc.popen.pid
        if hasattr(os, "waitid"):
            try:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                    return False
                _signal_group(pid, signal.SIGKILL)
            except ChildProcessError:
                pass  # already reaped
        return proc.popen.poll() is not None

    def _enforce_timeouts(self, procs: Iterable[_Proc]) -> None:
        now = time.monotonic()
        for proc in procs:
            if proc.term_sent is None and now - proc.started > proc.limit_s:
                proc.timed_out = True
                proc.term_sent = now
                _signal_group(proc.popen.pid, signal.SIGTERM)
            elif proc.term_sent is not None and now - proc.term_sent > self.config.kill_grace_s:
                _signal_group(proc.popen.pid, signal.SIGKILL)

    def _stop_all(self, procs: Iterable[_Proc], grace_s: float) -> None:
        live = list(procs)
        for proc in live:
            _signal_group(proc.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(p.popen.poll() is None for p in live) and time.monotonic() < deadline:
            time.sleep(0.05)
        for proc in live:
            _signal_group(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()

    def _collect(self, proc: _Proc, run_dir: Path) -> RunResult:
        item = proc.item
        returncode = proc.popen.wait()
        proc.log.close()
        paths = run_paths(run_dir, item.key)
        duration = round(time.monotonic() - proc.started, 3)
        outcome: Outcome
        if proc.timed_out:
            outcome, detail = "timeout", f"killed after {proc.limit_s:g} s (time limit)"
        else:
            summary = read_junit(paths.junit)
            outcome, detail = decide_outcome(summary, returncode, expect_junit=item.wants_junit)
        return RunResult(item.key, item.test_id, outcome, BACKEND, self._where(proc.gpus),
                         proc.started_at, now_iso(), duration,
                         str(paths.junit) if paths.junit.exists() else None, str(paths.log),
                         returncode, detail)

    # ------------------------------------------------------------------ records

    def _where(self, gpus: tuple[str, ...]) -> str:
        return f"{self._host} GPU {','.join(gpus)}" if gpus else f"{self._host} (no GPU)"

    def _not_runnable(self, item: RunItem, inventory: GpuInventory) -> RunResult:
        return RunResult(item.key, item.test_id, "not-runnable", BACKEND, self._host,
                         detail=f"needs {item.gpus} GPU(s), this machine has {len(inventory)} "
                                f"usable ({inventory.source})")

    @staticmethod
    def _pending(item: RunItem) -> RunResult:
        return RunResult(item.key, item.test_id, "pending", BACKEND)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, sig)
