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
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from auditor.behaviour import module_name
from auditor.modinfo import ModuleInfo, UnitCode
from auditor.resolve import definers, scan_code
from testdb.files import read_cache, write_cache
from testdb.gcpause import gc_paused
from testdb.parallel import MIN_ITEMS, in_child_parts, in_fork, parallel_map, usable_cpus
from testdb.stamp import Stamp, cache_dir, code_stamp, stat_of

if TYPE_CHECKING:
    import networkx as nx

    from testdb.parallel import Scans

_T = TypeVar("_T")
_R = TypeVar("_R")

_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", "3rdparty",
              ".tox", ".mypy_cache", ".pytest_cache"}


def _resolve_relative(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    base = parts if is_pkg else parts[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def import_statements(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth: in its body, class bodies, function
    bodies (``def f(): import x``: lazy imports are imports), and the blocks of ``if``,
    ``try``, ``with``, loops and ``match``; in source order.

    Only statement lists are visited, not expressions: an import is a statement, and the
    grammar puts statements only in a node's list fields (``body``, ``orelse``,
    ``finalbody``, ``handlers``' and ``cases``' bodies). ``ast.walk`` finds the same
    statements by visiting every node of the tree, about ten times as many (most of a scan's
    time, docs/benchmarks.md)."""
    todo: list[ast.AST] = list(reversed(tree.body))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        lists = _STATEMENT_LISTS.get(type(node))
        if lists is None:
            lists = _STATEMENT_LISTS[type(node)] = _statement_lists(type(node))
        if not lists:
            continue
        inner: list[ast.AST] = []
        for name in lists:
            inner += getattr(node, name, ())
        todo += reversed(inner)


# The fields of each node class that are statement lists: the statements, and the except
# handlers and match cases whose bodies are statement lists (``body``, ``orelse``,
# ``finalbody``, ``handlers``, ``cases``). Looking up only these, by class, took half the
# time of testing every field of every statement (``_fields`` and ``isinstance`` of each
# item), docs/benchmarks.md.
_STATEMENT_LISTS: dict[type, tuple[str, ...]] = {}
_STATEMENT_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statement_lists(kind: type) -> tuple[str, ...]:
    return tuple(f for f in getattr(kind, "_fields", ()) if f in _STATEMENT_FIELDS)


def scan_module(path: str, text: str) -> ModuleInfo:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ModuleInfo(path, module_name(path))
    return scan_parsed(path, tree)


def scan_parsed(path: str, tree: ast.Module) -> ModuleInfo:
    """``scan_module`` of a module already parsed (``_Shared`` parses a test file once for
    this and for the inventory); the tree is only read."""
    mod = module_name(path)
    info = ModuleInfo(path, mod)
    is_pkg = path.endswith("__init__.py")
    for node in import_statements(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                info.imports.add(a.name)
        else:
            base = (_resolve_relative(mod, is_pkg, node.level, node.module) if node.level
                    else node.module or "")
            info.imports.add(base)
            for a in node.names:
                info.imports.add(f"{base}.{a.name}")
                info.imported_names.add(a.name)

    def visit(node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef,
              prefix: str) -> None:
        # A definition directly in a module, class or function is a statement of its body
        # (no other field holds one): ``ast.iter_child_nodes`` found the same, visiting
        # every argument, decorator and base too.
        for child in node.body:
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
    # Read from the plain form: that form, which a new change over the same tree patches.
    plain: _Plain | None = None
    # What identifies the content where it was read from or kept as a plain form (the form's
    # file name: the tree's content and the change), for caches of what follows from it.
    key: str | None = None

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
           use_cache: bool, child: bool = True, scans: Scans | None = None,
           networkx: bool = True) -> tuple[Callable[[], ImportGraph], list[str]]:
    """``start_graph``, and the list its function fills with the plain form's path once it
    is written. ``child``: a cold build of many modules may run in a child process;
    ``scans``: what runs the scans the cache lacks (``parallel_map`` unless given);
    ``networkx``: a build of the tree's own graph answers the networkx graph (else the
    plain form, as a child that only writes that form needs: networkx is not imported)."""
    stamp = _tree_stamp(root) if use_cache else None
    hit = stamp.check() if stamp is not None else None
    change = _change_key(texts, exclude)
    written: list[str] = []
    if hit is not None:
        plain = _read_plain(_plain_path(hit[1], change))
        if plain is not None:
            return (lambda: plain), [_plain_path(hit[1], change)]
        # A change no audit of this tree saw: the tree's own graph, patched by the change.
        own = _plain_path(hit[1], NO_CHANGE)
        base = _read_plain(own) if change != NO_CHANGE else None
        patched = _patched(root, base, texts, exclude) if base is not None else None
        if patched is not None:
            path = _plain_path(hit[1], change)
            _write_parts(path, patched.plain)
            patched.key = os.path.basename(path)
            return (lambda: patched), [path]
    dirs, files = _walk(root)
    if child and stamp is not None and len(files) >= MIN_ITEMS and usable_cpus() > 1:
        return _in_child(root, texts, exclude), written
    infos: dict[str, ModuleInfo | None] = {}
    cache = _GraphCache(root) if use_cache else None
    misses: list[tuple[str, bytes]] = []
    digests: dict[str, str] = {}
    overridden: set[str] = set()
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
            overridden.add(rel)
            if stamp is None:
                continue  # with a stamp, the tree's own graph is built too (and patched)
        infos[rel] = cache.get(rel, data) if cache else None
        if infos[rel] is None:
            misses.append((rel, data))
    # A cold checkout has thousands of modules to parse: in worker processes when that many,
    # started now and collected by finish().
    results = (scans or parallel_map)(_scan_bytes, misses)

    def finish() -> ImportGraph:
        for (rel, data), info in zip(misses, results, strict=True):
            infos[rel] = info
            if cache:
                cache.put(rel, data, info)
        if cache:
            cache.save()
        if stamp is not None and len(digests) == len(files):
            tree = hashlib.sha256("\0".join(f"{r}:{d}" for r, d in sorted(digests.items()))
                                  .encode()).hexdigest()
            # The tree's own graph, and the change's as a new change patches it: one way
            # to a change's graph, whether the tree was cached or not.
            every = {rel: i for rel, i in infos.items() if i is not None}
            own = _plain_of(every)
            _write_parts(_plain_path(tree, NO_CHANGE), own)
            graph: ImportGraph | None = (
                _networkx_graph(every) if networkx and change == NO_CHANGE else _opened(own))
            if change != NO_CHANGE:
                graph = _patched(root, _opened(own), texts, exclude)
                if graph is not None and graph.plain is not None:
                    _write_parts(_plain_path(tree, change), graph.plain)
            if graph is not None:
                written.append(_plain_path(tree, change))
                graph.key = os.path.basename(written[-1])
                where = {rel: path for rel, path, _ in files}
                stamp.write(dirs, [(path, st) for _, path, st in files],
                            {where[r]: d for r, d in digests.items()}, {}, tree)
                return graph
        kept = {rel: i for rel, i in infos.items() if i is not None and rel not in overridden}
        scanned = dict(kept)
        for rel, text in (texts or {}).items():
            if rel.endswith(".py") and rel not in kept:
                scanned[rel] = scan_module(rel, text)
        return _networkx_graph(scanned)

    return finish, written


def _in_child(root: str, texts: dict[str, str] | None, exclude: set[str] | None
              ) -> Callable[[], ImportGraph]:
    """The build in a child process (``testdb.parallel.in_child_parts``): networkx is
    imported and the scans' results are read there, and the plain form written; the function
    returned reads that form, as a warm audit does. Should the child fail, the graph is built
    here.

    The same child builds the checkout's default static inventory (``start_static(root)``,
    which an audit starts next, takes its answer: ``started_with_graph``): a test file is
    both a module of the graph and a file of the inventory, and parsing it is most of either
    scan, so each is parsed once, for both (``_Shared``)."""
    from testdb.inventory.build import started_with_graph

    answer = in_child_parts(_build_both, root, texts, exclude, _inventory_dir())
    withdraw = started_with_graph(root, lambda: answer("inventory"))

    def opened() -> ImportGraph:
        withdraw()  # the inventory not taken by now is built afresh by whoever asks later
        path = answer("graph")
        plain = _read_plain(path) if path else None
        if plain is not None:
            return plain
        return _start(root, texts, exclude, use_cache=True, child=False)[0]()

    return opened


def _inventory_dir() -> str:
    from testdb.inventory.cache import FileCache

    return str(FileCache().directory)


def _build_both(tell: Callable[[str, object], None], root: str, texts: dict[str, str] | None,
                exclude: set[str] | None, directory: str) -> None:
    """In the child: the inventory and the graph from one set of scans; each answer (the
    whole inventory's key, the plain form's path) told as soon as it is written."""
    from testdb.inventory import build as inventory
    from testdb.inventory.cache import FileCache
    from testdb.inventory.config import DEFAULT_CONFIG

    with gc_paused():
        shared = _Shared()
        graph_done, written = _start(root, texts, exclude, use_cache=True, child=False,
                                     scans=shared.scans("graph"), networkx=False)
        inventory_done, whole = inventory._start(
            root, None, DEFAULT_CONFIG, FileCache(directory), None,
            child=False, scans=shared.scans("inventory"))
        shared.run()

        def graph_part() -> None:
            graph_done()
            tell("graph", written[0] if written else None)

        # The two builds' last steps (packing and writing each one's caches, different files)
        # at once: the graph's in a fork of this process, the inventory's here.
        in_fork(graph_part)
        try:
            inventory_done()
            tell("inventory", whole)
        except Exception:  # the parent builds it again and meets the error there
            pass


class _Shared:
    """The scans two builds ask for, run as one map (``Scans``): a file that both scan
    (a test file: a module of the graph, a file of the inventory, with the same bytes) is
    parsed once, and each build's scan reads that tree. Each build's results come back to
    it in the order it asked, as from ``parallel_map``; ``run`` runs them."""

    def __init__(self) -> None:
        self.asked: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {}
        self.results: dict[str, list[Any]] = {}

    def scans(self, name: str) -> Scans:
        def scans(fn: Callable[[_T], _R], items: list[_T], /) -> Iterator[_R]:
            self.asked[name] = (fn, items)
            return self._results(name)

        return scans

    def _results(self, name: str) -> Iterator[Any]:
        yield from self.results[name]  # a generator: read once ``run`` has filled it

    def run(self) -> None:
        from testdb.inventory.build import _scan_prepared

        graph_fn, modules = self.asked.get("graph", (_scan_bytes, []))
        inventory_fn, files = self.asked.get("inventory", (_scan_prepared, []))
        # Inventory jobs by the file's shown path, which is its path below the checkout (the
        # default test directories lie inside it): the graph's name for the same module.
        by_path = {job[6]: k for k, job in enumerate(files)}
        shared = graph_fn is _scan_bytes and inventory_fn is _scan_prepared
        jobs: list[tuple[Any, ...]] = []
        slots: list[tuple[int, int]] = []
        paired: set[int] = set()
        for g, (rel, data) in enumerate(modules):
            k = by_path.get(rel, -1) if shared else -1
            if k >= 0 and files[k][0] == data and _one_parse_fits(data):
                jobs.append(("both", rel, data, files[k]))
                slots.append((g, k))
                paired.add(k)
            else:
                jobs.append(("one", graph_fn, (rel, data)))
                slots.append((g, -1))
        for k, job in enumerate(files):
            if k not in paired:
                jobs.append(("one", inventory_fn, job))
                slots.append((-1, k))
        graph_out: list[Any] = [None] * len(modules)
        inventory_out: list[Any] = [None] * len(files)
        for (g, k), got in zip(slots, parallel_map(_shared_scan, jobs, min_items=MIN_ITEMS),
                               strict=True):
            if g >= 0 and k >= 0:
                graph_out[g], inventory_out[k] = got
            elif g >= 0:
                graph_out[g] = got
            else:
                inventory_out[k] = got
        self.results = {"graph": graph_out, "inventory": inventory_out}


def _shared_scan(job: tuple[Any, ...]) -> Any:
    """One job of ``_Shared.run``: one build's scan, or both scans of one parse."""
    if job[0] == "one":
        return job[1](job[2])
    from testdb.inventory.build import scan_prepared_parsed

    _, rel, data, file_job = job
    parsed: ast.Module | SyntaxError | ValueError
    try:
        parsed = ast.parse(data)
    except (SyntaxError, ValueError) as e:
        parsed = e
    info = (scan_parsed(rel, parsed) if isinstance(parsed, ast.Module)
            else ModuleInfo(rel, module_name(rel)))
    return info, scan_prepared_parsed(file_job, parsed)


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)


