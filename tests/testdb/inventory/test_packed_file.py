"""The packed inventory's cache file: blobs read (and checked) when asked for, damage rebuilt."""

from __future__ import annotations

import marshal
import random
import subprocess
import sys
from pathlib import Path

import pytest

import testdb.files
from testdb.inventory import Inventory, build_static
from testdb.inventory.cache import FileCache
from testdb.inventory.packed import PackedInventory

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Inventory]:
    """A synthetic test tree, and its inventory built without any cache."""
    root = tmp_path_factory.mktemp("synthetic")
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_synthetic_tests.py"),
                    str(root), "--files", "30"], check=True, capture_output=True)
    return root, build_static(str(root), cache=False)


def summary(inv: Inventory) -> tuple[object, ...]:
    return (len(inv), inv.ids(), inv.files(), inv.placeholders(), inv.param_value_counts(),
            sorted(inv.params_with_value("FLASHINFER")), [inv.by_file(f) for f in inv.files()])


def whole_file(cache: Path) -> Path:
    (path,) = cache.rglob("whole-*.records")
    return path


def test_a_warm_build_reads_only_the_blobs_it_is_asked_for(
        tree: tuple[Path, Inventory], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, eager = tree
    store = FileCache(tmp_path / "cache")
    build_static(str(root), cache=store)
    real = testdb.files.Records.get
    read: list[int] = []

    def counting(self: testdb.files.Records, i: int) -> bytes | None:
        read.append(i)
        return real(self, i)

    monkeypatch.setattr(testdb.files.Records, "get", counting)
    warm = build_static(str(root), cache=store)
    assert isinstance(warm, PackedInventory) and read == []
    f = eager.files()[7]
    assert warm.by_file(f) == eager.by_file(f) and len(read) == 1
    assert len(warm) == len(eager) and read == [read[0]]  # the count is in the header
    assert summary(warm) == summary(eager)


@pytest.mark.parametrize("seed", range(6))
def test_a_damaged_blob_is_rebuilt_not_believed(tree: tuple[Path, Inventory], tmp_path: Path,
                                                seed: int) -> None:
    root, eager = tree
    store = FileCache(tmp_path / "cache")
    build_static(str(root), cache=store)
    path = whole_file(tmp_path / "cache")
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    # past the header: a flipped byte in one blob (the header's own seal catches the rest)
    pos = rng.randrange(len(data) - len(data) // 2, len(data))
    data[pos] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    warm = build_static(str(root), cache=store)
    assert isinstance(warm, PackedInventory)
    assert summary(warm) == summary(eager)  # every blob read, the damaged one rebuilt
    assert warm.state()[1] == eager.ids()  # all of it read, the build keys too
    again = whole_file(tmp_path / "cache").read_bytes()
    assert again != bytes(data)  # the damaged file was replaced by a good one
    assert summary(build_static(str(root), cache=store)) == summary(eager)


@pytest.mark.parametrize("damage", ["header", "cut", "empty", "foreign"])
def test_a_damaged_header_or_a_cut_file_is_a_miss(tree: tuple[Path, Inventory], tmp_path: Path,
                                                  damage: str) -> None:
    root, eager = tree
    store = FileCache(tmp_path / "cache")
    build_static(str(root), cache=store)
    path = whole_file(tmp_path / "cache")
    data = path.read_bytes()
    path.write_bytes({"header": data[:40] + bytes([data[40] ^ 0xFF]) + data[41:],
                      "cut": data[: len(data) * 2 // 3], "empty": b"",
                      "foreign": b"testdb-cache\0" + data[13:]}[damage])
    assert summary(build_static(str(root), cache=store)) == summary(eager)


def test_an_inventory_built_on_a_damaged_one_starts_afresh(
        tree: tuple[Path, Inventory], tmp_path: Path) -> None:
    """The last build is the base of the next one only when every blob of it checks out."""
    root, eager = tree
    store = FileCache(tmp_path / "cache")
    build_static(str(root), cache=store)
    path = whole_file(tmp_path / "cache")
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x40
    path.write_bytes(bytes(data))
    changed = root / "tests" / "integration" / "defs"
    first = sorted(changed.rglob("test_*.py"))[0]
    text = first.read_text()
    try:
        first.write_text(text + "\n\ndef test_added_for_the_rebuild():\n    pass\n")
        got = build_static(str(root), cache=store)
        want = build_static(str(root), cache=False)
        assert summary(got) == summary(want)
    finally:
        first.write_text(text)
    assert summary(build_static(str(root), cache=store)) == summary(eager)


def test_files_prepared_in_workers_pack_as_in_one_process(
        tree: tuple[Path, Inventory], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold build prepares each file's rows, ids and index entries where it was scanned;
    the result is the inventory a single process packs from the same items."""
    from testdb.inventory import build
    from testdb.inventory.packed import file_blob

    root, eager = tree
    monkeypatch.setattr(build, "_PARALLEL_MIN_FILES", 1)
    inv = build_static(str(root), cache=FileCache(tmp_path / "cache"), workers=2)
    assert isinstance(inv, PackedInventory)
    by_file = {f: file_blob(eager.by_file(f)) for f in eager.files()}
    want = PackedInventory.from_blobs(by_file)
    got, wanted = inv.state(), want.state()
    # the same rows and index entries (marshal's bytes may differ in shared references)
    assert {f: marshal.loads(b) for f, b in got[0].items()} == {
        f: marshal.loads(b) for f, b in wanted[0].items()}
    assert got[1:5] == wanted[1:5] and got[6] == wanted[6]
    assert {v: marshal.loads(b) for v, b in got[5].items()} == {
        v: marshal.loads(b) for v, b in wanted[5].items()}
    assert summary(inv) == summary(eager)
    for prefix in ("unittest/", "accuracy/", "unittest/llmapi/group3/", "no/"):
        assert inv.ids_starting(prefix) == [i for i in eager.ids() if i.startswith(prefix)]
