"""The Slurm run state file: what was submitted, as which job, and what is known of each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.launch.model import (
    RunItem,
    RunResult,
    RunResults,
    atomic_write_text,
    item_from_dict,
    item_to_dict,
    result_from_dict,
    result_to_dict,
    write_results,
)
from auditor.launch.slurmconfig import SlurmConfig
from testdb.errors import InputError, SourceLoc, json_error
from testdb.files import read_text

STATE_SCHEMA = "testdb-audit/slurm-state@1"
STATE_FILE = "slurm-state.json"


@dataclass(frozen=True)
class Job:
    """One item's job and what we know of it; ``ended_seen`` times the wait for late JUnit."""

    item: RunItem
    result: RunResult
    job_id: str | None = None
    requeues: int = 0
    sacct_misses: int = 0
    ended_seen: float | None = None


@dataclass(frozen=True)
class SlurmRun:
    """The state file's content: enough for a later process to pick the run up again."""

    run_dir: str
    config: SlurmConfig
    jobs: tuple[Job, ...]
    accounting: bool | None = None  # None until sacct has answered or said it is disabled

    def results(self, interrupted: bool = False) -> RunResults:
        return RunResults(self.run_dir, tuple(j.result for j in self.jobs), interrupted)


def publish(run: SlurmRun, interrupted: bool = False) -> RunResults:
    """Write the run's ``results.json`` and return the results."""
    results = run.results(interrupted)
    write_results(results)
    return results


def save_state(run: SlurmRun) -> Path:
    path = Path(run.run_dir) / STATE_FILE
    doc: dict[str, Any] = {
        "schema": STATE_SCHEMA, "run_dir": run.run_dir, "config": run.config.to_dict(),
        "accounting": run.accounting,
        "jobs": [{"item": item_to_dict(j.item), "result": result_to_dict(j.result),
                  "job_id": j.job_id, "requeues": j.requeues, "sacct_misses": j.sacct_misses,
                  "ended_seen": j.ended_seen} for j in run.jobs],
    }
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")
    return path


def load_state(run_dir: Path) -> SlurmRun:
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        raise InputError(f"{path}: no Slurm run here",
                         hint="pass the run directory that `launch --backend slurm` wrote")
    try:
        doc = json.loads(read_text(str(path)))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {json_error(exc)}", SourceLoc(str(path), exc.lineno)
                         ) from None
    except (ValueError, RecursionError):  # a number of thousands of digits; deep nesting
        raise InputError("not a Slurm run state file", SourceLoc(str(path), 1)) from None
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA:
        raise InputError(f"{path}: not a Slurm run state file",
                         hint=f"expected schema {STATE_SCHEMA!r}")
    try:
        jobs = tuple(Job(item_from_dict(j["item"]), result_from_dict(j["result"]),
                         j.get("job_id"), int(j.get("requeues", 0)),
                         int(j.get("sacct_misses", 0)), j.get("ended_seen"))
                     for j in doc["jobs"])
        return SlurmRun(str(doc["run_dir"]), SlurmConfig.from_dict(doc.get("config", {})), jobs,
                        doc.get("accounting"))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise InputError(f"malformed Slurm run state: {type(exc).__name__}: {str(exc)[:200]}",
                         SourceLoc(str(path), 1)) from None
