"""The import graph's plain cached form answers as the networkx graph, and only while it holds."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

import testdb.stamp
from auditor.graph import ImportGraph, _distances, build_graph
from tests.conftest import EXAMPLE, REPO

CREATOR = "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py"


@pytest.fixture(autouse=True)
def private_cache(_isolated_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> None:
    """A cache of this test's own; no file counts as racily clean (the trees here are written
    a moment before they are stamped), as in tests/testdb/test_stamp.py."""
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(testdb.stamp, "RACY_NS", -10**12)


def answers(g: ImportGraph) -> tuple[object, ...]:
    return ({m: g.importers(m) for m in sorted(g.modules)},
            {m: (i.path, i.imports, i.functions, i.imported_names)
             for m, i in g.modules.items()},
            sorted(g.by_path))


@pytest.mark.parametrize("seed", range(8))
def test_the_plain_search_is_networkxs(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(1, 40)
    g = nx.gnp_random_graph(n, rng.choice([0.02, 0.1, 0.3]), seed=seed, directed=True)
    g = nx.relabel_nodes(g, {k: f"m{k}" for k in g})
    imported_by = {v: list(g.predecessors(v)) for v in g}
    for v in [*g, "absent"]:
        want = (nx.single_source_shortest_path_length(g.reverse(copy=False), v)
                if v in g else {})
        want.pop(v, None)
        assert _distances(imported_by, v) == want


def example_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(EXAMPLE, root)
    return root


HEAD_TEXT = ("from tensorrt_llm._torch.pyexecutor import py_executor_creator\n"
             "def create_py_executor(x):\n    return x\n")


@pytest.mark.parametrize("change", ["none", "texts", "exclude"])
def test_a_warm_graph_is_the_plain_form_and_answers_the_same(tmp_path: Path,
                                                             change: str) -> None:
    root = example_tree(tmp_path)
    texts = {CREATOR: HEAD_TEXT} if change == "texts" else None
    exclude = {CREATOR} if change == "exclude" else None
    cold = build_graph(str(root), texts, exclude)
    # built with networkx; a change's graph is the tree's own, patched (tests/auditor/
    # test_graph_patch.py)
    assert (cold.graph is not None) is (change == "none")
    warm = build_graph(str(root), texts, exclude)
    assert warm.graph is None  # read from the plain form
    assert answers(warm) == answers(cold) == answers(build_graph(str(root), texts, exclude,
                                                                 use_cache=False))
    # another change of the same tree is not answered from this one's form, but patched
    other_texts = {CREATOR: HEAD_TEXT + "\nimport tensorrt_llm.llmapi\n"}
    other = build_graph(str(root), other_texts, None)
    assert answers(other) == answers(build_graph(str(root), other_texts, None,
                                                 use_cache=False))
    assert "tensorrt_llm.llmapi" in other.by_path[CREATOR].imports


@pytest.mark.parametrize("edit", ["edit", "add", "remove", "rename-dir", "new-dir"])
def test_a_changed_tree_is_not_answered_from_the_plain_form(tmp_path: Path, edit: str) -> None:
    root = example_tree(tmp_path)
    build_graph(str(root))
    assert build_graph(str(root)).graph is None
    tests = root / "tests" / "unittest" / "_torch" / "executor"
    victim = sorted(tests.glob("test_*.py"))[0]
    if edit == "edit":
        victim.write_text(victim.read_text() + "\nimport tensorrt_llm\n")
    elif edit == "add":
        (tests / "test_added.py").write_text("from tensorrt_llm._torch import pyexecutor\n")
    elif edit == "remove":
        victim.unlink()
    elif edit == "rename-dir":
        tests.rename(tests.with_name("executor_moved"))
    else:
        (root / "newpkg").mkdir()
        (root / "newpkg" / "mod.py").write_text("import tensorrt_llm\n")
    got = build_graph(str(root))
    assert got.graph is not None
    assert answers(got) == answers(build_graph(str(root), use_cache=False))
    assert build_graph(str(root)).graph is None  # and the new tree's form is kept


def test_a_damaged_plain_form_is_a_miss(tmp_path: Path) -> None:
    root = example_tree(tmp_path)
    cold = build_graph(str(root))
    (path,) = (tmp_path / "cache").glob("graphplain-*")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    again = build_graph(str(root))
    assert again.graph is not None and answers(again) == answers(cold)


def test_a_warm_graph_imports_no_networkx_and_reads_no_source(tmp_path: Path) -> None:
    root = example_tree(tmp_path)
    env = {**os.environ, "TESTDB_CACHE_DIR": str(tmp_path / "cache")}
    fine = "import testdb.stamp; testdb.stamp.RACY_NS = -10**12\n"  # as the fixture does
    warm_up = fine + f"from auditor.graph import build_graph; build_graph({str(root)!r})"
    subprocess.run([sys.executable, "-c", warm_up], env=env, check=True, cwd=REPO)
    probe = fine + (
        "import builtins, sys\n"
        "opened = []\n"
        "real = builtins.open\n"
        "def spy(f, *a, **k):\n"
        "    opened.append(str(f))\n"
        "    return real(f, *a, **k)\n"
        "builtins.open = spy\n"
        "from auditor.graph import build_graph\n"
        f"g = build_graph({str(root)!r})\n"
        f"print(g.graph is None, 'networkx' in sys.modules, "
        f"[f for f in opened if f.startswith({str(root)!r})])\n")
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    assert out.split() == ["True", "False", "[]"]


def test_a_text_equal_to_its_file_is_the_file(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``audit --head`` passes the head side's texts for a tree that already holds them: such
    a text is scanned (or read from the scan cache) with the other files, never one by one in
    the main process; a text that differs is still what the graph is built from."""
    import auditor.graph

    root = example_tree(tmp_path)
    build_graph(str(root))  # fills the scan cache
    same = {CREATOR: (root / CREATOR).read_text()}

    def refuse(*_: object) -> None:
        raise AssertionError("scanned in the main process")

    with monkeypatch.context() as m:
        m.setattr(auditor.graph, "scan_module", refuse)
        got = build_graph(str(root), same)  # another change key: not the plain form's
    assert answers(got) == answers(build_graph(str(root), same, use_cache=False))
    differs = {CREATOR: HEAD_TEXT + "\nimport tensorrt_llm.llmapi\n"}
    info = build_graph(str(root), differs).by_path[CREATOR]
    assert "tensorrt_llm.llmapi" in info.imports


