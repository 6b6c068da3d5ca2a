"""Evidence records: the parameter tier's ranks, one link per test, and the parameter name of a
bare id piece read from the test's own decorators."""

from __future__ import annotations

import ast

import pytest

from auditor.candidates import parametrized_name
from auditor.evidence import Evidence, parameter_rank, strongest


@pytest.mark.parametrize(("name_on_lines", "reaches_unit", "rank"), [
    (True, True, 1), (True, False, 1), (False, True, 2), (False, False, 3)])
def test_parameter_rank(name_on_lines: bool, reaches_unit: bool, rank: int) -> None:
    assert parameter_rank(name_on_lines, reaches_unit) == rank


def test_strongest_keeps_one_link_per_test() -> None:
    ev = [Evidence("b", "parameter", 3, "value only"), Evidence("a", "parameter", 3, "x"),
          Evidence("b", "parameter", 1, "name too"), Evidence("b", "parameter", 2, "reach")]
    assert [(e.test_id, e.rank) for e in strongest(ev)] == [("a", 3), ("b", 1)]


SOURCE = '''
import pytest
from defs.conftest import parametrize_with_ids

@pytest.mark.parametrize("attn_backend", ["FLASHINFER", "FLASHINFER_STAR_ATTENTION"])
def test_one(attn_backend): ...

@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("backend", ["TRTLLM", "FLASHINFER"])
def test_two(backend, tp): ...

@pytest.mark.parametrize("a,b", [("FLASHINFER", 1)])
def test_pairs(a, b): ...

@pytest.mark.parametrize(["kind"], [BACKENDS])
def test_computed(kind): ...

@pytest.mark.parametrize("x", ["FLASHINFER"])
@pytest.mark.parametrize("y", ["FLASHINFER"])
def test_both(x, y): ...

@pytest.mark.parametrize("mode", ["FAST"])
class TestK:
    def test_m(self, mode): ...

def test_plain(): ...
'''


@pytest.mark.parametrize(("qualname", "value", "name"), [
    ("test_one", "FLASHINFER", "attn_backend"),  # the example's unit test
    ("test_two", "FLASHINFER", "backend"),  # the one decorator listing the value
    ("test_pairs", "FLASHINFER", None),  # two names in one decorator: not told apart
    ("test_computed", "FLASHINFER", "kind"),  # values computed, but one name only
    ("test_both", "FLASHINFER", None),  # two decorators list it
    ("TestK.test_m", "FAST", "mode"),  # a class-level parametrize
    ("test_plain", "FLASHINFER", None),
    ("test_missing", "FLASHINFER", None),
])
def test_parametrized_name(qualname: str, value: str, name: str | None) -> None:
    assert parametrized_name(ast.parse(SOURCE), qualname.split("."), value) == name
