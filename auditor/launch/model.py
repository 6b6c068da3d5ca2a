"""Run items, run results, progress events and the run-results JSON file."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, cast

from testdb.errors import InputError, SourceLoc, json_error
from testdb.files import read_text, write_text_atomic

RESULTS_SCHEMA = "testdb-audit/run-results@1"
RESULTS_FILE = "results.json"
JUNIT_PLACEHOLDER = "{junit}"

Outcome = Literal[
    "passed", "failed", "error", "timeout", "cancelled", "not-runnable", "preempted",
    "node-fail", "oom", "pending", "running",
]
OUTCOMES: tuple[Outcome, ...] = (
    "passed", "failed", "error", "timeout", "cancelled", "not-runnable", "preempted",
    "node-fail", "oom", "pending", "running",
)
# "pending" and "running" are snapshots of a run that has not ended yet; every other word is final.
UNFINISHED: frozenset[Outcome] = frozenset({"pending", "running"})

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KEY_MAX = 80


@dataclass(frozen=True)
class RunItem:
    """One test to run: the command, where, how many GPUs and for how long."""

    key: str
    test_id: str
    gpus: int
    gpu_type: str | None
    timeout_minutes: int
    isolation: bool
    cwd: str
    argv: tuple[str, ...]
    duration_s: float | None
    stages: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def command(self, junit_path: str) -> tuple[str, ...]:
        """The argv with every ``{junit}`` replaced by this run's JUnit path."""
        return tuple(arg.replace(JUNIT_PLACEHOLDER, junit_path) for arg in self.argv)

    @property
    def wants_junit(self) -> bool:
        return any(JUNIT_PLACEHOLDER in arg for arg in self.argv)


@dataclass(frozen=True)
class RunResult:
    """How one item's run ended (or where it stands, for ``pending``/``running``)."""

    key: str
    test_id: str
    outcome: Outcome
    backend: str
    where: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    junit_path: str | None = None
    log_path: str | None = None
    returncode: int | None = None
    detail: str = ""

    @property
    def finished(self) -> bool:
        return self.outcome not in UNFINISHED


@dataclass(frozen=True)
class RunResults:
    """Everything one launch produced; ``interrupted`` when the user stopped it early."""

    run_dir: str
    results: tuple[RunResult, ...]
    interrupted: bool = False

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.outcome for r in self.results))

    @property
    def finished(self) -> bool:
        return all(r.finished for r in self.results)


@dataclass(frozen=True)
class Progress:
    """A progress event: enough for a progress bar (done/total) and a live summary (counts)."""

    event: Literal["started", "finished", "submitted", "requeued", "polled"]
    total: int
    done: int
    running: int
    counts: tuple[tuple[str, int], ...] = ()
    key: str | None = None
    result: RunResult | None = None
    message: str = ""


ProgressCallback = Callable[[Progress], None]


def no_progress(_: Progress) -> None:
    """The default progress callback: ignore every event."""


def make_progress(
    event: Literal["started", "finished", "submitted", "requeued", "polled"],
    results: Iterable[RunResult],
    total: int,
    *,
    running: int = 0,
    key: str | None = None,
    result: RunResult | None = None,
    message: str = "",
) -> Progress:
    finals = [r for r in results if r.finished]
    counts = Counter(r.outcome for r in finals)
    return Progress(event=event, total=total, done=len(finals), running=running,
                    counts=tuple(sorted(counts.items())), key=key, result=result,
                    message=message)


def make_key(test_id: str, taken: Iterable[str] = ()) -> str:
    """A filesystem-safe, readable, unique name for a run of ``test_id``.

    Node ids hold ``/``, ``::``, ``[...]`` and arbitrary parameter text; the readable part keeps
    the tail (the test name matters more than the directory) and a hash of the whole id keeps
    ids that sanitise to the same text apart.
    """
    readable = _SAFE.sub("_", test_id.replace("::", ".")).strip("._-") or "test"
    readable = readable[-(_KEY_MAX - 9):].lstrip("._-")
    digest = hashlib.sha1(test_id.encode()).hexdigest()
    used = set(taken)
    for width in (8, 12, 40):
        key = f"{readable}-{digest[:width]}"
        if key not in used:
            return key
    n = 2
    while f"{readable}-{digest[:8]}-{n}" in used:
        n += 1
    return f"{readable}-{digest[:8]}-{n}"


def validate_items(items: Iterable[RunItem]) -> tuple[RunItem, ...]:
    """Check a plan once at the launch boundary; the backends trust what passes."""
    seen: set[str] = set()
    out = tuple(items)
    for item in out:
        where = f"run item {item.key!r} ({item.test_id})"
        if not item.key or _SAFE.search(item.key) or item.key in {".", ".."}:
            raise InputError(f"{where}: key is not a safe file name",
                             hint="derive keys with auditor.launch.model.make_key")
        if item.key in seen:
            raise InputError(f"{where}: duplicate key", hint="keys must be unique within a run")
        seen.add(item.key)
        if item.gpus < 0:
            raise InputError(f"{where}: negative GPU count {item.gpus}")
        if item.timeout_minutes <= 0:
            raise InputError(f"{where}: timeout must be positive, got {item.timeout_minutes} min")
        if not item.argv:
            raise InputError(f"{where}: empty command")
    return out


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def atomic_write_text(path: Path, text: str) -> None:
    """Write through a temp file and rename it, so readers never see half (testdb.files)."""
    write_text_atomic(str(path), text)


