"""The cold scan's shortcuts (issue 25, third pass) equal the straightforward versions.

Each shortcut is compared with the code it replaced, kept here as the reference: the rows
packed straight from the groups, the value index entries from a process-wide split of each
params string, the stacks of parametrize layers multiplied once per process, the mutated-
constant pre-check by ``str.find``, the line starts and the config fingerprint per process.
"""

from __future__ import annotations

import ast
import marshal
import re
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from idfn_suites import IDFN, LONG_STR, POSITIONAL_IDS
from inventory_suites import DEFS, EXPAND, UNIT

from testdb.inventory import pytest_rules, static
from testdb.inventory.config import DEFAULT_CONFIG, StaticConfig
from testdb.inventory.groups import Group, expand, rows
from testdb.inventory.memo import _fingerprint, line_starts
from testdb.inventory.model import split_params
from testdb.inventory.packed import file_blob
from testdb.inventory.packed_rows import (
    _SPLITS,
    file_entries,
    group_index,
    names_text,
    prepared_blob,
    prepared_groups,
    row,
)
from testdb.inventory.static import _variants, _variants_of, scan_groups
from testdb.inventory.values import _may_mutate, module_scope

EXTRA = {
    # a test defined twice: its first place, its last definition
    "test_redefined.py": '''
import pytest

@pytest.mark.parametrize("x", [1, 2])
def test_a(x):
    pass

def test_b():
    pass

@pytest.mark.parametrize("x", [2, 3])
@pytest.mark.slow
def test_a(x):
    pass
''',
    # a generated name equal to a def's: the def's row, in the generated one's place
    "test_expand_twice.py": '''
import unittest
from parameterized import parameterized

class TestA(unittest.TestCase):
    @parameterized.expand([("x",), ("y",)])
    def test_e(self, a):
        pass

    def test_e_0_x(self):
        pass
''',
    "test_broken.py": "def test_a(:\n    pass\n",
    # params with "=", "-", "[", "]", "::" and "/" in them, values repeated in one id
    "test_odd_ids.py": '''
import pytest

@pytest.mark.parametrize("a", ["x=y", "p-q", "[b]", "c::d", "e/f", ""], ids=str)
@pytest.mark.parametrize("b", [False, True])
@pytest.mark.parametrize("c", [False, pytest.param(True, marks=pytest.mark.skip)])
def test_a(a, b, c):
    pass

@pytest.mark.parametrize("v", [pytest.param(1, id=""), pytest.param(2, id="x]")])
def test_empty(v):
    pass
''',
}
EXTRA["test_slash_ids.py"] = '''
import pytest

def test_plain():
    pass

@pytest.mark.parametrize("a", ["e/f", "g"], ids=str)
def test_a(a):
    pass
'''
EXTRA["test_colon_ids.py"] = EXTRA["test_slash_ids.py"].replace('"e/f"', '"c::d"')
# A directory name with "[" in it: the id's first "[" is not its params'.
ODD_FILE_IDS = {"test_odd_ids.py": "odd[dir]/test_odd_ids.py"}


def suite_sources() -> list[tuple[str, str]]:
    out = []
    for suite in (DEFS, UNIT, EXPAND, IDFN, LONG_STR, POSITIONAL_IDS, EXTRA):
        out += [(f, textwrap.dedent(t).lstrip("\n")) for f, t in suite.items()
                if f.endswith(".py") and f.rsplit("/", 1)[-1].startswith("test_")]
    return out


SOURCES = suite_sources()
SCANNED = [(ODD_FILE_IDS.get(f, f), f"tests/{f}", scan_groups(text, ODD_FILE_IDS.get(f, f)))
           for f, text in SOURCES]


def test_the_suites_hold_what_the_shortcuts_meet() -> None:
    ids = [i.nodeid for fid, path, groups in SCANNED for i in expand(groups, fid, path)]
    assert len(SOURCES) >= 15 and len(ids) > 200
    assert any(i.startswith("odd[") for i in ids)
    assert any(i.endswith("[]") for i in ids) and any("=" in i for i in ids)
    assert any(i.error for fid, path, groups in SCANNED for i in expand(groups, fid, path))


@pytest.mark.parametrize(("file_id", "path", "groups"), SCANNED, ids=[f for f, _ in SOURCES])
def test_rows_are_the_items_rows(file_id: str, path: str, groups: list[Any]) -> None:
    assert list(rows(groups, file_id, path)) == [row(i) for i in expand(groups, file_id, path)]


