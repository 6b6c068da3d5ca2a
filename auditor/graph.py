"""The static import graph of a checkout (networkx) and the names each test function uses.

The graph is built with networkx. Building it means walking and reading every ``.py`` file
of the checkout, and importing networkx costs more than a warm audit's whole graph work; so
the built graph is also kept in a plain form (each module's info and who imports it), behind
a stat stamp of the tree (``testdb.stamp``): while no ``.py`` file or directory changed, a
later audit of the same change reads that form and imports neither networkx nor a source.
"""

from __future__ import annotations

import ast
import hashlib
import marshal
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from auditor.behaviour import module_name
from auditor.resolve import UnitCode, definers, scan_code
from testdb.files import read_cache, write_cache
from testdb.gcpause import gc_paused
from testdb.parallel import MIN_ITEMS, in_child, parallel_map, usable_cpus
from testdb.stamp import Stamp, cache_dir, code_stamp, stat_of

if TYPE_CHECKING:
    import networkx as nx

_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", "3rdparty",
              ".tox", ".mypy_cache", ".pytest_cache"}


@dataclass
class ModuleInfo:
    path: str
    module: str
    imports: set[str] = field(default_factory=set)
    # function or class qualname -> (first line, last line); what each uses is in ``code``
    functions: dict[str, tuple[int, int]] = field(default_factory=dict)
    imported_names: set[str] = field(default_factory=set)
    # The resolver's facts (auditor.resolve.scan_code): top-level import bindings and
    # aliases, star imports, each unit's chains/locals/returns/parameters, classes' bases
    # as written, fixtures.
    bindings: dict[str, str] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    code: dict[str, UnitCode] = field(default_factory=dict)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fixtures: set[str] = field(default_factory=set)


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
                info.functions[q] = (child.lineno, child.end_lineno or child.lineno)
                visit(child, q + ".")

    visit(tree, "")
    facts = scan_code(tree, mod, {k: _resolve_relative(mod, is_pkg, k, None)
                                  for k in range(1, 5)})
    info.bindings, info.stars, info.code = facts.bindings, facts.stars, facts.code
    info.bases, info.fixtures = facts.bases, facts.fixtures
    return info


@dataclass
class ImportGraph:
    graph: nx.DiGraph[str] | None  # None when read from the plain form
    modules: Mapping[str, ModuleInfo]  # by module name
    by_path: Mapping[str, ModuleInfo]
    imported_by: dict[str, list[str]] = field(default_factory=dict)  # the plain form's edges
    # Each function/method name: its one defining unit, or how many classes and modules
    # define it (auditor.resolve.definers); in the plain form, marshalled until asked for.
    defined: dict[str, str | int] | bytes = field(default_factory=dict)

    def definers(self) -> dict[str, str | int]:
        if isinstance(self.defined, bytes):
            self.defined = marshal.loads(self.defined)
        assert isinstance(self.defined, dict)
        return self.defined

    def importers(self, module: str) -> dict[str, int]:
        """Modules that import ``module`` directly (1) or transitively (n), with the distance."""
        if self.graph is None:
            return _distances(self.imported_by, module)
        if module not in self.graph:
            return {}
        import networkx as nx

        rev = self.graph.reverse(copy=False)
        dist: dict[str, int] = nx.single_source_shortest_path_length(rev, module)
        dist.pop(module, None)
        return dist


def _distances(imported_by: dict[str, list[str]], module: str) -> dict[str, int]:
    """``single_source_shortest_path_length`` of the reversed graph, over the plain form's
    lists (a breadth-first search, as networkx's; here so that reading the plain form needs
    no networkx)."""
    if module not in imported_by:
        return {}
    dist = {module: 0}
    todo = deque([module])
    while todo:
        m = todo.popleft()
        for n in imported_by[m]:
            if n not in dist:
                dist[n] = dist[m] + 1
                todo.append(n)
    del dist[module]
    return dist


