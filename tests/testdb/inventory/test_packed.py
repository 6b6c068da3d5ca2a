"""The packed inventory (the whole-inventory cache's form) answers exactly as the eager one."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path

import pytest

from testdb.inventory import Inventory, InventoryItem, build_static, scan_source
from testdb.inventory.model import value_counts
from testdb.inventory.packed import PackedInventory, file_blob

REPO = Path(__file__).resolve().parents[3]

CHANGED = '''
import pytest

@pytest.mark.parametrize("attn_backend", ["TRTLLM", "FLASHINFER", "NEWBACKEND"])
@pytest.mark.parametrize("tp", [1, 2])
def test_changed(attn_backend, tp):
    pass
'''


@pytest.fixture(scope="module")
def eager(tmp_path_factory: pytest.TempPathFactory) -> Inventory:
    """A few dozen synthetic modules, built without any cache (so: not packed)."""
    root = tmp_path_factory.mktemp("synthetic")
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_synthetic_tests.py"),
                    str(root), "--files", "40"], check=True, capture_output=True)
    inv = build_static(str(root), cache=False)
    assert not isinstance(inv, PackedInventory) and len(inv) > 1000
    return inv


def packed_from(inv: Inventory) -> PackedInventory:
    """Packed file by file as a build does, written and read back as the cache does."""
    by_file: dict[str, list[InventoryItem]] = {}
    for i in inv:
        by_file.setdefault(i.file, []).append(i)
    packed = PackedInventory.from_blobs({f: file_blob(items) for f, items in by_file.items()})
    return PackedInventory.from_state(marshal.loads(marshal.dumps(packed.state())))


def values_of(inv: Inventory) -> set[str]:
    return set(value_counts(inv.ids())) | {"no-such-value"}


def assert_same(packed: Inventory, eager: Inventory) -> None:
    assert len(packed) == len(eager)
    assert sorted(packed.ids()) == sorted(eager.ids())
    assert set(packed.files()) == set(eager.files())
    assert packed.placeholders() == eager.placeholders()
    assert packed.param_value_counts() == eager.param_value_counts()
    for v in values_of(eager):
        assert sorted(packed.params_with_value(v)) == sorted(eager.params_with_value(v)), v
    for f in eager.files():
        assert packed.by_file(f) == eager.by_file(f)
    for item in eager:
        assert packed.get(item.nodeid) == item and item.nodeid in packed
        assert packed.by_base(item.base) == eager.by_base(item.base)
    assert packed.get("no/such.py::test_x") is None and "no/such.py::test_x" not in packed
    # ``lacking``, the bulk ``not in``: present, missing, in a known file or not, placeholders
    ask = [*eager.ids()[::7], "no/such.py::test_x", *(p.nodeid for p in eager.placeholders()),
           *(f"{f}::test_not_there[1]" for f in list(eager.files())[:5]), *eager.ids()[:3]]
    assert packed.lacking(ask) == eager.lacking(ask) == [i for i in ask if i not in eager]
    assert "no/such.py::test_x" in packed.lacking(ask)
    # what needs every item builds them all, and agrees too
    assert sorted(i.nodeid for i in packed) == sorted(i.nodeid for i in eager)
    for item in list(eager)[::50]:
        assert packed.status(item.nodeid) == eager.status(item.nodeid)
        assert packed.by_function(item.function) == eager.by_function(item.function)


def test_packed_agrees_with_eager(eager: Inventory) -> None:
    assert_same(packed_from(eager), eager)


def test_dropping_and_adding_files_agrees(eager: Inventory) -> None:
    files = list(eager.files())
    stale = {files[0], files[3], files[-1]}
    added = [*scan_source(CHANGED, files[0]), *scan_source(CHANGED, "brand/new/test_file.py")]
    packed = packed_from(eager).without_files(stale, added)
    want = eager.without_files(stale, added)
    assert_same(packed, want)
    assert {t for t, _ in packed.params_with_value("NEWBACKEND")} == {
        i.nodeid for i in added if "NEWBACKEND" in i.nodeid}
    # twice over, and back to the cache form
    again = packed.without_files({"brand/new/test_file.py"})
    assert_same(again, want.without_files({"brand/new/test_file.py"}))
    assert_same(packed_from(again), want.without_files({"brand/new/test_file.py"}))


def test_a_warm_build_is_packed_and_agrees(eager: Inventory, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tree"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_synthetic_tests.py"),
                    str(root), "--files", "40"], check=True, capture_output=True)
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    cold = build_static(str(root))
    warm = build_static(str(root))
    assert isinstance(warm, PackedInventory)
    assert_same(warm, cold)
    assert_same(warm, eager)  # the generator is deterministic


def test_updating_file_by_file_equals_packing_afresh(eager: Inventory) -> None:
    """What a rebuild does (replace the changed files' blobs) gives exactly the cache a
    fresh pack of the same items gives: ids, spans, counts, value index, placeholders."""
    import random

    rng = random.Random(3)
    current = {f: list(eager.by_file(f)) for f in eager.files()}
    inv = packed_from(eager)
    for step in range(6):
        names = list(current)
        changed = rng.sample(names, 3)
        for f in changed:
            current[f] = scan_source(CHANGED.replace("test_changed", f"test_step{step}"), f)
        gone = rng.choice([n for n in names if n not in changed])
        del current[gone]
        new = f"brand/new/test_step{step}.py"
        current[new] = scan_source(CHANGED, new)
        order = sorted(current)  # a rebuild follows the walk's order, not the history's
        fresh = {f: file_blob(current[f]) for f in [*changed, new]}
        inv = inv.replace_files({*changed, gone}, fresh, order=order)
        want = PackedInventory.from_blobs({f: file_blob(current[f]) for f in order})
        got_state, want_state = inv.state(), want.state()
        assert got_state[:5] == want_state[:5] and got_state[6] == want_state[6], step
        # the index's blobs: the same rows (marshal's bytes may differ in shared references)
        assert {v: marshal.loads(b) for v, b in got_state[5].items()} == {
            v: marshal.loads(b) for v, b in want_state[5].items()}, step
        assert_same(inv, Inventory([i for f in order for i in current[f]]))


MIXED = '''
import pytest

@pytest.mark.parametrize("x", compute())
def test_runtime(x):
    pass

def test_plain():
    pass
'''


def test_determinate_ids_from_the_rows_alone(eager: Inventory) -> None:
    """A file's ids when every one is known, None when one is computed at run time: the
    packed answer (read from the rows, building no item) equals the eager one."""
    mixed = scan_source(MIXED, "mixed/test_mixed.py")
    broken = scan_source("def (\n", "bad/test_bad.py")
    inv = eager.without_files(set(), [*mixed, *broken])
    packed = packed_from(inv)
    for f in inv.files():
        assert packed.determinate_ids(f) == inv.determinate_ids(f), f
    assert not packed._loaded  # no file's items were built
    assert inv.determinate_ids("mixed/test_mixed.py") is None
    assert inv.determinate_ids("bad/test_bad.py") == []  # only a placeholder
    plain = eager.files()[0]
    assert inv.determinate_ids(plain) == [i.nodeid for i in eager.by_file(plain)]
    assert packed.determinate_ids("no/such.py") == inv.determinate_ids("no/such.py") == []
    # once items are built, the answer is the same
    packed.by_file("mixed/test_mixed.py")
    assert packed.determinate_ids("mixed/test_mixed.py") is None


def test_a_blob_given_without_a_key_has_none() -> None:
    """A file rescanned from a diff's text is not what its parent's key was built from."""
    keys = {"a/test_a.py": "key-a", "a/test_b.py": "key-b"}
    blobs = {f: file_blob(scan_source(CHANGED, f)) for f in keys}
    base = PackedInventory.from_blobs(blobs, keys=keys)
    stored = PackedInventory.from_state(marshal.loads(marshal.dumps(base.state())))
    for inv in (base, stored):
        assert [inv.file_key(f) for f in keys] == ["key-a", "key-b"]
        over = inv.without_files({"a/test_a.py"}, scan_source(MIXED, "a/test_a.py"))
        assert over.file_key("a/test_a.py") is None and over.file_key("a/test_b.py") == "key-b"
        assert over.file_key("no/such.py") is None
    assert Inventory(scan_source(CHANGED, "a/test_a.py")).file_key("a/test_a.py") is None
