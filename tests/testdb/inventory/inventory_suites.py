"""Fixture suites for the inventory tests: small pytest trees, as text, and a writer."""

from __future__ import annotations

import textwrap
from pathlib import Path

# TensorRT-LLM's helper (tests/integration/defs/conftest.py), restated for the suites.
HELPER = '''
import pytest
from _pytest.mark.structures import ParameterSet


def parametrize_with_ids(argnames, argvalues, **kwargs):
    if isinstance(argnames, str):
        argname_list = [n.strip() for n in argnames.split(",")]
    else:
        argname_list = argnames
    case_ids = []
    for case_argvalues in argvalues:
        if isinstance(case_argvalues, ParameterSet):
            case_argvalues = case_argvalues.values
        elif case_argvalues is None or isinstance(case_argvalues, (str, float, int, bool)):
            case_argvalues = (case_argvalues,)
        assert len(case_argvalues) == len(argname_list)
        case_id = [f"{name}={value}" for name, value in zip(argname_list, case_argvalues)]
        case_ids.append("-".join(case_id))
    return pytest.mark.parametrize(argnames, argvalues, ids=case_ids, **kwargs)
'''

PYTEST_INI = """[pytest]
markers =
    part0
    part1
    part2
    part3
    gpu2
    gpu4
    slow
    skip_less_device
    cpu_only
"""

