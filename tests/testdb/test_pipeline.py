"""Which stages a PR's pipeline starts (testdb/pipeline.py): launchTestJobs's set logic, a
table per rule, on a stage table of the real corpus's shapes and on the corpus itself."""

from __future__ import annotations

import pytest
from tdb_helpers import corpus

from testdb.botcmd import parse
from testdb.errors import InputError
from testdb.index import Triggers
from testdb.pipeline import (
    effective,
    first_token,
    one_group,
    open_gates,
    pr_stages,
    stage_matches,
    stage_placements,
)
from testdb.stages import Stage

NAMES = [
    "A10-PyTorch-1", "A10-PyTorch-2", "A30-CPP-1", "A10-FMHA-Post-Merge-1",
    "A10-PyTorch-Post-Merge-1", "DGX_H100-4_GPUs-PyTorch-Others-1",
    "DGX_H100-4_GPUs-PyTorch-DeepSeek-1", "DGX_H100-4_GPUs-PyTorch-Post-Merge-1",
    "DGX_H100-4_GPUs-CPP-1", "H100_PCIe-PyTorch-DeepSeek-1", "H100_PCIe-PyTorch-Perf-1",
    "CPU-Generic-x86-1", "A30-Triton-1",
]
STAGES = [Stage(n, "p", "c") for n in NAMES] + [Stage("A10-Old-1", "p", "c", disabled=True)]
TRIGGERS = Triggers(
    multi_gpu_paths=("tensorrt_llm/mapping.py", "cpp/tensorrt_llm/kernels/moe"),
    auto_trigger=(("tensorrt_llm/_torch/models/modeling_deepseekv3.py", ("-DeepSeek-",)),
                  ("cpp/kernels/fmha_v2/", ("-FMHA-",))),
    groups=(("Docs", ("docs/",)), ("PyTorch", ("tensorrt_llm/_torch/", "tests/unittest/_torch/")),
            ("Triton", ("triton_backend/",))))
BASE = {"A10-PyTorch-1", "A10-PyTorch-2", "A30-CPP-1", "H100_PCIe-PyTorch-DeepSeek-1",
        "H100_PCIe-PyTorch-Perf-1", "CPU-Generic-x86-1", "A30-Triton-1"}
MULTI = {"DGX_H100-4_GPUs-PyTorch-Others-1", "DGX_H100-4_GPUs-PyTorch-DeepSeek-1",
         "DGX_H100-4_GPUs-CPP-1"}
POST = {"A10-FMHA-Post-Merge-1", "A10-PyTorch-Post-Merge-1",
        "DGX_H100-4_GPUs-PyTorch-Post-Merge-1"}
OTHER = ["README.txt"]  # a change in no group, opening no gate
DEEPSEEK = "tensorrt_llm/_torch/models/modeling_deepseekv3.py"


def started(paths: list[str], bot: str | None = None) -> set[str]:
    return set(pr_stages(STAGES, TRIGGERS, paths, parse(bot) if bot else None).started)


@pytest.mark.parametrize("paths, expected", [
    # base set: no Post-Merge, no N_GPUs; a single-GPU stage with a tag in its name is in it
    ([], BASE),
    (OTHER, BASE),
    # the multi-GPU path list is a substring test on the joined file list
    (["tensorrt_llm/mapping.py"], BASE | MULTI),
    (["cpp/tensorrt_llm/kernels/moeGemm/x.cu"], BASE | MULTI),
    (["a/tensorrt_llm/mapping.py.bak"], BASE | MULTI),
    # a multi-GPU stage with a tag opens by the tag alone ...
    ([DEEPSEEK, *OTHER], BASE | {"DGX_H100-4_GPUs-PyTorch-DeepSeek-1"}),
    # ... and by the path list alone (the old per-stage class let only the tag open it)
    (["tensorrt_llm/mapping.py", *OTHER], BASE | MULTI),
    # a tag pulls in Post-Merge stages too
    (["cpp/kernels/fmha_v2/fmha.cu"], BASE | {"A10-FMHA-Post-Merge-1"}),
    (["cpp/kernels/fmha_v2"], BASE),  # a prefix test: the directory itself is not under it
])
def test_changed_files(paths: list[str], expected: set[str]) -> None:
    assert started(paths) == expected


def test_disabled_stages_never_start() -> None:
    p = pr_stages(STAGES, TRIGGERS, [], parse('/bot run --stage-list "A10-*"'))
    assert "A10-Old-1" not in p.started and "A10-Old-1" not in p.decisions


