"""The stat stamp (a warm run reads no input file) and the where-records cache."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest
from tdb_helpers import QA, STAGES, TESTDB, WAIVES, small_checkout, write_checkout

from testdb import index as index_mod
from testdb import stamp as stamp_mod
from testdb.files import Records, prune, write_cache, write_records
from testdb.index import load, locate
from testdb.stamp import Stamp, stat_of


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def fine_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Treat no file as racily clean, as on a file system whose clock is much finer than
    the test's steps (each step below also sleeps past a coarse clock's tick)."""
    monkeypatch.setattr(stamp_mod, "RACY_NS", -10**12)


def fresh_key(root: Path) -> str:
    """The content key by discovering and reading everything, no stamp involved."""
    return locate(str(root), use_cache=False).key


def test_a_warm_load_reads_no_input(tmp_path: Path, fine_clock: None,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = small_checkout(tmp_path)
    first = load(str(root))
    expected = fresh_key(root)

    def no_reading(*_: object, **__: object) -> object:
        raise AssertionError("an input was read although the stamp proves the plan unchanged")

    monkeypatch.setattr(index_mod, "read_all", no_reading)
    monkeypatch.setattr(index_mod.Sources, "discover", no_reading)
    plan = locate(str(root))
    assert plan.read is None and plan.key == expected
    again = load(str(root))
    assert again.schedule.placements.keys() == first.schedule.placements.keys()


def test_the_stamp_gives_the_same_sources_as_discovery(tmp_path: Path, fine_clock: None) -> None:
    root = small_checkout(tmp_path)
    discovered = index_mod.Sources.discover(str(root))
    locate(str(root))
    assert locate(str(root)).src == discovered


def _edit_same_size(root: Path) -> None:
    p = root / WAIVES
    text = p.read_text()
    p.write_text(text.replace("a", "b", 1) if "a" in text else text.upper())


CHANGES = {
    "same-size edit": _edit_same_size,
    "longer file": lambda r: (r / WAIVES).write_text((r / WAIVES).read_text() + "x.py::t SKIP\n"),
    "new test-db file": lambda r: shutil.copy(r / TESTDB / "l0_a10.yml", r / TESTDB / "l0_b.yml"),
    "removed QA list": lambda r: (r / QA / "llm_function_core.txt").unlink(),
    "new QA subdirectory": lambda r: write_checkout(r, {f"{QA}/sub/more.txt": "b.py::test_q\n"}),
    "renamed test-db file": lambda r: (r / TESTDB / "l0_a10.yml").rename(r / TESTDB / "l0_z.yml"),
    "waives became a link": lambda r: ((r / WAIVES).unlink(), (r / WAIVES).symlink_to(
        r / QA / "llm_function_core.txt")),
    "a Groovy file appears": lambda r: write_checkout(r, {"jenkins/L0_Test.groovy": "x = 1\n"}),
    "stage table removed": lambda r: (r / STAGES).unlink(),
}


@pytest.mark.parametrize("racy", [True, False], ids=["right-after", "later"])
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_every_kind_of_change_is_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         change: str, racy: bool) -> None:
    """Right after the stamp (the racy window: content is hashed again) and later (the stat
    alone must tell), the key after a change is the one a full read gives."""
    if not racy:
        monkeypatch.setattr(stamp_mod, "RACY_NS", -10**12)
    root = small_checkout(tmp_path)
    before = locate(str(root)).key
    assert locate(str(root)).key == before
    time.sleep(0.03)  # past a coarse file-system clock's tick
    CHANGES[change](root)
    after = locate(str(root)).key
    assert after == fresh_key(root) and after != before
    assert locate(str(root)).key == after  # and the renewed stamp holds


def test_racily_clean_files_are_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed in the same clock tick as the stamp keeps its stat: only its content
    tells. Simulated by stamping the current stat with the previous content's hash."""
    f = tmp_path / "plan.txt"
    f.write_text("new content")
    stamp = Stamp(str(tmp_path / "cache"), ["x"])
    stamp.write([], [(str(f), stat_of(str(f), follow=True))], {str(f): "hash-of-old-content"},
                {}, "old-key")
    assert stamp.check() is None  # hashed, so the change shows
    monkeypatch.setattr(stamp_mod, "RACY_NS", -10**12)
    assert stamp.check() == ({}, "old-key")  # what a stat-only check would wrongly believe


