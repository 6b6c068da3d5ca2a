"""``auditor.candidates.ValueCounts``: the count of one token among the listed ids the
inventory lacks is what counting every value of every id (``value_counts``) says, for
tokens that are values, parts of values, parameter names, across ``=`` and ``-``."""

from __future__ import annotations

import random

import pytest

from auditor.candidates import ValueCounts
from testdb.inventory.model import value_counts

IDS = [
    "a/test_x.py::test_f[FLASHINFER-tp4]",
    "a/test_x.py::test_f[TRTLLM-tp4]",
    "a/test_x.py::test_g[attn_backend=FLASHINFER-tp=2]",
    "a/test_x.py::test_g[tp4-tp4]",  # a piece twice in one id: counted once
    "a/test_x.py::test_plain",
    "a/test_x.py::test_open[FLASHINFER",  # no closing bracket: no parameters
    "[FLASHINFER]",  # a bracket first: no test name, no parameters
    "a/test_y.py::TestC::test_h[FLASH-INFER]",
]


@pytest.mark.parametrize("tok", ["FLASHINFER", "FLASH", "INFER", "tp4", "tp", "tp=2", "2",
                                 "attn_backend", "TRTLLM", "test_f", "", "-", "\0", "x]"])
def test_a_token_counts_as_every_value_counted(tok: str) -> None:
    assert ValueCounts(IDS).count(tok) == value_counts(IDS).get(tok, 0)


def test_random_ids_and_tokens() -> None:
    rnd = random.Random(7)
    words = ["A", "B", "AB", "tp1", "tp", "x=A", "y=B", "=", "A-B"]
    ids = [f"f.py::t{k}[{'-'.join(rnd.choice(words) for _ in range(rnd.randint(1, 4)))}]"
           for k in range(300)]
    counts = value_counts(ids)
    vc = ValueCounts(ids)
    for tok in {*counts, *words, "none", "A-"}:
        assert vc.count(tok) == counts.get(tok, 0), tok
