"""The caches' one store (testdb/cachestore.py), and the seven caches on it, as one table.

For each cache: the same inputs are a hit; a change of any key ingredient (an input's text, an
option, the tool's version, the layout) is a miss whose answer is computed afresh, and is the
fresh answer (the trap: a cache that ignored the ingredient would hand back the answer of the
inputs before, and these tests would fail); a damaged entry (cut short, scribbled on, empty,
or of another format version under the same name) is a miss, never an exception, and the
answer is computed again and kept again.
"""

from __future__ import annotations

import hashlib
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import testdb
from testdb import cachestore
from testdb.cachestore import Store, cache_key
from testdb.files import read_cache, write_cache

# -- the store and the key builder ---------------------------------------------------------


@pytest.mark.parametrize(("what", "a", "b"), [
    ("another kind", ("audit", 1, {}), ("parts", 1, {})),
    ("another format", ("audit", 1, {}), ("audit", 2, {})),
    ("another value", ("audit", 1, {"x": "a"}), ("audit", 1, {"x": "b"})),
    ("another name", ("audit", 1, {"x": "a"}), ("audit", 1, {"y": "a"})),
    ("None is not empty", ("audit", 1, {"x": None}), ("audit", 1, {"x": ""})),
    ("fields are told apart", ("audit", 1, {"x": "ab", "y": "c"}),
     ("audit", 1, {"x": "a", "y": "bc"})),
    ("a list is not its join", ("audit", 1, {"x": ["a", "b"]}), ("audit", 1, {"x": ["ab"]})),
    ("a list's items are told apart", ("audit", 1, {"x": ["a", "b"]}),
     ("audit", 1, {"x": ["a", "b", ""]})),
    ("bytes and text of other content", ("audit", 1, {"x": b"a"}), ("audit", 1, {"x": "b"})),
])
def test_every_part_of_a_key_makes_another_key(what: str, a: tuple[str, int, dict[str, Any]],
                                               b: tuple[str, int, dict[str, Any]]) -> None:
    assert cache_key(a[0], a[1], **a[2]) != cache_key(b[0], b[1], **b[2]), what
    assert cache_key(a[0], a[1], **a[2]) == cache_key(a[0], a[1], **a[2])  # and is stable


def test_the_tool_version_is_in_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = cache_key("audit", 1, x="a")
    monkeypatch.setattr(testdb, "__version__", testdb.__version__ + ".post1")
    assert cache_key("audit", 1, x="a") != before


