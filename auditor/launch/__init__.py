"""Launch backends: run a plan of tests on local GPUs or through Slurm and collect the results."""

from __future__ import annotations

from auditor.launch.gpus import Gpu, GpuDetector, GpuInventory, detect_gpus, fake_gpus
from auditor.launch.local import LocalBackend, LocalConfig
from auditor.launch.model import (
    OUTCOMES,
    RESULTS_SCHEMA,
    Outcome,
    Progress,
    ProgressCallback,
    RunItem,
    RunResult,
    RunResults,
    make_key,
    read_results,
    write_results,
)
from auditor.launch.slurm import SlurmBackend, cancel, status
from auditor.launch.slurmconfig import PartitionRule, SlurmConfig

__all__ = [
    "OUTCOMES", "RESULTS_SCHEMA", "Gpu", "GpuDetector", "GpuInventory", "LocalBackend",
    "LocalConfig", "Outcome", "PartitionRule", "Progress", "ProgressCallback", "RunItem",
    "RunResult", "RunResults", "SlurmBackend", "SlurmConfig", "cancel", "detect_gpus",
    "fake_gpus", "make_key", "read_results", "status", "write_results",
]
