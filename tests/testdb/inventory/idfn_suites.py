"""Hand-written test modules with ``parametrize(ids=<callable>)`` in the shapes real suites use.

The first shape is TensorRT-LLM's (``tests/integration/defs/accuracy/test_llm_api_pytorch.py``
at 0179952a: ``ids=lambda x: "" if x == 0 else "enable_configurable_moe"`` under stacked
``parametrize_with_ids`` layers); the rest cover what pytest does with a callable's result.
Written here, imitating the shapes: no repository code is copied.
"""

from __future__ import annotations

# A helper like TensorRT-LLM's parametrize_with_ids (``name=value`` ids), in a conftest.
CONFTEST = '''
import pytest
from _pytest.mark.structures import ParameterSet


def parametrize_with_ids(argnames, argvalues, **kwargs):
    names = [n.strip() for n in argnames.split(",")]
    ids = []
    for case in argvalues:
        if isinstance(case, ParameterSet):
            values = case.values
        elif isinstance(case, (list, tuple)):
            values = case
        else:
            values = (case,)
        ids.append("-".join(f"{n}={v}" for n, v in zip(names, values)))
    return pytest.mark.parametrize(argnames, argvalues, ids=ids, **kwargs)
'''

IDFN = {
    "conftest.py": CONFTEST,
    "__init__.py": "",
    "test_callable_ids.py": '''
import os

import pytest

from conftest import parametrize_with_ids

PREFIX = "pre"
SHORT = lambda v: f"k{v}"


def named(v):
    """A module-level function of the value."""
    if v is None:
        return "none"
    label = f"v{v}"
    return label.upper()


def falls_through(v):
    if v == 1:
        return "one"


class Harness:
    pass


class TestShapes(Harness):
    # the lowest parametrize gives the first id piece: an empty id leaves a leading "-"
    @parametrize_with_ids("mtp", ["disable", "eagle"])
    @pytest.mark.parametrize("tp", [1, 4], ids=["tp1", "tp4"])
    @pytest.mark.parametrize("moe", [0, 1],
                             ids=lambda x: ""
                             if x == 0 else "configurable_moe")
    def test_leading(self, mtp, tp, moe):
        pass

    @pytest.mark.parametrize("moe", [0, 1],
                             ids=lambda x: "" if x == 0 else "configurable_moe")
    @pytest.mark.parametrize("tp", [1, 4], ids=["tp1", "tp4"])
    def test_trailing(self, tp, moe):
        pass

    @pytest.mark.parametrize("a", ["x"])
    @pytest.mark.parametrize("moe", [0, 1], ids=lambda x: "" if x == 0 else "m")
    @pytest.mark.parametrize("b", ["y"])
    def test_middle(self, a, moe, b):
        pass


@pytest.mark.parametrize("x", [0, 1], ids=lambda x: "" if x == 0 else "on")
def test_empty_alone(x):
    pass


@pytest.mark.parametrize("x", [1, 2, 3], ids=lambda x: "same")
def test_duplicates(x):
    pass


@pytest.mark.parametrize("x", [1, 2], ids=lambda x: "v1")
def test_duplicates_digit(x):
    pass


@pytest.mark.parametrize("x", [0, 1, 2, [5]], ids=lambda x: None if x in (2, [5]) else f"n{x}")
def test_none_falls_back(x):
    pass


@pytest.mark.parametrize("x", [1, 2], ids=lambda x: x * 2)
def test_not_a_string(x):
    pass


@pytest.mark.parametrize("x", [1, 2], ids=lambda x: [x])
def test_unsupported_result(x):
    pass


@pytest.mark.parametrize("x", ["a", 3], ids=lambda x: f"{x!r}|{x:>3}|{x!s}")
def test_fstring(x):
    pass


@pytest.mark.parametrize("x", ["a", 1, None], ids=repr)
def test_repr(x):
    pass


@pytest.mark.parametrize("t", [(1, 2), (3, "b")], ids=lambda t: "_".join(map(str, t)))
def test_join_map(t):
    pass


@pytest.mark.parametrize("t", [(1, 2), (3, 4)],
                         ids=lambda t: "x".join(str(v * 10) for v in t if v > 1))
def test_join_generator(t):
    pass


@pytest.mark.parametrize("v", [None, 2, 3], ids=named)
def test_module_function(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=falls_through)
def test_function_returns_none(v):
    pass


@pytest.mark.parametrize("a,b", [(1, "x"), (2, "y")], ids=lambda v: f"<{v}>")
def test_per_value(a, b):
    pass


@pytest.mark.parametrize("v", [pytest.param(1, id="explicit"), 2], ids=lambda v: f"c{v}")
def test_param_id_wins(v):
    pass


@pytest.mark.parametrize("v", ["é", "t"], ids=lambda v: v + "\\t")
def test_escaped(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=lambda v: PREFIX + str(v))
def test_module_constant(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=SHORT)
def test_bound_lambda(v):
    pass


@pytest.mark.parametrize("v", [{"k": "a"}, {"k": "b"}], ids=lambda d: d["k"].upper())
def test_subscript(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=lambda v: "{}-{:02d}".format("n", v))
def test_str_format(v):
    pass


@pytest.mark.parametrize("v", ["y" * 120], ids=lambda v: v)
def test_long_result_kept(v):
    pass


# -- what must stay indeterminate (never guessed) ------------------------------------------
@pytest.mark.parametrize("v", [1, 2], ids=lambda v: os.environ.get("X", str(v)))
def test_reads_environment(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=lambda v: v.__class__.__name__)
def test_attribute_of_value(v):
    pass


@pytest.mark.parametrize("v", [{1, 2}], ids=lambda v: str(v))
def test_set_order(v):
    pass


@pytest.mark.parametrize("v", [Harness], ids=lambda v: str(v))
def test_class_value(v):
    pass
''',
}

# What the scanner must leave open in IDFN, by base id.
IDFN_INDETERMINATE = {
    "test_callable_ids.py::test_reads_environment",
    "test_callable_ids.py::test_attribute_of_value",
    "test_callable_ids.py::test_set_order",
    "test_callable_ids.py::test_class_value",
}

# pytest >= 9.2 gives a long str value's auto id as argname + index; before, the value itself.
LONG_STR = {
    "test_long_str.py": '''
import pytest


@pytest.mark.parametrize("s", ["x" * 101, "y" * 100, "short"])
def test_long(s):
    pass
''',
}

# pytest >= 9.2 takes ``indirect``/``ids`` by keyword only: this module fails collection there.
POSITIONAL_IDS = {
    "test_positional.py": '''
import pytest


@pytest.mark.parametrize("v", [1, 2], False, ["a", "b"])
def test_positional(v):
    pass
''',
}
