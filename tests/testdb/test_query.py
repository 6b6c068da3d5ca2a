"""`where` patterns: exact id, id without params, Class::function, name, glob."""

from __future__ import annotations

import random

import pytest
from tdb_helpers import DATA, corpus

from testdb.errors import UsageError
from testdb.query import match_ids, where

IDS = [
    "a/test_x.py::TestA::test_f[p=1]",
    "a/test_x.py::TestA::test_f[p=2]",
    "a/test_x.py::TestA::test_fg",
    "a/test_x.py::test_f",
    "b/test_y.py::TestB::test_f[[1]-x]",
    'unittest/_torch/attention -k "a"',
]


@pytest.mark.parametrize("pattern, want", [
    ("a/test_x.py::TestA::test_f[p=1]", [0]),
    ("a/test_x.py::TestA::test_f", [0, 1]),
    ("TestA::test_f", [0, 1]),
    ("test_f", [0, 1, 3, 4]),
    ("test_x.py::test_f", [3]),
    ("TestA::test_f*", [0, 1, 2]),
    ("*::test_f[p=?]", [0, 1]),
    ("*test_f[[1]*", [4]),  # '[' in a glob is a literal, as in the ids themselves
    ("*[p=1]", [0]),
    ("test_?", [0, 1, 3, 4]),
    ("test_f?", [2]),
    ("b/test_y.py::TestB::test_f[[1]-x]", [4]),
    ('unittest/_torch/attention -k "a"', [5]),
    ("unittest/_torch/*", [5]),
    ("  TestA::test_fg  ", [2]),
    ("nothing", []),
    ("est_f", []),  # names match whole parts only
    # a class, a file or a directory names every test in it (QA 7)
    ("TestA", [0, 1, 2]),
    ("a/test_x.py::TestA", [0, 1, 2]),
    ("test_x.py::TestA", [0, 1, 2]),
    ("a/test_x.py", [0, 1, 2, 3]),
    ("test_x.py", [0, 1, 2, 3]),
    ("a/", [0, 1, 2, 3]),
    ("a", [0, 1, 2, 3]),
    ("b", [4]),
    ("unittest/_torch", [5]),
    ("unittest/_torch/", [5]),
    ("TestB", [4]),
    ("estA", []),
    ("x.py", []),
    ("_x.py::TestA", []),
    ("test_x", []),  # a file is named with its .py
    ('"a"', []),  # a -k expression is not a directory
])
def test_match_ids(pattern: str, want: list[int]) -> None:
    assert match_ids(IDS, pattern) == sorted(IDS[i] for i in want)


@pytest.mark.parametrize("pattern", ["", "   "])
def test_empty_pattern(pattern: str) -> None:
    with pytest.raises(UsageError):
        match_ids(IDS, pattern)


def test_where_on_the_corpus() -> None:
    tests = where(corpus(), "TestLlama3_1_8BInstruct::test_chunked_prefill")
    ids = [t.id for t in tests]
    assert ids == sorted(ids) and len(ids) >= 2
    assert all("TestLlama3_1_8BInstruct::test_chunked_prefill[" in i for i in ids)
    by_id = {t.id.rsplit("[", 1)[1]: t for t in tests}
    assert by_id["attn_backend=TRTLLM]"].verdict == "pre-merge"
    assert by_id["attn_backend=FLASHINFER]"].verdict == "gated"
    for t in tests:
        assert t.placements and all(p.entry.test == t.id for p in t.placements)


def test_where_without_match() -> None:
    assert where(corpus(), "no_such_test_anywhere") == []


# ---- `where` against a deliberately simple second reading of the raw files ----------------

@pytest.fixture(scope="module")
def oracle():  # type: ignore[no-untyped-def]
    from where_oracle import Oracle

    return Oracle.read(DATA)


def tool_families(test_id: str) -> set[str]:
    from where_oracle import family

    return {family(r.stage) for p in corpus().schedule.placements.get(test_id, [])
            for r in p.runs}


def test_where_agrees_with_the_oracle_on_200_random_ids(oracle) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(20240607)
    sample = rng.sample(oracle.l0_ids, 150) + rng.sample(sorted(oracle.qa), 50)
    for test_id in sample:
        [found] = [t for t in where(corpus(), test_id) if t.id == test_id]
        assert found.verdict == oracle.verdict(test_id), test_id
        assert tool_families(test_id) == oracle.families.get(test_id, set()), test_id


def test_where_agrees_with_the_oracle_on_every_id(oracle) -> None:  # type: ignore[no-untyped-def]
    sched = corpus().schedule
    ids = set(oracle.l0_ids) | oracle.qa
    assert ids == set(sched.placements)
    wrong = [t for t in sorted(ids) if sched.verdict(t) != oracle.verdict(t)
             or tool_families(t) != oracle.families.get(t, set())]
    assert wrong == []


def test_canonical_check_against_the_oracle(oracle) -> None:  # type: ignore[no-untyped-def]
    base = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
    trt, fi = f"{base}[attn_backend=TRTLLM]", f"{base}[attn_backend=FLASHINFER]"
    assert oracle.verdict(trt) == "pre-merge"
    assert oracle.verdict(fi) == "gated"  # never pre-merge
    got = {t.id: t.verdict for t in where(corpus(), base)}
    assert got[trt] == "pre-merge" and got[fi] == "gated"
    assert "DGX_H100-PyTorch-Post-Merge" in tool_families(fi)
    assert any(f.startswith("DGX_H100-4_GPUs") for f in tool_families(fi))
    assert not any(oracle.family_class[f] == "pre-merge" for f in tool_families(fi))