def test_damaged_or_foreign_stamps_are_misses(tmp_path: Path, fine_clock: None) -> None:
    root = small_checkout(tmp_path)
    key = locate(str(root)).key
    [path] = [p for p in Path(os.environ["TESTDB_CACHE_DIR"]).glob("stamp-*")]
    for junk in (b"", b"garbage", path.read_bytes()[:-5]):
        path.write_bytes(junk)
        assert locate(str(root)).key == key
    write_cache(str(path), b"\x00not marshal")
    assert locate(str(root)).key == key


def test_explicit_paths_are_part_of_the_stamp(tmp_path: Path, fine_clock: None) -> None:
    root = small_checkout(tmp_path)
    other = tmp_path / "other-stages.yml"
    other.write_text((root / STAGES).read_text().replace("splits: 2", "splits: 3"))
    plain = locate(str(root)).key
    explicit = locate(str(root), stages=str(other)).key
    assert explicit != plain and locate(str(root)).key == plain
    time.sleep(0.03)
    other.write_text(other.read_text() + "\n")
    assert locate(str(root), stages=str(other)).key == locate(
        str(root), stages=str(other), use_cache=False).key != explicit


# ---- the records file ---------------------------------------------------------------------------

def test_records_round_trip_and_damage(tmp_path: Path) -> None:
    path = str(tmp_path / "r.records")
    recs = [f"record {i} ".encode() * (i + 1) for i in range(50)]
    write_records(path, b"meta", recs)
    table = Records.open(path)
    assert table is not None and table.meta == b"meta" and len(table) == 50
    assert [table.get(i) for i in range(50)] == recs
    table.close()
    blob = Path(path).read_bytes()
    rng = random.Random(7)
    for pos in rng.sample(range(len(blob)), 200):
        damaged = bytearray(blob)
        damaged[pos] ^= 0xFF
        Path(path).write_bytes(bytes(damaged))
        t = Records.open(path)
        if t is not None:  # the header survived: the damaged record reads as None
            got = [t.get(i) for i in range(len(t))]
            t.close()
            assert t.meta == b"meta"
            assert sum(g is None for g in got) == 1 and all(
                g == r for g, r in zip(got, recs, strict=True) if g is not None)
    for cut in (0, 5, 20, 60, len(blob) - 1):
        Path(path).write_bytes(blob[:cut])
        t = Records.open(path)
        if t is not None:
            assert t.get(len(t) - 1) is None
            t.close()
    Path(path).write_bytes(blob[:15 + 32] + (2**62).to_bytes(8, "little") + blob[55:])
    assert Records.open(path) is None  # a huge header length is refused, not allocated


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    for i in range(12):
        p = tmp_path / f"index-{i:02}.pickle"
        p.write_bytes(b"x")
        os.utime(p, ns=(i * 10**9, i * 10**9))
    (tmp_path / "where2-keep.records").write_bytes(b"y")
    prune(str(tmp_path / "index-11.pickle"), 4)
    assert sorted(os.listdir(tmp_path)) == [
        "index-08.pickle", "index-09.pickle", "index-10.pickle", "index-11.pickle",
        "where2-keep.records"]


def test_the_cache_directory_stays_bounded(tmp_path: Path) -> None:
    root = small_checkout(tmp_path)
    for i in range(12):
        (root / WAIVES).write_text(f"a.py::test_post SKIP (bug {i})\n")
        load(str(root))
    names = os.listdir(os.environ["TESTDB_CACHE_DIR"])
    assert sum(n.startswith("index-") for n in names) == 8


def test_where_survives_a_damaged_records_file(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    root = small_checkout(tmp_path)
    argv = ["--root", str(root), "where", "a.py::*", "--format", "json"]
    first = run_cli(*argv)
    assert first.code == 0 and '"verdict"' in first.out
    [path] = Path(os.environ["TESTDB_CACHE_DIR"]).glob("where*.records")
    blob = path.read_bytes()
    rng = random.Random(11)
    for pos in [*rng.sample(range(len(blob)), 40), len(blob) - 1]:
        damaged = bytearray(blob)
        damaged[pos] ^= 0x5A
        path.write_bytes(bytes(damaged))
        again = run_cli(*argv)
        assert (again.code, again.out) == (first.code, first.out), pos
    path.write_bytes(blob[: len(blob) // 2])
    assert run_cli(*argv).out == first.out
