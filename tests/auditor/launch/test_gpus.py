"""Tests of GPU detection: nvidia-smi parsing and the outer CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from auditor.launch.commands import Completed, SubprocessRunner
from auditor.launch.gpus import (
    NVIDIA_SMI,
    Gpu,
    detect_gpus,
    fake_gpus,
    parse_nvidia_smi,
    restrict_to_visible,
)

SMI = """0, NVIDIA H100 80GB HBM3, 81559 MiB
1, NVIDIA H100 80GB HBM3, 81559 MiB
2, NVIDIA H100 80GB HBM3, 81559 MiB
3, NVIDIA H100 80GB HBM3, 81559 MiB
"""


class Smi:
    def __init__(self, rc: int = 0, out: str = SMI, err: str = "") -> None:
        self.done = Completed(NVIDIA_SMI, rc, out, err)
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Completed:
        self.calls.append(tuple(argv))
        return self.done


def tokens(gpus: tuple[Gpu, ...]) -> list[str]:
    return [g.token for g in gpus]


def test_parse_nvidia_smi() -> None:
    gpus = parse_nvidia_smi(SMI + "\nWARNING: infoROM is corrupted\n4, Odd, Name, [N/A]\n")
    assert tokens(gpus) == ["0", "1", "2", "3", "4"]
    assert gpus[0] == Gpu("0", "NVIDIA H100 80GB HBM3", 81559)
    assert gpus[4] == Gpu("4", "Odd, Name", None)


def test_detect_uses_the_documented_query_and_all_gpus_without_cvd() -> None:
    smi = Smi()
    inv = detect_gpus(smi, environ={})
    assert smi.calls == [("nvidia-smi", "--query-gpu=index,name,memory.total",
                          "--format=csv,noheader")]
    assert tokens(inv.gpus) == ["0", "1", "2", "3"] and len(inv) == 4


@pytest.mark.parametrize(("cvd", "expected"), [
    ("2,3", ["2", "3"]),
    ("3, 1", ["3", "1"]),
    ("", []),                    # CUDA: an empty list hides every GPU
    ("-1", []),
    ("1,7,2", ["1"]),            # CUDA stops at the first device that does not exist
    ("1,1", ["1"]),
    ("GPU-abc,MIG-def", ["GPU-abc", "MIG-def"]),
])
def test_outer_cuda_visible_devices_limits_the_usable_gpus(cvd: str, expected: list[str]) -> None:
    inv = detect_gpus(Smi(), environ={"CUDA_VISIBLE_DEVICES": cvd})
    assert tokens(inv.gpus) == expected
    assert "CUDA_VISIBLE_DEVICES" in inv.source


@pytest.mark.parametrize("smi", [
    Smi(rc=127, out="", err="nvidia-smi: command not found"),
    Smi(rc=9, out="", err="NVIDIA-SMI has failed because it couldn't communicate with the driver"),
    Smi(rc=0, out=""),
])
def test_no_or_broken_nvidia_smi_means_no_gpus(smi: Smi) -> None:
    inv = detect_gpus(smi, environ={})
    assert inv.gpus == ()


def test_real_detection_without_nvidia_smi_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    inv = detect_gpus(SubprocessRunner(), environ={})
    assert inv.gpus == () and "nvidia-smi" in inv.source


def test_restrict_without_cvd_keeps_everything() -> None:
    gpus = parse_nvidia_smi(SMI)
    assert restrict_to_visible(gpus, None) == gpus


def test_fake_gpus() -> None:
    assert tokens(fake_gpus(3)().gpus) == ["0", "1", "2"]
    assert len(fake_gpus(0)()) == 0
