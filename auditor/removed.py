"""Modules that go away: a deleted module, or the old path of a renamed one, and its guards.

Importing a module that no longer exists raises ``ModuleNotFoundError``; a test module that
imports it at its top level fails at collection, so every one of its tests fails: a real
guard, whatever else it calls. A module that imports it at its top level fails to import in
turn, and so does every module importing *that* one at its top level: a chain of such
imports is as certain as a direct one. An import anywhere else (under ``try``, ``if``,
``with``, inside a function that may not run) is not certain: ``try: import x / except
ImportError: pytest.skip(...)`` skips rather than fails. Such importers are the module tier
(weak: context, never a guard). An import at the top of a test function's own body fails
that test when it runs: a guard of that function's tests.

Hand-written over the import graph's own scans (``auditor.graph.ModuleInfo.imports``) and the
test modules' ASTs (``Candidates._tree``): which imports are unconditional is a question of
statement position, which no import-graph library records. The graph is the head side of the
change, without the removed files, so an importer found here still imports the old path
after the change.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auditor.behaviour import module_name
from auditor.evidence import Evidence
from auditor.graph import _resolve_relative

if TYPE_CHECKING:
    from auditor.candidates import Candidates

MAX_CHAIN = 8  # import distance followed from the removed module
MAX_CONTEXT = 200  # module-tier (uncertain) links kept as context: they never guard


@dataclass(frozen=True)
class Importer:
    """A module of the head side that imports a removed module path: where, and whether the
    import is certain to run when the module is imported (``scope`` ``""``) or when one of
    its functions runs (``scope`` its qualname), or neither (``certain`` False)."""

    module: str
    path: str
    line: int
    certain: bool
    scope: str = ""  # "" (module level), or the function whose body holds the import


@dataclass(frozen=True)
class Removal:
    """What a removed module path breaks: the modules importing it (directly, with where),
    and the evidence for the tests that would fail or merely reach it."""

    old_module: str
    importers: tuple[Importer, ...]
    links: tuple[Evidence, ...]  # tier removed-module (certain) and module (context)


def imported_names(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    """The dotted names an import statement imports, as ``auditor.graph.scan_module`` records
    them (``from a import b`` imports ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = (_resolve_relative(module, is_pkg, node.level, node.module) if node.level
            else node.module or "")
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def names_module(name: str, module: str) -> bool:
    """Whether importing ``name`` imports ``module`` (itself, or a name inside it)."""
    return name == module or name.startswith(module + ".")


def importers_in(tree: ast.Module, path: str, target: str) -> list[Importer]:
    """Each import of ``target`` in a module's AST, with its certainty: a statement of the
    module's own body (or of a class body at the top) runs on import; one at the top of a
    function's body runs with the function; any other may not run."""
    module, is_pkg = module_name(path), path.endswith("__init__.py")
    found: list[Importer] = []

    def hits(node: ast.AST) -> bool:
        return isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            names_module(n, target) for n in imported_names(node, module, is_pkg))

    def walk(body: list[ast.stmt], scope: str | None, prefix: str) -> None:
        """``scope``: "" in the module (or a class at its top), the function's qualname at
        the top of its body, None below anything conditional."""
        for stmt in body:
            if hits(stmt):
                found.append(Importer(module, path, stmt.lineno, scope is not None,
                                      scope or ""))
            elif isinstance(stmt, ast.ClassDef):
                walk(stmt.body, scope if scope == "" else None, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(stmt.body, f"{prefix}{stmt.name}" if scope == "" else None,
                     f"{prefix}{stmt.name}.")
            else:  # if, try, with, for, match: what they hold may not run
                walk([c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt)]
                     + [c for h in getattr(stmt, "handlers", ()) for c in h.body]
                     + [c for m in getattr(stmt, "cases", ()) for c in m.body], None, prefix)

    walk(tree.body, "", "")
    return found


class ImportIndex:
    """Who imports each dotted name on the head side: the graph's modules by the names their
    imports start with (``a``, ``a.b``, ``a.b.c`` for ``import a.b.c``). Built once, and only
    for a change that removes a module: it reads every module's scan."""

    def __init__(self, cands: Candidates) -> None:
        self.by_prefix: dict[str, set[str]] = {}
        self.path_of: dict[str, str] = {}
        for path, info in cands.graph.by_path.items():
            self.path_of[info.module] = path
            for name in info.imports:
                parts = name.split(".")
                for k in range(1, len(parts) + 1):
                    self.by_prefix.setdefault(".".join(parts[:k]), set()).add(info.module)

    def importers(self, module: str) -> list[str]:
        return sorted(self.by_prefix.get(module, ()))


