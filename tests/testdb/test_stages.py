"""Stage records and facts from names; checked against the stage table's own data (which
stages a PR starts: test_pipeline.py)."""

from __future__ import annotations

import pytest
import yaml
from tdb_helpers import DATA, STAGES, corpus

from testdb.stages import Stage, stage_facts


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, object]]:
    data = yaml.safe_load((DATA / STAGES).read_text(encoding="utf-8"))
    return {row["name"]: row for row in data["stages"]}


def test_stage_rows_match_the_table(table: dict[str, dict[str, object]]) -> None:
    stages = {s.name: s for s in corpus().stages if not s.disabled}
    assert set(stages) == set(table)
    for name, row in table.items():
        s = stages[name]
        assert (s.platform, s.context, s.split_id, s.splits, s.gpu_count, s.node_count,
                s.run_with_sbatch, s.arch) == (
            row["platform"], row["context"], row["split_id"], row["splits"], row["gpu_count"],
            row["node_count"], row["run_with_sbatch"], str(row["arch"]).split()[0])
        assert s.is_multi_gpu is row["multi_gpu"]
        assert s.is_post_merge is row["post_merge"]


def test_facts_from_names_agree_with_the_table(table: dict[str, dict[str, object]]) -> None:
    """``mako_from_name`` in ci/stages.yml was derived separately from the Groovy source."""
    for s in corpus().stages:
        if s.disabled:
            continue
        facts = stage_facts(s)
        want = table[s.name]["mako_from_name"]
        assert isinstance(want, dict)
        for key in ("stage", "backend", "auto_trigger", "orchestrator"):
            got = facts[key].value if key in facts else None
            assert got == want.get(key), (s.name, key)


def test_gpu_count_and_cpu_facts() -> None:
    cpu = stage_facts(Stage("CPU-Generic-x86-1", "cpu", "l0_cpu", arch="x86_64"))
    assert cpu["system_gpu_count"].value == "0" and "gpu" not in cpu
    assert cpu["cpu"].values == ("x86_64",) and cpu["cpu"].known
    sb = stage_facts(Stage("DGX_B200-8_GPUs-PyTorch-1", "auto:x", "c", gpu_count=8,
                           run_with_sbatch=True))
    assert sb["system_gpu_count"].value == "8" and sb["gpu"].value == "DGX_B200"
    one = stage_facts(Stage("B200-PyTorch-1", "auto:x", "c", run_with_sbatch=True))
    assert one["system_gpu_count"].value == "1"
    facts = stage_facts(Stage("A10-PyTorch-1", "a10", "c"), {"a10": {"supports_fp8": False,
                                                                     "gpu": ["A10", "a10g"]}})
    assert facts["supports_fp8"].values == ("False",) and facts["gpu"].values == ("A10", "a10g")
