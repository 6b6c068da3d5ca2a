"""`audit --bot-command`: the audit judges under the pipeline the PR's `/bot run` starts; the
line it suggests, fed back, leaves no error finding whose guards it names (the closed loop);
the suggestion says what it costs. Real git repositories in temp dirs, the real CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testdb.index import load
from tests.conftest import CORPUS, EXAMPLE, REPO
from tests.gitrepo import git

CREATOR = "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py"
FLASHINFER = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
              "[attn_backend=FLASHINFER]")
OTHERS = "DGX_H100-4_GPUs-PyTorch-Others-1"
DEEPSEEK = ("accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_fp8_block_scales_4gpus"
            "[tp4-mtp_nextn=0-fp8kv=False-attention_dp=False-cuda_graph=False-"
            "overlap_scheduler=False]")
DEEPSEEK_STAGE = "DGX_H100-4_GPUs-PyTorch-DeepSeek-1"
# Linked by path rules; each runs only where its name says (checked in the tests below).
RULES = f"""\
path_rules:
- paths: ['cpp/kernels/fmha_v2/*', 'cpp/other_fmha/*']
  tests: ['test_fmha.py::test_fmha']
- paths: ['cpp/deep/*', 'docker/common/*']
  tests: ['{DEEPSEEK}']
- paths: ['tensorrt_llm/_torch/*.cu']
  tests: ['test_cpp.py::test_unit_tests[batch_manager-80]']
