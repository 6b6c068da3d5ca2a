"""A new change over a cached tree: its import graph is the tree's own graph patched by the
change's modules (``auditor.graph._patched``), and answers exactly as a build from scratch of
the same head side: modules, their infos, every module's importers and distances, the
names' definers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import testdb.stamp
from auditor.graph import ImportGraph, build_graph


@pytest.fixture(autouse=True)
def private_cache(_isolated_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(testdb.stamp, "RACY_NS", -10**12)


def answers(g: ImportGraph) -> tuple[object, ...]:
    return ({m: g.importers(m) for m in sorted(g.modules)},
            {m: (i.path, i.imports, i.functions, i.imported_names, i.bindings, i.code, i.bases,
                 i.fixtures) for m, i in g.modules.items()},
            {p: g.by_path[p].module for p in g.by_path},
            {m: set(v) for m, v in g.imported_by.items()} if g.graph is None else {
                m: set(g.graph.predecessors(m)) for m in g.graph},
            g.definers())


TREE = {
    "pkg/__init__.py": "",
    "pkg/a.py": "from pkg.b import g\n\ndef f():\n    return g()\n",
    "pkg/b.py": "import pkg.c\n\ndef g():\n    return pkg.c.h()\n",
    "pkg/c.py": "def h():\n    return 1\n\nclass K:\n    def run(self):\n        pass\n",
    "pkg/sub/__init__.py": "from .. import a\n",
    "pkg/sub/d.py": "from ..a import f\n\ndef run():\n    return f()\n",
    "tests/integration/defs/conftest.py": "import pytest\n\n@pytest.fixture\ndef llm():\n"
                                          "    return 1\n",
    "tests/integration/defs/test_x.py": "from pkg.a import f\nfrom defs.conftest import llm\n\n"
                                        "def test_f():\n    assert f()\n",
    "tests/unittest/conftest.py": "import pkg.c\n",
    # `conftest` is a suffix of both conftest modules: the first built resolves it.
    "tests/unittest/test_y.py": "import conftest\n\ndef test_lazy():\n"
                                "    from pkg.sub.d import run\n    assert run()\n",
}

# (name, head-side texts, dropped files)
CHANGES: list[tuple[str, dict[str, str], set[str]]] = [
    ("adds an import", {"pkg/a.py": TREE["pkg/a.py"] + "import pkg.c\n"}, set()),
    ("removes an import", {"pkg/b.py": "def g():\n    return 2\n"}, set()),
    ("renames an import", {"tests/integration/defs/test_x.py":
                           "from pkg.b import g\n\ndef test_f():\n    assert g()\n"}, set()),
    ("a lazy import in a function", {"pkg/c.py": TREE["pkg/c.py"]
                                     + "\ndef late():\n    from pkg.sub import d\n"}, set()),
    ("adds a module its importer imports",
     {"pkg/e.py": "def e():\n    return 3\n",
      "pkg/a.py": TREE["pkg/a.py"] + "from pkg.e import e\n"}, set()),
    ("adds a module file no one imports", {"pkg/f.py": "import pkg.a\n\ndef h():\n    pass\n"},
     set()),
    ("removes an imported module", {}, {"pkg/c.py"}),
    ("renames a module", {"pkg/b2.py": TREE["pkg/b.py"],
                          "pkg/a.py": "from pkg.b2 import g\n\ndef f():\n    return g()\n"},
     {"pkg/b.py"}),
    ("changes a module whose suffix another shares",  # it moves last: `conftest` resolves anew
     {"tests/integration/defs/conftest.py": "import pkg.b\n"}, set()),
    ("a text equal to its file", {"pkg/a.py": TREE["pkg/a.py"]}, set()),
    ("a text that does not parse", {"pkg/b.py": "def g(:\n"}, set()),
    ("a text of no Python file", {"README.md": "import pkg.c\n"}, set()),
    ("drops and rewrites one file", {"pkg/c.py": "import pkg.a\n"}, {"pkg/c.py"}),
    ("drops a file the tree lacks", {}, {"pkg/nothere.py"}),
    ("defines a name defined elsewhere", {"pkg/b.py": TREE["pkg/b.py"]
                                          + "\ndef h():\n    pass\n"}, set()),
]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def patched_and_scratch(root: Path, texts: dict[str, str], gone: set[str],
                        monkeypatch: pytest.MonkeyPatch) -> tuple[ImportGraph, ImportGraph]:
    import auditor.graph

    build_graph(str(root))  # the tree's own graph, kept with its stamp

    def refuse(*_: object) -> None:
        raise AssertionError("a new change built the whole graph again")

    with monkeypatch.context() as m:
        m.setattr(auditor.graph, "_networkx_graph", refuse)
        m.setattr(auditor.graph, "_walk", refuse)
        patched = build_graph(str(root), texts, gone)
    return patched, build_graph(str(root), texts, gone, use_cache=False)


@pytest.mark.parametrize("name,texts,gone", CHANGES, ids=[c[0] for c in CHANGES])
def test_a_patched_graph_is_the_graph_built_from_scratch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, texts: dict[str, str],
        gone: set[str]) -> None:
    root = tmp_path / "tree"
    write(root, TREE)
    patched, scratch = patched_and_scratch(root, texts, gone, monkeypatch)
    assert patched.graph is None and scratch.graph is not None
    assert answers(patched) == answers(scratch)
    again = build_graph(str(root), texts, gone)  # the patched form was kept for this change
    assert answers(again) == answers(scratch)


def test_distances_change_beyond_the_changed_module(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The GUARDED case and its trap: dropping b's import of c cuts test_x off from c (was
    a -> b -> c at distance 3); adding it back elsewhere brings test_x back at 2."""
    root = tmp_path / "tree"
    write(root, TREE)
    c, test_x = "pkg.c", "tests.integration.defs.test_x"
    assert build_graph(str(root)).importers(c)[test_x] == 3
    cut, _ = patched_and_scratch(root, {"pkg/b.py": "def g():\n    return 2\n"}, set(),
                                 monkeypatch)
    assert test_x not in cut.importers(c)
    nearer, _ = patched_and_scratch(root, {"pkg/a.py": TREE["pkg/a.py"] + "import pkg.c\n"},
                                    set(), monkeypatch)
    assert nearer.importers(c)[test_x] == 2