@pytest.mark.parametrize(("file_id", "path", "groups"), SCANNED, ids=[f for f, _ in SOURCES])
def test_prepared_from_groups_equals_prepared_from_items(file_id: str, path: str,
                                                         groups: list[Any]) -> None:
    got = prepared_groups(file_id, path, groups)
    want = prepared_blob(file_id, file_blob(expand(groups, file_id, path)))
    # The blobs' bytes may differ in marshal's reference flags (which objects are shared
    # while it writes), never in what they decode to.
    assert marshal.loads(got.blob) == marshal.loads(want.blob)
    assert got._replace(blob=b"") == want._replace(blob=b"")


@settings(max_examples=300, deadline=None)
@given(groups=st.lists(st.builds(
    lambda cls, fn, params: Group(cls, fn, 1, False, (), (), (fn,),
                                  tuple((p, ()) for p in params)),
    st.sampled_from([(), ("TestC",), ("Test[C",)]),
    st.sampled_from(["test_a", "test_b", "*", "test_[x", "test_a_*"]),
    st.lists(st.none() | st.text(alphabet="ab=-[]/:", max_size=6), min_size=1, max_size=4)),
    max_size=5), file=st.sampled_from(["t.py", "d/t.py", "d[1]/t.py"]))
def test_prepared_from_any_groups(groups: list[Group], file: str) -> None:
    """Any groups, ids alike or not, "[" before the params or not, placeholders among them."""
    got = prepared_groups(file, file, groups)
    want = prepared_blob(file, file_blob(expand(groups, file, file)))
    assert marshal.loads(got.blob) == marshal.loads(want.blob)
    assert got._replace(blob=b"") == want._replace(blob=b"")
    assert list(got.entries) == list(want.entries)  # the values in the same order


def test_the_groups_index_is_their_ids_index() -> None:
    plain = 0
    for file_id, path, groups in SCANNED:
        ids = [i.nodeid for i in expand(groups, file_id, path) if "*" not in i.function]
        if len(set(ids)) < len(ids) or "[" in file_id:
            continue
        plain += 1
        want = (*straightforward_entries(ids), names_text(ids))
        assert group_index(file_id, groups, ids) == want, file_id
        assert group_index(file_id, groups, ids) == want, file_id  # kept stacks
    assert plain >= 10


# -- the value index entries -----------------------------------------------------------------

def straightforward_entries(ids: list[str]) -> tuple[dict[str, Any], list[str]]:
    """``file_entries`` before it kept its splits across files (main at 28eb60f)."""
    per: dict[str, tuple[list[int], list[str | None]]] = {}
    pieces: list[str] = []
    parsed: dict[str, tuple[list[tuple[str | None, str]], set[str]]] = {}
    for pos, tid in enumerate(ids):
        b = tid.find("[")
        if b > 0 and tid.endswith("]"):
            params = tid[b + 1:-1]
            got = parsed.get(params)
            if got is None:
                got = parsed[params] = (
                    [(sys.intern(n) if n is not None else None, v)
                     for n, v in split_params(params)],
                    set(params.replace("=", "-").split("-")))
            pieces.extend(got[1])
            for name, v in got[0]:
                where, names = per.setdefault(v, ([], []))
                where.append(pos)
                names.append(name)
    return per, pieces


def test_entries_equal_the_straightforward_ones_cold_and_warm() -> None:
    files = [[i.nodeid for i in expand(g, fid, path) if "*" not in i.function]
             for fid, path, g in SCANNED]
    _SPLITS.clear()
    for _ in range(2):  # the splits made, then kept
        for ids in files:
            assert file_entries(ids) == straightforward_entries(ids)


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(st.text(alphabet="ab=-[]:/", max_size=12).map(lambda s: "f.py::t" + s),
                    max_size=12))
def test_entries_of_any_ids(ids: list[str]) -> None:
    assert file_entries(ids) == straightforward_entries(ids)
    assert file_entries(ids) == straightforward_entries(ids)  # from the kept splits


# -- the layer stacks ------------------------------------------------------------------------

