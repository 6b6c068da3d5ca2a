"""Read squeue, sacct and scontrol output and map Slurm job states onto run outcomes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from auditor.launch.model import Outcome

SQUEUE_FORMAT = "%i|%T|%r|%N"
SACCT_FIELDS = "JobID,State,ExitCode,Elapsed,NodeList"

# None: the job ran to its end and its JUnit (plus exit code) decides passed/failed/error.
STATE_OUTCOMES: dict[str, Outcome | None] = {
    "PENDING": "pending",
    "CONFIGURING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESV_DEL_HOLD": "pending",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "RESIZING": "running",
    "COMPLETED": None,
    "FAILED": None,
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "NODE_FAIL": "node-fail",
    "BOOT_FAIL": "node-fail",
    "OUT_OF_MEMORY": "oom",
    "PREEMPTED": "preempted",
    # held after an exit code the site marked as special: it will not finish without a person
    "SPECIAL_EXIT": "error",
}
ACTIVE = frozenset(k for k, v in STATE_OUTCOMES.items() if v in ("pending", "running"))

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


@dataclass(frozen=True)
class JobRecord:
    """What Slurm says about one job, from whichever command answered."""

    job_id: str
    state: str  # normalised: "CANCELLED" for "CANCELLED by 1000" and sacct's "CANCELLED+"
    raw_state: str
    source: str  # squeue | sacct | scontrol
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: float | None = None
    nodes: str = ""
    reason: str = ""
    start: str | None = None
    end: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def returncode(self) -> int | None:
        """The batch script's status the way subprocess reports it (negative: a signal)."""
        if self.signal:
            return -self.signal
        return self.exit_code


def normalise_state(text: str) -> str:
    word = text.strip().split(" ", 1)[0].rstrip("+").upper()
    return word or "UNKNOWN"


def classify(state: str) -> tuple[bool, Outcome | None]:
    """``(known, outcome)``: outcome None means "decide from JUnit and the exit code"."""
    if state in STATE_OUTCOMES:
        return True, STATE_OUTCOMES[state]
    return False, "error"


def parse_elapsed(text: str) -> float | None:
    """``[D-]HH:MM:SS``, ``MM:SS`` or ``SS`` (Slurm's time formats) as seconds."""
    text = text.strip()
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        if not head.isdigit():
            return None
        days = int(head)
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        return None
    if not 1 <= len(parts) <= 3:
        return None
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + part
    return days * 86400 + seconds


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """Slurm's ``exit:signal`` pair (``3:0``, ``0:15``)."""
    code, _, sig = text.strip().partition(":")
    return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)


def parse_squeue(text: str) -> dict[str, JobRecord]:
    """Lines of ``squeue -h -o '%i|%T|%r|%N'``."""
    records = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        job_id, raw = parts[0], parts[1]
        records[job_id] = JobRecord(job_id, normalise_state(raw), raw, "squeue",
                                    reason=_field(parts, 2), nodes=_field(parts, 3))
    return records


def parse_sacct(text: str, job_ids: Iterable[str]) -> dict[str, JobRecord]:
    """Lines of ``sacct -n -P -o JobID,State,ExitCode,Elapsed,NodeList``, whole jobs only.

    sacct also lists the job's steps (``123.batch``, ``123.extern``); the job's own line is
    the one that carries the state Slurm settled on.
    """
    wanted = set(job_ids)
    records = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or parts[0] not in wanted:
            continue
        code, sig = parse_exit_code(_field(parts, 2))
        records[parts[0]] = JobRecord(
            parts[0], normalise_state(parts[1]), parts[1], "sacct", code, sig,
            parse_elapsed(_field(parts, 3)), _none_empty(_field(parts, 4)))
    return records


def parse_scontrol(text: str) -> JobRecord | None:
    """``scontrol show job -o ID`` (one ``Key=Value`` line; values may hold spaces)."""
    fields = scontrol_fields(text)
    job_id = fields.get("JobId")
    raw = fields.get("JobState")
    if not job_id or raw is None:
        return None
    code, sig = parse_exit_code(fields.get("ExitCode", ""))
    return JobRecord(
        job_id, normalise_state(raw), raw, "scontrol", code, sig,
        parse_elapsed(fields.get("RunTime", "")), _none_empty(fields.get("NodeList", "")),
        reason=_none_empty(fields.get("Reason", "")), start=_time(fields.get("StartTime")),
        end=_time(fields.get("EndTime")))


def scontrol_fields(text: str) -> dict[str, str]:
    line = " ".join(text.split("\n"))
    matches = list(_KEY.finditer(line))
    fields: dict[str, str] = {}
    ends = [m.start() for m in matches[1:]] + [len(line)] if matches else []
    for this, end in zip(matches, ends, strict=True):
        fields.setdefault(this.group(1), line[this.end():end].strip())
    return fields


def _field(parts: list[str], index: int) -> str:
    return parts[index].strip() if index < len(parts) else ""


def _none_empty(text: str) -> str:
    return "" if text in ("(null)", "None", "None assigned") else text


def _time(text: str | None) -> str | None:
    return None if text in (None, "", "Unknown", "None", "N/A") else text