"""



def commit(repo: Path, message: str = "change") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def new_repo(src: str, dest: Path, extra: dict[str, str] | None = None) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    for rel, text in (extra or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    git(dest, "init", "-q", "-b", "main")
    commit(dest, "base")
    return dest


def change(repo: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit(repo)
    return repo


def edit(repo: Path, rel: str, old: str, new: str) -> None:
    text = (repo / rel).read_text()
    assert old in text, f"{old!r} not in {rel}"
    (repo / rel).write_text(text.replace(old, new))


Run = Callable[..., Any]


def audit(run_cli: Run, root: Path | str, args: list[str], bot: str | None = None
          ) -> dict[str, Any]:
    extra = ["--bot-command", bot] if bot is not None else []
    res = run_cli("--root", str(root), "audit", *args, "--format", "json", *extra)
    assert res.code in (0, 1), res.err
    data: dict[str, Any] = json.loads(res.out)
    return data


GIT_RANGE = ["--base", "HEAD~1", "--head", "HEAD"]


@pytest.fixture
def corpus_repo(tmp_path: Path) -> Path:
    """The bundled TensorRT-LLM test plan as a git checkout, with path rules to its tests."""
    return new_repo(CORPUS, tmp_path / "trtllm", {"ci/audit-rules.yml": RULES})


@pytest.fixture
def example_repo(tmp_path: Path) -> Path:
    return new_repo(EXAMPLE, tmp_path / "example")


def behaviour(data: dict[str, Any], path: str) -> dict[str, Any]:
    return next(b for b in data["behaviours"] if b["path"] == path)


# ---- judging under the command -------------------------------------------------------------

def test_the_command_is_judged_and_recorded(run_cli: Run) -> None:
    diff = ["--diff", f"{EXAMPLE}/pr-no-thin-guard.diff"]
    plain = audit(run_cli, EXAMPLE, diff)
    assert plain["summary"]["errors"] == 1 and plain["provenance"]["bot_command"] is None
    cmd = f'/bot run --extra-stage "{OTHERS}"'
    data = audit(run_cli, EXAMPLE, diff, cmd)
    assert data["provenance"]["bot_command"] == cmd
    assert data["pipeline"]["started"][OTHERS] == f"--extra-stage {OTHERS}"
    assert data["summary"]["errors"] == 0 and data["suggestion"] == {}
    guard = next(g for gs in data["behaviours"][0]["guards"].values() for g in gs
                 if g["test_id"] == FLASHINFER)
    assert (guard["verdict"], guard["effective"]) == ("gated", "pre-merge")
    run = next(r for r in guard["runs"] if r["stage"] == OTHERS)
    assert run["started"] and run["placement"] == "gated"


def test_a_command_that_starts_the_wrong_stage_stays_red(run_cli: Run) -> None:
    data = audit(run_cli, EXAMPLE, ["--diff", f"{EXAMPLE}/pr-no-thin-guard.diff"],
                 '/bot run --extra-stage "DGX_A100-PyTorch-Post-Merge-1"')
    assert data["summary"]["errors"] == 1  # the A100 stage renders none of its guards


def test_a_stage_list_without_the_base_stage_is_not_green(run_cli: Run) -> None:
    """The example's only pre-merge guards are unit tests in DGX_H100-PyTorch-1; a
    --stage-list that leaves it out must not count them."""
    diff = ["--diff", f"{EXAMPLE}/pr.diff"]
    assert audit(run_cli, EXAMPLE, diff)["summary"]["errors"] == 0
    data = audit(run_cli, EXAMPLE, diff, '/bot run --stage-list "DGX_H100-PyTorch-2"')
    assert data["summary"]["errors"] == 1
    b = data["behaviours"][0]
    assert b["verdict"] != "pre-merge" and b["pre_merge_guards"] == []
    unit = next(g for gs in b["guards"].values() for g in gs
                if g["test_id"].startswith("unittest/"))
    assert unit["verdict"] == "pre-merge" and unit["effective"] == "gated"
    [run] = [r for r in unit["runs"] if r["stage"] == "DGX_H100-PyTorch-1"]
    assert not run["started"] and run["why"] == "not in --stage-list"


def test_a_pytorch_only_change_does_not_run_cpp_stages(run_cli: Run, corpus_repo: Path) -> None:
    """only_one_group_changed: every changed file under tensorrt_llm/_torch/ drops the -CPP-
    stages, so a guard listed only in A30-CPP-1 (a base-set stage) does not guard it."""
    change(corpus_repo, {"tensorrt_llm/_torch/kernel.cu": "// x\n"})
    data = audit(run_cli, corpus_repo, GIT_RANGE)
    assert data["gates"]["only_one_group_changed"] == "PyTorch"
    b = behaviour(data, "tensorrt_llm/_torch/kernel.cu")
    assert b["verdict"] == "gated" and data["summary"]["errors"] == 1
    [g] = b["guards"]["path-rule"]
    [run] = g["runs"]
    assert (run["stage"], run["placement"], run["started"]) == ("A30-CPP-1", "pre-merge", False)
    assert run["why"].startswith("only PyTorch files changed")
    # one more file outside the group: the group rule is off and A30-CPP-1 runs
    change(corpus_repo, {"tensorrt_llm/_torch/kernel.cu": "// y\n", "setup.cfg": "[x]\n"})
    assert behaviour(audit(run_cli, corpus_repo, GIT_RANGE),
                     "tensorrt_llm/_torch/kernel.cu")["verdict"] == "pre-merge"


def test_an_auto_trigger_tag_pulls_a_post_merge_stage_into_the_pr(run_cli: Run,
                                                                  corpus_repo: Path) -> None:
    change(corpus_repo, {"cpp/kernels/fmha_v2/fmha.cu": "// x\n"})
    data = audit(run_cli, corpus_repo, GIT_RANGE)
    assert data["gates"]["auto_trigger_tags"] == ["-FMHA-"]
    b = behaviour(data, "cpp/kernels/fmha_v2/fmha.cu")
    assert b["verdict"] == "pre-merge" and data["summary"]["errors"] == 0
    runs = b["guards"]["path-rule"][0]["runs"]
    assert {r["placement"] for r in runs} == {"gated"}  # Post-Merge stages a tag opens
    assert all(r["started"] and "-FMHA- opened by cpp/kernels/fmha_v2/fmha.cu" in r["why"]
               for r in runs)


def test_the_multi_gpu_path_list_opens_a_tagged_stage(run_cli: Run, corpus_repo: Path) -> None:
    """DGX_H100-4_GPUs-PyTorch-DeepSeek-1 opens by the path list as well as by its tag."""
    change(corpus_repo, {"cpp/deep/k.cu": "// x\n"})
    assert behaviour(audit(run_cli, corpus_repo, GIT_RANGE), "cpp/deep/k.cu")["verdict"] == \
        "gated"
    change(corpus_repo, {"docker/common/install_ucx.sh": "# x\n"})  # on the multi-GPU list
    data = audit(run_cli, corpus_repo, GIT_RANGE)
    assert data["gates"]["multi_gpu"] is True and data["gates"]["auto_trigger_tags"] == []
    b = behaviour(data, "docker/common/install_ucx.sh")
    assert b["verdict"] == "pre-merge"
    [run] = b["guards"]["path-rule"][0]["runs"]
    assert run["stage"] == DEEPSEEK_STAGE and run["why"].startswith("multi-GPU path list")


@pytest.mark.parametrize("cmd, words", [
    ("/bot run --add-multi-gpu", "column 10: unknown flag --add-multi-gpu"),
    ('/bot run --extra-stage "A10-PyTorch-1', 'column 24: unbalanced "'),
    ("/bot run --extra-stage NOPE-1", "--extra-stage names no stage of the stage table: NOPE-1"),
    ("/bot skip --comment x", "column 1: expected `/bot run`"),
    ("/bot run --test-backend tensorrt", "'tensorrt' is no backend"),
])
def test_a_command_the_bot_rejects_is_exit_2(run_cli: Run, cmd: str, words: str) -> None:
    res = run_cli("--root", EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr.diff",
                  "--bot-command", cmd)
    assert res.code == 2 and "Traceback" not in res.err
    assert res.err.startswith("error: --bot-command: ") and words in res.err


# ---- the cost of the suggestion ------------------------------------------------------------

def test_suggestion_cost_in_gpu_minutes_and_no_multi_gpu_flag(run_cli: Run,
                                                              corpus_repo: Path) -> None:
    """The DeepSeek guard runs in one 4-GPU shard: its cost is 4 x its minutes. The
    --add-multi-gpu-test flag starts every multi-GPU stage, so naming the one shard never
    costs more: the flag is no candidate (auditor.suggest)."""
    change(corpus_repo, {"cpp/deep/k.cu": "// x\n"})
    data = audit(run_cli, corpus_repo, GIT_RANGE)
    sug = data["suggestion"]
    index = load(str(corpus_repo))
    minutes = round(index.schedule.stages[DEEPSEEK_STAGE].duration_s / 60, 1)
    assert sug["command"] == f'/bot run --extra-stage "{DEEPSEEK_STAGE}"'
    assert sug["stages"] == [{"stage": DEEPSEEK_STAGE, "minutes": minutes,
                              "tests": len(index.schedule.stages[DEEPSEEK_STAGE].entries),
                              "timed": sug["stages"][0]["timed"], "gpus": 4, "nodes": 1,
                              "gpu_minutes": round(4 * minutes, 1)}]
    assert (sug["shards"], sug["minutes"], sug["wall_minutes"]) == (1, minutes, minutes)
    assert sug["gpu_minutes"] == round(4 * minutes, 1) and sug["exact"] is True
    assert "alternative" not in sug and "--add-multi-gpu-test" not in json.dumps(sug)
    res = run_cli("--root", str(corpus_repo), "comment", *GIT_RANGE)
    assert (f"1 extra shard, ~{4 * minutes:g} GPU-min, ~{minutes:g} min wall: "
            f"{DEEPSEEK_STAGE} (4 GPUs x ~{minutes:g} min)") in res.out


def test_unknown_durations_use_pytest_splits_average(run_cli: Run, tmp_path: Path) -> None:
    """A shard whose tests have no recorded duration costs the average of the known ones."""
    root = new_repo(EXAMPLE, tmp_path / "ex")
    durations = root / "tests/integration/defs/.test_durations"
    known = {FLASHINFER.replace("FLASHINFER", "TRTLLM"): 600.0, "x.py::test_other": 1200.0}
    durations.write_text(json.dumps(known))
    commit(root, "durations")
    git(root, "apply", f"{EXAMPLE}/pr-no-thin-guard.diff")
    commit(root)
    data = audit(run_cli, root, GIT_RANGE)
    [row] = data["suggestion"]["stages"]
    ss = load(str(root)).schedule.stages[row["stage"]]
    assert row["timed"] < row["tests"] == len(ss.entries)
    # every item of the shard counts the mean of the known durations among its own items
    ids = [e.test for e in ss.entries]
    mean = sum(known[i] for i in ids if i in known) / max(1, sum(i in known for i in ids))
    expect = sum(known.get(i, mean if mean else 1.0) for i in ids) / 60
    assert row["minutes"] == round(expect, 1)


def test_launch_bot_follows_the_audits_pipeline(run_cli: Run, tmp_path: Path) -> None:
    smoke = str(Path(REPO, "examples", "gpu-smoke"))
    out = tmp_path / "audit.json"
    cmd = "/bot run --disable-fail-fast --extra-stage DGX_H200-PyTorch-Post-Merge-1"
    res = run_cli("--root", smoke, "audit", "--diff", f"{smoke}/pr.diff", "--bot-command", cmd,
                  "-o", str(out))
    assert res.code == 1  # the 2-GPU guard still runs only post-merge
    res = run_cli("--root", smoke, "launch", "--from", str(out), "--backend", "bot")
    assert res.code == 0, res.err
    # the audit's own flags and stages stay; the stage its pipeline lacks is added
    assert res.out.strip() == ('/bot run --extra-stage "DGX_H200-PyTorch-Post-Merge-1, '
                               'DGX_H200-2_GPUs-PyTorch-Post-Merge-1" --disable-fail-fast')
    again = audit(run_cli, smoke, ["--diff", f"{smoke}/pr.diff"], res.out.strip())
    assert again["summary"]["errors"] == 0


# ---- the closed loop -----------------------------------------------------------------------

def closed_loop(run_cli: Run, root: Path | str, args: list[str],
                bot: str | None = None) -> dict[str, Any]:
    """Feed the suggested line (and its runner-up) back: no error finding may still name
    a guard of the error findings it starts, and nothing is left to suggest."""
    first = audit(run_cli, root, args, bot)
    sug = first["suggestion"]
    errors = [f for f in first["findings"] if f["severity"] == "error" and f["stages"]]
    if not sug:
        assert errors == [], "an error finding with stages and no suggestion"
        return first
    for line in [sug["command"], *([sug["runner_up"]["command"]]
                                   if sug.get("runner_up") else [])]:
        again = audit(run_cli, root, args, line)
        starts = set(again["pipeline"]["started"])
        assert all(set(f["stages"]) & starts for f in errors), "a finding it does not start"
        named = {g for f in errors for g in f["guards"]}
        left = [f for f in again["findings"]
                if f["severity"] == "error" and set(f["guards"]) & named]
        assert left == [], (line, left)
        assert again["suggestion"] == {}, (line, again["suggestion"])
        assert again["provenance"]["bot_command"] == line
    return first


def _examples() -> list[tuple[str, str]]:
    out = []
    for root in sorted(Path(REPO, "examples").iterdir()):
        out += [(str(root), str(d)) for d in sorted(root.glob("*.diff"))]
    return out


@pytest.mark.parametrize("root, diff", _examples(),
                         ids=[f"{Path(r).name}/{Path(d).name}" for r, d in _examples()])
def test_closed_loop_on_every_bundled_example(run_cli: Run, root: str, diff: str) -> None:
    first = closed_loop(run_cli, root, ["--diff", diff])
    assert first["suggestion"], "each bundled example misses a guard before merge"


def _multi_gpu_gate(repo: Path) -> None:  # test_audit.py: the change that opens the gate
    edit(repo, CREATOR, "if attn_backend in (AttentionBackend.FLASHINFER,\n"
         "                        AttentionBackend.FLASHINFER_STAR_ATTENTION):",
         "if attn_backend == AttentionBackend.FLASHINFER_STAR_ATTENTION:")


def _path_rule_cpp(repo: Path) -> None:  # test_audit.py: a C++ file a path rule links
    (repo / "ci/audit-rules.yml").write_text(
        "path_rules:\n- paths: ['cpp/kernels/*flashinfer*']\n"
        "  tests: ['test_chunked_prefill[attn_backend=FLASHINFER]']\n")
    commit(repo, "rules")
    (repo / "cpp/kernels").mkdir(parents=True)
    (repo / "cpp/kernels/flashinfer.cu").write_text("__global__ void k() {}\n")


def _parameter(repo: Path) -> None:  # test_audit.py: a parametrization the change names
    edit(repo, CREATOR, "if attn_backend in (AttentionBackend.FLASHINFER,",
         "if attn_backend in (AttentionBackend.FLASHINFER, AttentionBackend.TRTLLM,")


def _moved_to_post_merge(repo: Path) -> None:  # test_audit.py: a list line demoted
    path = "tests/integration/test_lists/test-db/l0_h100.yml"
    line = ("  - accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16"
            "[attn_backend=TRTLLM-torch_compile=True]\n")
    text = (repo / path).read_text().replace(line, "")
    (repo / path).write_text(text.replace("  # ------------- PyTorch tests ---------------\n",
                                          "  # PyTorch\n" + line, 1))


def _cpp_file_unlinked(repo: Path) -> None:  # test_audit.py: a C++ file nothing links
    (repo / "cpp").mkdir()
    (repo / "cpp/kernel.cu").write_text("__global__ void k() {}\n")


EXAMPLE_SCENARIOS = {"multi-gpu-gate": _multi_gpu_gate, "path-rule-cpp": _path_rule_cpp,
                     "parameter": _parameter, "moved-to-post-merge": _moved_to_post_merge,
                     "cpp-unlinked": _cpp_file_unlinked}


@pytest.mark.parametrize("name", sorted(EXAMPLE_SCENARIOS))
@pytest.mark.parametrize("bot", [None, "/bot run --disable-multi-gpu-test --debug"])
def test_closed_loop_on_the_audit_scenarios(run_cli: Run, example_repo: Path, name: str,
                                            bot: str | None) -> None:
    EXAMPLE_SCENARIOS[name](example_repo)
    commit(example_repo)
    first = closed_loop(run_cli, example_repo, GIT_RANGE, bot)
    assert bool(first["suggestion"]) == (name in ("multi-gpu-gate", "path-rule-cpp"))
    if bot and first["suggestion"]:
        # the PR's own flags stay in the line it is told to post
        assert "--disable-multi-gpu-test --debug" in first["suggestion"]["command"]


CORPUS_SCENARIOS = {
    "fmha-tag-opens": {"cpp/kernels/fmha_v2/a.cu": "// x\n"},
    "fmha-post-merge-only": {"cpp/other_fmha/a.cu": "// x\n"},
    "deepseek-4-gpu": {"cpp/deep/k.cu": "// x\n"},
    "multi-gpu-path": {"docker/common/install_nixl.sh": "# x\n"},
    "pytorch-only-drops-cpp": {"tensorrt_llm/_torch/kernel.cu": "// x\n"},
    "two-findings": {"cpp/deep/k.cu": "// x\n", "cpp/other_fmha/a.cu": "// x\n"},
}


@pytest.mark.parametrize("name", sorted(CORPUS_SCENARIOS))
@pytest.mark.parametrize("bot", [None, '/bot run --gpu-type "A10, A30"'])
def test_closed_loop_on_the_corpus(run_cli: Run, corpus_repo: Path, name: str,
                                   bot: str | None) -> None:
    change(corpus_repo, CORPUS_SCENARIOS[name])
    first = closed_loop(run_cli, corpus_repo, GIT_RANGE, bot)
    # --gpu-type "A10, A30" drops the stages that guard the others; a tag or the path list
    # starts the guards of these two on a plain /bot run
    guarded = {"fmha-tag-opens", "multi-gpu-path"} if bot is None else set()
    assert bool(first["suggestion"]) == (name not in guarded)