def test_a_kind_may_not_hold_the_pruning_separator(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no '-'"):
        Store("audit-text", 1, str(tmp_path))


def _damage(path: Path, how: str) -> None:
    """Damage one cache file as a full disk, a copy cut short, a stray write or another
    version of the tool would."""
    data = bytearray(path.read_bytes())
    if how == "cut":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "scribbled":
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "foreign-format":  # well sealed, written by another layout under this name
        payload = read_cache(str(path))
        assert payload is not None
        kind_fmt, rest = payload.split(b"\0", 1)
        write_cache(str(path), kind_fmt + b"x\0" + rest, keep=None)
    else:
        raise AssertionError(how)


DAMAGES = ["cut", "empty", "scribbled", "foreign-format"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_record_is_a_miss(tmp_path: Path, how: str) -> None:
    store = Store("audit", 1, str(tmp_path))
    key = store.key(x="a")
    assert store.dump(key, {"answer": 42})
    assert store.load(key) == {"answer": 42}
    _damage(Path(store.path(key)), how)
    assert store.get(key) is None and store.load(key) is None
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temp file is left


def test_the_newest_records_of_a_kind_are_kept(tmp_path: Path) -> None:
    store = Store("audit", 1, str(tmp_path), keep=2)
    other = Store("parts", 1, str(tmp_path), keep=2)
    other.put(other.key(n=0), b"p")
    for n in range(4):
        store.put(store.key(n=n), b"a")
        os.utime(store.path(store.key(n=n)), ns=(n * 10**9, n * 10**9))
    store.prune()
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["audit", "audit",
                                                                        "parts"]
    assert store.get(store.key(n=3)) == b"a" and store.get(store.key(n=0)) is None


def test_a_record_read_is_kept_as_the_newest(tmp_path: Path) -> None:
    """Pruning keeps the records used last: one read since (the tree's own import graph,
    which every new diff reads and none writes) outlives newer ones written and never read."""
    store = Store("audit", 1, str(tmp_path), keep=3)
    for n in range(3):
        store.put(store.key(n=n), b"a")
        os.utime(store.path(store.key(n=n)), ns=(n * 10**9, n * 10**9))
    assert store.get(store.key(n=0)) == b"a"  # the oldest written, read: now the newest
    store.put(store.key(n=3), b"a")  # prunes to three: the least recently used goes
    assert [store.get(store.key(n=n)) for n in range(4)] == [b"a", None, b"a", b"a"]


# -- the seven caches, as one table --------------------------------------------------------


@dataclass
class Env:
    """One test's cache directory and the counts of answers computed (not read back)."""

    dir: Path
    monkeypatch: pytest.MonkeyPatch
    computed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Case:
    """A cache, driven through its public functions: ``answer(env, inputs)`` gives the
    answer, read from the cache or computed (then kept), and records which in env.computed.
    ``fresh(inputs)``: the answer with no cache."""

    name: str
    answer: Callable[[Env, dict[str, Any]], Any]
    fresh: Callable[[dict[str, Any]], Any]
    base: dict[str, Any]
    # (what, how the inputs change) for every key ingredient; a change given as a function of
    # the env changes the world (the tool's version, a module constant) instead of an input
    changes: list[tuple[str, Callable[[Env, dict[str, Any]], dict[str, Any]]]]
    files: str  # the glob of the cache's files in env.dir


def _with(**kw: Any) -> Callable[[Env, dict[str, Any]], dict[str, Any]]:
    return lambda env, inputs: {**inputs, **kw}


def _patched(target: str, value: Any) -> Callable[[Env, dict[str, Any]], dict[str, Any]]:
    def change(env: Env, inputs: dict[str, Any]) -> dict[str, Any]:
        env.monkeypatch.setattr(target, value)
        return inputs
    return change


def _new_version(env: Env, inputs: dict[str, Any]) -> dict[str, Any]:
    env.monkeypatch.setattr(testdb, "__version__", testdb.__version__ + ".post1")
    return inputs


# stamp: remembers an input's stat and digest; its answer is the content key written with it
def _stamp_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from testdb.stamp import Stamp, text_digest

    src = env.dir / "input.txt"
    if not src.exists() or src.read_text() != inputs["text"]:
        src.write_text(inputs["text"])
    stamp = Stamp(str(env.dir / "cache"), inputs["identity"])
    hit = stamp.check()
    if hit is not None:
        return hit[1]
    env.computed.append("stamp")
    key = _stamp_fresh(inputs)
    files = Stamp.stat_files([str(src)])
    stamp.write([], files, {str(src): text_digest(str(src))}, {}, key)
    return key


def _stamp_fresh(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(inputs["text"].encode()).hexdigest()


# inventory: a file's scan, found by file_key in a kept whole inventory
SOURCE = """\
import pytest


@pytest.mark.parametrize("n", [1, 2])
def test_one(n):
    pass
"""


def _scan_fresh(inputs: dict[str, Any]) -> Any:
    from testdb.inventory.groups import expand
    from testdb.inventory.static import scan_groups

    return expand(scan_groups(inputs["text"], "test_x.py", dirs=()), "test_x.py",
                  "tests/test_x.py")


def _scan_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from testdb.inventory.cache import FileCache, file_key
    from testdb.inventory.groups import expand
    from testdb.inventory.packed import PackedInventory, file_blob

    key = file_key(inputs["text"].encode(), *inputs["context"])
    got = FileCache(env.dir / "cache").get(key)
    if got is not None:
        return expand(got, "test_x.py", "tests/test_x.py")
    env.computed.append("inventory")
    items = _scan_fresh(inputs)
    inv = PackedInventory.from_blobs({"test_x.py": file_blob(items)},
                                     keys={"test_x.py": f"{key}:tests/test_x.py"})
    inv.write(str(env.dir / "cache" / f"whole-{key}.records"))
    return items


# whole: the packed inventory of a checkout, through build_static
def _checkout(env: Env, inputs: dict[str, Any]) -> str:
    root = env.dir / "co"
    path = root / "tests/integration/defs/test_x.py"
    if not path.exists() or path.read_text() != inputs["text"]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(inputs["text"])
    return str(root)


def _whole_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from testdb.inventory import build
    from testdb.inventory.cache import FileCache

    real = build.scan_groups

    def counting(*args: Any, **kw: Any) -> Any:
        env.computed.append("whole")
        return real(*args, **kw)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(build, "scan_groups", counting)
        inv = build.build_static(_checkout(env, inputs), cache=FileCache(env.dir / "cache"),
                                 workers=1)
        return sorted(inv, key=lambda i: i.nodeid)  # read here: a damaged blob rebuilds


def _whole_fresh(inputs: dict[str, Any]) -> Any:
    from testdb.inventory.groups import expand
    from testdb.inventory.static import scan_groups

    return sorted(expand(scan_groups(inputs["text"], "test_x.py", dirs=()), "test_x.py",
                         "tests/integration/defs/test_x.py"), key=lambda i: i.nodeid)


# selections: which list lines select each item of a test file
def _items(inputs: dict[str, Any]) -> list[Any]:
    from testdb.inventory.model import InventoryItem

    return [InventoryItem(f"unittest/t.py::{n}", "unittest/t.py", 1, n)
            for n in inputs["names"]]


def _select_fresh(inputs: dict[str, Any]) -> Any:
    return tuple(tuple(p for p, line in enumerate(inputs["lines"]) if i.function in line)
                 for i in _items(inputs))


def _select_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from testdb.inventory.select_cache import SelectionCache, items_digest

    items = _items(inputs)
    cache = SelectionCache.open(str(env.dir / "cache"), inputs["lines"])
    got = cache.get("unittest/t.py", items_digest(items), len(items))
    if got is not None:
        return got
    env.computed.append("selections")
    found = _select_fresh(inputs)
    cache.put("unittest/t.py", items_digest(items), found)
    cache.save()
    return found


# parts: the module tier's part of one test file
def _part_fresh(inputs: dict[str, Any]) -> Any:
    from auditor.part_memo import MODULE, module_links
    from auditor.verdict import Decision

    ids = tuple(inputs["ids"])
    d = Decision(MODULE, "guarded" if inputs["started"] else "not guarded",
                 tuple(module_links(ids)), ids if inputs["started"] else (),
                 () if inputs["started"] else ids)
    return d, [(0, t) for t in ids], frozenset(inputs["started"])


def _part_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from auditor.part_memo import PartMemo

    memo = PartMemo.open(str(env.dir / "cache"), inputs["plan"], inputs["started"],
                         lambda f: inputs["items_key"])
    got = memo.get("test_x.py")
    if got is not None:
        return got
    env.computed.append("parts")
    part = _part_fresh(inputs)
    memo.put("test_x.py", part)
    memo.save()
    return part


# behaviours: a change's behaviour changes, file by file
def _changed_files(inputs: dict[str, Any]) -> list[Any]:
    from auditor.diff import FileChange

    return [FileChange(inputs["path"], inputs["path"], frozenset(inputs["lines"]),
                       frozenset(inputs["lines"]), "def f():\n    return 1\n", inputs["text"])]


def _behaviours_fresh(inputs: dict[str, Any]) -> Any:
    from auditor.behaviour import behaviours

    return [behaviours(fc) for fc in _changed_files(inputs)]


def _behaviours_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from auditor.behaviour import behaviours
    from auditor.behaviour_memo import behaviours_of

    def judge(fc: Any) -> Any:
        env.computed.append("behaviours")
        return behaviours(fc)

    return behaviours_of(_changed_files(inputs), judge, str(env.dir / "cache"))


# reach: the symbol tier's index of one graph's test modules
def _reach_fresh(inputs: dict[str, Any]) -> Any:
    return (tuple(inputs["units"]), (), ())


def _reach_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from auditor.reach_memo import ReachMemo

    memo = ReachMemo.open(str(env.dir / "cache"), inputs["graph"])
    got = memo.get("tests.test_x")
    if got is not None:
        return got
    env.computed.append("reach")
    entry = _reach_fresh(inputs)
    memo.put("tests.test_x", entry)
    memo.save()
    return entry


# audit: the kept answer of `audit --base --head`
def _audit_key(inputs: dict[str, Any]) -> str:
    from auditor.diff import Change, FileChange
    from reports import audit_memo

    change = Change("/r", "b" * 40, inputs["head"], [FileChange(
        "a.py", "a.py", frozenset({1}), frozenset({1}), "x\n", inputs["text"])], source="git")
    key = audit_memo.memo_key(change, root=inputs["root"], options_key=inputs["options"],
                              coverage=None, bot_command=inputs["bot"])
    assert key is not None
    return key


def _audit_fresh(inputs: dict[str, Any]) -> Any:
    return {"summary": {"head": inputs["head"], "text": inputs["text"]},
            "behaviours": [inputs["root"], inputs["options"], inputs["bot"]]}


def _audit_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from reports import audit_memo

    env.monkeypatch.setenv("TESTDB_CACHE_DIR", str(env.dir / "cache"))
    key = _audit_key(inputs)
    got = audit_memo.get(key)
    if got is not None:
        return got[0]
    env.computed.append("audit")
    data = _audit_fresh(inputs)
    audit_memo.put(key, data, [])
    return data


def _text_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from reports import audit_memo

    env.monkeypatch.setenv("TESTDB_CACHE_DIR", str(env.dir / "cache"))
    kept = audit_memo.Kept(inputs["answer"], inputs["digest"])

    def render() -> str:
        env.computed.append("audittext")
        return str(_text_fresh(inputs))

    return kept.rendered(inputs["options"], render)


def _text_fresh(inputs: dict[str, Any]) -> Any:
    return f"{inputs['answer']} {inputs['digest']} {inputs['options']}"


# rec: a replay record of one commit
def _rec_fresh(inputs: dict[str, Any]) -> Any:
    from auditor.replay.model import CommitRecord

    return CommitRecord(inputs["sha"], inputs["parent"], f"subject {inputs['options']}",
                        "2026-01-01", "audited")


def _rec_answer(env: Env, inputs: dict[str, Any]) -> Any:
    from auditor.replay.cache import RecordCache

    cache = RecordCache(inputs["options"], str(env.dir / "cache"))
    got = cache.get(inputs["sha"], inputs["parent"])
    if got is not None:
        return got
    env.computed.append("rec")
    rec = _rec_fresh(inputs)
    cache.put(rec)
    return rec


CASES = [
    Case("stamp", _stamp_answer, _stamp_fresh, {"identity": ["root"], "text": "one"}, [
        ("an input edited (another size)", _with(text="three")),
        ("an input edited (the same size)", _with(text="owt")),
        ("another checkout or input paths", _with(identity=["other root"])),
        ("the tool's version", _new_version),
        ("the stamp's layout", _patched("testdb.stamp.VERSION", 99)),
    ], "stamp-*"),
    Case("inventory", _scan_answer, _scan_fresh,
         {"text": SOURCE, "context": ("fp", "test_x.py", "")}, [
             ("the test file's text", _with(text=SOURCE.replace("[1, 2]", "[1, 2, 3]"))),
             ("the scan's configuration", _with(context=("fp2", "test_x.py", ""))),
             ("the -k directory names", _with(context=("fp", "test_x.py", "sub"))),
             ("the scanner's schema", _patched("testdb.inventory.cache.SCHEMA", 99)),
             ("the tool's version", _new_version),
         ], "whole-*"),
    Case("whole", _whole_answer, _whole_fresh, {"text": SOURCE}, [
        ("the test file's text", _with(text=SOURCE.replace("test_one", "test_two"))),
        ("the tool's version", _new_version),
        ("the scanner's schema", _patched("testdb.inventory.cache.SCHEMA", 99)),
    ], "whole-*"),
    Case("selections", _select_answer, _select_fresh,
         {"lines": ["unittest/t.py -k a"], "names": ["a", "b"]}, [
             ("the list lines", _with(lines=["unittest/t.py -k b"])),
             ("the items", _with(names=["a", "bb"])),
             ("pytest's version", _patched("_pytest._version.version", "0.0.1")),
             ("the inventory code", _patched("testdb.inventory.select_cache.code_stamp",
                                             lambda d: "edited")),
             ("the tool's version", _new_version),
         ], "selections-*"),
    Case("parts", _part_answer, _part_fresh,
         {"plan": "p1", "started": ["A100-1"], "items_key": "k1", "ids": ["test_x.py::t"]}, [
             ("the plan", _with(plan="p2", ids=["test_x.py::u"])),
             ("the started stages", _with(started=[])),
             ("the test file's items", _with(items_key="k2", ids=["test_x.py::v"])),
             ("the tool's code", _patched("auditor.part_memo.tool_key", lambda: "edited")),
             ("the tool's version", _new_version),
         ], "parts-*"),
    Case("behaviours", _behaviours_answer, _behaviours_fresh,
         {"path": "pkg/a.py", "text": "def f():\n    return 2\n", "lines": [2]}, [
             ("a changed file's text", _with(text="def f():\n    return 3\n")),
             ("its changed lines", _with(lines=[1, 2])),
             ("its path", _with(path="pkg/b.py")),
             ("the auditor code", _patched("auditor.behaviour_memo.code_stamp",
                                           lambda d: "edited")),
             ("Python's version", _patched("sys.version", "3.99")),
             ("the tool's version", _new_version),
         ], "behaviours-*"),
    Case("reach", _reach_answer, _reach_fresh, {"graph": "graphplain-a", "units": ["m:f"]}, [
        ("another graph", _with(graph="graphplain-b", units=["m:g"])),
        ("the auditor code", _patched("auditor.reach_memo.code_stamp", lambda d: "edited")),
        ("Python's version", _patched("sys.version", "3.99")),
        ("the tool's version", _new_version),
    ], "reach-*"),
    Case("audit", _audit_answer, _audit_fresh,
         {"head": "h" * 40, "text": "y\n", "root": "/r", "options": "o", "bot": None}, [
             ("the head commit", _with(head="i" * 40)),
             ("a changed file's text", _with(text="z\n")),
             ("the root", _with(root="/s")),
             ("the plan options", _with(options="o2")),
             ("the /bot run text", _with(bot="/bot run")),
             ("the tool's code", _patched("reports.audit_memo.tool_key", lambda: "edited")),
             ("the tool's version", _new_version),
         ], "audit-*"),
    Case("audittext", _text_answer, _text_fresh,
         {"answer": "a" * 64, "digest": "d" * 64, "options": "text colour=False width=100"}, [
             ("another answer", _with(answer="b" * 64)),
             ("other bytes under the same answer key", _with(digest="e" * 64)),
             ("the render options", _with(options="text colour=True width=100")),
             ("the tool's version", _new_version),
         ], "audittext-*"),
    Case("rec", _rec_answer, _rec_fresh, {"sha": "s" * 40, "parent": "p" * 40, "options": "o"}, [
        ("another commit", _with(sha="t" * 40)),
        ("another parent", _with(parent="q" * 40)),
        ("the options", _with(options="o2")),
        ("the tool's code", _patched("auditor.replay.cache.tool_key", lambda: "edited")),
        ("the record layout", _patched("auditor.replay.cache.RECORD_VERSION", 99)),
        ("the tool's version", _new_version),
    ], "rec-*"),
]
BY_NAME = {c.name: c for c in CASES}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    return Env(tmp_path, monkeypatch)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_same_inputs_are_a_hit(env: Env, case: Case) -> None:
    first = case.answer(env, case.base)
    assert env.computed and first == case.fresh(case.base)
    env.computed.clear()
    assert case.answer(env, case.base) == first
    assert env.computed == [], f"{case.name}: the same inputs computed again"
    assert list((env.dir / "cache").rglob(case.files)), "the cache keeps a file of its kind"


@pytest.mark.parametrize(("case", "what"), [(c, w) for c in CASES for w, _ in c.changes],
                         ids=[f"{c.name}-{w}" for c in CASES for w, _ in c.changes])
def test_a_changed_key_ingredient_is_a_miss(env: Env, case: Case, what: str) -> None:
    before = case.answer(env, case.base)
    change = dict(case.changes)[what]
    inputs = change(env, dict(case.base))
    env.computed.clear()
    got = case.answer(env, inputs)
    assert env.computed, f"{case.name}: {what} changed, and the kept answer was used"
    assert got == case.fresh(inputs)
    if inputs != case.base:  # an input changed: the answer must be that input's, not stale
        assert got != before or case.fresh(inputs) == before, what
    env.computed.clear()
    assert case.answer(env, inputs) == got and env.computed == []  # kept again


@pytest.mark.parametrize(("case", "how"), [(c, h) for c in CASES for h in DAMAGES],
                         ids=[f"{c.name}-{h}" for c in CASES for h in DAMAGES])
def test_a_damaged_entry_is_a_miss_and_answered_afresh(env: Env, case: Case, how: str) -> None:
    from testdb.inventory import packed

    first = case.answer(env, case.base)
    kept = [p for p in (env.dir / "cache").rglob(case.files) if p.is_file()]
    assert kept
    for path in kept:
        if how == "foreign-format" and path.suffix == ".records":
            # the packed layout's version lives in its sealed header
            inv = packed.PackedInventory.open(str(path))
            assert inv is not None
            with pytest.MonkeyPatch.context() as m:
                m.setattr(packed, "FORMAT", packed.FORMAT + "-other")
                inv.materialized().write(str(path))
        else:
            _damage(path, how)
    env.computed.clear()
    assert case.answer(env, case.base) == first == case.fresh(case.base)
    assert env.computed, f"{case.name}: a {how} entry was believed"
    env.computed.clear()
    assert case.answer(env, case.base) == first and env.computed == []  # kept again


def test_every_cache_is_in_the_key_table() -> None:
    """The table in testdb/cachestore.py names every cache kind the table above drives."""
    doc = cachestore.__doc__ or ""
    for case in CASES:
        assert f"``{case.name}``" in doc, case.name
    assert "``decorator``" in doc  # the in-process memo, tested below


# -- the in-process decorator memo (testdb/inventory/memo.py): never on disk --------------

MEMO_SOURCE = """\
import pytest
{alias}


@{helper}("n", [1, 2])
def test_one(n):
    pass
"""


@pytest.mark.parametrize(("what", "alias", "helper", "config"), [
    ("the same module again", "", "pytest.mark.parametrize", None),
    ("an alias naming another module", "import mylib as pytest", "pytest.mark.parametrize",
     None),
    ("another id style for a helper", "from conftest import parametrize_with_ids",
     "parametrize_with_ids", (("parametrize_with_ids", "value"),)),
])
def test_the_decorator_memo_answers_as_a_fresh_scan(
        what: str, alias: str, helper: str, config: tuple[tuple[str, str], ...] | None) -> None:
    """A memoized decorator gives the items a scan with an empty memo gives, whatever the
    module around it binds (an alias is in the key) and whatever the config (its
    fingerprint is): the trap is the same decorator text scanned first with other meanings."""
    from dataclasses import replace

    from testdb.inventory import memo
    from testdb.inventory.config import DEFAULT_CONFIG
    from testdb.inventory.static import scan_source

    cfg = replace(DEFAULT_CONFIG, helper_styles=config) if config else DEFAULT_CONFIG
    plain = textwrap.dedent(MEMO_SOURCE.format(alias="", helper=helper))
    this = textwrap.dedent(MEMO_SOURCE.format(alias=alias, helper=helper))
    scan_source(plain, "test_m.py")  # the same text memoized under the default meaning
    warm = scan_source(this, "test_m.py", config=cfg)
    memo._MEMO.clear()
    memo._WORDS.clear()
    assert warm == scan_source(this, "test_m.py", config=cfg), what


# -- cold writes: the records written one by one are the bytes the joined form was ---------------


def _joined_records(meta: bytes, records: list[bytes]) -> bytes:
    """``write_records``'s file as it was made before (one ``b"".join`` of everything)."""
    import marshal
    import zlib

    from testdb.files import _RECORDS_SEAL

    table, offset = [], 0
    for rec in records:
        table.append((offset, len(rec), zlib.crc32(rec)))
        offset += len(rec)
    header = marshal.dumps((meta, table))
    return b"".join([_RECORDS_SEAL, hashlib.sha256(header).digest(),
                     len(header).to_bytes(8, "little"), header, *records])


@pytest.mark.parametrize("records", [[], [b""], [b"a", b"", b"bc" * 70_000, b"d"],
                                     [bytes([n]) * n for n in range(200)]],
                         ids=["none", "one-empty", "large", "many-small"])
def test_write_records_writes_the_joined_bytes(tmp_path: Path, records: list[bytes]) -> None:
    from testdb.files import Records, write_records

    path = tmp_path / "x-1.records"
    write_records(str(path), b"meta", records)
    assert path.read_bytes() == _joined_records(b"meta", records)
    opened = Records.open(str(path))
    assert opened is not None
    assert [opened.get(i) for i in range(len(opened))] == records
    opened.close()


def test_a_packed_inventory_is_written_byte_for_byte_as_before(tmp_path: Path) -> None:
    """A whole inventory of the benchmark generator's shapes, written by ``write`` (records
    one by one), is the joined file, and reads back the same items."""
    import marshal
    import subprocess
    import sys

    from testdb.files import Records
    from testdb.inventory import build_static
    from testdb.inventory.packed import PackedInventory
    from testdb.inventory.packed_rows import file_blob

    tree = tmp_path / "tree"
    subprocess.run([sys.executable, str(Path(__file__).parents[2] / "benchmarks"
                                        / "gen_synthetic_tests.py"), str(tree), "--files", "30"],
                   check=True, capture_output=True)
    inv = build_static(str(tree), cache=False)
    by_file: dict[str, list[Any]] = {}
    for i in inv:
        by_file.setdefault(i.file, []).append(i)
    packed = PackedInventory.from_blobs({f: file_blob(items) for f, items in by_file.items()})
    path = tmp_path / "whole-x.records"
    packed.write(str(path))
    opened = Records.open(str(path))
    assert opened is not None
    records = [opened.get(i) or b"" for i in range(len(opened))]
    assert path.read_bytes() == _joined_records(opened.meta, records)
    opened.close()
    back = PackedInventory.open(str(path))
    assert back is not None and list(back) == list(packed)
    assert marshal.loads(records[-1]) == [packed._names(f) for f in packed.files()]


def test_an_interrupted_write_leaves_the_old_file(tmp_path: Path) -> None:
    from testdb.files import write_bytes_atomic, write_chunks_atomic

    path = tmp_path / "out"
    write_bytes_atomic(str(path), b"old")

    def chunks() -> Any:
        yield b"new"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_chunks_atomic(str(path), chunks())
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["out"]


# -- a file's scan given back from a kept whole inventory's rows -----------------------------------


def _corpus_rows(tmp_path: Path) -> dict[str, list[Any]]:
    """Every file's item rows, as a whole inventory keeps them, of two corpora: the benchmark
    generator's shapes and this project's own test modules (classes, marks, parametrize)."""
    import shutil
    import subprocess
    import sys

    from testdb.inventory import build_static
    from testdb.inventory.packed_rows import _rows

    repo = Path(__file__).parents[2]
    tree = tmp_path / "tree"
    subprocess.run([sys.executable, str(repo / "benchmarks" / "gen_synthetic_tests.py"),
                    str(tree), "--files", "40"], check=True, capture_output=True)
    shutil.copytree(repo / "tests", tree / "tests" / "unittest" / "own",
                    ignore=shutil.ignore_patterns("__pycache__", "fixtures"))
    by_file: dict[str, list[Any]] = {}
    for i in build_static(str(tree), cache=False):
        by_file.setdefault(i.file, []).append(i)
    return {f: _rows(items) for f, items in by_file.items()}


def test_kept_rows_give_back_groups_that_expand_to_them(tmp_path: Path) -> None:
    from testdb.inventory.cache import groups_of
    from testdb.inventory.groups import expand
    from testdb.inventory.packed_rows import row

    rows = _corpus_rows(tmp_path)
    assert len(rows) > 100 and sum(map(len, rows.values())) > 1000
    for file, these in rows.items():
        groups = groups_of(these)
        assert groups is not None, file
        assert [row(i) for i in expand(groups, file, these[0][10])] == these, file


@pytest.mark.parametrize(("what", "edit"), [
    ("another node id", lambda r: (r[0] + "x", *r[1:])),
    ("a keyword list without the item's name", lambda r: (*r[:7], ("other",), *r[8:])),
    ("a mark twice", lambda r: (*r[:6], (*r[6], *r[6][:1]) or ("m", "m"), *r[7:])),
    ("another source", lambda r: (*r[:9], "collected", *r[10:])),
    ("an empty error kept", lambda r: (*r[:11], "")),
    ("another file's path", lambda r: (*r[:10], "elsewhere.py", *r[11:])),
])
def test_a_row_expand_would_not_make_is_a_miss(what: str, edit: Callable[[Any], Any]) -> None:
    """The trap: rows no scan makes are never given back as a scan (the file is scanned)."""
    from testdb.inventory.cache import groups_of
    from testdb.inventory.groups import expand
    from testdb.inventory.packed_rows import _rows
    from testdb.inventory.static import scan_groups

    items = expand(scan_groups(SOURCE.replace("(n", "(n, m=1").replace(
        "@pytest", "@pytest.mark.gpu\n@pytest", 1), "test_x.py", dirs=()), "test_x.py", "p")
    rows = _rows(items)
    assert groups_of(rows) is not None and rows[0][6]  # a good file, its first item marked
    assert groups_of([*rows[:-1], edit(rows[-1])]) is None, what
