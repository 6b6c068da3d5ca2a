"""``parametrize(ids=<callable>)`` statically, against real pytest collection and pytest's rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from idfn_suites import IDFN, IDFN_INDETERMINATE, LONG_STR, POSITIONAL_IDS
from inventory_suites import write_tree
from test_inventory_crosscheck import _compare

from testdb.errors import ExternalError
from testdb.inventory import Inventory, build_static
from testdb.inventory import pytest_rules as rules
from testdb.inventory.collect import collect
from testdb.inventory.idfn import IdFn, resolve
from testdb.inventory.ids import OPAQUE, Named, Unknowable
from testdb.inventory.values import module_scope
from testdb.names import NameChecker


@pytest.fixture(scope="module")
def idfn_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("idfn"), IDFN)


@pytest.fixture(scope="module")
def idfn_static(idfn_dir: Path) -> Inventory:
    return build_static(str(idfn_dir), [(".", "")], cache=False)


@pytest.fixture(scope="module")
def idfn_collected(idfn_dir: Path) -> Inventory:
    return collect(str(idfn_dir), ["-p", "no:cacheprovider"])


def test_callable_ids_match_pytest(idfn_static: Inventory, idfn_collected: Inventory) -> None:
    assert len(idfn_collected) > 50  # the module imported: the check below compares something
    assert _compare(idfn_static, idfn_collected, {"test_callable_ids.py"}) == []


def test_indeterminate_only_where_the_callable_cannot_be_told(idfn_static: Inventory) -> None:
    assert {i.base for i in idfn_static if i.indeterminate} == IDFN_INDETERMINATE


@pytest.mark.parametrize(("nodeid", "present"), [
    # an empty id first leaves a leading "-" (the real TensorRT-LLM shape)
    ("TestShapes::test_leading[-tp1-mtp=disable]", True),
    ("TestShapes::test_leading[configurable_moe-tp4-mtp=eagle]", True),
    ("TestShapes::test_leading[tp1-mtp=disable]", False),  # as a QA list writes it: no test
    ("TestShapes::test_trailing[tp1-]", True),
    ("TestShapes::test_middle[y--x]", True),
    ("test_empty_alone[]", True),
    ("test_empty_alone", False),
    ("test_duplicates[same0]", True),
    ("test_duplicates[same2]", True),
    ("test_duplicates_digit[v1_1]", True),
    ("test_none_falls_back[2]", True),  # None: the value's own id
    ("test_none_falls_back[x3]", True),  # None for a list: argname + index
    ("test_not_a_string[4]", True),
    ("test_unsupported_result[1]", True),  # no id of a list: the value's own
    ("test_module_function[none]", True),
    ("test_module_function[V3]", True),
    ("test_function_returns_none[2]", True),
    ("test_per_value[<1>-<x>]", True),
    ("test_param_id_wins[explicit]", True),
    ("test_param_id_wins[c2]", True),
    ("test_escaped[\\xe9\\t]", True),
    ("test_module_constant[pre2]", True),
])
def test_ids_by_pytests_rules(idfn_static: Inventory, idfn_collected: Inventory, nodeid: str,
                              present: bool) -> None:
    full = f"test_callable_ids.py::{nodeid}"
    assert (full in idfn_static) is present
    assert (full in idfn_collected) is present  # the expectation is pytest's, not ours


def test_listed_name_without_the_leading_dash_is_invalid(idfn_static: Inventory) -> None:
    # TRAP: the QA-list spelling of the empty-id case names no test; GUARDED: the real id does
    checker = NameChecker(idfn_static)
    wrong = checker.check("test_callable_ids.py::TestShapes::test_leading[tp1-mtp=disable]")
    assert wrong.status == "invalid"
    assert wrong.nearest[0] == "test_callable_ids.py::TestShapes::test_leading[-tp1-mtp=disable]"
    right = checker.check("test_callable_ids.py::TestShapes::test_leading[-tp1-mtp=disable]")
    assert right.status == "valid"
    opaque = checker.check("test_callable_ids.py::test_reads_environment[1]")
    assert opaque.status == "not-checked"  # a callable we cannot evaluate: never invalid


def _idfn(src: str, name: str = "f") -> IdFn | None:
    tree = ast.parse(src)
    scope = module_scope(tree)
    return resolve(ast.Name(name, ast.Load()), scope, 10**6)


@pytest.mark.parametrize(("src", "value", "expected"), [
    ('f = lambda x: "" if x == 0 else "on"', 0, ""),
    ('f = lambda x: "" if x == 0 else "on"', 1, "on"),
    ("f = lambda x: f'{x:03d}-{x!r}'", 7, "007-7"),
    ("f = lambda x: str(x) + repr(x)", "a", "a'a'"),
    ("f = lambda x: '_'.join(map(str, x))", (1, "b"), "1_b"),
    ("f = lambda x: '-'.join(sorted(x))", ["b", "a"], "a-b"),
    ("f = lambda x: x[0] if x else None", [], None),
    ("f = lambda x: x.get('k', 'd')", {}, "d"),
    ("f = lambda x: '%s=%d' % ('n', x)", 3, "n=3"),
    ("f = lambda x: x is None and 'none' or 'some'", None, "none"),
    ("f = lambda x, y=2: x * 2", 4, 8),
    ("P = 'p'\nf = lambda x: P + x", "q", "pq"),
    ("def f(x):\n    '''doc'''\n    if x > 1:\n        return 'big'\n    y = x + 1\n    return y",
     1, 2),
    ("def f(x):\n    pass", 1, None),
])
def test_evaluator(src: str, value: object, expected: object) -> None:
    fn = _idfn(src)
    assert fn is not None
    assert fn(value) == expected


@pytest.mark.parametrize(("src", "value"), [
    ("f = lambda x: x.name", 1),  # an attribute of the value
    ("import os\nf = lambda x: os.environ['X']", 1),  # the environment
    ("f = lambda x: str(x)", OPAQUE),  # a value known only at run time
    ("f = lambda x: str(x)", Named("helper")),  # a def: its str is an address
    ("f = lambda x: str(x)", frozenset({1, 2})),  # a set's order is a process's hash order
    ("f = lambda x: 'a' * x", 10**9),  # unbounded sizes
    ("f = lambda x: x ** x", 99),
    ("f = lambda x: 1 / x", 0),  # pytest: a collection error; here: not told
    ("f = lambda x: '{0.__class__}'.format(x)", 1),  # attribute access through format
    ("str = repr\nf = lambda x: str(x)", 1),  # a rebound builtin is not the builtin
    ("f = lambda x: open(x)", "p"),  # any other call
    ("f = lambda x: (y := x)", 1),
    ("f = lambda x: x is 1", 1),  # identity of ints is CPython's business
    ("y = 'module'\nf = lambda x, y=2: y", 1),  # a default is not the module's name
    ("f = lambda x, *, k=1: k", 1),
])
def test_evaluator_refuses(src: str, value: object) -> None:
    fn = _idfn(src)
    assert fn is not None
    with pytest.raises(Unknowable):
        fn(value)


@pytest.mark.parametrize("src", [
    "f = lambda *a: a",  # pytest passes one value
    "f = lambda a, b: a",  # a second parameter without default
    "import x\nf = x.helper",  # imported: not read
    "from m import f",
    "@wrap\ndef f(x):\n    return x",  # a decorated def is not its body
    "class f:\n    pass",
    "f = [1, 2]",  # not a callable: the ids list path takes it
])
def test_not_evaluated_callables(src: str) -> None:
    assert _idfn(src) is None


def test_builtins_str_and_repr() -> None:
    fn = _idfn("x = 1", "str")
    assert fn is not None and fn(Named("int", builtin_class=True)) == "<class 'int'>"
    fn = _idfn("x = 1", "repr")
    assert fn is not None and fn("a") == "'a'"
    fn = _idfn("x = 1", "str")
    assert fn is not None
    with pytest.raises(Unknowable):
        fn(frozenset({"a", "b"}))  # str of a set: hash order


# (hidden_param, keywords_skip_private_attrs, parametrize_keyword_only, long_str_falls_back,
#  empty_set_id_notset), from each version's _pytest source
@pytest.mark.parametrize(("version", "expected"), [
    ("8.3.5", (False, False, False, False, False)),
    ("8.4.0", (True, False, False, False, True)),
    ("9.0.3", (True, False, False, False, True)),
    ("9.1.1", (True, False, False, False, True)),
    ("9.2.0", (True, True, True, True, True)),
    ("9.3.0.dev12+g0abc", (True, True, True, True, True)),
])
def test_rules_per_version(version: str, expected: tuple[bool, ...]) -> None:
    r = rules.rules_for(version)
    assert (r.hidden_param, r.keywords_skip_private_attrs, r.parametrize_keyword_only,
            r.long_str_falls_back, r.empty_set_id_notset) == expected


def test_rules_reject_a_non_version() -> None:
    with pytest.raises(ValueError, match="not a pytest version"):
        rules.rules_for("nine")


def test_installed_pytest_is_supported() -> None:
    assert rules.supported(rules.installed()), rules.installed()


def test_cache_keys_carry_the_pytest_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    from testdb.inventory.config import DEFAULT_CONFIG

    before = DEFAULT_CONFIG.fingerprint()
    monkeypatch.setattr(rules, "installed", lambda: rules.rules_for("8.3.0"))
    other = DEFAULT_CONFIG.fingerprint()
    monkeypatch.setattr(rules, "installed", lambda: rules.rules_for("9.2.0"))
    assert len({before, other, DEFAULT_CONFIG.fingerprint()}) >= 2


def test_long_str_values_follow_the_installed_pytest(tmp_path: Path) -> None:
    root = write_tree(tmp_path, LONG_STR)
    static = build_static(str(root), [(".", "")], cache=False)
    collected = collect(str(root), ["-p", "no:cacheprovider"])
    assert _compare(static, collected, {"test_long_str.py"}) == []
    short = rules.installed().long_str_falls_back
    assert ("test_long_str.py::test_long[s0]" in static) is short
    assert f"test_long_str.py::test_long[{'y' * 100}]" in static


def test_positional_ids_follow_the_installed_pytest(tmp_path: Path) -> None:
    root = write_tree(tmp_path, POSITIONAL_IDS)
    static = build_static(str(root), [(".", "")], cache=False)
    if rules.installed().parametrize_keyword_only:
        # pytest >= 9.2 fails the module's collection: the scanner must not list the ids
        assert {i.base for i in static if i.indeterminate} == {
            "test_positional.py::test_positional"}
        with pytest.raises(ExternalError, match="collection failed"):
            collect(str(root), ["-p", "no:cacheprovider"])
    else:
        collected = collect(str(root), ["-p", "no:cacheprovider"])
        assert _compare(static, collected, {"test_positional.py"}) == []
        assert "test_positional.py::test_positional[a]" in static


def test_empty_ids_survive_the_packed_cache(idfn_dir: Path, idfn_static: Inventory,
                                            tmp_path: Path) -> None:
    # "" (an empty id: ``test_f[]``) is not None (no brackets) in the cache's rows either
    from testdb.inventory.cache import FileCache

    store = FileCache(tmp_path / "cache")
    cold = build_static(str(idfn_dir), [(".", "")], cache=store)
    warm = build_static(str(idfn_dir), [(".", "")], cache=store)
    want = {(i.nodeid, i.indeterminate) for i in idfn_static}
    assert {(i.nodeid, i.indeterminate) for i in cold} == want
    assert {(i.nodeid, i.indeterminate) for i in warm} == want
    assert "test_callable_ids.py::test_empty_alone[]" in warm
    assert "test_callable_ids.py::test_empty_alone" not in warm