@pytest.mark.parametrize("paths, dropped", [
    # one group: PyTorch-only changes drop -CPP- and -FMHA- stages, Triton-only more
    (["tensorrt_llm/_torch/a.py", "tests/unittest/_torch/t.py"], {"A30-CPP-1"}),
    (["triton_backend/x.py"], {"A30-CPP-1", "A10-PyTorch-1", "A10-PyTorch-2",
                               "H100_PCIe-PyTorch-DeepSeek-1", "H100_PCIe-PyTorch-Perf-1"}),
    (["docs/a.rst", "README.md"], BASE),  # Docs: only the doc build runs (and .md counts)
    (["tensorrt_llm/_torch/a.py", "cpp/x.cu"], set()),  # two groups: nothing dropped
])
def test_one_group_changed(paths: list[str], dropped: set[str]) -> None:
    assert started(paths) == BASE - dropped


def test_one_group_drops_a_tagged_stage_the_tag_opened() -> None:
    # modeling_deepseekv3.py is a PyTorch-only change: the tag opens the 4-GPU stage, the
    # group rule then keeps it (it has no -CPP-/-FMHA-) and drops A30-CPP-1.
    assert started([DEEPSEEK]) == (BASE - {"A30-CPP-1"}) | {"DGX_H100-4_GPUs-PyTorch-DeepSeek-1"}


@pytest.mark.parametrize("paths, bot, expected", [
    (OTHER, "/bot run", BASE),
    (OTHER, "/bot run --add-multi-gpu-test", BASE | MULTI),
    (OTHER, "/bot run --disable-fail-fast --detailed-log --debug --reuse-test", BASE),
    (["tensorrt_llm/mapping.py"], "/bot run --disable-multi-gpu-test", BASE),
    # --disable-multi-gpu-test removes a tagged multi-GPU stage the tag opened, too
    ([DEEPSEEK, *OTHER], "/bot run --disable-multi-gpu-test", BASE),
    (OTHER, "/bot run --only-multi-gpu-test", MULTI),
    (OTHER, "/bot run --only-multi-gpu-test --post-merge",
     {"DGX_H100-4_GPUs-PyTorch-Post-Merge-1"}),
    (OTHER, "/bot run --post-merge", BASE | MULTI | POST),
    (OTHER, "/bot run --skip-test", set()),
    (OTHER, "/bot run --skip-test --add-multi-gpu-test", MULTI),  # added after the skip
    (OTHER, '/bot run --gpu-type "A10, A30"', {"A10-PyTorch-1", "A10-PyTorch-2", "A30-CPP-1",
                                               "A30-Triton-1"}),
    (OTHER, "/bot run --gpu-type DGX_H100 --add-multi-gpu-test", MULTI),
    (OTHER, "/bot run --test-backend cpp", {"A30-CPP-1", "CPU-Generic-x86-1"}),
    (OTHER, "/bot run --test-backend PyTorch,triton", BASE - {"A30-CPP-1"}),
    # --test-backend switches the one-group rule off
    (["tensorrt_llm/_torch/a.py"], "/bot run --test-backend cpp,pytorch", BASE - {"A30-Triton-1"}),
    (OTHER, '/bot run --stage-list "A10-PyTorch-Post-Merge-1, A30-CPP-1"',
     {"A10-PyTorch-Post-Merge-1", "A30-CPP-1"}),
    (OTHER, '/bot run --stage-list "DGX_H100-*"', MULTI | {"DGX_H100-4_GPUs-PyTorch-Post-Merge-1"}),
    (OTHER, '/bot run --stage-list "*-DeepSeek-*"', {"H100_PCIe-PyTorch-DeepSeek-1",
                                                     "DGX_H100-4_GPUs-PyTorch-DeepSeek-1"}),
    # --stage-list replaces after every filter; --gpu-type does not narrow it
    (OTHER, "/bot run --gpu-type A30 --stage-list A10-PyTorch-1", {"A10-PyTorch-1"}),
    (OTHER, '/bot run --extra-stage "A10-PyTorch-Post-Merge-1"',
     BASE | {"A10-PyTorch-Post-Merge-1"}),
    (OTHER, '/bot run --extra-stage "*Post-Merge*"', BASE | POST),
    # --extra-stage adds back what a filter took out
    (OTHER, "/bot run --gpu-type A30 --extra-stage A10-PyTorch-1",
     {"A30-CPP-1", "A30-Triton-1", "A10-PyTorch-1"}),
    (OTHER, "/bot run --stage-list A30-CPP-1 --extra-stage A10-PyTorch-1",
     {"A30-CPP-1", "A10-PyTorch-1"}),
])
def test_bot_flags(paths: list[str], bot: str, expected: set[str]) -> None:
    assert started(paths, bot) == expected


