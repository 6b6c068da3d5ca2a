"""Build the static inventory of a checkout: find test modules, scan them (cached, in parallel)."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import marshal
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from testdb.errors import InputError
from testdb.files import read_cache, write_cache
from testdb.gcpause import gc_paused
from testdb.inventory.cache import FileCache, file_key
from testdb.inventory.config import DEFAULT_CONFIG, StaticConfig
from testdb.inventory.groups import Group, expand
from testdb.inventory.model import Inventory, InventoryItem
from testdb.inventory.packed import PackedInventory
from testdb.inventory.packed_rows import Prepared, prepared_groups
from testdb.inventory.tree import inventory_stamp, whole_format
from testdb.parallel import MIN_ITEMS, Scans, in_child, parallel_map, usable_cpus
from testdb.stamp import Stamp

# (directory relative to the checkout, id prefix): the two pytest roots of TensorRT-LLM.
DEFAULT_DIRS: tuple[tuple[str, str], ...] = (
    ("tests/integration/defs", ""),
    ("tests/unittest", "unittest/"),
)
_PARALLEL_MIN_FILES = MIN_ITEMS  # module-level, so a test can make the pool start at once
_END = object()


@dataclass(frozen=True)
class TestFile:
    """One test module to scan."""

    __test__ = False  # not a pytest test class

    abspath: str
    file_id: str  # the id's file part: prefix + path below the pytest root
    path: str  # as reported (relative to the checkout root where possible)
    dirs: tuple[str, ...]  # directory names below the pytest root (pytest -k sees them)


def find_test_files(root: str, dirs: Sequence[tuple[str, str]] | None = None,
                    config: StaticConfig = DEFAULT_CONFIG) -> list[TestFile]:
    """Test modules under each ``(dir, prefix)``, sorted; absent default dirs are skipped."""
    explicit = dirs is not None
    out: list[TestFile] = []
    root_path = Path(root)
    skip_dir, test_file = _matcher(config.norecursedirs), _matcher(config.python_files)
    for base, prefix in (DEFAULT_DIRS if dirs is None else dirs):
        top = root_path / base
        if not top.is_dir():
            if explicit:
                raise InputError(f"test directory {top} does not exist",
                                 hint="pass an existing directory below --root")
            continue
        try:  # the shown path of a file is this and its path below top (once per top)
            top_shown: str | None = top.relative_to(root_path).as_posix()
        except ValueError:
            top_shown = None
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not skip_dir(d))
            rel_dir = os.path.relpath(dirpath, top)
            parts = () if rel_dir == "." else tuple(Path(rel_dir).parts)
            for name in sorted(filenames):
                if not test_file(name):
                    continue
                if name == "conftest.py":
                    continue
                abspath = os.path.join(dirpath, name)
                rel = "/".join((*parts, name))
                shown = (abspath if top_shown is None else rel if top_shown == "."
                         else f"{top_shown}/{rel}")
                out.append(TestFile(abspath, prefix + rel, shown, parts))
    return out


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Whether a name matches any of the glob ``patterns`` (as ``fnmatch.fnmatch`` on this
    system), as one compiled expression: pattern by pattern cost more than the walk."""
    rx = re.compile("|".join(fnmatch.translate(os.path.normcase(p)) for p in patterns)
                    or r"(?!)")
    return lambda name: rx.match(os.path.normcase(name)) is not None


# (content, file id, -k directory names, config, cache key, cache dir or None, shown path)
Job = tuple[bytes, str, tuple[str, ...], StaticConfig, str, str | None, str]


def scan_groups(content: bytes, file_id: str, *, dirs: tuple[str, ...],
                config: StaticConfig) -> list[Group]:
    """The scanner (``testdb.inventory.static``), imported on first use: a warm build never
    scans, and the scanner's modules take longer to import than a warm build takes."""
    from testdb.inventory.static import scan_groups as scan

    return scan(content, file_id, dirs=dirs, config=config)


