"""The graph's scan reads the tree by shortcuts (issue 25): each is equal to the
straightforward walk it replaced, over this project's own sources and the stdlib's top-level
modules: a function's nodes in ``ast.walk``'s order, the definitions found in bodies alone
(``ast.iter_child_nodes`` visited every field), a fixture told by its decorator's last name
without building the chain."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from auditor.graph import scan_parsed
from auditor.resolve import _body_nodes, _chain, _is_fixture, scan_code
from tests.corpus import python_corpus

_Fn = ast.FunctionDef | ast.AsyncFunctionDef


def walked_body(fn: _Fn) -> list[ast.AST]:
    """The walk ``_body_nodes`` replaced."""
    return [n for part in (*fn.body, *fn.args.defaults, *(d for d in fn.args.kw_defaults if d))
            for n in ast.walk(part)]


def chained_fixture(fn: _Fn) -> bool:
    """The test ``_is_fixture`` replaced: the whole chain built, its last name read."""
    for d in fn.decorator_list:
        c = _chain(d.func if isinstance(d, ast.Call) else d) or ""
        if c.rsplit(".", 1)[-1] in ("fixture", "yield_fixture"):
            return True
    return False


def graph_definitions(tree: ast.Module) -> list[str]:
    """``scan_parsed``'s definitions as its visit of every child node found them."""
    out: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append(f"{prefix}{child.name}")
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def resolver_units(tree: ast.Module) -> list[str]:
    """``scan_code``'s units as its visit of every child node found them: the classes and
    functions of the module and of its classes, not those nested in a function."""
    out: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append(f"{prefix}{child.name}")
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def functions(tree: ast.Module) -> Iterator[_Fn]:
    return (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def test_each_shortcut_finds_what_the_walk_found_in_every_module_of_the_project() -> None:
    modules = units = 0
    for tree in python_corpus():
        modules += 1
        # (in a dict's order: a name defined twice keeps its first place)
        assert list(scan_parsed("pkg/m.py", tree).functions) == list(
            dict.fromkeys(graph_definitions(tree)))
        assert list(scan_code(tree, "pkg.m", {}).code) == list(
            dict.fromkeys(resolver_units(tree)))
        for fn in functions(tree):
            units += 1
            assert [id(n) for n in _body_nodes(fn)] == [id(n) for n in walked_body(fn)]
            assert _is_fixture(fn) is chained_fixture(fn)
    assert modules > 400 and units > 10_000


@pytest.mark.parametrize("decorator", [
    "pytest.fixture", "pytest.fixture(scope='module')", "fixture", "fixture()",
    "pytest.yield_fixture", "a.b.c.fixture", "a().fixture", "x[0].fixture", "x[0].fixture()",
    "''.fixture", "'a'.fixture()", "(1).fixture", "fixture()()", "a()()", "lambda: fixture",
    "pytest.fixtures", "fixture_", "pytest.mark.fixture", "pytest.fixture.x", "x[fixture]",
])
def test_a_fixture_is_told_by_its_decorators_last_name_as_by_its_chain(decorator: str) -> None:
    fn = ast.parse(f"@{decorator}\ndef f(): pass\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _is_fixture(fn) is chained_fixture(fn)
