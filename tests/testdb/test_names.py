"""names: a listed name is valid, invalid (with the nearest real ids) or not checked; a table."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testdb.inventory import Inventory, build_static
from testdb.inventory.packed import PackedInventory
from testdb.names import NameChecker, rank_params

SOURCE = '''
import pytest
from defs.conftest import parametrize_with_ids, compute_params

class TestLlama:
    @parametrize_with_ids("cuda_graph", [False, True])
    @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
    def test_auto_dtype(self, attn_backend, cuda_graph):
        pass

    def test_fp8(self):
        pass

    @pytest.mark.parametrize("n", compute_params())
    def test_computed(self, n):
        pass

class TestQwen3_8B:
    @parametrize_with_ids("tp_size", [1, 4])
    def test_fp8(self, tp_size):
        pass

@pytest.mark.parametrize("a", [1, 2])
def test_module_level(a):
    pass
'''
FILE = "accuracy/test_acc.py"
BASE = f"{FILE}::TestLlama::test_auto_dtype"


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> NameChecker:
    root = tmp_path_factory.mktemp("co")
    path = root / "tests" / "integration" / "defs" / FILE
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(SOURCE))
    return NameChecker(build_static(str(root), cache=False))


# (listed id, status, reason contains, the first nearest ids)
CASES = [
    (f"{BASE}[attn_backend=TRTLLM-cuda_graph=False]", "valid", "", []),
    (f"{FILE}::TestLlama::test_fp8", "valid", "", []),
    # a bare name of a parametrized function: its own parametrizations, in source order
    (BASE, "invalid", "is parametrized (4 ids)",
     [f"{BASE}[attn_backend=TRTLLM-cuda_graph=False]",
      f"{BASE}[attn_backend=TRTLLM-cuda_graph=True]",
      f"{BASE}[attn_backend=FLASHINFER-cuda_graph=False]"]),
    # a wrong parameter id: the same function's ids by closeness
    (f"{BASE}[attn_backend=TRTLLM-cuda_graph=None]", "invalid", "no parametrization",
     [f"{BASE}[attn_backend=TRTLLM-cuda_graph=False]",
      f"{BASE}[attn_backend=TRTLLM-cuda_graph=True]",
      f"{BASE}[attn_backend=FLASHINFER-cuda_graph=False]"]),
    (f"{BASE}[cuda_graph=True-attn_backend=FLASHINFER]", "invalid", "no parametrization",
     [f"{BASE}[attn_backend=FLASHINFER-cuda_graph=True]"]),  # pieces in the other order: first
    (f"{FILE}::TestLlama::test_fp8[tp_size=4]", "invalid", "takes no parameters",
     [f"{FILE}::TestLlama::test_fp8"]),
    # a wrong function: the nearest names of the same class, keeping the params
    (f"{FILE}::TestLlama::test_auto_dtypes[attn_backend=FLASHINFER-cuda_graph=True]",
     "invalid", "no test TestLlama::test_auto_dtypes",
     [f"{BASE}[attn_backend=FLASHINFER-cuda_graph=True]"]),
    # a wrong class: the nearest classes that have the function
    (f"{FILE}::TestQwen3_8b::test_fp8[tp_size=4]", "invalid", "no test TestQwen3_8b::test_fp8",
     [f"{FILE}::TestQwen3_8B::test_fp8[tp_size=4]"]),
    (f"{FILE}::test_module_levl[1]", "invalid", "no test test_module_levl",
     [f"{FILE}::test_module_level[1]"]),
    (f"{FILE}::TestNothingLikeIt::test_zzz", "invalid", "no test", []),
    # a class that does not exist, near a real class and function by difflib's ratio alone
    # (QA 12d: TestLagunaXS_2_1::test_fp8_dflash -> TestLlama3_2_1B::test_fp8_prequantized):
    # past CI's edit budget on Class::function, nothing is suggested rather than noise
    (f"{FILE}::TestLlamaXS_2_1::test_fp8_dflash", "invalid", "no test", []),
    (f"{FILE}::TestQwen3_9B::test_fp8_dflash[tp_size=4]", "invalid", "no test", []),
    ("accuracy/test_gone.py::TestX::test_y", "invalid", "no test file accuracy/test_gone.py", []),
    # computed at run time: the inventory cannot say
    (f"{FILE}::TestLlama::test_computed[7]", "not-checked", "computed at run time", []),
    (f"{FILE}::TestLlama::test_computed", "not-checked", "computed at run time", []),
    # other roots, other kinds
    ("unittest/_torch/test_x.py::test_y", "not-checked", "no test sources", []),
    ("unittest/_torch/attention", "not-checked", "not a node id", []),
]


@pytest.mark.parametrize("test_id, status, reason, nearest", CASES,
                         ids=[f"{c[1]}-{n}" for n, c in enumerate(CASES)])
def test_check(checker: NameChecker, test_id: str, status: str, reason: str,
               nearest: list[str]) -> None:
    got = checker.check(test_id)
    assert got.status == status
    assert reason in got.reason
    assert list(got.nearest[:len(nearest)]) == nearest and (nearest or not got.nearest)
    if status == "invalid":
        assert got.reason.startswith("names no test in this checkout; CI ignores it")


def test_a_bare_name_counts_the_rest(checker: NameChecker) -> None:
    assert checker.check(BASE).more == 1


def test_without_sources_nothing_is_checked() -> None:
    checker = NameChecker(Inventory())
    got = checker.check(f"{BASE}[attn_backend=TRTLLM-cuda_graph=False]")
    assert got.status == "not-checked" and got.reason == (
        "not checked against sources: no test sources in this checkout")
    assert not checker.has_sources


@pytest.mark.parametrize("params, candidates, want", [
    ("a=1-b=2", ["a=2-b=3", "a=1-b=3", "a=1-b=2-c=0"], ["a=1-b=2-c=0", "a=1-b=3", "a=2-b=3"]),
    ("b=2-a=1", ["a=1-b=2", "a=1-b=3"], ["a=1-b=2", "a=1-b=3"]),
    ("x", ["completely_different_value"], []),  # too far: no suggestion
    ("tp4-fp8", ["tp8-bf16", "tp4-bf16"], ["tp4-bf16", "tp8-bf16"]),
    ("x", ["y", "x2"], ["x2", "y"]),
    ("5", ["1", "2"], ["1", "2"]),  # a wrong value: the function's own ids still help
])
def test_rank_params(params: str, candidates: list[str], want: list[str]) -> None:
    assert rank_params(params, candidates) == want


@pytest.mark.parametrize("a, b, bound, want", [
    ("kitten", "sitting", 3, 3), ("kitten", "sitting", 2, None), ("", "abc", 3, 3),
    ("abc", "abc", 0, 0), ("test_fp8", "test_fp9", 1, 1), ("ab", "abcdef", 3, None),
    ("TestLagunaXS_2_1::test_fp8_dflash", "TestLlama3_2_1B::test_fp8_prequantized", 6, None),
])
def test_edit_distance(a: str, b: str, bound: int, want: int | None) -> None:
    from testdb.names import edit_distance

    assert edit_distance(a, b, bound) == want
    assert edit_distance(b, a, bound) == want


def test_work_per_name_is_bounded() -> None:
    """Thousands of parametrizations of one function: a wrong id ranks at most
    MAX_CANDIDATES of them and answers from the same function."""
    from testdb.inventory import InventoryItem
    from testdb.names import MAX_CANDIDATES

    base = "t.py::test_big"
    items = [InventoryItem(f"{base}[p{i}-q{i % 7}]", "t.py", 1, "test_big", (), f"p{i}-q{i % 7}")
             for i in range(5 * MAX_CANDIDATES)]
    got = NameChecker(Inventory(items)).check(f"{base}[p3-q9]")
    assert got.status == "invalid" and got.nearest[0] == f"{base}[p3-q3]"



def test_the_fast_path_agrees_with_the_check(checker: NameChecker) -> None:
    for test_id, status, _, _ in CASES:
        assert checker.is_invalid(test_id) is (status == "invalid"), test_id


def test_the_fast_path_reads_ids_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no id of the file is computed at run time, ``is_invalid`` answers from the packed
    inventory's ids (no item built), and still agrees with ``check``."""
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "co" / "tests" / "integration" / "defs" / FILE
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(SOURCE).replace("compute_params()", "[1, 2]"))
    build_static(str(tmp_path / "co"))
    packed = build_static(str(tmp_path / "co"))  # warm: the packed cache form
    assert isinstance(packed, PackedInventory)
    fast = NameChecker(packed)
    assert fast.is_invalid(f"{BASE}[attn_backend=TRTLLM-cuda_graph=False]") is False
    assert not packed._loaded  # answered from the ids
    slow = NameChecker(build_static(str(tmp_path / "co"), cache=False))
    for test_id, *_ in CASES:
        assert fast.is_invalid(test_id) is (slow.check(test_id).status == "invalid"), test_id
