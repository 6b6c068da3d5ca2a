"""The directory of one launch: its logs, JUnit XML, list files and results.json.

Each launch gets its own, always: the default ``testdb-runs/<YYYYmmdd-HHMMSS>`` is created with
an exclusive ``mkdir`` and takes a ``-2``, ``-3``, ... suffix when a launch in the same second
took the name first (three launches in one second used to write into one directory and
overwrite each other's results.json). A ``--run-dir`` that already holds a run is refused.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from testdb.errors import UsageError

DEFAULT_PARENT = "testdb-runs"
RUN_MARKERS = ("results.json", "slurm-state.json")
"""What a launch (local, Slurm) writes into its directory: a directory holding one holds a run."""


def stamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now))


def candidates(parent: str, name: str) -> list[Path]:
    """The names a default run directory may take, in order (bounded: no endless loop)."""
    return [Path(parent) / (name if i == 1 else f"{name}-{i}") for i in range(1, 1000)]


def preview(run_dir: str | None, now: float | None = None) -> Path:
    """The directory a launch would use now, creating nothing (for ``--dry-run``)."""
    if run_dir:
        return Path(run_dir)
    return next((p for p in candidates(DEFAULT_PARENT, stamp(now)) if not p.exists()),
                Path(DEFAULT_PARENT) / stamp(now))


def claim(run_dir: str | None, now: float | None = None) -> Path:
    """Create and return this launch's own directory: the given one (refused when it holds a
    run already) or the first free ``testdb-runs/<time>[-N]``, taken by an exclusive mkdir so
    that two launches racing for one name never share it."""
    if run_dir:
        path = Path(run_dir)
        held = [m for m in RUN_MARKERS if (path / m).exists()]
        if held:
            raise UsageError(f"--run-dir {run_dir} already holds a run ({held[0]})",
                             hint="pass a new --run-dir, or leave it out for a fresh "
                                  f"{DEFAULT_PARENT}/<time> directory")
        path.mkdir(parents=True, exist_ok=True)
        return path
    os.makedirs(DEFAULT_PARENT, exist_ok=True)
    for path in candidates(DEFAULT_PARENT, stamp(now)):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise UsageError(f"{DEFAULT_PARENT}: no free run directory for {stamp(now)}",
                     hint="pass --run-dir")