def _scan(job: Job) -> list[Group]:
    content, file_id, dirs, config, _, _, _ = job
    return scan_groups(content, file_id, dirs=dirs, config=config)


def _scan_prepared(job: Job) -> Prepared:
    """The file as the packed inventory keeps it, prepared where it was scanned."""
    return prepared_groups(job[1], job[6], _scan(job))


def scan_prepared_parsed(job: Job, parsed: Any) -> Prepared:
    """``_scan_prepared`` of a file already parsed: ``parsed`` is ``ast.parse`` of the job's
    content, or what it raised (``auditor.graph`` parses a test file once for this and for
    the import graph)."""
    from testdb.inventory.static import parsed_groups

    content, file_id, dirs, config, _, _, shown = job
    groups = parsed_groups(parsed, content, file_id, dirs=dirs, config=config)
    return prepared_groups(file_id, shown, groups)


# Cold builds of a checkout's default inventory (``start_static(root)``) already running in
# a child process of this one, started with the scans of its import graph, which parse each
# test file once for both (``auditor.graph``); by (checkout, cache directory): the function
# that answers the whole inventory's key (None: that build failed).
_STARTED: dict[tuple[str, str], Callable[[], str | None]] = {}


def started_with_graph(root: str, answer: Callable[[], str | None]) -> Callable[[], None]:
    """Let the next ``start_static(root)`` of this process that finds no current inventory
    take its answer from ``answer`` (a build of the same tree, running). The function
    returned withdraws the offer, once the graph is asked for: a later call builds again."""
    key = _started_key(root, FileCache())
    _STARTED[key] = answer

    def withdraw() -> None:
        if _STARTED.get(key) is answer:
            del _STARTED[key]

    return withdraw


def _started_key(root: str, store: FileCache) -> tuple[str, str]:
    return os.path.realpath(root), str(store.directory)


def build_static(root: str, dirs: Sequence[tuple[str, str]] | None = None, *,
                 config: StaticConfig = DEFAULT_CONFIG, cache: FileCache | bool = True,
                 workers: int | None = None) -> Inventory:
    """The static inventory of a checkout.

    ``dirs``: ``(directory, id prefix)`` pairs, relative to ``root`` or absolute; the default
    is ``tests/integration/defs`` (no prefix) and ``tests/unittest`` (prefix ``unittest/``).
    ``cache``: True for the default cache dir (``TESTDB_CACHE_DIR``), a FileCache, or False.
    ``workers``: processes for scanning uncached files (default: the CPU count, when there
    are enough files to pay for starting them).
    """
    return start_static(root, dirs, config=config, cache=cache, workers=workers)()


def static_and_units(root: str) -> tuple[Inventory, list[str] | None]:
    """``build_static(root)`` and, where kept beside it, ``unit_test_ids(root)`` (else None:
    ask that), proving the test tree unchanged once: ``where`` asks both, and a stamp check
    stats every test file (~30 ms for 2,000 on this project's machine)."""
    with gc_paused():
        finish, whole = _start(root, None, DEFAULT_CONFIG, FileCache(), None)
        inv = finish()
    return inv, _stored_units(FileCache(), whole) if whole is not None else None


def start_static(root: str, dirs: Sequence[tuple[str, str]] | None = None, *,
                 config: StaticConfig = DEFAULT_CONFIG, cache: FileCache | bool = True,
                 workers: int | None = None) -> Callable[[], Inventory]:
    """``build_static`` in two steps: this finds and reads the test files and starts the
    scans the caches lack (in worker processes, when many); the function returned collects
    them and packs the inventory. Between the two the caller can do other work (the audit
    parses the test plan)."""
    with gc_paused():
        finish, _ = _start(root, dirs, config, cache, workers)

    def collect() -> Inventory:
        with gc_paused():
            return finish()

    return collect