@pytest.mark.parametrize("bot, words", [
    ('/bot run --extra-stage "A10-PyTorch-9"', "--extra-stage names no stage"),
    ('/bot run --stage-list "Z*"', "--stage-list names no stage"),
    ("/bot run --extra-stage A10-Old-1", "A10-Old-1"),  # a disabled stage is no stage
    ("/bot run --test-backend tensorrt", "'tensorrt' is no backend"),
])
def test_commands_ci_rejects(bot: str, words: str) -> None:
    with pytest.raises(InputError, match=words):
        pr_stages(STAGES, TRIGGERS, [], parse(bot))


@pytest.mark.parametrize("paths, stage, why", [
    ([], "A10-PyTorch-1", "base set: no Post-Merge and no N_GPUs in the name"),
    ([], "DGX_H100-4_GPUs-PyTorch-Others-1",
     "multi-GPU stage; no changed file is on the multi-GPU path list"),
    ([], "A10-PyTorch-Post-Merge-1", "Post-Merge stage: runs after merge, or on request"),
    (["tensorrt_llm/mapping.py"], "DGX_H100-4_GPUs-CPP-1",
     "multi-GPU path list: 'tensorrt_llm/mapping.py' is in the changed files"),
    (["tensorrt_llm/mapping.py", DEEPSEEK], "DGX_H100-4_GPUs-PyTorch-DeepSeek-1",
     f"multi-GPU path list: 'tensorrt_llm/mapping.py' is in the changed files; "
     f"auto-trigger tag -DeepSeek- opened by {DEEPSEEK}"),
    (["cpp/kernels/fmha_v2/a.cu"], "A10-FMHA-Post-Merge-1",
     "auto-trigger tag -FMHA- opened by cpp/kernels/fmha_v2/a.cu"),
    (["tensorrt_llm/_torch/a.py"], "A30-CPP-1",
     "only PyTorch files changed: stages with -CPP- or -FMHA- are dropped"),
])
def test_every_stage_says_why(paths: list[str], stage: str, why: str) -> None:
    assert pr_stages(STAGES, TRIGGERS, paths).why(stage) == why


def test_bot_reasons() -> None:
    p = pr_stages(STAGES, TRIGGERS, OTHER, parse('/bot run --gpu-type A30 --extra-stage "A10-*-1"'))
    assert p.why("A10-PyTorch-1") == "--extra-stage A10-*-1"
    assert p.why("A10-PyTorch-2") == "--gpu-type A30: another GPU type"
    assert p.decisions["A10-PyTorch-2"].rules == ("gpu-type",)
    assert p.to_json()["bot_command"] == '/bot run --gpu-type A30 --extra-stage "A10-*-1"'


@pytest.mark.parametrize("name, placement", [
    ("A10-PyTorch-1", "pre-merge"),
    ("H100_PCIe-PyTorch-Perf-1", "pre-merge"),
    ("H100_PCIe-PyTorch-DeepSeek-1", "pre-merge"),  # tagged, single-GPU, not post-merge
    ("DGX_H100-4_GPUs-PyTorch-Others-1", "gated"),
    ("DGX_H100-4_GPUs-PyTorch-DeepSeek-1", "gated"),
    ("A10-FMHA-Post-Merge-1", "gated"),  # a tag pulls it into a PR's run
    ("A10-PyTorch-Post-Merge-1", "post-merge-only"),
    ("DGX_H100-4_GPUs-PyTorch-Post-Merge-1", "post-merge-only"),
])
def test_placements_for_a_pr_that_opens_nothing(name: str, placement: str) -> None:
    assert stage_placements(STAGES, TRIGGERS)[name].verdict == placement


def test_placement_reasons_name_every_gate() -> None:
    why = stage_placements(STAGES, TRIGGERS)["DGX_H100-4_GPUs-PyTorch-DeepSeek-1"].why
    assert why == ("gated: multi-GPU path list, auto-trigger tag -DeepSeek-, "
                   "--add-multi-gpu-test")