def build_graph(root: str, texts: dict[str, str] | None = None,
                exclude: set[str] | None = None, *, use_cache: bool = True) -> ImportGraph:
    """Scan every ``.py`` file under ``root``; ``texts`` overrides contents by path and
    ``exclude`` drops files (both describe the head side of a change). Scans are cached by
    file content, so a large checkout is parsed once; the graph of an unchanged tree and the
    same change is read from its plain form."""
    return start_graph(root, texts, exclude, use_cache=use_cache)()


def start_graph(root: str, texts: dict[str, str] | None = None,
                exclude: set[str] | None = None, *, use_cache: bool = True
                ) -> Callable[[], ImportGraph]:
    """``build_graph`` in two steps: this reads the tree and starts the scans of the modules
    the cache lacks (in worker processes, when many); the function returned collects them and
    builds the graph. Between the two the caller can do other work."""
    return _start(root, texts, exclude, use_cache=use_cache)[0]


def _start(root: str, texts: dict[str, str] | None, exclude: set[str] | None, *,
           use_cache: bool, child: bool = True) -> tuple[Callable[[], ImportGraph], list[str]]:
    """``start_graph``, and the list its function fills with the plain form's path once it
    is written. ``child``: a cold build of many modules may run in a child process."""
    stamp = _tree_stamp(root) if use_cache else None
    hit = stamp.check() if stamp is not None else None
    change = _change_key(texts, exclude)
    written: list[str] = []
    if hit is not None:
        plain = _read_plain(_plain_path(hit[1], change))
        if plain is not None:
            return (lambda: plain), [_plain_path(hit[1], change)]
    dirs, files = _walk(root)
    if child and stamp is not None and len(files) >= MIN_ITEMS and usable_cpus() > 1:
        return _in_child(root, texts, exclude), written
    infos: dict[str, ModuleInfo | None] = {}
    cache = _GraphCache(root) if use_cache else None
    misses: list[tuple[str, bytes]] = []
    digests: dict[str, str] = {}
    for rel, full, _ in files:
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            continue
        digests[rel] = _GraphCache.digest(data).hex()
        # A head-side text equal to the file is the file (``audit --head`` judges in a tree
        # of the head commit): scanned, or read from the cache, with the others.
        if (texts is not None and rel in texts and not _same(texts[rel], data)) or (
                exclude and rel in exclude):
            continue
        infos[rel] = cache.get(rel, data) if cache else None
        if infos[rel] is None:
            misses.append((rel, data))
    # A cold checkout has thousands of modules to parse: in worker processes when that many,
    # started now and collected by finish().
    results = parallel_map(_scan_bytes, misses)

    def finish() -> ImportGraph:
        for (rel, data), info in zip(misses, results, strict=True):
            infos[rel] = info
            if cache:
                cache.put(rel, data, info)
        if cache:
            cache.save()
        scanned = {rel: i for rel, i in infos.items() if i is not None}
        for rel, text in (texts or {}).items():
            if rel.endswith(".py") and rel not in infos:
                scanned[rel] = scan_module(rel, text)
        graph = _networkx_graph(scanned)
        if stamp is not None and len(digests) == len(files):
            tree = hashlib.sha256("\0".join(f"{r}:{d}" for r, d in sorted(digests.items()))
                                  .encode()).hexdigest()
            _write_plain(_plain_path(tree, change), graph)
            written.append(_plain_path(tree, change))
            where = {rel: path for rel, path, _ in files}
            stamp.write(dirs, [(path, st) for _, path, st in files],
                        {where[r]: d for r, d in digests.items()}, {}, tree)
        return graph

    return finish, written


def _in_child(root: str, texts: dict[str, str] | None, exclude: set[str] | None
              ) -> Callable[[], ImportGraph]:
    """The build in a child process (``testdb.parallel.in_child``): networkx is imported and
    the scans' results are read there, and the plain form written; the function returned
    reads that form, as a warm audit does. Should the child fail, the graph is built here."""
    built = in_child(_build_plain, root, texts, exclude)

    def opened() -> ImportGraph:
        path = built()
        plain = _read_plain(path) if path else None
        if plain is not None:
            return plain
        return _start(root, texts, exclude, use_cache=True, child=False)[0]()

    return opened


