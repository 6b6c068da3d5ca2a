"""The static import graph of a checkout (networkx) and the names each test function uses."""

from __future__ import annotations

import ast
import gc
import hashlib
import os
import pickle
from dataclasses import dataclass, field

import networkx as nx

from auditor.behaviour import module_name
from testdb.files import read_cache, write_cache
from testdb.parallel import parallel_map

_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", "3rdparty",
              ".tox", ".mypy_cache", ".pytest_cache"}


@dataclass
class ModuleInfo:
    path: str
    module: str
    imports: set[str] = field(default_factory=set)
    # function qualname -> (first line, last line, names referenced inside)
    functions: dict[str, tuple[int, int, frozenset[str]]] = field(default_factory=dict)
    imported_names: set[str] = field(default_factory=set)


def _resolve_relative(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    base = parts if is_pkg else parts[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def scan_module(path: str, text: str) -> ModuleInfo:
    mod = module_name(path)
    info = ModuleInfo(path, mod)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return info
    is_pkg = path.endswith("__init__.py")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                info.imports.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = (_resolve_relative(mod, is_pkg, node.level, node.module) if node.level
                    else node.module or "")
            info.imports.add(base)
            for a in node.names:
                info.imports.add(f"{base}.{a.name}")
                info.imported_names.add(a.name)

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}{child.name}"
                names = frozenset(
                    n.id if isinstance(n, ast.Name) else n.attr
                    for n in ast.walk(child) if isinstance(n, (ast.Name, ast.Attribute)))
                info.functions[q] = (child.lineno, child.end_lineno or child.lineno, names)
                visit(child, q + ".")

    visit(tree, "")
    _close_over_helpers(info)
    return info


def _close_over_helpers(info: ModuleInfo, depth: int = 3) -> None:
    """A test that calls a module-level helper uses what the helper uses (a few levels deep):
    ``test_x`` -> ``_worker`` -> ``allreduce_sum`` links ``test_x`` to ``allreduce_sum``."""
    top = {q: names for q, (_, _, names) in info.functions.items() if "." not in q}
    for q, (start, end, names) in list(info.functions.items()):
        seen = set(names)
        frontier = {n for n in names if n in top and n != q}
        for _ in range(depth):
            nxt: set[str] = set()
            for helper in frontier:
                new = top[helper] - seen
                seen |= new
                nxt |= {n for n in new if n in top}
            frontier = nxt
        info.functions[q] = (start, end, frozenset(seen))


@dataclass
class ImportGraph:
    graph: nx.DiGraph[str]
    modules: dict[str, ModuleInfo]  # by module name
    by_path: dict[str, ModuleInfo]

    def importers(self, module: str) -> dict[str, int]:
        """Modules that import ``module`` directly (1) or transitively (n), with the distance."""
        if module not in self.graph:
            return {}
        rev = self.graph.reverse(copy=False)
        dist: dict[str, int] = nx.single_source_shortest_path_length(rev, module)
        dist.pop(module, None)
        return dist


def build_graph(root: str, texts: dict[str, str] | None = None,
                exclude: set[str] | None = None, *, use_cache: bool = True) -> ImportGraph:
    """Scan every ``.py`` file under ``root``; ``texts`` overrides contents by path and
    ``exclude`` drops files (both describe the head side of a change). Scans are cached by
    file content, so a large checkout is parsed once."""
    infos: dict[str, ModuleInfo | None] = {}
    cache = _GraphCache(root) if use_cache else None
    misses: list[tuple[str, bytes]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
        reldir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if reldir == "." else reldir + "/"
        for fn in filenames:
            if fn.endswith(".py"):
                rel = prefix + fn
                if (texts is not None and rel in texts) or (exclude and rel in exclude):
                    continue
                try:
                    with open(os.path.join(dirpath, fn), "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                infos[rel] = cache.get(rel, data) if cache else None
                if infos[rel] is None:
                    misses.append((rel, data))
    # A cold checkout has thousands of modules to parse: in worker processes when that many.
    for (rel, data), info in zip(misses, parallel_map(_scan_bytes, misses), strict=True):
        infos[rel] = info
        if cache:
            cache.put(rel, data, info)
    if cache:
        cache.save()
    scanned = {rel: i for rel, i in infos.items() if i is not None}
    for rel, text in (texts or {}).items():
        if rel.endswith(".py"):
            scanned[rel] = scan_module(rel, text)
    g: nx.DiGraph[str] = nx.DiGraph()
    modules = {i.module: i for i in scanned.values()}
    # Test files import the project by absolute name, but also by names relative to the test
    # root (`defs.conftest`, `conftest`); index every dotted suffix so both resolve.
    suffix: dict[str, str] = {}
    for name in modules:
        parts = name.split(".")
        for k in range(1, len(parts)):
            suffix.setdefault(".".join(parts[k:]), name)
    for info in scanned.values():
        g.add_node(info.module)
        for imp in info.imports:
            target = imp if imp in modules else suffix.get(imp)
            if target and target != info.module:
                g.add_edge(info.module, target)
    return ImportGraph(g, modules, {i.path: i for i in scanned.values()})


def _scan_bytes(job: tuple[str, bytes]) -> ModuleInfo:
    rel, data = job
    return scan_module(rel, data.decode("utf-8", errors="replace"))


class _GraphCache:
    """One pickle per checkout root: ``{path: (content digest, ModuleInfo)}``, written
    atomically; a damaged or foreign file is simply a miss."""

    VERSION = 1

    def __init__(self, root: str) -> None:
        from testdb.index import cache_dir

        key = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:24]
        self.path = os.path.join(cache_dir(), f"graph-{key}.pickle")
        self.entries: dict[str, tuple[bytes, ModuleInfo]] = {}
        self.dirty = False
        payload = read_cache(self.path)
        try:
            gc.disable()  # many small objects: unpickling is twice as fast without the GC
            version, entries = pickle.loads(payload) if payload else (None, None)
            if version == self.VERSION and isinstance(entries, dict):
                self.entries = entries
        except Exception:
            self.entries = {}
        finally:
            gc.enable()

    @staticmethod
    def _digest(data: bytes) -> bytes:
        return hashlib.blake2b(data, digest_size=16).digest()

    def get(self, rel: str, data: bytes) -> ModuleInfo | None:
        hit = self.entries.get(rel)
        return hit[1] if hit and hit[0] == self._digest(data) else None

    def put(self, rel: str, data: bytes, info: ModuleInfo) -> None:
        self.entries[rel] = (self._digest(data), info)
        self.dirty = True

    def save(self) -> None:
        if self.dirty:
            write_cache(self.path, pickle.dumps((self.VERSION, self.entries),
                                                pickle.HIGHEST_PROTOCOL), keep=32)
