"""promote/demote on copies of the real corpus: minimal diffs, byte-exact round trips, verification,
--create-block, the budget against a hand computation, and the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import auditor.promote as promote_mod
from auditor.promote import SCHEMA, apply_plan, plan_moves
from reports.cli import cli
from testdb.errors import InputError, UsageError
from testdb.index import DURATIONS, STAGES_YAML, TESTDB_DIR, Index, load

DATA = Path(__file__).resolve().parents[2] / "data" / "trtllm"
H100 = f"{TESTDB_DIR}/l0_h100.yml"
FLASHINFER = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::"
              "test_chunked_prefill[attn_backend=FLASHINFER]")
LORA = "examples/test_llama.py::test_llama_3_x_with_bf16_lora_torch[llama-3.2-1b-instruct]"
MEDUSA = "accuracy/test_cli_flow.py::TestVicuna7B::test_medusa[cuda_graph=True]"
NEMOTRON = "examples/test_nemotron.py::test_llm_nemotron_3_8b_1gpu[bfloat16-fp8]"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dest = tmp_path / "trtllm"
    shutil.copytree(DATA, dest)
    return dest


def _load(root: Path) -> Index:
    return load(str(root), use_cache=False)


def _changed(diff: str) -> list[str]:
    return [d for d in diff.splitlines() if d[:1] in "+-" and not d.startswith(("+++", "---"))]


def _line(path: Path, text: str) -> str:
    return next(ln for ln in path.read_text().splitlines() if text in ln)


def test_promote_diff_is_exactly_the_moved_line(root: Path) -> None:
    path = root / H100
    original = path.read_text()
    assert original.splitlines()[217] == f"  - {FLASHINFER}"  # line 218, post_merge block at 201
    index = _load(root)
    plan = plan_moves(index, [FLASHINFER])
    (edit,) = plan.edits
    assert _changed(edit.diff) == [f"+  - {FLASHINFER}", f"-  - {FLASHINFER}"]
    (move,) = plan.moves
    assert (move.source.loc.line, move.target and move.target.loc.line) == (201, 3)
    assert path.read_text() == original  # planning writes nothing
    apply_plan(index, plan)
    assert path.read_text() == edit.new
    after = _load(root)
    (p,) = [p for p in after.schedule.placements[FLASHINFER] if p.context == "l0_h100"]
    assert p.block is not None and p.block.stage_term == "pre_merge" and p.block.loc.line == 3
    assert p.entry.loc.line == 112  # the end of the pre_merge block's list
    assert after.schedule.verdict(FLASHINFER) == "pre-merge"


def test_moved_line_keeps_its_text_and_takes_target_indentation(root: Path) -> None:
    index = _load(root)
    original = _line(root / H100, MEDUSA)
    assert "# 5 mins" in original
    plan = plan_moves(index, [MEDUSA], contexts=["l0_h100"])
    assert _changed(plan.edits[0].diff) == [f"+{original}", f"-{original}"]
    # the ray block indents its list by four spaces: a line moved there takes that indentation
    ray = "unittest/_torch/ray_orchestrator/single_gpu"
    demoted = plan_moves(index, [ray], "demote", create_block=True)
    added = [d for d in _changed(demoted.edits[0].diff) if d.startswith("+")]
    assert added[-1] == f"+    - {ray}" and "      stage: post_merge" in "\n".join(added)


def test_promote_then_demote_restores_bytes_and_mode(root: Path) -> None:
    path = root / H100
    os.chmod(path, 0o640)
    original = path.read_bytes()
    index = _load(root)
    apply_plan(index, plan_moves(index, [LORA]))
    assert path.read_bytes() != original
    assert os.stat(path).st_mode & 0o777 == 0o640
    index = _load(root)
    plan = plan_moves(index, [LORA], "demote")
    assert _changed(plan.edits[0].diff) == [f"-  - {LORA}", f"+  - {LORA}"]
    apply_plan(index, plan)
    assert path.read_bytes() == original
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert not [f for f in os.listdir(path.parent) if f.endswith(".tmp")]


def test_failed_verification_leaves_file_untouched(root: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = root / H100
    original = path.read_bytes()
    index = _load(root)
    plan = plan_moves(index, [FLASHINFER])
    real = promote_mod.load_sources  # type: ignore[attr-defined]

    def broken(*args: object, **kwargs: object) -> Index:
        reloaded = real(*args, **kwargs)  # type: ignore[arg-type]
        # pretend the edit also moved another test of the file to another block
        sched = reloaded.schedule
        lora = [dataclasses.replace(p, block=sched.placements[FLASHINFER][0].block)
                for p in sched.placements[LORA]]
        sched.placements = {**sched.placements, LORA: lora}
        return reloaded

    monkeypatch.setattr(promote_mod, "load_sources", broken)
    with pytest.raises(InputError, match=r"verification failed.*nothing was written"):
        apply_plan(index, plan)
    assert path.read_bytes() == original
    assert not [f for f in os.listdir(path.parent) if f.endswith(".tmp")]


def test_verification_at_planning_refuses_a_wrong_schedule(root: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    index = _load(root)
    real = promote_mod.build_schedule  # type: ignore[attr-defined]

    def broken(ix: Index) -> object:
        sched = real(ix)
        sched.placements = {k: v for k, v in sched.placements.items()  # type: ignore[assignment]
                            if k != LORA}
        return sched

    monkeypatch.setattr(promote_mod, "build_schedule", broken)
    with pytest.raises(InputError, match="verification failed"):
        plan_moves(index, [FLASHINFER])


def test_file_changed_since_planning_is_refused(root: Path) -> None:
    path = root / H100
    index = _load(root)
    plan = plan_moves(index, [FLASHINFER])
    path.write_text(path.read_text() + "# edited meanwhile\n")
    touched = path.read_bytes()
    with pytest.raises(InputError, match="changed since"):
        apply_plan(index, plan)
    assert path.read_bytes() == touched


def test_create_block(root: Path) -> None:
    path = root / H100
    index = _load(root)
    with pytest.raises(UsageError) as err:
        plan_moves(index, ["test_fmha.py::test_fmha"], contexts=["l0_h100"])
    assert f"{H100}:391" in str(err.value) and "--create-block" in str(err.value)
    plan = plan_moves(index, ["test_fmha.py::test_fmha"], contexts=["l0_h100"], create_block=True)
    lines = path.read_text().splitlines(keepends=False)
    copy = lines[390:403]  # `- condition:` (391) .. `  tests:` (403) of the post_merge block
    want = ["+" + ln.replace("post_merge", "pre_merge") for ln in copy]
    assert _changed(plan.edits[0].diff) == want
    assert any("rendered by no stage" in w for w in plan.warnings)
    assert any("left with no tests" in w for w in plan.warnings)
    apply_plan(index, plan)
    ctx = _load(root).contexts["l0_h100"]
    old, new = ctx.blocks[-2], ctx.blocks[-1]
    assert old.stage_term == "post_merge" and old.entries == ()
    assert new.stage_term == "pre_merge"
    assert [e.test for e in new.entries] == ["test_fmha.py::test_fmha"]
    assert new.entries[0].timeout_minutes == 90
    assert promote_mod._same_condition(old.condition, new.condition)


def test_id_in_several_contexts_needs_context(root: Path) -> None:
    index = _load(root)
    with pytest.raises(UsageError, match=r"several contexts.*l0_a10.*l0_h100.*l0_l40s.*--context"):
        plan_moves(index, [NEMOTRON])
    plan = plan_moves(index, [NEMOTRON], contexts=["l0_h100"])
    assert [m.context for m in plan.moves] == ["l0_h100"]
    both = plan_moves(index, [NEMOTRON], contexts=["l0_h100", "l0_a10"])
    assert sorted(m.context for m in both.moves) == ["l0_a10", "l0_h100"]
    assert len(both.edits) == 2


def test_nothing_to_move_is_a_usage_error(root: Path) -> None:
    index = _load(root)
    trtllm = FLASHINFER.replace("FLASHINFER", "TRTLLM")
    with pytest.raises(UsageError, match="no entry of a post_merge test-db block"):
        plan_moves(index, [trtllm])
    with pytest.raises(UsageError, match="no test-db context"):
        plan_moves(index, [FLASHINFER], contexts=["l0_nope"])


# ---- budget -------------------------------------------------------------------------------------

STAGES = """stages:
- {name: DGX_H100-PyTorch-1, platform: dgx-h100, context: l0_h100, split_id: 1, splits: 2}
- {name: DGX_H100-PyTorch-2, platform: dgx-h100, context: l0_h100, split_id: 2, splits: 2}
- {name: DGX_H100-PyTorch-Post-Merge-1, platform: dgx-h100, context: l0_h100, split_id: 1,
   splits: 1}