@pytest.mark.parametrize("change", ["none", "texts", "exclude"])
def test_a_cold_graph_built_in_a_child_answers_as_one_built_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """A cold tree of many modules is built in a child process (networkx and the scans'
    results stay there); this process reads the plain form it wrote."""
    import auditor.graph

    root = example_tree(tmp_path)
    texts = {CREATOR: HEAD_TEXT} if change == "texts" else None
    exclude = {CREATOR} if change == "exclude" else None
    pids = tmp_path / "pids"
    real = auditor.graph._build_both

    def recorded(*args: Any) -> None:
        with open(pids, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        real(*args)

    monkeypatch.setattr(auditor.graph, "MIN_ITEMS", 1)  # the example tree counts as many
    monkeypatch.setattr(auditor.graph, "usable_cpus", lambda: 2)
    monkeypatch.setattr(auditor.graph, "_build_both", recorded)
    got = build_graph(str(root), texts, exclude)
    assert got.graph is None  # the plain form the child wrote
    assert [int(p) for p in pids.read_text().split()] != [os.getpid()]
    assert answers(got) == answers(build_graph(str(root), texts, exclude, use_cache=False))


def test_a_failed_child_graph_is_built_here(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import auditor.graph

    def fail(*_: object) -> None:
        raise OSError("no space left on device")

    root = example_tree(tmp_path)
    monkeypatch.setattr(auditor.graph, "MIN_ITEMS", 1)
    monkeypatch.setattr(auditor.graph, "usable_cpus", lambda: 2)
    monkeypatch.setattr(auditor.graph, "_build_both", fail)
    got = build_graph(str(root))
    assert got.graph is not None  # built here
    assert answers(got) == answers(build_graph(str(root), use_cache=False))