def _start(root: str, dirs: Sequence[tuple[str, str]] | None, config: StaticConfig,
           cache: FileCache | bool, workers: int | None, *, child: bool = True,
           scans: Scans | None = None) -> tuple[Callable[[], Inventory], str | None]:
    """``start_static``: the function that finishes the build, and the key of the whole
    inventory it answers (None where the caller cannot know it yet). ``child``: a cold
    build of many files may run in a child process (``_in_child``), or be one already
    running (``started_with_graph``); ``scans``: what runs the scans the per-file cache
    lacks (``parallel_map`` unless given)."""
    store = FileCache() if cache is True else (cache or None)
    stamp = None

    def rebuild() -> Inventory:  # a damaged whole inventory: built again
        with gc_paused():
            return _start(root, dirs, config, store or False, workers, child=child)[0]()

    if store is not None:
        # Unchanged test files since the last build (by stat, as for the test plan): load the
        # whole inventory without walking the tree or reading a file.
        stamp = _stamp(root, dirs, config, store)
        hit = stamp.check()
        if hit is not None:
            cached = _open_whole(store, hit[1], rebuild)
            if cached is not None:
                return (lambda: cached), hit[1]
        running = (_STARTED.pop(_started_key(root, store), None)
                   if child and dirs is None and config is DEFAULT_CONFIG else None)
        if running is not None:
            return _opener(running, root, dirs, config, store, workers), None
    dir_stats = Stamp.stat_dirs(_test_dirs(root, dirs, config))  # before the listing
    files = find_test_files(root, dirs, config)
    if child and store is not None and len(files) >= _PARALLEL_MIN_FILES and usable_cpus() > 1:
        return _in_child(root, dirs, config, store, workers), None
    file_stats = Stamp.stat_files(tf.abspath for tf in files)
    fingerprint = config.fingerprint()
    contents: list[bytes] = []
    keys: list[str] = []
    for tf in files:
        try:
            with open(tf.abspath, "rb") as f:
                content = f.read()
        except OSError as e:
            raise InputError(f"cannot read test module: {e}") from e
        contents.append(content)
        keys.append(file_key(content, fingerprint, tf.file_id, "/".join(tf.dirs)))
    if store is None:
        items = _start_scans(files, contents, keys, None, config, workers)
        return (lambda: Inventory(i for file_items in items() for i in file_items)), None

    def stamped(inv: PackedInventory) -> PackedInventory:
        if stamp is not None:
            stamp.write(dir_stats, file_stats,
                        {tf.abspath: hashlib.sha256(c).hexdigest()
                         for tf, c in zip(files, contents, strict=True)}, {}, whole)
        return inv

    # The whole inventory, cached under a digest of every file's key: a warm build loads
    # one file instead of decoding thousands of per-file JSON entries.
    built_from = [f"{k}:{tf.path}" for k, tf in zip(keys, files, strict=True)]
    whole = hashlib.sha256("\0".join([_whole_format(), *built_from]).encode()).hexdigest()
    found = _open_whole(store, whole, rebuild)
    if found is not None:
        return (lambda: stamped(found)), whole
    # Most builds follow one of the same tree with a few test files changed: the last
    # build is updated by the files that changed, and only those are scanned.
    last = stamp.recorded_key() if stamp is not None else None
    previous = (_load_whole(store.directory, last) if last else None) or \
        PackedInventory.from_blobs({})
    todo = [i for i, tf in enumerate(files)
            if previous.blob_for(tf.file_id, built_from[i]) is None]
    prepared = _start_scans([files[i] for i in todo], [contents[i] for i in todo],
                            [keys[i] for i in todo], store, config, workers, prepare=True,
                            scans=scans)

    def finish() -> Inventory:
        # A module without tests has no place in the inventory.
        fresh = {files[i].file_id: p for i, p in zip(todo, prepared(), strict=True)
                 if p.ids or p.placeholders}
        inv = previous.replace_files({files[i].file_id for i in todo}, {},
                                     order=[tf.file_id for tf in files],
                                     keys={files[i].file_id: built_from[i] for i in todo},
                                     prepared=fresh)
        _save_whole(store.directory, whole, inv)
        return stamped(inv)

    return finish, whole


