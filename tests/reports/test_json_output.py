"""dump_json: indented JSON, and the inlined form the audit uses for large documents."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reports.common import dump_json

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=30)


@given(documents, st.integers(min_value=0, max_value=6))
def test_inlined_json_is_the_same_document(doc: object, depth: int) -> None:
    assert json.loads(dump_json(doc, inline_depth=depth)) == doc


@pytest.mark.parametrize("depth, lines", [
    (0, ['{"a": [{"b": [1, 2]}, "ü"], "c": {}}']),
    (1, ["{", '  "a": [{"b": [1, 2]}, "ü"],', '  "c": {}', "}"]),
    (2, ["{", '  "a": [', '    {"b": [1, 2]},', '    "ü"', "  ],", '  "c": {}', "}"]),
])
def test_values_at_the_depth_are_one_line_each(depth: int, lines: list[str]) -> None:
    assert dump_json({"a": [{"b": [1, 2]}, "ü"], "c": {}}, inline_depth=depth).split("\n") == lines


def test_without_a_depth_it_is_plain_indented_json() -> None:
    doc = {"a": [1, {"b": None}], "ü": "é"}
    assert dump_json(doc) == json.dumps(doc, indent=2, ensure_ascii=False)