def test_many_new_changes_in_a_row_each_patch_the_tree_s_own_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each new change keeps its own form, and the forms are pruned oldest first: the tree's
    own form, which every new change is patched from, stays (it was pruned after four new
    changes, and the fifth rebuilt the whole graph)."""
    import auditor.graph

    root = tmp_path / "tree"
    write(root, TREE)
    build_graph(str(root))

    def refuse(*_: object) -> None:
        raise AssertionError("a new change built the whole graph again")

    for k in range(10):
        texts = {"pkg/c.py": TREE["pkg/c.py"] + f"\ndef new{k}():\n    return {k}\n"}
        with monkeypatch.context() as m:
            m.setattr(auditor.graph, "_walk", refuse)
            patched = build_graph(str(root), texts, set())
        assert answers(patched) == answers(build_graph(str(root), texts, set(), use_cache=False))


def random_tree(rng: random.Random, n: int) -> dict[str, str]:
    files = {"pkg/__init__.py": ""}
    for k in range(n):
        deps = rng.sample(range(n), rng.randrange(0, 4))
        body = "".join(f"import pkg.m{d}\n" if rng.random() < 0.5 else
                       f"from pkg.m{d} import f{d}\n" for d in deps if d != k)
        files[f"pkg/m{k}.py"] = body + f"\ndef f{k}():\n    pass\n\ndef shared():\n    pass\n"
    for t in range(rng.randrange(1, 4)):
        deps = rng.sample(range(n), 2)
        files[f"tests/unittest/test_t{t}.py"] = "".join(
            f"from pkg.m{d} import f{d}\n" for d in deps) + "def test_a():\n    pass\n"
    return files


@pytest.mark.parametrize("seed", range(12))
def test_a_random_change_patches_as_it_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(3, 12)
    root = tmp_path / "tree"
    tree = random_tree(rng, n)
    write(root, tree)
    head = random_tree(rng, n + rng.randrange(0, 3))  # other imports, maybe new modules
    texts = {rel: text for rel, text in head.items() if rng.random() < 0.4}
    gone = {rel for rel in tree if rel not in texts and rng.random() < 0.15}
    patched, scratch = patched_and_scratch(root, texts, gone, monkeypatch)
    assert answers(patched) == answers(scratch)
