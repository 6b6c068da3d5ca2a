"""Condition matching: terms, ranges, wildcards; certain vs assumed matches."""

from __future__ import annotations

import pytest
from tdb_helpers import corpus

from testdb.matching import match
from testdb.model import Condition, Range
from testdb.stages import Fact, Stage, stage_facts

FACTS = {
    "stage": Fact(("pre_merge",)),
    "backend": Fact(("pytorch",)),
    "system_gpu_count": Fact(("4",)),
    "gpu": Fact(("DGX_H100",), known=False),
    "cpu": Fact(("x86_64",), known=False),
    "compute_capability": Fact(("9.0",)),
}


@pytest.mark.parametrize("cond, ok, assumed", [
    (Condition(), True, ()),
    (Condition(terms=(("stage", "pre_merge"),)), True, ()),
    (Condition(terms=(("stage", "post_merge"),)), False, ()),
    (Condition(terms=(("backend", "PyTorch"),)), True, ()),  # values compare case-insensitively
    (Condition(terms=(("orchestrator", "mpi"),)), True, ("orchestrator",)),  # no fact: assumed
    (Condition(ranges=(Range("system_gpu_count", gte=4, lte=4),)), True, ()),
    (Condition(ranges=(Range("system_gpu_count", gte=1, lte=1),)), False, ()),
    (Condition(ranges=(Range("system_gpu_count", gt=4),)), False, ()),
    (Condition(ranges=(Range("system_gpu_count", lt=5),)), True, ()),
    (Condition(ranges=(Range("compute_capability", gte=9.0),)), True, ()),
    (Condition(ranges=(Range("gpu_memory", gte=80000),)), True, ("gpu_memory",)),
    (Condition(wildcards=(("gpu", ("*h100*",)),)), True, ("gpu",)),  # fnmatch, any case
    (Condition(wildcards=(("gpu", ("*a10*", "*H100*")),)), True, ("gpu",)),
    (Condition(wildcards=(("gpu", ("*b200*",)),)), False, ()),
    (Condition(wildcards=(("gpu", ("h100",)),)), False, ()),  # no '*': the whole value
    (Condition(wildcards=(("linux_distribution_name", ("ubuntu*",)),)), True,
     ("linux_distribution_name",)),
    (Condition(wildcards=(("cpu", ("x86_64",)),)), True, ("cpu",)),
    (Condition(terms=(("stage", "pre_merge"),), ranges=(Range("system_gpu_count", gte=4),),
               wildcards=(("gpu", ("*h100*",)),)), True, ("gpu",)),
    (Condition(terms=(("stage", "pre_merge"),), ranges=(Range("system_gpu_count", gte=8),),
               wildcards=(("gpu", ("*h100*",)),)), False, ()),
])
def test_match(cond: Condition, ok: bool, assumed: tuple[str, ...]) -> None:
    m = match(cond, FACTS)
    assert m.ok is ok
    assert m.assumed == assumed
    assert m.certain is (ok and not assumed)


def test_range_bounds() -> None:
    r = Range("x", gte=1, lt=4)
    assert [r.holds(v) for v in (0, 1, 3.9, 4)] == [False, True, True, False]
    assert Range("x").holds(-1e9)
    assert r.describe() == "x >= 1 and < 4"


def test_k8s_gpu_is_assumed_but_sbatch_gpu_is_known() -> None:
    k8s = stage_facts(Stage("H100_PCIe-PyTorch-1", "h100", "l0_h100"))
    sbatch = stage_facts(Stage("DGX_B200-4_GPUs-PyTorch-1", "auto:dgx-b200", "l0_dgx_b200",
                               gpu_count=4, run_with_sbatch=True))
    cond = Condition(wildcards=(("gpu", ("*h100*", "*b200*")),))
    assert match(cond, k8s).assumed == ("gpu",)
    assert match(cond, sbatch).certain


def test_real_blocks_reach_stages_of_their_own_gpu() -> None:
    """Sanity on the corpus: every pre-merge block of l0_h100 matches a H100 stage only."""
    idx = corpus()
    ctx = idx.contexts["l0_h100"]
    for stage in (s for s in idx.stages if s.context == "l0_h100" and not s.disabled):
        facts = stage_facts(stage)
        for block in ctx.blocks:
            m = match(block.condition, facts)
            if m.ok:
                assert block.stage_term in (None, facts["stage"].value)