# Integration-style suite: ids relative to its root (like tests/integration/defs).
DEFS: dict[str, str] = {
    "pytest.ini": PYTEST_INI,
    "conftest.py": HELPER,
    "test_parametrize.py": r'''
import pytest


@pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
def test_string_names(a, b):
    pass


@pytest.mark.parametrize(("a", "b"), [(1, "x"), (2.5, None)])
def test_sequence_names(a, b):
    pass


@pytest.mark.parametrize(["x"], [(1,), (2,)])
def test_list_one_name(x):
    pass


@pytest.mark.parametrize(
    "v", ["s", 7, -3, 2.5, True, False, None, 1j, b"by", "é", "a\tb", "a\\b", "", "a b"])
def test_literals(v):
    pass


@pytest.mark.parametrize("v", [[1, 2], (3,), {"k": 1}, {1, 2}, ..., "x"])
def test_containers(v):
    pass


@pytest.mark.parametrize("v", [1, 2, 3, 4], ids=["one", None, 3, "four"])
def test_ids_list(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=str)
def test_ids_str(v):
    pass


@pytest.mark.parametrize("v,w", [
    pytest.param(1, 2, id="first"),
    pytest.param(3, 4, marks=pytest.mark.slow),
    pytest.param(5, 6, marks=[pytest.mark.gpu2, pytest.mark.part1], id="x"),
])
def test_param(v, w):
    pass


@pytest.mark.parametrize("v", ["a", "a", "b", "a"])
def test_duplicates(v):
    pass


@pytest.mark.parametrize("v", ["a1", "a1", "a10", "a1_0"])
def test_duplicates_digit(v):
    pass


@pytest.mark.parametrize("v", [1, 1, 2], ids=["x", "x", "x0"])
def test_duplicate_ids(v):
    pass


@pytest.mark.parametrize("v", [])
def test_empty(v):
    pass


@pytest.mark.parametrize(argnames="v", argvalues=[1, 2])
def test_keywords(v):
    pass
''',
    # pytest.HIDDEN_PARAM exists from pytest 8.4: conftest leaves this module out before
    "test_hidden.py": '''
import pytest


@pytest.mark.parametrize("v", [pytest.param(1, id=pytest.HIDDEN_PARAM)])
@pytest.mark.parametrize("w", [1, 2])
def test_hidden(v, w):
    pass


@pytest.mark.parametrize("v", [pytest.param(1, id=pytest.HIDDEN_PARAM)])
def test_hidden_only(v):
    pass
''',
    "accuracy/__init__.py": "",
    "accuracy/test_stacked.py": '''
import pytest

from conftest import parametrize_with_ids

pytestmark = [pytest.mark.part0, pytest.mark.parametrize("mod", ["m1", "m2"])]


class TestLlama:
    @parametrize_with_ids("torch_compile", [False, True])
    @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
    @parametrize_with_ids("fp8kv", [False, True])
    def test_fp8(self, fp8kv, attn_backend, torch_compile, mod):
        pass

    @parametrize_with_ids("torch_compile", [False])
    @parametrize_with_ids("attn_backend", ["TRTLLM"])
    @pytest.mark.parametrize("tp_size,pp_size", [(4, 1), (2, 2), (1, 4)],
                             ids=["tp4", "tp2pp2", "pp4"])
    @pytest.mark.skip_less_device(4)
    def test_bfloat16_4gpus(self, tp_size, pp_size, attn_backend, torch_compile, mod):
        pass


@pytest.mark.gpu2
@pytest.mark.parametrize("cls_param", [10, 20])
class TestClassParams:
    @pytest.mark.parametrize("m", ["x", "y"])
    def test_m(self, m, cls_param, mod):
        pass

    def test_plain(self, cls_param, mod):
        pass
''',
    "test_helpers.py": '''
import pytest

from conftest import parametrize_with_ids


@parametrize_with_ids("a,b", [(1, "x"), (2, None)])
def test_two_names(a, b):
    pass


@parametrize_with_ids(["a"], [(True,), (False,)])
def test_sequence_names(a):
    pass


@parametrize_with_ids("cfg", [([1, 2],), ({"k": "v"},)])
def test_container_values(cfg):
    pass


@parametrize_with_ids("v,w", [pytest.param(1, 2), pytest.param(3, 4, id="named"),
                               pytest.param(5, 6, marks=pytest.mark.slow)])
def test_with_param(v, w):
    pass


@parametrize_with_ids("v", ["é", "a b", 1.5])
def test_escaping(v):
    pass


@parametrize_with_ids("v", [1, 1])
def test_helper_duplicates(v):
    pass
''',
    "test_classes.py": '''
import abc

import pytest

MODELS = ["llama", "mistral"]
SIZES = [1, 2] + [3]
MUTATED = ["a"]
MUTATED.append("b")
SKIP_SLOW = pytest.mark.slow
par = pytest.mark.parametrize


def helper():
    pass


@pytest.mark.part1
class TestBase:
    @pytest.mark.parametrize("model", MODELS)
    def test_model(self, model):
        pass

    def test_base_only(self):
        pass


@pytest.mark.part2
class TestDerived(TestBase):
    def test_base_only(self):
        pass

    def test_own(self):
        pass


class TestSkipped:
    __test__ = False

    def test_never(self):
        pass


class TestWithInit:
    def __init__(self):
        pass

    def test_never(self):
        pass


class TestAbstract(abc.ABC):
    @abc.abstractmethod
    def impl(self):
        pass

    def test_never(self):
        pass


class TestOuter:
    class TestInner:
        def test_nested(self):
            pass

    @staticmethod
    def test_static():
        pass

    @classmethod
    def test_classmethod(cls):
        pass

    @pytest.fixture
    def test_fixture_not_a_test(self):
        return 1

    @SKIP_SLOW
    def test_alias_mark(self):
        pass

    @par("v", SIZES)
    def test_alias_parametrize(self, v):
        pass


class NotATestClass:
    def test_never(self):
        pass


@pytest.mark.parametrize("fn", [helper, int, len, abs])
def test_named_values(fn):
    pass


@pytest.mark.parametrize("v", MUTATED)
def test_mutated_constant(v):
    pass


def test_redefined():
    pass


@pytest.mark.parametrize("v", [1])
def test_redefined(v):
    pass


async def test_async():
    pass
''',
    "test_indeterminate.py": '''
import os

import pytest

from conftest import parametrize_with_ids


def values():
    return [1, 2]


@pytest.mark.parametrize("v", values())
def test_call(v):
    pass


@pytest.mark.parametrize("v", [i for i in range(3)])
def test_comprehension(v):
    pass


@pytest.mark.parametrize("v", [os.sep])
def test_imported_value(v):
    pass


@pytest.mark.parametrize("v", [1, 2], ids=lambda v: f"n{v}")
def test_ids_lambda(v):
    pass


@parametrize_with_ids("v", [os.name])
@pytest.mark.parametrize("w", [1, 2])
def test_helper_opaque(v, w):
    pass


@pytest.mark.parametrize("v", [pytest.param(os.sep, id="sep"), pytest.param(object(), id="o")])
def test_opaque_values_with_ids(v):
    pass


if os.sep == "/":
    def test_conditional():
        pass
''',
    "test_module_marks.py": '''
import pytest

pytestmark = pytest.mark.part3


@pytest.mark.gpu4
def test_marked():
    pass


def test_unmarked():
    pass
''',
    "test_module_off.py": '''
__test__ = False


def test_never():
    pass
''',
    "test_generate_hook.py": '''
def pytest_generate_tests(metafunc):
    if "v" in metafunc.fixturenames:
        metafunc.parametrize("v", [1, 2])


def test_hooked(v):
    pass
''',
    "test_decorated.py": '''
import functools

import pytest


def wrapper(fn):
    @functools.wraps(fn)
    def inner(*a, **k):
        return fn(*a, **k)
    return inner


@wrapper
def test_wrapped():
    pass


@pytest.mark.parametrize(
    "v",
    [1,
     2],
)
@wrapper
def test_multiline(v):
    pass
''',
}