def _in_child(root: str, dirs: Sequence[tuple[str, str]] | None, config: StaticConfig,
              store: FileCache, workers: int | None) -> Callable[[], Inventory]:
    """The build in a child process (``testdb.parallel.in_child``), which writes the whole
    inventory to the cache; the function returned opens it, as a warm build does (its blobs
    read when asked for). Should the child fail, the build runs here."""
    built = in_child(_build_whole, root, dirs, config, str(store.directory), workers)
    return _opener(built, root, dirs, config, store, workers)


def _opener(built: Callable[[], str | None], root: str,
            dirs: Sequence[tuple[str, str]] | None, config: StaticConfig, store: FileCache,
            workers: int | None) -> Callable[[], Inventory]:
    """Opens the whole inventory whose key ``built`` answers (a child process's build), or
    builds it here should that fail."""

    def here() -> PackedInventory:
        got = _start(root, dirs, config, store, workers, child=False)[0]()
        assert isinstance(got, PackedInventory)  # built with a store: packed
        return got

    def opened() -> Inventory:
        whole = built()
        inv = _open_whole(store, whole, here) if whole else None
        return inv if inv is not None else here()

    return opened


def _build_whole(root: str, dirs: Sequence[tuple[str, str]] | None, config: StaticConfig,
                 directory: str, workers: int | None) -> str | None:
    """In the child: build, write the whole inventory, and answer its key."""
    with gc_paused():
        finish, whole = _start(root, dirs, config, FileCache(directory), workers, child=False)
        finish()
    return whole


@overload
def _start_scans(files: list[TestFile], contents: list[bytes], keys: list[str],
                 store: FileCache | None, config: StaticConfig, workers: int | None,
                 prepare: Literal[False] = False, scans: Scans | None = None
                 ) -> Callable[[], list[list[InventoryItem]]]: ...


@overload
def _start_scans(files: list[TestFile], contents: list[bytes], keys: list[str],
                 store: FileCache | None, config: StaticConfig, workers: int | None,
                 prepare: Literal[True], scans: Scans | None = None
                 ) -> Callable[[], list[Prepared]]: ...


def _start_scans(files: list[TestFile], contents: list[bytes], keys: list[str],
                 store: FileCache | None, config: StaticConfig, workers: int | None,
                 prepare: bool = False, scans: Scans | None = None
                 ) -> Callable[[], list[list[InventoryItem]]] | Callable[[], list[Prepared]]:
    """Each file's items (``prepare``: the file as the packed inventory keeps it): from the
    per-file cache, else scanned (in parallel when many). The scans start now; the function
    returned collects them."""
    cache_dir = str(store.directory) if store is not None else None
    results: list[list[Group] | None] = []
    todo: list[int] = []
    jobs: list[Job] = []
    for idx, tf in enumerate(files):
        key = keys[idx]
        hit = store.get(key) if store is not None else None
        results.append(hit)
        if hit is None:
            todo.append(idx)
            jobs.append((contents[idx], tf.file_id, tf.dirs, config, key, cache_dir, tf.path))
    fn = _scan_prepared if prepare else _scan
    scanned: Iterator[Any] = (scans(fn, jobs) if scans is not None else parallel_map(
        fn, jobs, workers=workers, min_items=_PARALLEL_MIN_FILES))

    def collect() -> list[Any]:
        # Streamed: each file is expanded while workers still scan the later ones.
        pending = set(todo)
        out: list[Any] = []
        for idx, tf in enumerate(files):
            if idx in pending:
                got = next(scanned)
                out.append(got if prepare else expand(got, tf.file_id, tf.path))
                continue
            hit = results[idx] or []
            out.append(prepared_groups(tf.file_id, tf.path, hit) if prepare
                       else expand(hit, tf.file_id, tf.path))
        # Read to the end: that is what lets the workers go (``parallel_map``).
        if next(scanned, _END) is not _END:
            raise RuntimeError("more scan results than files scanned")
        return out

    return collect


def _whole_format() -> str:
    """What the whole-inventory cache's layout depends on: its format and this code."""
    return whole_format()


