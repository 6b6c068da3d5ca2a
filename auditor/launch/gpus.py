"""Which GPUs this machine lets us use: nvidia-smi, narrowed by an outer CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from auditor.launch.commands import CommandRunner, SubprocessRunner

NVIDIA_SMI = ("nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader")


@dataclass(frozen=True)
class Gpu:
    """One usable GPU; ``token`` is what a child's CUDA_VISIBLE_DEVICES must say to reach it."""

    token: str
    name: str = ""
    memory_mib: int | None = None


@dataclass(frozen=True)
class GpuInventory:
    gpus: tuple[Gpu, ...]
    source: str  # how we know, for "needs 4 GPUs, have 0 (nvidia-smi not found)"

    def __len__(self) -> int:
        return len(self.gpus)


GpuDetector = Callable[[], GpuInventory]


def parse_nvidia_smi(text: str) -> tuple[Gpu, ...]:
    """Parse ``index, name, 81559 MiB`` lines; anything else (warnings, "[N/A]") is skipped."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        memory = parts[-1].split()[0] if len(parts) >= 3 and parts[-1] else ""
        name = ", ".join(parts[1:-1]) if len(parts) >= 3 else parts[1]
        gpus.append(Gpu(parts[0], name, int(memory) if memory.isdigit() else None))
    return tuple(gpus)


def restrict_to_visible(gpus: tuple[Gpu, ...], visible: str | None) -> tuple[Gpu, ...]:
    """Apply CUDA's reading of an outer CUDA_VISIBLE_DEVICES to the machine's GPUs.

    nvidia-smi ignores CUDA_VISIBLE_DEVICES, so without this a tool started on GPUs 2,3 would
    hand GPUs 0,1 to its children. Like CUDA, parsing stops at the first entry that names no
    device. UUID/MIG entries are kept as opaque tokens: the child passes them on unchanged.
    """
    if visible is None:
        return gpus
    by_index = {g.token: g for g in gpus}
    chosen: list[Gpu] = []
    for raw in visible.split(","):
        token = raw.strip()
        if token.isdigit() and str(int(token)) in by_index:
            gpu = by_index[str(int(token))]
        elif token.startswith(("GPU-", "MIG-")):
            gpu = Gpu(token)
        else:
            break
        if gpu not in chosen:
            chosen.append(gpu)
    return tuple(chosen)


def detect_gpus(runner: CommandRunner | None = None,
                environ: Mapping[str, str] | None = None) -> GpuInventory:
    """The GPUs this process may use; no nvidia-smi, or one that fails, means none."""
    env = os.environ if environ is None else environ
    done = (runner or SubprocessRunner()).run(NVIDIA_SMI, timeout=60)
    if not done.ok:
        return GpuInventory((), f"nvidia-smi unavailable: {done.describe()}")
    found = parse_nvidia_smi(done.stdout)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    usable = restrict_to_visible(found, visible)
    source = f"nvidia-smi lists {len(found)}"
    if visible is not None:
        source += f", CUDA_VISIBLE_DEVICES={visible!r} leaves {len(usable)}"
    return GpuInventory(usable, source)


def fake_gpus(count: int, name: str = "FakeGPU") -> GpuDetector:
    """A detector that reports ``count`` GPUs numbered from 0 (tests, dry runs)."""
    inventory = GpuInventory(tuple(Gpu(str(i), name, None) for i in range(count)),
                             f"{count} fake GPU(s)")
    return lambda: inventory