def _one_parse_fits(data: bytes) -> bool:
    """Whether ``ast.parse(data)`` is the tree the graph's scan parses (``_scan_bytes``: the
    text decoded as UTF-8, bad bytes replaced): the bytes are UTF-8, with no byte-order
    mark and no coding cookie naming another encoding. Else each scan parses its own."""
    if data.startswith(b"\xef\xbb\xbf"):
        return False
    cookie = _COOKIE.search(b"\n".join(data.split(b"\n", 2)[:2]))
    if cookie is not None and cookie.group(1).lower().replace(b"_", b"-") not in (
            b"utf-8", b"utf8"):
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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

PLAIN_VERSION = 4  # 2: the resolver's facts, the names' definers; 3: the facts apart;
# 4: the table a change's graph is recomputed from


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


NO_CHANGE = _change_key(None, None)


def _plain_path(tree: str, change: str) -> str:
    key = hashlib.sha256(f"{tree}\0{change}".encode()).hexdigest()
    return os.path.join(cache_dir(), f"graphplain-{key}.marshal")


@dataclass
class _Plain:
    """The plain form as stored: each module's info marshalled on its own (its base and its
    resolver facts), by a key; the keys by module name and by path; the edges; the names'
    definers; and ``table``, one row per module in the order the graph was built
    ``(path, module, imports, units, classes)``: what a change's graph is recomputed from
    without decoding every module's info (``_patched``)."""

    rows: dict[int, tuple[bytes, bytes]]
    modules: dict[str, int]
    by_path: dict[str, int]
    imported_by: dict[str, list[str]]
    defined: bytes
    table: bytes


