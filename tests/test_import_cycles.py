"""No import cycle among the project's modules (testdb, auditor, reports).

The graph is the project's own (`auditor.graph.scan_module`, which the audit's import graph is
built from: every `import` and `from ... import`, a function-local one too, for a lazy import
is still a dependency). Networkx finds the strongly connected components. A submodule's import
of its own package (`auditor.launch.local` -> `auditor.launch`) is not counted: Python runs a
package's __init__ before any of its submodules, whichever imports come first.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import networkx as nx
import pytest

from auditor.graph import scan_module

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("testdb", "auditor", "reports")


def import_graph(root: Path, packages: tuple[str, ...]) -> nx.DiGraph[str]:
    infos = {}
    for pkg in packages:
        for folder, dirs, files in os.walk(root / pkg):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = Path(folder, name)
                    info = scan_module(str(path.relative_to(root)),
                                       path.read_text(encoding="utf-8"))
                    infos[info.module] = info
    g: nx.DiGraph[str] = nx.DiGraph()
    for mod, info in infos.items():
        g.add_node(mod)
        for imp in info.imports:
            if imp in infos and imp != mod and not mod.startswith(imp + "."):
                g.add_edge(mod, imp)
    return g


@functools.cache
def project_graph() -> nx.DiGraph[str]:
    return import_graph(REPO, PACKAGES)


def cycles(g: nx.DiGraph[str]) -> list[frozenset[str]]:
    """Each set of modules that import one another (directly or around a circle)."""
    found = [frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    return sorted(found, key=sorted)


def describe(g: nx.DiGraph[str], group: frozenset[str]) -> str:
    circle = nx.find_cycle(g.subgraph(group))
    return " -> ".join([a for a, _ in circle] + [circle[0][0]])


def test_no_import_cycle() -> None:
    g = project_graph()
    assert g.number_of_nodes() > 100, "the packages were found"
    assert [describe(g, c) for c in cycles(g)] == []


def test_reports_cli_and_entry_do_not_import_each_other() -> None:
    g = project_graph()
    assert g.has_edge("reports.entry", "reports.cli")
    assert not nx.has_path(g, "reports.cli", "reports.entry")


@pytest.mark.parametrize(("files", "expected"), [
    # two modules importing each other, one lazily inside a function: a cycle
    ({"p/__init__.py": "", "p/a.py": "from p import b\n",
      "p/b.py": "def f():\n    import p.a\n"}, [{"p.a", "p.b"}]),
    # around a circle of three
    ({"p/__init__.py": "", "p/a.py": "import p.b\n", "p/b.py": "from p.c import x\n",
      "p/c.py": "from p.a import y\n"}, [{"p.a", "p.b", "p.c"}]),
    # a package's __init__ re-exporting its submodule, which imports the package: not counted
    ({"p/__init__.py": "from p.a import x\n", "p/a.py": "from p import other\n"}, []),
    # a chain without a way back
    ({"p/__init__.py": "", "p/a.py": "import p.b\n", "p/b.py": "import os\n"}, []),
])
def test_cycle_table(tmp_path: Path, files: dict[str, str], expected: list[set[str]]) -> None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert [set(c) for c in cycles(import_graph(tmp_path, ("p",)))] == expected