def _test_dirs(root: str, dirs: Sequence[tuple[str, str]] | None, config: StaticConfig
               ) -> list[str]:
    """The directories ``find_test_files`` lists, and the ones between them and the root
    (the root's own listing does not matter: a cache directory inside it changes it)."""
    top_root = os.path.abspath(root)
    out = set()
    skip_dir = _matcher(config.norecursedirs)
    for base, _ in (DEFAULT_DIRS if dirs is None else dirs):
        top = os.path.abspath(os.path.join(root, base))
        d = top
        while d.startswith(top_root + os.sep):
            out.add(d)
            d = os.path.dirname(d)
        for dirpath, dirnames, _ in os.walk(top):
            dirnames[:] = [n for n in dirnames if not skip_dir(n)]
            out.add(dirpath)
    return sorted(out)


def unit_test_ids(root: str) -> list[str]:
    """The static inventory's unit-test ids (``unittest/...``, placeholders left out). While
    the test tree is unchanged (the stamp holds), one small file is read and nothing is
    built: ``where`` asks this to learn whether a pattern names a unit test at all."""
    store = FileCache()
    stamp = _stamp(root, None, DEFAULT_CONFIG, store)
    hit = stamp.check()
    if hit is not None:
        stored = _stored_units(store, hit[1])
        if stored is not None:
            return stored
    ids = _unit_ids(build_static(root))
    hit = stamp.check()
    if hit is not None:  # the build's own stamp: remember the ids for the next call
        write_cache(str(_units_path(store.directory, hit[1])), marshal.dumps(ids), keep=3)
    return ids


def _stored_units(store: FileCache, digest: str) -> list[str] | None:
    """The unit-test ids kept beside the whole inventory of key ``digest`` (None: none)."""
    payload = read_cache(str(_units_path(store.directory, digest)))
    with contextlib.suppress(ValueError, EOFError, TypeError):
        ids = marshal.loads(payload) if payload is not None else None
        if isinstance(ids, list):
            return ids
    return None


def _unit_ids(inv: Inventory) -> list[str]:
    if isinstance(inv, PackedInventory):
        return inv.ids_starting("unittest/")
    return [i for i in inv.ids() if i.startswith("unittest/")]


def _stamp(root: str, dirs: Sequence[tuple[str, str]] | None, config: StaticConfig,
           store: FileCache) -> Stamp:
    """The test tree's stamp (``testdb.inventory.tree``: a warm ``stats`` checks it too)."""
    return inventory_stamp(root, dirs, config.fingerprint(), str(store.directory))


def _units_path(directory: Path, digest: str) -> Path:
    return directory / f"units-{digest}.marshal"


def _whole_path(directory: Path, digest: str) -> Path:
    return directory / f"whole-{digest}.records"


def _open_whole(store: FileCache, digest: str, build: Callable[[], Inventory]
                ) -> PackedInventory | None:
    """The whole inventory cached under ``digest``, its blobs read when asked for; should
    one fail its check, the file is removed and the answers come from ``build()``."""
    path = _whole_path(store.directory, digest)

    def rebuild() -> PackedInventory:
        with contextlib.suppress(OSError):
            os.unlink(path)
        got = build()
        assert isinstance(got, PackedInventory)  # built with a store: packed
        return got

    return PackedInventory.open(str(path), rebuild)


def _load_whole(directory: Path, digest: str) -> PackedInventory | None:
    """A whole inventory to build on, every blob read and checked (None if one fails)."""
    found = PackedInventory.open(str(_whole_path(directory, digest)))
    try:
        return found.materialized() if found is not None else None
    except RuntimeError:  # a damaged blob (and no way to rebuild it here): build afresh
        return None


def _save_whole(directory: Path, digest: str, inv: PackedInventory) -> None:
    # Tens of MB for 100k parametrizations: keep one per checkout in use, not every version.
    inv.write(str(_whole_path(directory, digest)), keep=3)
    write_cache(str(_units_path(directory, digest)), marshal.dumps(_unit_ids(inv)), keep=3)
