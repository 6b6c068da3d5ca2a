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
from testdb.schedule import Placement, StageRun, WaiveIndex, full_waive_applies, verdict_for
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
    ([td(run("gated")), td(run("post-merge-only"))], "gated"),
    ([td(run("post-merge-only")), qa()], "post-merge-only"),
    ([td(run("pre-merge", waived=True)), td(run("gated"))], "gated"),
    ([td(run("pre-merge", waived=True))], "waived"),
    ([td(run("pre-merge", waived=True)), qa()], "qa-only"),
    ([qa()], "qa-only"),
    ([qa(waived=True)], "waived"),
])
def test_verdict_for(placements: list[Placement], verdict: str) -> None:
    assert verdict_for(placements) == verdict


UT = 'unittest/_torch/speculative -k "eagle3"'


def ut(test: str, gpu: str | None = None) -> Entry:
    return Entry(test, SourceLoc("f", 1), "unittest", gpu_prefix=gpu, marker="SKIP")


# CI's apply_waives (tests/integration/defs/test_list_parser.py): `if item.nodeid in
# test_name_to_marker_dict` -- the item's node id must be exactly a waived name.
@pytest.mark.parametrize("waive, listed, waived", [
    (entry("a.py::t[x]"), entry("a.py::t[x]"), True),
    (entry("a.py::t"), entry("a.py::t"), True),
    (entry("a.py::t"), entry("a.py::t[x]"), False),  # a function waive waives no parametrization
    (entry("a.py::C::t"), entry("a.py::C::t[x]"), False),
    (entry("a.py::t[x]"), entry("a.py::t[y]"), False),
    (entry("a.py::t[x]"), entry("a.py::t"), False),
    (entry("a.py"), entry("a.py::t"), False),  # nor does a file
    (ut(UT), ut(UT), True),  # both are test_unittests_v2[<the line>]
    (ut("unittest/_torch/speculative"), ut(UT), False),
], ids=["params", "plain", "function", "class-function", "other-params", "params-vs-plain",
        "file", "unittest", "unittest-other-options"])
def test_waives_match_exact_node_ids(waive: Entry, listed: Entry, waived: bool) -> None:
    assert (WaiveIndex((waive,)).matching(listed) == [waive]) is waived


# parse_test_name with --test-prefix=<stage>: `full:` stripped by str.lstrip, the stage name's
# first `-` token replaced by the stage name wherever it occurs, then compared with the item's
# id `<stage>/<id>`.
@pytest.mark.parametrize("gpu, test, stage, applies", [
    ("A10", "a.py::t", "A10-PyTorch-1", True),
    ("H100_PCIe", "a.py::t", "H100_PCIe-PyTorch-1", True),
    ("DGX_H100", "a.py::t", "DGX_H100-4_GPUs-PyTorch-DeepSeek-1", True),
    ("A10", "a.py::t", "H100_PCIe-PyTorch-1", False),
    ("A100X", "a.py::t", "A10-PyTorch-1", False),  # `A10` occurs, but gives A10-PyTorch-10X/...
    ("H100", "a.py::t", "DGX_H100-4_GPUs-PyTorch-1", False),  # DGX_H100 does not occur in H100
    ("DGX_H100", "a.py::t", "H100-PyTorch-1", False),  # H100 occurs, rewrite gives DGX_H100-...
    ("B200", "a.py::t", "DGX_B200-PyTorch-1", False),
    ("H20-3e", "a.py::t", "H20-3e-PyTorch-1", False),  # the token is H20: H20-3e-PyTorch-1-3e/
    ("A10", "a.py::t[A10]", "A10-PyTorch-1", False),  # the token is also replaced in the id
    ("A10", "test_unittests.py::test_unittests_v2[unittest/x]", "A10-PyTorch-1", True),
], ids=lambda v: v if isinstance(v, str) else None)
def test_full_waive_applies_as_parse_test_name_does(gpu: str, test: str, stage: str,
                                                    applies: bool) -> None:
    assert full_waive_applies(gpu, test, stage) is applies
    waive = Entry(test, SourceLoc("f", 1), "nodeid", gpu_prefix=gpu, marker="SKIP")
    assert WaiveIndex.applies(waive, Stage(stage, "p", "c")) is applies
    assert not WaiveIndex.applies(waive, None)  # a QA run has no stage prefix


def test_plain_waive_applies_everywhere() -> None:
    plain = entry("a.py::t")
    assert WaiveIndex.applies(plain, Stage("A10-PyTorch-1", "a10", "c"))
    assert WaiveIndex.applies(plain, None)


def test_function_waive_leaves_parametrizations_running(tmp_path: Path) -> None:
    """The trap: `a.py::test_a SKIP` looks like it waives test_a[x=1], but CI still runs it."""
    idx = load(str(small_checkout(tmp_path, {
        WAIVES: "a.py::test_a SKIP (reads like a function waive)\n"
                "full:A100X/a.py::test_a[x=2] SKIP (A100X only, not A10)\n"
                "full:A10/a.py::TestB::test_b SKIP (A10 only)\n",
    })))
    sched = idx.schedule
    for test in ("a.py::test_a[x=1]", "a.py::test_a[x=2]"):
        runs = [r for p in sched.placements[test] for r in p.runs]
        assert runs and all(r.waived_by == () for r in runs), test
    assert sched.verdict("a.py::test_a[x=2]") == "pre-merge"
    [b] = sched.placements["a.py::TestB::test_b"]
    assert [(r.stage, r.waived_by[0].gpu_prefix) for r in b.runs] == [
        (r.stage, "A10") for r in b.runs if r.stage.startswith("A10-")]
    assert sched.verdict("a.py::TestB::test_b") == "waived"


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
    assert [(r.stage, r.placement, r.waived_by) for r in dgx_line.runs] == [
        ("DGX_H100-4_GPUs-PyTorch-1", "gated", ())]
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
    trt_pre = {(p.entry.loc.path.rsplit("/", 1)[-1], r.placement)
               for p in sched.placements[trt] for r in p.runs}
    assert ("l0_h100.yml", "pre-merge") in trt_pre
    assert sched.verdict(fi) == "gated"
    lines = {(p.entry.loc.path.rsplit("/", 1)[-1], p.block.stage_term if p.block else None,
              r.placement) for p in sched.placements[fi] for r in p.runs}
    assert ("l0_h100.yml", "post_merge", "post-merge-only") in lines
    assert ("l0_dgx_h100.yml", "pre_merge", "gated") in lines
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


def test_placements_get_and_contains(tmp_path: Path) -> None:
    """``get`` answers as Mapping's would (an audit asks it of thousands of unlisted ids)."""
    placements = load(str(small_checkout(tmp_path, {}))).schedule.placements
    listed = next(iter(placements))
    assert placements.get(listed) == placements[listed] and listed in placements
    assert placements.get("no.py::test_none") is None and "no.py::test_none" not in placements
    assert placements.get("no.py::test_none", ()) == ()
    with pytest.raises(KeyError):
        placements["no.py::test_none"]
