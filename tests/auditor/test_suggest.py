"""One suggestion, the cheapest by GPU-minutes, for every face (issue 25): a table test per rule
of auditor.suggest, the traps (a cheaper stage that does not run the guard: waived there, the
guard in another shard, a stage no need names, a disabled one) beside the guarded cases, and
the FlashInfer example's line through audit, comment, HTML and launch --backend bot."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from auditor.suggest import (
    Candidate,
    GuardRun,
    Need,
    ShardCost,
    _greedy,
    cheapest_covers,
    choose,
    need_from_runs,
    needs,
    pick,
    rank,
)
from testdb.index import load
from tests.conftest import EXAMPLE
from tests.gitrepo import git

Run = Callable[..., Any]
POST = "DGX_H100-PyTorch-Post-Merge-1"
OTHERS = "DGX_H100-4_GPUs-PyTorch-Others-1"
FLASHINFER = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
              "[attn_backend=FLASHINFER]")
BF16 = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16"
        "[attn_backend=FLASHINFER-torch_compile=False]")


# ---- a need: only stages that run a guard there ---------------------------------------------

@pytest.mark.parametrize("runs, started, replace_all, expect", [
    ([GuardRun("A"), GuardRun("B")], set(), False, {"A", "B"}),
    # the trap: waived there, the guard would not run
    ([GuardRun("A", waived=True), GuardRun("B")], set(), False, {"B"}),
    # QA lists run in release testing: the bot starts none
    ([GuardRun("QA llm_function_core", qa=True), GuardRun("B")], set(), False, {"B"}),
    # already started: nothing to ask for
    ([GuardRun("A"), GuardRun("B")], {"A"}, False, {"B"}),
    # --stage-list replaces the pipeline: a started stage must be named again
    ([GuardRun("A"), GuardRun("B")], {"A"}, True, {"A", "B"}),
    ([GuardRun("A", waived=True)], set(), False, set()),
])
def test_need_from_runs(runs: list[GuardRun], started: set[str], replace_all: bool,
                        expect: set[str]) -> None:
    assert need_from_runs("t", runs, frozenset(started), replace_all).stages == expect


@pytest.mark.parametrize("rows, started, expect", [
    ([("f", "error", ["A", "B"])], set(), [{"A", "B"}]),
    ([("f", "warning", ["A"])], set(), [{"A"}]),
    ([("f", "info", ["A"])], set(), []),  # an info finding asks for nothing
    ([("f", "error", ["A", "B"])], {"A"}, [{"B"}]),
    ([("f", "error", ["A"])], {"A"}, []),  # met already
    ([("f", "error", [])], set(), []),  # no stage runs its guards: nothing the bot can do
])
def test_needs_of_findings(rows: list[tuple[str, str, list[str]]], started: set[str],
                           expect: list[set[str]]) -> None:
    assert [n.stages for n in needs(rows, frozenset(started))] == expect


# ---- the cost of a shard: minutes x GPUs x nodes --------------------------------------------

@pytest.mark.parametrize("minutes, gpus, nodes, expect", [
    (22.6, 4, 1, 90.4),  # the issue's 4-GPU shard
    (23.4, 1, 1, 23.4),
    (30.0, 4, 2, 240.0),  # a two-node stage holds both nodes' GPUs
    (None, 4, 1, None),  # unknown minutes: unknown cost
])
def test_gpu_minutes(minutes: float | None, gpus: int, nodes: int,
                     expect: float | None) -> None:
    got = ShardCost("S", minutes, gpus=gpus, nodes=nodes).gpu_minutes
    assert got == (None if expect is None else pytest.approx(expect))


# ---- ranking: fewest GPU-minutes, then wall minutes, shards, names --------------------------

def _costs(**rows: tuple[float | None, int]) -> dict[str, ShardCost]:
    return {k: ShardCost(k, m, gpus=g) for k, (m, g) in rows.items()}


@pytest.mark.parametrize("wants, costs, best, runner_up", [
    pytest.param([{"O", "P"}], _costs(O=(22.6, 4), P=(23.4, 1)), ["P"], None,
                 id="GPU-minutes, not wall minutes: the 1-GPU post-merge shard"),
    pytest.param([{"A", "B"}], _costs(A=(10, 1), B=(12, 1)), ["A"], ["B"],
                 id="runner-up within 20%"),
    pytest.param([{"A", "B"}], _costs(A=(10, 1), B=(12.5, 1)), ["A"], None,
                 id="runner-up past 20%: not shown"),
    pytest.param([{"A", "C"}, {"B", "C"}], _costs(A=(10, 1), B=(10, 1), C=(15, 1)), ["C"],
                 None, id="one shared stage beats two"),
    pytest.param([{"A", "C"}, {"B", "C"}], _costs(A=(10, 1), B=(10, 1), C=(17, 1)), ["C"],
                 ["A", "B"], id="two stages as the runner-up"),
    pytest.param([{"A", "B"}], _costs(A=(10, 2), B=(20, 1)), ["A"], ["B"],
                 id="equal GPU-minutes: fewer wall minutes first"),
    pytest.param([{"A", "B"}], _costs(A=(None, 1), B=(50, 8)), ["B"], None,
                 id="unknown minutes never beat known ones"),
    pytest.param([{"D", "B"}, {"D", "A"}, {"B", "C"}],
                 _costs(A=(2, 1), B=(5, 1), C=(5, 1), D=(3, 1)), ["A", "B"], ["B", "D"],
                 id="exact, where greedy cost per need would take D+B"),
    # the trap: the cheapest stage of the table runs none of the guards
    pytest.param([{"A"}], _costs(A=(40, 4), Z=(0.1, 1)), ["A"], None,
                 id="TRAP: a cheaper stage no need names is never chosen"),
])
def test_rank_and_pick(wants: list[set[str]], costs: dict[str, ShardCost], best: list[str],
                       runner_up: list[str] | None) -> None:
    ranked, exact = rank([Need(str(i), frozenset(w)) for i, w in enumerate(wants)], costs)
    got_best, got_up = pick(ranked)
    assert exact and got_best is not None
    assert list(got_best.names) == best
    assert (list(got_up.names) if got_up else None) == runner_up
    # every candidate meets every need with stages the needs name
    for c in ranked:
        assert all(set(c.names) & w for w in wants)
        assert set(c.names) <= set().union(*wants)


@pytest.mark.parametrize("wants, kept", [
    # a need whose stages include all of another's is met whenever that one is
    ([{"A"}, {"A", "B"}], [{"A"}]),
    ([{"A", "B"}, {"B", "C"}], [{"A", "B"}, {"B", "C"}]),
    ([{"A", "B"}, {"A", "B"}], [{"A", "B"}]),
    ([{"A", "B", "C"}, {"C"}, {"B", "C"}], [{"C"}]),
])
def test_needs_met_by_another_are_dropped(wants: list[set[str]], kept: list[set[str]]) -> None:
    from auditor.suggest import _minimal

    assert _minimal([frozenset(w) for w in wants]) == [frozenset(k) for k in kept]


def test_the_greedy_case_really_differs() -> None:
    """The exact case above is one where greedy (cost per need met) picks dearer."""
    wants = [frozenset("DB"), frozenset("DA"), frozenset("BC")]
    cost = {"A": 2.0, "B": 5.0, "C": 5.0, "D": 3.0}
    assert _greedy(wants, cost) == {"B", "D"}
    assert cheapest_covers(wants, cost)[0][0] == {"A", "B"}


def test_exact_search_matches_brute_force() -> None:
    """Every small instance: the search's cheapest equals the cheapest of all stage subsets."""
    stages = "ABCD"
    costs = [1.0, 2.0, 3.0, 5.0]
    subsets = [frozenset(c) for r in (1, 2) for c in itertools.combinations(stages, r)]
    checked = 0
    for wants in itertools.combinations(subsets, 3):
        cost = {s: costs[(i * 7 + len(wants[0])) % 4] for i, s in enumerate(stages)}
        (best, *_), exact = cheapest_covers(list(wants), cost)
        brute = min(sum(cost[s] for s in c) for r in range(1, 5)
                    for c in itertools.combinations(stages, r) if all(set(c) & w for w in wants))
        assert exact and sum(cost[s] for s in best) == brute, (wants, cost)
        checked += 1
    assert checked == len(list(itertools.combinations(subsets, 3)))