def _row(info: ModuleInfo) -> tuple[bytes, bytes]:
    return (marshal.dumps((info.path, info.module, info.imports, info.functions,
                           info.imported_names)),
            marshal.dumps(tuple(getattr(info, f) for f in _FACTS)))


def _table_row(info: ModuleInfo) -> tuple[str, str, tuple[str, ...], tuple[str, ...],
                                          tuple[str, ...]]:
    return info.path, info.module, tuple(info.imports), tuple(info.code), tuple(info.bases)


def _plain_of(scanned: dict[str, ModuleInfo]) -> _Plain:
    """The plain form of the graph of ``scanned`` (by path, in build order), as
    ``_networkx_graph`` builds it, without networkx (``_edges``). Each module's info is
    marshalled on its own: a warm audit decodes the few hundred it looks at, not the
    thousands of the checkout."""
    infos = list(scanned.values())
    table = [_table_row(i) for i in infos]
    modules: dict[str, int] = {}
    for k, i in enumerate(infos, 1):
        modules[i.module] = k  # as {i.module: i}: the last module of a name
    return _Plain({k: _row(i) for k, i in enumerate(infos, 1)}, modules,
                  {i.path: k for k, i in enumerate(infos, 1)}, _edges(table),
                  marshal.dumps(definers(infos)), marshal.dumps(table))