def test_multi_gpu_stages_are_gated_without_a_path_list() -> None:
    # --add-multi-gpu-test opens them on any PR: gated even where no trigger file is given
    placements = stage_placements(STAGES, Triggers())
    assert {n for n, p in placements.items() if p.verdict == "gated"} == MULTI
    assert placements["DGX_H100-4_GPUs-CPP-1"].why == "gated: --add-multi-gpu-test"


def test_a_probe_of_every_gate_is_no_one_group_change() -> None:
    # every multi-GPU path and tag prefix here is a PyTorch path: the probe must still not
    # count as a PyTorch-only change, or -CPP- multi-GPU stages would read post-merge-only
    triggers = Triggers(("tensorrt_llm/_torch/distributed/",), (), TRIGGERS.groups)
    assert stage_placements(STAGES, triggers)["DGX_H100-4_GPUs-CPP-1"].verdict == "gated"


@pytest.mark.parametrize("placement, started_, verdict", [
    ("pre-merge", True, "pre-merge"),
    ("gated", True, "pre-merge"),
    ("post-merge-only", True, "pre-merge"),
    ("pre-merge", False, "gated"),  # a base-set stage this PR's command or group drops
    ("gated", False, "gated"),
    ("post-merge-only", False, "post-merge-only"),
])
def test_effective_verdict(placement: str, started_: bool, verdict: str) -> None:
    assert effective(placement, started_) == verdict


@pytest.mark.parametrize("name, pattern, hit", [
    ("A10-PyTorch-1", "A10-PyTorch-1", True),
    ("A10-PyTorch-1", "A10-PyTorch", False),
    ("A10-PyTorch-1", "A10-*", True),
    ("A10-PyTorch-1", "*-1", True),
    ("A10-PyTorch-1", "*Torch*", True),
    ("A10-PyTorch-12", "A10-PyTorch-1*", True),
    ("DGX_H100-4_GPUs-PyTorch-1", "DGX_H100-?_GPUs*", False),  # only * is a wildcard
    ("GB200-[x]-1", "GB200-[x]-*", True),  # brackets are literal
])
def test_stage_patterns(name: str, pattern: str, hit: bool) -> None:
    assert stage_matches(name, pattern) is hit


@pytest.mark.parametrize("name, token", [
    ("DGX_H100-4_GPUs-PyTorch-1", "DGX_H100"), ("A10-PyTorch-1", "A10"), ("-x-1", "x")])
def test_gpu_type_token(name: str, token: str) -> None:
    assert first_token(name) == token


def test_gates_of_an_empty_change_are_closed() -> None:
    g = open_gates([], TRIGGERS)
    assert (g.multi_gpu, g.tags, g.group) == (False, (), "")
    assert one_group(["docs/x.rst"], TRIGGERS) == "Docs"


# ---- the bundled corpus --------------------------------------------------------------------

def test_corpus_fmha_change_pulls_post_merge_stages_into_the_pr() -> None:
    idx = corpus()
    p = pr_stages(idx.stages, idx.triggers, ["cpp/kernels/fmha_v2/src/fmha.cu"])
    assert p.starts("A10-FMHA-Post-Merge-1")
    assert p.why("A10-FMHA-Post-Merge-1").startswith("auto-trigger tag -FMHA- opened by")
    plain = pr_stages(idx.stages, idx.triggers, ["cpp/kernels/other.cu"])
    assert set(p.started) - set(plain.started) == {
        "A10-FMHA-Post-Merge-1", "L40S-FMHA-Post-Merge-1", "H100_PCIe-FMHA-Post-Merge-1",
        "DGX_A100-FMHA-Post-Merge-1"}  # pr-triggers.yml derived_active_stage_matches


def test_corpus_deepseek_stage_opens_by_the_path_list_too() -> None:
    idx = corpus()
    p = pr_stages(idx.stages, idx.triggers, ["tensorrt_llm/mapping.py"])
    assert p.starts("DGX_H100-4_GPUs-PyTorch-DeepSeek-1")
    assert not pr_stages(idx.stages, idx.triggers, ["setup.py"]).starts(
        "DGX_H100-4_GPUs-PyTorch-DeepSeek-1")