def test_a_search_past_its_budget_says_so_and_still_meets_every_need() -> None:
    wants = [frozenset({f"S{i}", f"S{i + 1}"}) for i in range(12)]
    cost = {f"S{i}": float(1 + i % 3) for i in range(13)}
    sets, exact = cheapest_covers(wants, cost, budget=3)
    assert not exact and sets and all(w & sets[0] for w in wants)
    assert cheapest_covers(wants, cost)[1]  # the default budget finishes it


@pytest.mark.parametrize("best, second, shown", [(10.0, 12.0, True), (10.0, 12.01, False),
                                                 (10.0, 10.0, True)])
def test_runner_up_threshold(best: float, second: float, shown: bool) -> None:
    a, b = Candidate((ShardCost("A", best),)), Candidate((ShardCost("B", second),))
    assert (pick([a, b])[1] is b) == shown


# ---- a real checkout: the traps end to end ---------------------------------------------------

PCIE = "H100_PCIe-PyTorch-Post-Merge"


def _checkout(tmp_path: Path, waive: bool = False, disabled: bool = False) -> Path:
    """The FlashInfer example plus a 1-GPU post-merge stage split in two shards: the guard's
    shard costs less than DGX_H100-PyTorch-Post-Merge-1 (which runs both tests), the other
    shard less still; ``waive`` waives the guard in the new stage only, ``disabled`` moves
    the new stage to the table's disabled list."""
    root = tmp_path / "ex"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    rows = "".join(
        f"- {{name: {PCIE}-{i}, platform: auto:h100-pcie, context: l0_h100, split_id: {i}, "
        f"splits: 2, gpu_count: 1, node_count: 1}}\n" for i in (1, 2))
    table = (root / "ci/stages.yml").read_text()
    table = (table + "disabled:\n" + rows if disabled
             else table.replace("stages:\n", "stages:\n" + rows))
    (root / "ci/stages.yml").write_text(table)
    durations = root / "tests/integration/defs/.test_durations"
    known = json.loads(durations.read_text())
    known[BF16] = 60.0  # the guard's neighbour in the post-merge block: a short test
    durations.write_text(json.dumps(known))
    if waive:
        with (root / "tests/integration/test_lists/waives.txt").open("a") as f:
            f.write(f"full:H100_PCIe/{FLASHINFER} SKIP (https://nvbugs/1)\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "apply", str(Path(EXAMPLE, "pr.diff")))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "change")
    return root


def _audit(run_cli: Run, root: Path) -> dict[str, Any]:
    res = run_cli("--root", str(root), "audit", "--base", "HEAD~1", "--head", "HEAD",
                  "--format", "json")
    assert res.code in (0, 1), res.err
    data: dict[str, Any] = json.loads(res.out)
    return data


def _shards(root: Path) -> tuple[str, str]:
    """(the new stage's shard that runs the guard, the one that does not)."""
    sched = load(str(root)).schedule
    [guard] = [f"{PCIE}-{i}" for i in (1, 2)
               if FLASHINFER in {e.test for e in sched.stages[f"{PCIE}-{i}"].entries}]
    other = next(f"{PCIE}-{i}" for i in (1, 2) if f"{PCIE}-{i}" != guard)
    assert BF16 in {e.test for e in sched.stages[other].entries}
    assert sched.stages[other].duration_s < sched.stages[guard].duration_s
    return guard, other


def test_guarded_the_cheaper_shard_that_runs_the_guard_is_chosen(run_cli: Run,
                                                                 tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    guard, other = _shards(root)
    sug = _audit(run_cli, root)["suggestion"]
    assert sug["command"] == f'/bot run --extra-stage "{guard}"'
    assert other not in json.dumps(sug)  # TRAP: the other shard is cheaper and runs no guard
    # DGX_H100-PyTorch-Post-Merge-1 runs the guard and its neighbour: within 20%, the runner-up
    assert sug["runner_up"]["command"] == f'/bot run --extra-stage "{POST}"'
    assert sug["gpu_minutes"] < sug["runner_up"]["gpu_minutes"] <= 1.2 * sug["gpu_minutes"]
    # the text and the comment show both, the cheapest first
    rng = ["--base", "HEAD~1", "--head", "HEAD"]
    text = run_cli("--root", str(root), "audit", *rng).out
    assert (f'  /bot run --extra-stage "{guard}"\n    1 extra shard, ~{sug["gpu_minutes"]:g} '
            f"GPU-min") in text
    assert (f'  runner-up, within 20% of its GPU-minutes: /bot run --extra-stage "{POST}"'
            in text)
    comment = run_cli("--root", str(root), "comment", *rng).out
    assert comment.index(f'"{guard}"') < comment.index(
        "or the runner-up, within 20% of its GPU-minutes:") < comment.index(f'"{POST}"')


def test_trap_a_stage_where_the_guard_is_waived_is_never_suggested(run_cli: Run,
                                                                   tmp_path: Path) -> None:
    root = _checkout(tmp_path, waive=True)
    data = _audit(run_cli, root)
    assert data["suggestion"]["command"] == f'/bot run --extra-stage "{POST}"'
    assert PCIE not in json.dumps(data["suggestion"])


def test_trap_a_disabled_stage_is_never_suggested(run_cli: Run, tmp_path: Path) -> None:
    root = _checkout(tmp_path, disabled=True)
    assert all(s.disabled for s in load(str(root)).stages if s.name.startswith(PCIE))
    sug = _audit(run_cli, root)["suggestion"]
    assert sug["command"] == f'/bot run --extra-stage "{POST}"'
    # and choose() itself drops a disabled stage a need might still name (a stale record)
    index = load(str(root))
    assert choose(index, [Need("f", frozenset({f"{PCIE}-1"}))]) == {}


# ---- every face prints the one line ----------------------------------------------------------

def test_every_face_suggests_the_same_cheapest_line(run_cli: Run, tmp_path: Path) -> None:
    """The issue's example: audit and comment said the 4-GPU shard, launch the post-merge
    one. Now all say the 1-GPU post-merge shard (23.4 GPU-min against 4 x 22.6 = 90.4)."""
    args = ["--root", EXAMPLE]
    diff = ["--diff", f"{EXAMPLE}/pr.diff"]
    want = f'/bot run --extra-stage "{POST}"'
    res = run_cli(*args, "audit", *diff, "--format", "json")
    data = json.loads(res.out)
    sug = data["suggestion"]
    assert sug["command"] == want
    assert [(r["stage"], r["gpus"], r["minutes"], r["gpu_minutes"]) for r in sug["stages"]] == [
        (POST, 1, 23.4, 23.4)]
    assert (sug["gpu_minutes"], sug["wall_minutes"]) == (23.4, 23.4)
    assert "runner_up" not in sug  # the 4-GPU shard costs 90.4 GPU-min: far past 20%
    text = run_cli(*args, "audit", *diff).out
    assert f"  {want}\n    1 extra shard, ~23.4 GPU-min, ~23.4 min wall: {POST} (1 GPU x " \
           "~23.4 min)" in text
    assert OTHERS not in text.split("Run the missing guards")[1]
    comment = run_cli(*args, "comment", *diff).out
    assert f"```\n{want}\n```" in comment
    out = tmp_path / "audit.json"
    out.write_text(res.out)
    html = tmp_path / "html"
    assert run_cli(*args, "report", "--html", str(html), "--audit", str(out)).code == 0
    page = (html / "index.html").read_text()
    assert want.replace('"', "&#34;") in page or want.replace('"', "&quot;") in page
    bot = run_cli(*args, "launch", "--from", str(out), "--backend", "bot")
    assert (bot.code, bot.out.strip()) == (0, want), bot.err
    js = json.loads(run_cli(*args, "launch", "--from", str(out), "--backend", "bot",
                            "--format", "json").out)
    assert js["command"] == want and js["stages"] == [POST]
    assert js["suggestion"]["gpu_minutes"] == 23.4
    # a pattern (no audit) asks the same function over the test's own stages
    pat = run_cli(*args, "launch", FLASHINFER, "--backend", "bot")
    assert pat.out.strip() == want, pat.err
