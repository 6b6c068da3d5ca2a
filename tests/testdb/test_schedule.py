"""Where each entry runs: stages, shards, waives, QA; one verdict per test id."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from tdb_helpers import STAGES, TESTDB, WAIVES, corpus, small_checkout

from testdb.errors import SourceLoc
from testdb.grammar import Entry
from testdb.index import load
from testdb.schedule import Placement, StageRun, WaiveIndex, verdict_for
from testdb.stages import Stage

CHUNKED = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"


def entry(test: str, line: int = 1, gpu: str | None = None) -> Entry:
    return Entry(test, SourceLoc("f", line), "nodeid", gpu_prefix=gpu, marker="SKIP")


def run(cls: str, waived: bool = False) -> StageRun:
    return StageRun("S-1", cls, 1, 1, (), (entry("w"),) if waived else ())


def td(*runs: StageRun) -> Placement:
    return Placement("test-db", entry("t"), "ctx", None, runs)


def qa(waived: bool = False) -> Placement:
    return Placement("qa", entry("t"), "qa", None, (), (entry("w"),) if waived else ())


@pytest.mark.parametrize("placements, verdict", [
    ([], "unscheduled"),
    ([td()], "unscheduled"),  # a block no stage reaches
    ([td(run("pre-merge"))], "pre-merge"),
    ([td(run("perf"))], "pre-merge"),
    ([td(run("gated-multi-gpu")), td(run("post-merge"))], "gated"),
    ([td(run("gated-auto-trigger:-DeepSeek-"))], "gated"),
    ([td(run("post-merge")), qa()], "post-merge-only"),
    ([td(run("pre-merge", waived=True)), td(run("gated-multi-gpu"))], "gated"),
    ([td(run("pre-merge", waived=True))], "waived"),
    ([td(run("pre-merge", waived=True)), qa()], "qa-only"),
    ([qa()], "qa-only"),
    ([qa(waived=True)], "waived"),
])
def test_verdict_for(placements: list[Placement], verdict: str) -> None:
    assert verdict_for(placements) == verdict


def test_waive_index_prefixes_and_function_waives() -> None:
    plain, a10 = entry("a.py::t"), entry("a.py::t[x]", 2, gpu="A10")
    idx = WaiveIndex((plain, a10))
    assert idx.matching(entry("a.py::t[x]")) == [a10, plain]  # the function waive covers [x]
    assert idx.matching(entry("a.py::t[y]")) == [plain]
    assert idx.matching(entry("a.py::u")) == []
    assert WaiveIndex.applies(a10, Stage("A10-PyTorch-1", "a10", "c"))
    assert not WaiveIndex.applies(a10, Stage("H100_PCIe-PyTorch-1", "h100", "c"))
    assert not WaiveIndex.applies(a10, None)
    assert WaiveIndex.applies(plain, None)


def test_small_checkout_schedule(tmp_path: Path) -> None:
    idx = load(str(small_checkout(tmp_path, {
        WAIVES: "a.py::TestB::test_b SKIP (https://nvbugs/1)\n"
                "full:A10/a.py::test_a[x=1] SKIP (A10 only)\n",
    })))
    sched = idx.schedule
    # x=1 is waived on A10 but still runs on the 4-GPU stage: gated, not pre-merge
    assert sched.verdict("a.py::test_a[x=1]") == "gated"
    [a10_line, dgx_line] = sched.placements["a.py::test_a[x=1]"]
    assert [r.waived_by[0].gpu_prefix for r in a10_line.runs] == ["A10"]
    assert [(r.stage, r.pr_class, r.waived_by) for r in dgx_line.runs] == [
        ("DGX_H100-4_GPUs-PyTorch-1", "gated-multi-gpu", ())]
    # the two A10 shards split the three pre-merge entries between them, each exactly once
    shards = {n: [e.test for e in ss.entries] for n, ss in sched.stages.items()}
    assert sorted(shards["A10-PyTorch-1"] + shards["A10-PyTorch-2"]) == [
        "a.py::TestB::test_b", "a.py::test_a[x=1]", "a.py::test_a[x=2]"]
    assert shards["A10-PyTorch-Post-Merge-1"] == ["a.py::test_post"]
    assert sched.stages["A10-PyTorch-1"].context_entries == 3
    assert sched.verdict("a.py::test_post") == "post-merge-only"
    assert sched.verdict("a.py::test_qa") == "qa-only"
    assert sched.verdict("no.py::such") == "unscheduled"


def test_unreached_blocks_missing_contexts_and_repeats(tmp_path: Path) -> None:
    idx = load(str(small_checkout(tmp_path, {
        f"{TESTDB}/l0_b200.yml": "l0_b200:\n- condition:\n    terms: {stage: pre_merge}\n"
                                 "  tests:\n  - b.py::t\n  - b.py::t\n",
        STAGES: "stages:\n- {name: A10-PyTorch-1, platform: a10, context: l0_a10}\n"
                "- {name: B200-PyTorch-1, platform: b200, context: l0_b200}\n"
                "- {name: X-PyTorch-1, platform: x, context: l0_missing}\n",
    })))
    sched = idx.schedule
    assert sched.stages["X-PyTorch-1"].missing_context
    assert [(b.context, b.index) for b in sched.unreached_blocks] == [
        ("l0_a10", 1), ("l0_dgx_h100", 0)]
    assert [c.name for c in sched.unreached_contexts] == ["l0_dgx_h100"]
    # pytest runs a repeated id once: the first line gets the run, the second none
    first, second = sched.placements["b.py::t"]
    assert len(first.runs) == 1 and second.runs == ()
    assert [e.test for e in sched.stages["B200-PyTorch-1"].entries] == ["b.py::t"]


def test_placements_mapping(tmp_path: Path) -> None:
    sched = load(str(small_checkout(tmp_path))).schedule
    p = sched.placements
    ids = list(p)
    assert len(p) == len(ids) == len(set(ids))
    assert "a.py::test_qa" in p and "nope" not in p
    assert p.get("nope") is None
    assert p["a.py::test_post"] is p["a.py::test_post"]  # made once
    assert [x.kind for x in p["a.py::test_post"]] == ["test-db", "qa"]
    assert dict(p.items()).keys() == set(ids)
    with pytest.raises(KeyError):
        p["nope"]


def test_canonical_flashinfer_review() -> None:
    """trtllm-ci.md section 9: the review whose first grep missed the post-merge entry."""
    sched = corpus().schedule
    trt, fi = f"{CHUNKED}[attn_backend=TRTLLM]", f"{CHUNKED}[attn_backend=FLASHINFER]"
    assert sched.verdict(trt) == "pre-merge"
    trt_pre = {(p.entry.loc.path.rsplit("/", 1)[-1], r.pr_class)
               for p in sched.placements[trt] for r in p.runs}
    assert ("l0_h100.yml", "pre-merge") in trt_pre
    assert sched.verdict(fi) == "gated"
    lines = {(p.entry.loc.path.rsplit("/", 1)[-1], p.block.stage_term if p.block else None,
              r.pr_class) for p in sched.placements[fi] for r in p.runs}
    assert ("l0_h100.yml", "post_merge", "post-merge") in lines
    assert ("l0_dgx_h100.yml", "pre_merge", "gated-multi-gpu") in lines
    assert not any(cls == "pre-merge" for _, _, cls in lines)
    assert any(p.kind == "qa" for p in sched.placements[fi])
    # the post-merge block of l0_h100 starts well before the pre-merge one's TRTLLM line
    post = next(p for p in sched.placements[fi] if p.context == "l0_h100")
    assert post.block is not None and post.block.stage_term == "post_merge"


def test_each_rendered_entry_runs_in_exactly_one_shard_per_stage_family() -> None:
    idx = corpus()
    families: dict[str, list[str]] = {}
    for s in idx.stages:
        if not s.disabled:
            families.setdefault(re.sub(r"-\d+$", "", s.name), []).append(s.name)
    for family, names in families.items():
        scheds = [idx.schedule.stages[n] for n in names]
        if any(ss.missing_context for ss in scheds) or len(names) != scheds[0].stage.splits:
            continue
        counts = Counter(e.test for ss in scheds for e in ss.entries)
        assert all(c == 1 for c in counts.values()), family
        assert len(counts) == scheds[0].context_entries, family


def test_verdict_counts_cover_every_id() -> None:
    sched = corpus().schedule
    verdicts = Counter(sched.verdict(t) for t in sched.placements)
    assert sum(verdicts.values()) == len(sched.placements)
    assert set(verdicts) <= {"pre-merge", "gated", "post-merge-only", "qa-only", "waived",
                             "unscheduled"}
    assert verdicts["pre-merge"] > 100 and verdicts["qa-only"] > 1000