# Unit-test suite: the tree below tests/ with its own pytest.ini (TensorRT-LLM's layout).
UNIT: dict[str, str] = {
    "unittest/pytest.ini": PYTEST_INI,
    "unittest/llmapi/test_llm.py": '''
import pytest


@pytest.mark.part0
def test_llm_prefix_cache_reuse():
    pass


@pytest.mark.part1
@pytest.mark.parametrize("backend", ["pytorch", "trt"])
def test_llm_generate(backend):
    pass


@pytest.mark.gpu2
@pytest.mark.part3
def test_llm_tp2():
    pass


class TestLlmApi:
    @pytest.mark.part0
    def test_eagle3_spec(self):
        pass

    def test_plain(self):
        pass
''',
    "unittest/_torch/speculative/test_eagle3.py": '''
import pytest

pytestmark = pytest.mark.gpu2


@pytest.mark.parametrize("use_cuda_graph", [True, False])
def test_llama_eagle3(use_cuda_graph):
    pass


@pytest.mark.part3
def test_deepseek_mtp():
    pass
''',
    "unittest/_torch/speculative/test_ngram.py": '''
import unittest

import pytest


class NgramCase(unittest.TestCase):
    @pytest.mark.cpu_only
    def test_b(self):
        pass

    def test_a(self):
        pass

    def helper(self):
        pass
''',
}

# Needs the `parameterized` package (TensorRT-LLM's unit tests use it).
EXPAND: dict[str, str] = {
    "pytest.ini": PYTEST_INI,
    "test_expand.py": '''
import unittest

import pytest
from parameterized import param, parameterized


def unittest_name_func(testcase_func, param_num, param):
    expand_params = lambda params: "_".join([
        expand_params(x) if isinstance(x, (list, tuple)) else str(x) for x in params])
    name = expand_params(param.args)
    return "%s_%s" % (testcase_func.__name__, parameterized.to_safe_name(name))


def first_arg_name_func(testcase_func, param_num, param):
    name = param.args[0]
    return "%s_%s" % (testcase_func.__name__, parameterized.to_safe_name(name))


class TestExpand(unittest.TestCase):
    @parameterized.expand([("foo bar", 1), ("baz", 2), (3, 4)])
    def test_default(self, a, b):
        pass

    @parameterized.expand([(i,) for i in range(3)])
    def test_opaque(self, a):
        pass

    @parameterized.expand(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"])
    def test_padded(self, a):
        pass

    @parameterized.expand([(1, [2, "x"]), param("p", 2.5)], name_func=unittest_name_func)
    @pytest.mark.part2
    def test_join_all(self, a, b):
        pass

    @parameterized.expand([("first-one", 1), ("second", 2)], name_func=first_arg_name_func)
    def test_first(self, a, b):
        pass


class TestPytestStyle:
    @parameterized.expand([("x",), ("y",)])
    def test_in_pytest_class(self, a):
        pass
''',
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root