def _build_plain(root: str, texts: dict[str, str] | None, exclude: set[str] | None
                 ) -> str | None:
    """In the child: build the graph and answer where its plain form was written."""
    with gc_paused():
        finish, written = _start(root, texts, exclude, use_cache=True, child=False)
        finish()
    return written[0] if written else None


def _networkx_graph(scanned: dict[str, ModuleInfo]) -> ImportGraph:
    import networkx as nx  # here: a warm audit reads the plain form and never imports it

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
    return ImportGraph(g, modules, {i.path: i for i in scanned.values()},
                       {n: list(g.predecessors(n)) for n in g}, definers(scanned.values()))


def _same(text: str, data: bytes) -> bool:
    try:
        return text.encode("utf-8") == data
    except UnicodeEncodeError:  # a lone surrogate: not what any file holds
        return False


def _scan_bytes(job: tuple[str, bytes]) -> ModuleInfo:
    rel, data = job
    return scan_module(rel, data.decode("utf-8", errors="replace"))


class _GraphCache:
    """One pickle per checkout root: ``{path: (content digest, ModuleInfo)}``, written
    atomically; a damaged or foreign file is simply a miss."""

    VERSION = 2  # 2: ModuleInfo carries the resolver's facts, functions only their lines

    def __init__(self, root: str) -> None:
        key = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:24]
        self.path = os.path.join(cache_dir(), f"graph-{key}.pickle")
        self.entries: dict[str, tuple[bytes, ModuleInfo]] = {}
        self.dirty = False
        payload = read_cache(self.path)
        try:
            with gc_paused():  # many small objects: unpickling is twice as fast without it
                version, entries = pickle.loads(payload) if payload else (None, None)
            if version == self.VERSION and isinstance(entries, dict):
                self.entries = entries
        except Exception:
            self.entries = {}

    @staticmethod
    def digest(data: bytes) -> bytes:
        return hashlib.blake2b(data, digest_size=16).digest()

    def get(self, rel: str, data: bytes) -> ModuleInfo | None:
        hit = self.entries.get(rel)
        return hit[1] if hit and hit[0] == self.digest(data) else None

    def put(self, rel: str, data: bytes, info: ModuleInfo) -> None:
        self.entries[rel] = (self.digest(data), info)
        self.dirty = True

    def save(self) -> None:
        if self.dirty:
            write_cache(self.path, pickle.dumps((self.VERSION, self.entries),
                                                pickle.HIGHEST_PROTOCOL), keep=32)


# ---- the plain form and the tree's stamp ---------------------------------------------------

PLAIN_VERSION = 3  # 2: the resolver's facts, the names' definers; 3: the facts apart


def _walk(root: str) -> tuple[list[tuple[str, tuple[int, int, int, int, int] | None]],
                              list[tuple[str, str, tuple[int, int, int, int, int] | None]]]:
    """The directories walked, each stat taken before it is listed, and the ``.py`` files
    ``(rel, path, stat)``, each stat taken before it is read (what the stamp records); in
    name order. Like ``os.walk``: links to directories are not followed."""
    dirs, files = [], []
    todo = [root]
    while todo:
        d = todo.pop()
        dirs.append((d, stat_of(d, follow=False)))
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        sub = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                continue
            if is_dir:
                if e.name not in _SKIP_DIRS and not e.name.startswith(".") and not e.is_symlink():
                    sub.append(e.path)
            elif e.name.endswith(".py"):
                rel = os.path.relpath(e.path, root).replace(os.sep, "/")
                files.append((rel, e.path, stat_of(e.path, follow=True)))
        todo += reversed(sub)
    files.sort(key=lambda f: f[0])
    return dirs, files