def removal(cands: Candidates, index: ImportIndex, old_module: str) -> Removal:
    """The importers of ``old_module`` and the links of the tests they break: a test module
    reached by certain imports all the way is ``removed-module`` (distance: the chain's
    length); one that reaches it otherwise is ``module``, as context."""
    direct: list[Importer] = []
    certain: dict[str, int] = {}  # module -> distance of a chain of certain imports
    via: dict[str, str] = {}  # module -> the module of the chain it imports
    scoped: dict[tuple[str, str], int] = {}  # (test module, function) -> distance
    todo: deque[tuple[str, int]] = deque([(old_module, 0)])
    seen = {old_module}
    while todo:
        target, dist = todo.popleft()
        if dist >= MAX_CHAIN:
            continue
        for mod in index.importers(target):
            path = index.path_of.get(mod, "")
            tree = cands._tree(path) if path else None
            found = importers_in(tree, path, target) if tree is not None else []
            if target == old_module:
                direct += found
            if any(i.certain and not i.scope for i in found):
                if mod not in seen:
                    seen.add(mod)
                    certain[mod] = dist + 1
                    via[mod] = target
                    todo.append((mod, dist + 1))
            else:
                for i in found:
                    if i.certain and i.scope:
                        scoped.setdefault((mod, i.scope), dist + 1)
    links: list[Evidence] = []
    shown = old_module
    for mod, dist in sorted(certain.items(), key=lambda kv: (kv[1], kv[0])):
        fid = cands.module_file_id(mod)
        if fid:
            why = (f"imports {shown}, which is gone: fails at collection" if dist == 1 else
                   f"imports {shown} through {_chain(via, mod, old_module)}, each "
                   "unconditionally: fails at collection")
            links += [Evidence(t, "removed-module", 1, why, dist) for t in cands.items_of(fid, "")]
    for (mod, scope), dist in sorted(scoped.items()):
        fid = cands.module_file_id(mod)
        leaf = scope.rsplit(".", 1)[-1]
        if fid and leaf.startswith("test"):
            why = f"{scope} imports {shown} at the top of its body: fails when it runs"
            links += [Evidence(t, "removed-module", 1, why, dist)
                      for t in cands.items_of(fid, scope)]
    links += _context(cands, index, old_module, certain, direct)
    return Removal(old_module, tuple(sorted(direct, key=lambda i: (i.path, i.line))),
                   tuple(links))


def _chain(via: dict[str, str], mod: str, old_module: str, shown: int = 3) -> str:
    """The modules between a test module and the removed one: ``a.b -> a.c`` (the nearest
    few, then how many more)."""
    hops: list[str] = []
    at = via.get(mod, old_module)
    while at != old_module:
        hops.append(at)
        at = via.get(at, old_module)
    more = f" and {len(hops) - shown} more" if len(hops) > shown else ""
    return " -> ".join(hops[:shown]) + more


def _context(cands: Candidates, index: ImportIndex, old_module: str, certain: dict[str, int],
             direct: list[Importer]) -> list[Evidence]:
    """Test modules that reach the removed module other than by certain imports (an import
    under ``try`` or ``if``, or past a module that imports it so): weak, never a guard."""
    out: list[Evidence] = []
    starts = {i.module for i in direct} | set(certain)
    reach: dict[str, int] = {}
    for mod in sorted(starts):
        base = certain.get(mod, 1)
        reach.setdefault(mod, base)
        for m, d in cands.graph.importers(mod).items():
            if reach.get(m, 1 << 30) > base + d:
                reach[m] = base + d
    for mod, dist in sorted(reach.items(), key=lambda kv: (kv[1], kv[0])):
        if mod in certain or len(out) >= MAX_CONTEXT:
            continue
        fid = cands.module_file_id(mod)
        if fid:
            out += [Evidence(t, "module", 1, f"reaches {old_module} (distance {dist}) but not "
                             "by unconditional imports all the way: it may not fail", dist)
                    for t in cands.items_of(fid, "")[:MAX_CONTEXT - len(out)]]
    return out
