"""Run plans and the launch CLI: GPU needs from blocks, CI-shaped commands, the bot command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from auditor.launch.plan import gpu_needs, ids_from_audit, plan
from auditor.suggest import choose, needs_of_tests
from testdb.index import load
from tests.conftest import CORPUS, EXAMPLE

GPU_SMOKE = str(Path(EXAMPLE).parent / "gpu-smoke")
CHUNKED = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
           "[attn_backend=FLASHINFER]")


def test_gpu_needs_from_the_block() -> None:
    index = load(CORPUS)
    placements = index.schedule.placements[CHUNKED]
    by_ctx = {p.context: gpu_needs(p.block) for p in placements if p.kind == "test-db"}
    assert by_ctx == {"l0_h100": (1, "H100"), "l0_dgx_h100": (4, "H100")}


def test_plan_prefers_the_cheapest_non_pre_merge_placement(tmp_path: Path) -> None:
    index = load(CORPUS)
    [row] = plan(index, [(CHUNKED, "gated", "test")], str(tmp_path))
    assert row.item.gpus == 1 and row.item.gpu_type == "H100"
    assert row.item.stages == ("DGX_H100-PyTorch-Post-Merge-1",)
    assert row.item.timeout_minutes == 60 and row.entry.loc.line == 218
    assert row.item.argv[-3:] == (CHUNKED, "--junit-xml", "{junit}")
    # the bot line is the audit's choice (auditor.suggest): the 1-GPU post-merge shard costs
    # fewer GPU-minutes than the 4-GPU one that also runs it
    tests = [(row.item.test_id, (row.entry.test,))]
    sug = choose(index, needs_of_tests(index, tests, frozenset()))
    assert sug["command"] == '/bot run --extra-stage "DGX_H100-PyTorch-Post-Merge-1"'
    # a stage the PR's pipeline already starts is not asked for again
    every = frozenset(r.stage for p in index.schedule.placements[CHUNKED] for r in p.runs)
    assert choose(index, needs_of_tests(index, tests, every)) == {}
    sug = choose(index, needs_of_tests(index, tests, every, replace_all=True), stage_list=True)
    assert sug["command"] == '/bot run --stage-list "DGX_H100-PyTorch-Post-Merge-1"'


def test_trtllm_checkout_gets_ci_shaped_command(tmp_path: Path) -> None:
    root = tmp_path / "co"
    shutil.copytree(CORPUS, root)
    defs = root / "tests/integration/defs"
    (defs / "conftest.py").write_text("def pytest_addoption(parser):\n"
                                      "    parser.addoption('--test-list')\n")
    index = load(str(root), use_cache=False)
    [row] = plan(index, [(CHUNKED, "gated", "test")], str(tmp_path / "run"))
    argv = row.item.argv
    assert row.item.cwd == str(defs)
    assert "--timeout-method=thread" in argv and "--timeout=3600" in argv
    assert any(a.startswith("--test-list=") and a.endswith(".txt") for a in argv)
    assert f"--waives-file={root}/tests/integration/test_lists/waives.txt" in argv


def test_ids_from_audit_takes_only_guards_not_pre_merge() -> None:
    data = json.loads((Path(__file__).parents[1] / "reports/fixtures/flashinfer-audit.json")
                      .read_text())
    ids = ids_from_audit(data)
    assert ids and all(v != "pre-merge" for _, v, _ in ids)


def test_launch_dry_run_and_bot(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    audit = tmp_path / "audit.json"
    res = run_cli("--root", GPU_SMOKE, "audit", "--diff", f"{GPU_SMOKE}/pr.diff", "-o",
                  str(audit))
    assert res.code == 1
    res = run_cli("--root", GPU_SMOKE, "launch", "--from", str(audit), "--dry-run",
                  "--format", "json")
    assert res.code == 0, res.err
    items = {i["test_id"]: i for i in json.loads(res.out)["items"]}
    assert set(items) == {"test_gpu_smoke.py::test_matmul[dtype=bfloat16-size=4096]",
                          "test_gpu_smoke.py::test_nccl_allreduce[world=2]"}
    assert items["test_gpu_smoke.py::test_nccl_allreduce[world=2]"]["gpus"] == 2
    assert items["test_gpu_smoke.py::test_nccl_allreduce[world=2]"]["timeout_minutes"] == 10
    res = run_cli("--root", GPU_SMOKE, "launch", "--from", str(audit), "--backend", "bot")
    assert res.out.strip() == ('/bot run --extra-stage "DGX_H200-2_GPUs-PyTorch-Post-Merge-1, '
                               'DGX_H200-PyTorch-Post-Merge-1"')


def test_launch_local_without_gpus_reports_not_runnable(run_cli, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:  # type: ignore[no-untyped-def]
    """docs/launch.md: when none of the planned tests can run here, the launch exits 1 (a
    guard without a result is no success) and says why; --allow-not-runnable keeps 0. The
    not-runnable reason is in the results either way."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: zero GPUs
    for extra, code in (((), 1), (("--allow-not-runnable",), 0)):
        run_dir = tmp_path / f"run{code}"
        res = run_cli("--root", GPU_SMOKE, "launch", "test_gpu_smoke.py::test_peer_copy",
                      "--run-dir", str(run_dir), "--format", "json", *extra)
        assert res.code == code, res.err
        if code:
            assert "none of the 1 planned tests ran: not runnable here" in res.err
        [r] = json.loads(res.out)["results"]
        assert r["outcome"] == "not-runnable" and "needs 2 GPU(s)" in r["detail"]
        saved = json.loads((run_dir / "results.json").read_text())
        assert saved["results"][0]["outcome"] == "not-runnable"


def test_launch_needs_pattern_or_audit(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--root", GPU_SMOKE, "launch")
    assert res.code == 2 and "PATTERN" in res.err


def test_bot_command_posted_once_on_the_pr(run_cli, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from tests.reports.fake_github import FakeGitHub

    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    token = "ghs_launchTOKEN123"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    with FakeGitHub(token=token, prs={"octo/hello": (7,)}) as gh:
        args = ["--root", GPU_SMOKE, "launch", "test_gpu_smoke.py::test_nccl_allreduce",
                "--backend", "bot", "--post", "--repo", "octo/hello", "--pr", "7",
                "--api-url", gh.url]
        first, second = run_cli(*args), run_cli(*args)
        assert first.code == second.code == 0, first.err
        [comment] = gh.comments("octo/hello", 7)
        assert ('/bot run --extra-stage "DGX_H200-2_GPUs-PyTorch-Post-Merge-1"'
                in comment["body"])
        assert token not in first.out + first.err + second.out + second.err