def _tree_stamp(root: str) -> Stamp:
    return Stamp(cache_dir(), ["import-graph", str(PLAIN_VERSION), str(sorted(_SKIP_DIRS)),
                               code_stamp(os.path.dirname(os.path.abspath(__file__))),
                               os.path.abspath(root), os.path.realpath(root)],
                 digest=_file_digest)


def _file_digest(path: str) -> str:
    with open(path, "rb") as fh:
        return _GraphCache.digest(fh.read()).hex()


def _change_key(texts: dict[str, str] | None, exclude: Iterable[str] | None) -> str:
    """What the head side changes: each overridden file's content, each dropped file."""
    h = hashlib.sha256(b"change\0")
    for rel, text in sorted((texts or {}).items()):
        h.update(f"{rel}\0{_GraphCache.digest(text.encode('utf-8', 'surrogatepass')).hex()}\0"
                 .encode("utf-8", "surrogatepass"))
    h.update(b"\0exclude\0")
    for rel in sorted(exclude or ()):
        h.update(rel.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _plain_path(tree: str, change: str) -> str:
    key = hashlib.sha256(f"{tree}\0{change}".encode()).hexdigest()
    return os.path.join(cache_dir(), f"graphplain-{key}.marshal")


def _write_plain(path: str, graph: ImportGraph) -> None:
    """Each module's info is marshalled on its own: a warm audit decodes the few hundred it
    looks at, not the thousands of the checkout."""
    infos = {id(i): i for i in (*graph.modules.values(), *graph.by_path.values())}
    rows = {k: (marshal.dumps((i.path, i.module, i.imports, i.functions, i.imported_names)),
                marshal.dumps(tuple(getattr(i, f) for f in _FACTS)))
            for k, i in infos.items()}
    write_cache(path, marshal.dumps((
        PLAIN_VERSION, rows, {m: id(i) for m, i in graph.modules.items()},
        {p: id(i) for p, i in graph.by_path.items()}, graph.imported_by,
        marshal.dumps(graph.definers()))), keep=4)


def _read_plain(path: str) -> ImportGraph | None:
    payload = read_cache(path)
    if payload is None:
        return None
    try:
        version, rows, modules, by_path, imported_by, defined = marshal.loads(payload)
        if version != PLAIN_VERSION or not isinstance(rows, dict):
            return None
        infos = _Infos(rows)
        return ImportGraph(None, _Named(modules, infos), _Named(by_path, infos), imported_by,
                           defined)
    except (ValueError, EOFError, TypeError, KeyError):
        return None


_FACTS = ("bindings", "stars", "code", "bases", "fixtures")  # the resolver's, kept apart


class _LazyInfo(ModuleInfo):
    """A plain form's module info whose resolver facts are decoded when first read: most
    modules an audit looks at are asked only their path and imports."""

    _facts: bytes

    def __getattr__(self, name: str) -> object:
        if name not in _FACTS:
            raise AttributeError(name)
        for f, v in zip(_FACTS, marshal.loads(self.__dict__.pop("_facts")), strict=True):
            setattr(self, f, v)
        return getattr(self, name)


class _Infos:
    """The plain form's module infos, each decoded when first asked for."""

    def __init__(self, rows: dict[int, tuple[bytes, bytes]]) -> None:
        self.rows = rows
        self.done: dict[int, ModuleInfo] = {}

    def __getitem__(self, k: int) -> ModuleInfo:
        got = self.done.get(k)
        if got is None:
            base, facts = self.rows[k]
            info = object.__new__(_LazyInfo)
            (info.path, info.module, info.imports, info.functions,
             info.imported_names) = marshal.loads(base)
            info._facts = facts
            got = self.done[k] = info
        return got


class _Named(Mapping[str, ModuleInfo]):
    """Module infos by name (or path), decoded when looked up."""

    def __init__(self, at: dict[str, int], infos: _Infos) -> None:
        self._at, self._infos = at, infos

    def __getitem__(self, name: str) -> ModuleInfo:
        return self._infos[self._at[name]]

    def __contains__(self, name: object) -> bool:
        return name in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)