def _write_parts(path: str, plain: _Plain | None) -> None:
    if plain is not None:
        write_cache(path, marshal.dumps((
            PLAIN_VERSION, plain.rows, plain.modules, plain.by_path, plain.imported_by,
            plain.defined, plain.table)), keep=4)


def _read_plain(path: str) -> ImportGraph | None:
    payload = read_cache(path)
    if payload is None:
        return None
    try:
        version, rows, modules, by_path, imported_by, defined, table = marshal.loads(payload)
        if version != PLAIN_VERSION or not isinstance(rows, dict):
            return None
        graph = _opened(_Plain(rows, modules, by_path, imported_by, defined, table))
        graph.key = os.path.basename(path)
        return graph
    except (ValueError, EOFError, TypeError, KeyError):
        return None


def _opened(plain: _Plain) -> ImportGraph:
    infos = _Infos(plain.rows)
    return ImportGraph(None, _Named(plain.modules, infos), _Named(plain.by_path, infos),
                       plain.imported_by, plain.defined, plain)


def _patched(root: str, base: ImportGraph, texts: dict[str, str] | None,
             exclude: set[str] | None) -> ImportGraph | None:
    """The graph of the tree ``base`` is the graph of, with ``texts`` and ``exclude`` (the
    head side of a change) over it, as ``_start`` builds it from scratch: the modules the
    change leaves alone keep their place and their stored info; a module whose head-side
    text differs from its file is scanned from that text and, as a module the tree lacks,
    comes after the others, in the change's order; a dropped module is gone. The edges and
    the names' definers are recomputed over every module (``_edges``, ``definers``: the
    table's rows, no module's info decoded): a change that adds or drops an import or a
    module changes other modules' edges and distances too. None when a changed file cannot
    be read (the caller builds from scratch)."""
    plain = base.plain
    if plain is None:
        return None
    texts, exclude = texts or {}, exclude or set()
    table: list[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = \
        marshal.loads(plain.table)
    present = {row[0] for row in table}
    overridden = {rel for rel in exclude if rel in present}
    for rel, text in texts.items():
        if rel in present and rel not in overridden:
            try:
                with open(os.path.join(root, rel), "rb") as fh:
                    data = fh.read()
            except OSError:
                return None
            if not _same(text, data):
                overridden.add(rel)
    added = [rel for rel in texts if rel.endswith(".py") and (
        rel not in present or rel in overridden)]
    if not overridden and not added:
        return base
    scanned = {rel: scan_module(rel, texts[rel]) for rel in added}
    keys = iter(range(-1, -len(added) - 1, -1))  # the stored rows' keys are positive
    rows = {k: plain.rows[k] for rel, k in plain.by_path.items() if rel not in overridden}
    new_keys = {}
    for rel, info in scanned.items():
        k = new_keys[rel] = next(keys)
        rows[k] = _row(info)
    order = [(row, plain.by_path[row[0]]) for row in table if row[0] not in overridden]
    order += [(_table_row(info), new_keys[rel]) for rel, info in scanned.items()]
    modules: dict[str, int] = {}
    by_path: dict[str, int] = {}
    for (path, module, *_), k in order:
        modules[module] = k
        by_path[path] = k
    units = [ModuleInfo(path, module, code=dict.fromkeys(code, _NO_CODE),
                        bases=dict.fromkeys(bases, ()))
             for (path, module, _, code, bases), _ in order]
    patched = _Plain(rows, modules, by_path, _edges([row for row, _ in order]),
                     marshal.dumps(definers(units)),
                     marshal.dumps([row for row, _ in order]))
    return _opened(patched)


_NO_CODE: UnitCode = ((), (), (), ())


def _edges(table: Iterable[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]]
           ) -> dict[str, list[str]]:
    """Who imports each module (``ImportGraph.imported_by``), from the table's rows in build
    order: ``_networkx_graph``'s edges, node and predecessor order (by hand, so that a new
    change's graph needs no networkx: ~0.1 s to import, and building the graph of the whole
    tree took most of a new diff's time)."""
    rows = list(table)
    names = dict.fromkeys(module for _, module, *_ in rows)
    suffix: dict[str, str] = {}
    for name in names:
        parts = name.split(".")
        for k in range(1, len(parts)):
            suffix.setdefault(".".join(parts[k:]), name)
    preds: dict[str, dict[str, None]] = {}
    for _, module, imports, *_ in rows:
        preds.setdefault(module, {})
        for imp in imports:
            target = imp if imp in names else suffix.get(imp)
            if target and target != module:
                preds.setdefault(target, {})[module] = None
    return {n: list(p) for n, p in preds.items()}


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