def test_corpus_placements_match_the_stage_names() -> None:
    """A PR that opens nothing starts exactly the stages without Post-Merge and N_GPUs."""
    idx = corpus()
    placements = stage_placements(idx.stages, idx.triggers)
    for s in idx.stages:
        if s.disabled:
            continue
        if not s.is_post_merge and not s.is_multi_gpu:
            assert placements[s.name].verdict == "pre-merge", s.name
        elif s.is_multi_gpu and not s.is_post_merge:
            assert placements[s.name].verdict == "gated", s.name
        else:
            tagged = any(t in s.name for t in idx.triggers.tags)
            assert placements[s.name].verdict == ("gated" if tagged else "post-merge-only")


# ---- -OnDemand- stages (L0_Test.groovy at aebac710; issue 23, item 2) --------------------------

OD_MULTI, OD_SINGLE = "DGX_H100-4_GPUs-PyTorch-DeepSeek-OnDemand-1", "A10-PyTorch-OnDemand-1"
OD_STAGES = [*STAGES, Stage(OD_MULTI, "p", "c"), Stage(OD_SINGLE, "p", "c")]


@pytest.mark.parametrize(("paths", "bot", "expected"), [
    # TRAP: every automatic path (base set, multi-GPU path list, auto-trigger tag, multi-GPU
    # and post-merge flags) leaves them out: parallelJobsFiltered -= onDemandJobs
    ([], None, set()),
    (["tensorrt_llm/mapping.py"], None, set()),
    ([DEEPSEEK], None, set()),
    (OTHER, "/bot run --add-multi-gpu-test", set()),
    (OTHER, "/bot run --post-merge", set()),
    (OTHER, "/bot run --only-multi-gpu-test --post-merge", set()),
    (OTHER, '/bot run --gpu-type "DGX_H100, A10"', set()),
    # GUARDED: only --stage-list or --extra-stage starts them
    (OTHER, f"/bot run --extra-stage {OD_MULTI}", {OD_MULTI}),
    (OTHER, "/bot run --stage-list *OnDemand*", {OD_MULTI, OD_SINGLE}),
])
def test_on_demand_stages(paths: list[str], bot: str | None, expected: set[str]) -> None:
    p = pr_stages(OD_STAGES, TRIGGERS, paths, parse(bot) if bot else None)
    assert {OD_MULTI, OD_SINGLE} & p.started == expected
    for n in {OD_MULTI, OD_SINGLE} - expected:
        assert p.why(n) == "on demand: only `/bot run --stage-list`/`--extra-stage` starts it"


def test_on_demand_placement_names_its_reason_not_a_flag() -> None:
    placements = stage_placements(OD_STAGES, TRIGGERS)
    for n in (OD_MULTI, OD_SINGLE):
        assert (placements[n].verdict, placements[n].why) == (
            "gated", "on demand: only `/bot run --stage-list`/`--extra-stage` starts it")
    # the other multi-GPU stages stay gated by their flag
    assert "--add-multi-gpu-test" in placements["DGX_H100-4_GPUs-PyTorch-Others-1"].why


def test_the_suggestion_for_an_on_demand_guard_names_the_stage_not_a_flag() -> None:
    from types import SimpleNamespace

    from auditor.model import Finding
    from auditor.suggest import suggest

    index = SimpleNamespace(stages=OD_STAGES, triggers=TRIGGERS, durations={},
                            schedule=SimpleNamespace(stages={}))
    pipe = pr_stages(OD_STAGES, TRIGGERS, OTHER)
    # TRAP: the guard runs only in the on-demand multi-GPU stage: --add-multi-gpu-test would
    # not start it, so neither the suggestion nor its runner-up may offer that flag
    only_od = [Finding("error", "no-pre-merge-guard", "a.py", 1, "m", stages=(OD_MULTI,))]
    got = suggest(index, pipe, only_od)  # type: ignore[arg-type]
    assert got["command"] == f'/bot run --extra-stage "{OD_MULTI}"'
    assert "--add-multi-gpu-test" not in str(got)
    # GUARDED: a guard in an ordinary multi-GPU stage is suggested by that stage's name too
    # (auditor.suggest.choose: naming the needed stages never costs more than the flag)
    multi = [Finding("error", "no-pre-merge-guard", "a.py", 1, "m",
                     stages=("DGX_H100-4_GPUs-PyTorch-Others-1",))]
    got = suggest(index, pipe, multi)  # type: ignore[arg-type]
    assert got["command"] == '/bot run --extra-stage "DGX_H100-4_GPUs-PyTorch-Others-1"'