def item_to_dict(item: RunItem) -> dict[str, Any]:
    data = asdict(item)
    data["argv"] = list(item.argv)
    data["stages"] = list(item.stages)
    data["env"] = [list(pair) for pair in item.env]
    return data


def item_from_dict(data: Mapping[str, Any]) -> RunItem:
    try:
        return RunItem(
            key=str(data["key"]), test_id=str(data["test_id"]), gpus=int(data["gpus"]),
            gpu_type=None if data.get("gpu_type") is None else str(data["gpu_type"]),
            timeout_minutes=int(data["timeout_minutes"]), isolation=bool(data["isolation"]),
            cwd=str(data["cwd"]), argv=tuple(str(a) for a in data["argv"]),
            duration_s=None if data.get("duration_s") is None else float(data["duration_s"]),
            stages=tuple(str(s) for s in data.get("stages", ())),
            env=tuple((str(k), str(v)) for k, v in data.get("env", ())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"malformed run item {dict(data)!r}: {exc}") from exc


def result_to_dict(result: RunResult) -> dict[str, Any]:
    return asdict(result)


def result_from_dict(data: Mapping[str, Any]) -> RunResult:
    outcome = data.get("outcome")
    if outcome not in OUTCOMES:
        raise InputError(f"unknown outcome {outcome!r} in run result {data.get('key')!r}",
                         hint=f"expected one of {', '.join(OUTCOMES)}")

    def opt_str(name: str) -> str | None:
        value = data.get(name)
        return None if value is None else str(value)

    try:
        return RunResult(
            key=str(data["key"]), test_id=str(data["test_id"]), outcome=cast(Outcome, outcome),
            backend=str(data["backend"]), where=str(data.get("where", "")),
            started_at=opt_str("started_at"), finished_at=opt_str("finished_at"),
            duration_s=None if data.get("duration_s") is None else float(data["duration_s"]),
            junit_path=opt_str("junit_path"), log_path=opt_str("log_path"),
            returncode=None if data.get("returncode") is None else int(data["returncode"]),
            detail=str(data.get("detail", "")),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        shown = repr(dict(data))
        shown = shown if len(shown) <= 200 else shown[:200] + "...}"
        raise InputError(f"malformed run result {shown}: {type(exc).__name__}: "
                         f"{str(exc)[:200]}") from None


def write_results(results: RunResults, path: Path | None = None) -> Path:
    """Write ``results.json`` (or ``path``) atomically and return where it went."""
    target = path if path is not None else Path(results.run_dir) / RESULTS_FILE
    doc = {
        "schema": RESULTS_SCHEMA,
        "run_dir": results.run_dir,
        "interrupted": results.interrupted,
        "results": [result_to_dict(r) for r in results.results],
    }
    atomic_write_text(target, json.dumps(doc, indent=2) + "\n")
    return target


def read_results(path: Path) -> RunResults:
    """Read a results file; a directory means its ``results.json``."""
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.exists():
        raise InputError("cannot read run results: no such file", SourceLoc(str(path)),
                         "give the results.json (or the run directory) `testdb launch` wrote")
    text = read_text(str(path))  # clear errors for an unreadable, binary or non-UTF-8 file
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {json_error(exc)}",
                         SourceLoc(str(path), exc.lineno),
                         "give the results.json a launch wrote") from None
    except ValueError:  # an integer of thousands of digits
        raise InputError("a number is too long to read", SourceLoc(str(path), 1)) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to be run results",
                         SourceLoc(str(path), 1)) from None
    loc = SourceLoc(str(path))
    if not isinstance(doc, dict) or doc.get("schema") != RESULTS_SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        found = found if isinstance(found, (str, type(None))) else type(found).__name__
        raise InputError(f"not a run-results file (schema {str(found)[:100]!r})", loc,
                         f"expected schema {RESULTS_SCHEMA!r}")
    rows = doc.get("results")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError("'results' must be a list of objects", loc)
    results = []
    for i, row in enumerate(rows):
        try:
            results.append(result_from_dict(row))
        except InputError as exc:
            raise InputError(f"results[{i}]: {exc.bare}", loc, exc.hint) from None
    return RunResults(run_dir=str(doc.get("run_dir", str(path.parent))),
                      results=tuple(results), interrupted=bool(doc.get("interrupted", False)))


@dataclass(frozen=True)
class RunPaths:
    """Where one run's files live inside the run directory."""

    log: Path
    junit: Path


def run_paths(run_dir: Path, key: str) -> RunPaths:
    return RunPaths(log=run_dir / "logs" / f"{key}.log", junit=run_dir / "junit" / f"{key}.xml")
