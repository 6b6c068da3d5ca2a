"""A cold build parses each file once: the import graph's targeted visit of import statements
finds what ``ast.walk`` found, and the graph and the static inventory built from one parse of
each test file (in one child process) answer as each built alone."""

from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

import testdb.stamp
from auditor.graph import (
    _one_parse_fits,
    _scan_bytes,
    _shared_scan,
    build_graph,
    import_statements,
    scan_module,
    start_graph,
)
from testdb.inventory import build_static, start_static
from testdb.inventory.build import Job, _scan_prepared
from testdb.inventory.config import DEFAULT_CONFIG
from tests.conftest import EXAMPLE
from tests.corpus import python_corpus


@pytest.fixture(autouse=True)
def private_cache(_isolated_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(testdb.stamp, "RACY_NS", -10**12)


def walked(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


# (source, the modules it imports, as scan_module records them)
IMPORT_PLACES = [
    ("import a\n", {"a"}),
    # executor/worker.py style: a lazy import inside a function body is an import.
    ("def worker_main():\n    from tensorrt_llm.executor.ipc import ZeroMqQueue\n",
     {"tensorrt_llm.executor.ipc", "tensorrt_llm.executor.ipc.ZeroMqQueue"}),
    ("class C:\n    import b\n    def m(self):\n        def inner():\n            import c\n",
     {"b", "c"}),
    ("async def f():\n    async with x:\n        async for y in z:\n            import d\n", {"d"}),
    ("if X:\n    import e\nelif Y:\n    import f\nelse:\n    import g\n", {"e", "f", "g"}),
    ("try:\n    import h\nexcept ImportError:\n    import i\nelse:\n    import j\n"
     "finally:\n    import k\n", {"h", "i", "j", "k"}),
    ("try:\n    pass\nexcept* OSError:\n    import l\n", {"l"}),
    ("for a in b:\n    import m\nelse:\n    import n\nwhile c:\n    import o\nelse:\n"
     "    import p\n", {"m", "n", "o", "p"}),
    ("with open(f) as g:\n    import q\n", {"q"}),
    ("match x:\n    case 1:\n        import r\n    case _:\n        from s import t\n",
     {"r", "s", "s.t"}),
    ("@decorator(lambda: __import__('u'))\ndef f(x=[i for i in y]):\n    return x\n", set()),
]


@pytest.mark.parametrize("source,imports", IMPORT_PLACES)
def test_imports_are_found_wherever_a_statement_can_be(source: str,
                                                        imports: set[str]) -> None:
    tree = ast.parse(source)
    assert [id(n) for n in import_statements(tree)] == [id(n) for n in sorted(
        walked(tree), key=lambda n: (n.lineno, n.col_offset))]
    assert scan_module("pkg/m.py", source).imports == imports


def test_the_visit_finds_the_walks_imports_in_every_module_of_the_project() -> None:
    """Over this project's own sources and the stdlib's top-level modules (the table above
    has every kind of statement block)."""
    count = 0
    for tree in python_corpus():
        count += 1
        assert {id(n) for n in import_statements(tree)} == {id(n) for n in walked(tree)}
    assert count > 400


@pytest.mark.parametrize("data,fits", [
    (b"import a\n", True),
    (b"# -*- coding: utf-8 -*-\nimport a\n", True),
    (b"#!/usr/bin/env python\n# vim: set fileencoding=UTF_8 :\nimport a\n", True),
    (b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", False),
    (b"\xef\xbb\xbfimport a\n", False),
    (b"x = '\xff'\n", False),  # not UTF-8: the graph reads it with the bad byte replaced
    (b"x = (\n", True),  # both fail to parse, alike
])
def test_one_parse_serves_both_scans_or_each_parses_its_own(data: bytes, fits: bool) -> None:
    """Whatever the bytes, the shared job's two answers are the two scans' own."""
    assert _one_parse_fits(data) is fits
    job: Job = (data, "test_x.py", (), DEFAULT_CONFIG, "k", None, "tests/test_x.py")
    if fits:
        info, prepared = _shared_scan(("both", "tests/test_x.py", data, job))
        assert info == _scan_bytes(("tests/test_x.py", data))
        assert prepared == _scan_prepared(job)


def many_test_files(tmp_path: Path) -> Path:
    """The FlashInfer example, and test files that do not parse, are not UTF-8, import
    lazily."""
    root = tmp_path / "tree"
    shutil.copytree(EXAMPLE, root)
    defs = root / "tests" / "integration" / "defs"
    (defs / "test_broken.py").write_text("def test_a(:\n")
    (defs / "test_latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport tensorrt_llm\ndef test_e():\n    x = '\xe9'\n")
    (defs / "test_lazy.py").write_text(textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_lazy(n):
            from tensorrt_llm.llmapi import llm
            assert llm
        """))
    return root


def test_a_cold_build_parses_each_file_once_and_answers_as_built_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import auditor.graph
    import testdb.inventory.build

    root = many_test_files(tmp_path)
    parses = tmp_path / "parses"
    real_parse = ast.parse

    def counted(source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, bytes | str) and args == () and not kwargs:
            with open(parses, "a") as fh:
                fh.write("x\n")
        return real_parse(source, *args, **kwargs)

    def no_second_child(*_: object) -> None:
        raise AssertionError("the inventory was built in a child of its own")

    monkeypatch.setattr(auditor.graph, "MIN_ITEMS", 1)
    monkeypatch.setattr(auditor.graph, "usable_cpus", lambda: 2)
    monkeypatch.setattr(testdb.inventory.build, "_PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(testdb.inventory.build, "usable_cpus", lambda: 2)
    monkeypatch.setattr(testdb.inventory.build, "_in_child", no_second_child)
    monkeypatch.setattr(ast, "parse", counted)
    finish = start_graph(str(root))
    inventory = start_static(str(root))()
    graph = finish()
    monkeypatch.setattr(ast, "parse", real_parse)
    assert graph.graph is None  # the plain form the child wrote
    n_py = sum(1 for _ in root.rglob("*.py"))
    # Each module once; the test file whose bytes are not the graph's text, once more.
    assert len(parses.read_text().split()) == n_py + 1

    alone = build_graph(str(root), use_cache=False)
    assert {m: (i.path, i.imports, i.functions, i.imported_names, i.code)
            for m, i in graph.modules.items()} == {
        m: (i.path, i.imports, i.functions, i.imported_names, i.code)
        for m, i in alone.modules.items()}
    assert {m: graph.importers(m) for m in graph.modules} == {
        m: alone.importers(m) for m in alone.modules}
    assert "tensorrt_llm.llmapi.llm" in graph.modules["tests.integration.defs.test_lazy"].imports
    assert inventory.to_json() == build_static(str(root), cache=False).to_json()
    assert any(i.is_placeholder for i in inventory.by_file("test_broken.py"))


def test_an_inventory_asked_after_the_graph_is_built_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's inventory is offered until the graph is asked for; a later build (the
    tree may have changed by then) does not take it."""
    import auditor.graph
    import testdb.inventory.build

    root = many_test_files(tmp_path)
    monkeypatch.setattr(auditor.graph, "MIN_ITEMS", 1)
    monkeypatch.setattr(auditor.graph, "usable_cpus", lambda: 2)
    start_graph(str(root))()
    assert testdb.inventory.build._STARTED == {}
    (root / "tests" / "integration" / "defs" / "test_new.py").write_text(
        "def test_new():\n    pass\n")
    inventory = build_static(str(root))
    assert "test_new.py::test_new" in inventory.ids()
