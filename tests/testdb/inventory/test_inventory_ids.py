"""pytest's id rules, restated in testdb.inventory.ids, against pytest's own IdMaker."""

from __future__ import annotations

import ast

import pytest
from _pytest.compat import ascii_escaped as pytest_ascii_escaped
from _pytest.mark.structures import ParameterSet
from hypothesis import given
from hypothesis import strategies as st

from testdb.inventory.config import StaticConfig
from testdb.inventory.decorators import Layer, classify, idmaker
from testdb.inventory.ids import (
    OPAQUE,
    Named,
    Unknowable,
    ascii_escaped,
    auto_id,
    make_unique,
    py_str,
    value_id,
)
from testdb.inventory.values import module_scope


def pytest_ids(values: list[object], ids: list[object] | None = None,
               argnames: tuple[str, ...] = ("v",)) -> list[str]:
    sets = [ParameterSet((v,), (), None) for v in values]
    maker = idmaker(argnames, sets, None, ids)
    return [str(i) for i in maker.make_unique_parameterset_ids()]


@given(st.lists(st.sampled_from(["a", "a1", "a10", "a1_0", "b", "x0", "x", "1", "", "a0"]),
                max_size=12))
def test_make_unique_matches_idmaker(ids: list[str]) -> None:
    assert make_unique(list(ids)) == pytest_ids(list(ids))


@given(st.text(max_size=12))
def test_ascii_escaped_matches_pytest(text: str) -> None:
    assert ascii_escaped(text) == pytest_ascii_escaped(text)
    assert ascii_escaped(text.encode()) == pytest_ascii_escaped(text.encode())


@pytest.mark.parametrize("value", [
    "s", 7, -3, 2.5, True, False, None, 1j, b"by", "é", "a\tb", "a\\b", "", 1e100,
    [1, 2], (3,), {"k": 1}, Ellipsis,
])
def test_auto_id_matches_idmaker(value: object) -> None:
    assert [auto_id((value,), ("v",), 0)] == pytest_ids([value])


def test_named_values_use_their_name() -> None:
    assert value_id(Named("helper")) == "helper"
    assert py_str(Named("int", builtin_class=True)) == "<class 'int'>"
    with pytest.raises(Unknowable):
        value_id(OPAQUE)
    with pytest.raises(Unknowable):
        py_str([1, OPAQUE])


def test_py_str_renders_literals_like_str() -> None:
    assert py_str([1, "x", None]) == str([1, "x", None])
    assert py_str({"k": (1.5,)}) == str({"k": (1.5,)})


def _layer(src: str, config: StaticConfig | None = None) -> Layer | None:
    tree = ast.parse(src)
    node = tree.body[-1]
    assert isinstance(node, ast.Expr)
    effect = classify(node.value, module_scope(tree), 10**6, config or StaticConfig())
    assert effect.kind == "parametrize"
    return effect.layer


def test_helper_styles_are_configurable() -> None:
    cfg = StaticConfig(helper_styles=(("pwi", "name=value"), ("by_value", "value"),
                                      ("param_alias", "pytest")))
    assert _layer('pwi("a,b", [(1, "x")])', cfg) == Layer(("a=1-b=x",), ((),))
    assert _layer('by_value("a,b", [(1, "x")])', cfg) == Layer(("1-x",), ((),))
    assert _layer('param_alias("a", [[1]])', cfg) == Layer(("a0",), ((),))


def test_unknown_style_is_rejected() -> None:
    with pytest.raises(ValueError, match="id style"):
        StaticConfig(helper_styles=(("x", "fancy"),))


def test_ids_count_mismatch_is_not_guessed() -> None:
    assert _layer('import pytest\npytest.mark.parametrize("v", [1, 2], ids=["a"])') is None


def test_wrong_arity_is_not_guessed() -> None:
    assert _layer('import pytest\npytest.mark.parametrize("a,b", [(1, 2, 3)])') is None
    assert _layer('import pytest\npytest.mark.parametrize(("a", "b"), [1])') is None