def test_layer_stacks_multiplied_once_equal_each_product(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    static._VARIANTS.clear()
    kept = [scan_groups(text, f) for f, text in SOURCES]
    assert static._VARIANTS
    again = [scan_groups(text, f) for f, text in SOURCES]
    monkeypatch.setattr(static, "_variants_of", lambda layers: tuple(_variants(layers)))
    assert kept == again == [scan_groups(text, f) for f, text in SOURCES]
    for layers, variants in list(static._VARIANTS.items()):
        assert _variants_of(layers) == variants == tuple(_variants(layers))


# -- the mutated-constant pre-check ----------------------------------------------------------

_OLD_GLOBAL = re.compile(r"\b(?:global|nonlocal)\b")
_OLD_TOUCHED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\.|\[|[-+*/%@&|^]=|//=|\*\*=|>>=|<<=)")


def regex_may_mutate(source: str, consts: dict[str, Any]) -> bool:
    """``_may_mutate`` as it was: one expression over every word of the module."""
    if not consts:
        return False
    if _OLD_GLOBAL.search(source):
        return True
    return not consts.keys().isdisjoint(_OLD_TOUCHED.findall(source))


NAMES = ["M", "MODELS", "_m1", "é", "Mé", "aé", "x·y", "global"]


@pytest.mark.parametrize(("source", "consts", "want"), [
    ("M = [1]\nM.append(2)\n", ["M"], True),
    ("M = [1]\nM [0] = 2\n", ["M"], True),
    ("M = 1\nM //= 2\n", ["M"], True),
    ("M = 1\nM**=2\n", ["M"], True),
    ("M = 1\nM -= 2\n", ["M"], True),
    ("M = 1\nM - 2\n", ["M"], False),
    ("M = 1\nxM.a\n", ["M"], False),
    ("M = 1\néM.a\n", ["M"], False),  # é is a word character: no word boundary
    ("M = 1\nMé.a\n", ["M"], False),
    ("M = 1\n·M.a\n", ["M"], True),  # · is not
    ("M = 1\n1M.a\n", ["M"], False),
    ("M = 1\nM\u00a0.a\n", ["M"], True),  # unicode white space, as for \s
    ("M = 1\nMM.a\n", ["M"], False),
    ("MM = 1\nMMM.a MM.b\n", ["MM"], True),
    ("é = 1\né.a\n", ["é"], False),  # a name the expression never matched
    ("M = 1\ndef f():\n    global x\n", ["M"], True),
    ("M = 1\nglobals()\n", ["M"], False),
    ("M = 1\nM.a\n", [], False),
])
def test_may_mutate_table(source: str, consts: list[str], want: bool) -> None:
    got = _may_mutate(source, dict.fromkeys(consts, (1, ast.Constant(1))))
    assert got == regex_may_mutate(source, dict.fromkeys(consts)) == want


@settings(max_examples=500, deadline=None)
@given(source=st.lists(st.sampled_from(
    [*NAMES, "M", "MODELS", ".", "[", "+=", "//=", "/=", "**=", "*=", ">>=", "<<=", "-", "=",
     " ", "\t", "\n", "\u00a0", "\u2003", "1", "é", "·", "_", "nonlocal", "(", ")"]),
    max_size=20).map("".join),
    consts=st.lists(st.sampled_from(NAMES), max_size=4))
def test_may_mutate_equals_the_regex(source: str, consts: list[str]) -> None:
    table = dict.fromkeys(consts)
    assert _may_mutate(source, table) == regex_may_mutate(source, table)  # type: ignore[arg-type]


def test_word_characters_are_those_of_re() -> None:
    from testdb.inventory.values import _is_word

    word = re.compile(r"\w")
    assert all(_is_word(c) == bool(word.match(c)) for c in map(chr, range(sys.maxunicode + 1)))


def test_the_suites_consts_agree() -> None:
    for _, text in SOURCES:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        consts = module_scope(tree).consts
        assert _may_mutate(text, consts) == regex_may_mutate(text, consts)


# -- line starts and the fingerprint ---------------------------------------------------------

_NEWLINE = re.compile(rb"\r\n|\r|\n")


def regex_line_starts(raw: bytes) -> list[int]:
    return [0, *(m.end() for m in _NEWLINE.finditer(raw))]


@settings(max_examples=500, deadline=None)
@given(raw=st.lists(st.sampled_from([b"a", b"\r", b"\n", b"\r\n", b"\x0c", b"\x0b", b"\x1c",
                                     b"\x85", "é\u2028".encode()]), max_size=12).map(b"".join))
def test_line_starts_equal_the_regex(raw: bytes) -> None:
    assert line_starts(raw) == regex_line_starts(raw)


def test_line_starts_of_the_suites() -> None:
    for _, text in SOURCES:
        raw = text.encode()
        assert line_starts(raw) == regex_line_starts(raw)
        assert line_starts(raw.rstrip(b"\n")) == regex_line_starts(raw.rstrip(b"\n"))


def test_the_fingerprint_follows_the_pytest_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    other = StaticConfig(plain_bases=())
    for version in ("8.3.0", "9.2.0", "8.3.0"):
        monkeypatch.setattr(pytest_rules, "installed", lambda v=version: pytest_rules.rules_for(v))
        for config in (DEFAULT_CONFIG, other):
            assert _fingerprint(config) == config.fingerprint()
    assert _fingerprint(DEFAULT_CONFIG) != _fingerprint(other)


# -- the decorator memo through constants ------------------------------------------------------

def _module(consts: str, decorator: str, after: str = "", header: str = "import pytest") -> str:
    return f"{header}\n{consts}\n\n{decorator}\ndef test_a(m):\n    pass\n{after}"


LAMBDA_IDS = '@pytest.mark.parametrize("m", [1, 2], ids=lambda v: PREFIX + str(v))'
MEMO_CASES = {
    "module list": _module('MODELS = ["a", "b"]', '@pytest.mark.parametrize("m", MODELS)'),
    "another value": _module('MODELS = ["c"]', '@pytest.mark.parametrize("m", MODELS)'),
    "bound later": _module("", '@pytest.mark.parametrize("m", MODELS)', 'MODELS = ["a", "b"]'),
    "mutated": _module('MODELS = ["a", "b"]\nMODELS.append("x")',
                       '@pytest.mark.parametrize("m", MODELS)'),
    "bound twice": _module('MODELS = ["a", "b"]\nMODELS = ["d"]',
                           '@pytest.mark.parametrize("m", MODELS)'),
    "bound under if": _module('if True:\n    MODELS = ["a", "b"]',
                              '@pytest.mark.parametrize("m", MODELS)'),
    "a constant of a constant": _module('OTHER = ["a"]\nMODELS = OTHER',
                                        '@pytest.mark.parametrize("m", MODELS)'),
    "a constant of a constant, another": _module('OTHER = ["b"]\nMODELS = OTHER',
                                                 '@pytest.mark.parametrize("m", MODELS)'),
    "a def": _module("def MODELS():\n    return 1", '@pytest.mark.parametrize("m", MODELS)'),
    "ids by a def": _module('def name(v):\n    return "a" + str(v)',
                            '@pytest.mark.parametrize("m", [1, 2], ids=name)'),
    "ids by another def": _module('def name(v):\n    return "b" + str(v)',
                                  '@pytest.mark.parametrize("m", [1, 2], ids=name)'),
    "an alias in the value": _module(
        'MODELS = [pp.param("a", marks=pp.mark.slow), "b"]',
        '@pytest.mark.parametrize("m", MODELS)', header="import pytest\nimport pytest as pp"),
    "an alias in the value, another module": _module(
        'MODELS = [pp.param("a", marks=pp.mark.slow), "b"]',
        '@pytest.mark.parametrize("m", MODELS)', header="import pytest\nimport mylib as pp"),
    "marks in the value": _module('MODELS = [pytest.param("a", marks=pytest.mark.slow), "b"]',
                                  '@pytest.mark.parametrize("m", MODELS)'),
    "marks of another module": _module(
        'MODELS = [pytest.param("a", marks=pytest.mark.slow), "b"]',
        '@pytest.mark.parametrize("m", MODELS)', header="import pytest\nimport mylib as pytest"),
    "a helper": _module("MODELS = [1, 2]", '@parametrize_with_ids("m", MODELS)',
                        header="import pytest\nfrom conftest import parametrize_with_ids"),
    "not ascii": _module('MODELS = ["é", "b"]', '@pytest.mark.parametrize("m", MODELS)'),
    "a decorator naming a name not ascii": _module('é = [1]', '@pytest.mark.parametrize("m", é)'),
    "a decorator naming a name not ascii, another": _module(
        'é = [2]', '@pytest.mark.parametrize("m", é)'),
    "a name not ascii": _module('é = "x"\nMODELS = [é]', '@pytest.mark.parametrize("m", MODELS)'),
    "a name not ascii, another": _module('é = "y"\nMODELS = [é]',
                                         '@pytest.mark.parametrize("m", MODELS)'),
    "ids by a lambda": _module('PREFIX = "p"', LAMBDA_IDS),
    "ids by a lambda, another prefix": _module('PREFIX = "q"', LAMBDA_IDS),
    "ids by a constant lambda": _module('IDS = lambda v: f"k{v}"',
                                        '@pytest.mark.parametrize("m", [1, 2], ids=IDS)'),
    "a mark by name": _module('skip_x = pytest.mark.skipif(True, reason="x")', "@skip_x"),
    "another mark by that name": _module("skip_x = pytest.mark.slow", "@skip_x"),
    "parametrize by name": _module("parametrize = pytest.mark.parametrize",
                                   '@parametrize("m", [1, 2])'),
    "parametrize by name, another": _module("parametrize = pytest.mark.usefixtures",
                                            '@parametrize("m", [1, 2])'),
    "ids of a constant": _module('NAMES = ["x", "y"]',
                                 '@pytest.mark.parametrize("m", [1, 2], ids=NAMES)'),
}
CLASS_CASES = {
    "a class constant": '''
import pytest

MODELS = ["a"]

class TestA:
    MODELS = ["b", "c"]

    @pytest.mark.parametrize("m", MODELS)
    def test_a(self, m):
        pass

    @pytest.mark.parametrize("m", [1], ids=lambda v: MODELS[0])
    def test_b(self, m):
        pass
''',
    "a class constant, another module constant": '''
import pytest

MODELS = ["z"]

class TestA:
    MODELS = ["b", "c"]

    @pytest.mark.parametrize("m", MODELS)
    def test_a(self, m):
        pass

    @pytest.mark.parametrize("m", [1], ids=lambda v: MODELS[0])
    def test_b(self, m):
        pass
''',
    "a class constant after": '''
import pytest

MODELS = ["a"]

class TestA:
    @pytest.mark.parametrize("m", MODELS)
    def test_a(self, m):
        pass

    MODELS = ["b", "c"]
''',
    "expand by name": '''
from parameterized import parameterized
import unittest

ex = parameterized.expand

class TestA(unittest.TestCase):
    @ex([("a",), ("b",)])
    def test_one(self, m):
        pass

    @ex([("a",), ("b",)])
    def test_two(self, m):
        pass
''',
}
ALL_MEMO_CASES = {**MEMO_CASES, **CLASS_CASES}


def _fresh_memo() -> None:
    from testdb.inventory import memo

    memo._MEMO.clear()
    memo._WORDS.clear()


def _unmemoized(text: str) -> list[Any]:
    """The scan with every decorator classified afresh (no memo at all)."""
    from testdb.inventory import memo
    from testdb.inventory.decorators import classify

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(memo.DecoratorMemo, "classify",
                   lambda self, node, scope, line, func_name="": classify(
                       node, scope, line, self.config, func_name))
        return scan_groups(text, "test_m.py")


@pytest.mark.parametrize("case", list(ALL_MEMO_CASES))
def test_the_memo_through_constants_answers_as_no_memo(case: str) -> None:
    """Each case scanned after any other (its decorators' texts memoized with the other's
    meanings) gives what it gives with no memo."""
    text = ALL_MEMO_CASES[case]
    want = _unmemoized(text)
    for other in ALL_MEMO_CASES.values():
        _fresh_memo()
        scan_groups(other, "test_m.py")
        assert scan_groups(text, "test_m.py") == want, case
        assert scan_groups(text, "test_m.py") == want, case  # a memo hit of its own


def test_the_cases_mean_different_things() -> None:
    """Guards the test above: texts shared between cases are read differently."""
    got = {case: _unmemoized(text) for case, text in ALL_MEMO_CASES.items()}
    for a, b in [("module list", "another value"), ("module list", "bound later"),
                 ("marks in the value", "marks of another module"),
                 ("ids by a lambda", "ids by a lambda, another prefix"),
                 ("a mark by name", "another mark by that name"),
                 ("parametrize by name", "parametrize by name, another"),
                 ("a name not ascii", "a name not ascii, another"),
                 ("a decorator naming a name not ascii",
                  "a decorator naming a name not ascii, another"),
                 ("a class constant", "a class constant, another module constant"),
                 ("a constant of a constant", "a constant of a constant, another"),
                 ("ids by a def", "ids by another def"),
                 ("an alias in the value", "an alias in the value, another module")]:
        assert got[a] != got[b], (a, b)


def test_a_constant_self_contained_is_classified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from testdb.inventory import decorators, memo

    calls: list[str] = []
    real = decorators.classify

    def counted(node: ast.expr, *args: Any, **kwargs: Any) -> Any:
        calls.append(ast.unparse(node))
        return real(node, *args, **kwargs)

    monkeypatch.setattr(memo, "classify", counted)
    _fresh_memo()
    for case in ("module list", "module list", "another value", "another value"):
        scan_groups(MEMO_CASES[case], "test_m.py")
    assert calls == ["pytest.mark.parametrize('m', MODELS)"] * 2