"""


def _small_root(tmp_path: Path, flashinfer_s: float | None) -> tuple[Path, int]:
    """l0_h100.yml (copied), two pre-merge shards, every pre-merge test at 10 s."""
    root = tmp_path / "small"
    (root / TESTDB_DIR).mkdir(parents=True)
    shutil.copy(DATA / H100, root / H100)
    (root / STAGES_YAML).parent.mkdir(parents=True)
    (root / STAGES_YAML).write_text(STAGES)
    index = load(str(root), use_cache=False)
    pre = {e.test for e in index.contexts["l0_h100"].blocks[0].entries}
    durations = dict.fromkeys(pre, 10.0)
    if flashinfer_s is not None:
        durations[FLASHINFER] = flashinfer_s
    (root / DURATIONS).parent.mkdir(parents=True)
    (root / DURATIONS).write_text(json.dumps(durations))
    return root, len(pre)


def test_budget_against_hand_computation(tmp_path: Path) -> None:
    root, n = _small_root(tmp_path, 600.0)
    assert n > 60
    index = load(str(root), use_cache=False)
    plan = plan_moves(index, [FLASHINFER], budget_minutes=1000)
    (b,) = plan.budget
    assert (b.stage, b.context, b.placement) == ("DGX_H100-PyTorch", "l0_h100", "pre-merge")
    # least_duration, equal items: shards alternate, the first takes the odd one
    before = [10 * math.ceil(n / 2), 10 * (n // 2)]
    # after: the 600 s test opens shard 1; shard 2 takes 60 items to catch up; then alternate
    rest = n - 60
    after = [600 + 10 * math.ceil(rest / 2), 600 + 10 * (rest // 2)]
    assert [s.before_s for s in b.shards] == pytest.approx(before)
    assert [s.after_s for s in b.shards] == pytest.approx(after)
    assert b.growth_s == pytest.approx(max(after) - max(before))
    assert plan.missing_durations == () and plan.warnings == ()
    tight = plan_moves(index, [FLASHINFER], budget_minutes=max(after) / 60 - 0.5)
    assert [w for w in tight.warnings if "past the" in w and "DGX_H100-PyTorch" in w]


def test_budget_calls_out_a_missing_duration(tmp_path: Path) -> None:
    root, n = _small_root(tmp_path, None)
    index = load(str(root), use_cache=False)
    plan = plan_moves(index, [FLASHINFER])
    assert plan.missing_durations == (FLASHINFER,)
    (b,) = plan.budget
    assert b.average_s == pytest.approx(10.0)  # pytest-split's stand-in: the known average
    assert sum(s.after_s for s in b.shards) == pytest.approx(10 * (n + 1))
    result = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "promote", "--dry-run",
                                      FLASHINFER])
    assert result.exit_code == 0, result.output
    assert f"note: {FLASHINFER} has no recorded duration" in result.output


# ---- CLI ----------------------------------------------------------------------------------------

def _cli(root: Path, *args: str, **kw: object) -> object:
    return CliRunner().invoke(cli, ["--root", str(root), "--no-cache", *args],
                              standalone_mode=False, **kw)  # type: ignore[arg-type]


def test_cli_dry_run_changes_nothing(root: Path) -> None:
    path = root / H100
    original, mtime = path.read_bytes(), path.stat().st_mtime_ns
    res = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "promote", "--dry-run",
                                   "*::TestLlama3_1_8BInstruct::test_chunked_prefill"])
    assert res.exit_code == 0, res.output
    assert f"+  - {FLASHINFER}" in res.output and f"-  - {FLASHINFER}" in res.output
    assert "DGX_H100-PyTorch" in res.output and "largest shard" in res.output
    assert "dry run: nothing changed" in res.output
    assert path.read_bytes() == original and path.stat().st_mtime_ns == mtime


def test_cli_json_apply_and_demote(root: Path) -> None:
    path = root / H100
    original = path.read_bytes()
    res = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "promote", "--yes",
                                   "--format", "json", LORA])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["schema"] == SCHEMA == "testdb-audit/promote@1"
    assert data["applied"] is True and data["dry_run"] is False
    (move,) = data["moves"]
    assert move["tests"][0] == {"id": LORA, "verdict_before": "post-merge-only",
                                "verdict_after": "pre-merge"}
    assert move["from"] == {"path": H100, "line": 271, "block_line": 201}
    assert move["to"]["block_line"] == 3 and move["to"]["created_block"] is False
    assert data["budget"]["stages"][0]["stage"] == "DGX_H100-PyTorch"
    assert path.read_bytes() != original
    res = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "demote", "-y", LORA])
    assert res.exit_code == 0, res.output
    assert f"wrote {H100}" in res.output
    assert path.read_bytes() == original


def test_cli_without_yes_asks_or_refuses(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = root / H100
    original = path.read_bytes()
    res = _cli(root, "promote", FLASHINFER)
    assert isinstance(res.exception, UsageError) and "--yes" in str(res.exception)  # type: ignore[attr-defined]
    monkeypatch.setattr("reports.cmd_promote._interactive", lambda: True)
    res = _cli(root, "promote", FLASHINFER, input="n\n")
    assert res.return_value == 1  # type: ignore[attr-defined]
    assert path.read_bytes() == original
    res = _cli(root, "promote", FLASHINFER, input="y\n")
    assert res.return_value == 0  # type: ignore[attr-defined]
    assert path.read_bytes() != original


def test_cli_create_block_error_names_the_block(root: Path) -> None:
    res = _cli(root, "promote", "--context", "l0_h100", "--dry-run", "test_fmha.py::test_fmha")
    assert isinstance(res.exception, UsageError)  # type: ignore[attr-defined]
    assert f"{H100}:391" in str(res.exception) and "--create-block" in str(res.exception)  # type: ignore[attr-defined]
