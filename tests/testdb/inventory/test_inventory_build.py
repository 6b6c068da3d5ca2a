"""build_static on a checkout layout: id convention, directories, cache, parallel scan."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from inventory_suites import write_tree

from testdb.errors import InputError
from testdb.inventory import build, build_static, find_test_files
from testdb.inventory.cache import FileCache, default_cache_dir

CHECKOUT = {
    "tests/integration/defs/conftest.py": "",
    "tests/integration/defs/accuracy/test_llm_api_pytorch.py": '''
        import pytest

        class TestLlama3_1_8BInstruct:
            @pytest.mark.parametrize("attn_backend", ["TRTLLM", "FLASHINFER"])
            def test_chunked_prefill(self, attn_backend):
                pass
        ''',
    "tests/integration/defs/test_e2e.py": "def test_e2e():\n    pass\n",
    "tests/integration/defs/.hidden/test_skip.py": "def test_hidden():\n    pass\n",
    "tests/integration/defs/helper.py": "def test_not_a_test_module():\n    pass\n",
    "tests/unittest/llmapi/test_llm_pytorch.py": "def test_llm_prefix_cache_reuse():\n    pass\n",
    "tests/unittest/llmapi/llm_test.py": "def test_suffix_pattern():\n    pass\n",
    "tests/unittest/broken/test_syntax.py": "def test_(:\n",
}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return write_tree(tmp_path, CHECKOUT)


def test_id_convention(checkout: Path) -> None:
    inv = build_static(str(checkout), cache=False)
    ids = {i.nodeid for i in inv}
    assert ids == {
        "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
        "[TRTLLM]",
        "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
        "[FLASHINFER]",
        "test_e2e.py::test_e2e",
        "unittest/llmapi/test_llm_pytorch.py::test_llm_prefix_cache_reuse",
        "unittest/llmapi/llm_test.py::test_suffix_pattern",
        "unittest/broken/test_syntax.py::*",  # a syntax error: contents unknown
    }
    item = inv.get("test_e2e.py::test_e2e")
    assert item is not None and item.path == "tests/integration/defs/test_e2e.py"
    assert item.source == "static"
    unit = inv.get("unittest/llmapi/test_llm_pytorch.py::test_llm_prefix_cache_reuse")
    # -k sees directories below the pytest root (tests/unittest), not the root itself
    assert unit is not None and "llmapi" in unit.keywords and "unittest" not in unit.keywords


def test_explicit_dirs_with_prefix(checkout: Path) -> None:
    inv = build_static(str(checkout), [("tests/unittest/llmapi", "unittest/llmapi/")],
                       cache=False)
    assert {i.file for i in inv} == {"unittest/llmapi/test_llm_pytorch.py",
                                     "unittest/llmapi/llm_test.py"}
    absolute = build_static("/", [(str(checkout / "tests/integration/defs"), "")], cache=False)
    assert len(absolute) == 3


def test_missing_explicit_dir_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        build_static(str(tmp_path), [("nope", "")], cache=False)
    assert len(build_static(str(tmp_path), cache=False)) == 0  # default dirs are optional


def test_cache_hits_and_invalidation(checkout: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileCache(tmp_path / "cache")
    first = build_static(str(checkout), cache=store)
    # one whole inventory, no entry per scanned file (it keeps their rows under their keys)
    assert not list((tmp_path / "cache").rglob("*.json"))
    assert len(list((tmp_path / "cache").glob("whole-*.records"))) == 1
    assert not list((tmp_path / "cache").rglob(".*.tmp"))  # atomic writes leave no temp files

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("scanned although cached")

    monkeypatch.setattr(build, "scan_groups", no_scan)
    assert build_static(str(checkout), cache=store).items == first.items
    monkeypatch.undo()

    target = checkout / "tests/integration/defs/test_e2e.py"
    target.write_text("def test_e2e_renamed():\n    pass\n")
    again = build_static(str(checkout), cache=store)
    assert "test_e2e.py::test_e2e_renamed" in again and "test_e2e.py::test_e2e" not in again


def _counting_scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    scanned: list[str] = []
    real = build.scan_groups

    def counting(content: bytes, file_id: str, **kw: object) -> object:
        scanned.append(file_id)
        return real(content, file_id, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "scan_groups", counting)
    return scanned


def _forget_stamps(cache: Path) -> None:
    """Without its stamp a build has no last inventory to build on: each file's scan comes
    from the file cache (the kept whole inventories) or is scanned."""
    for stamp in cache.glob("stamp-*"):
        stamp.unlink()


def test_files_are_found_in_any_kept_whole_inventory(checkout: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's scan is found in an older whole inventory too (another branch's), not only
    in the newest: only the file no kept inventory has is scanned, and the answer is a fresh
    build's. The trap: the kept inventory's other version of a changed file is not used."""
    cache = tmp_path / "cache"
    store = FileCache(cache)
    target = checkout / "tests/integration/defs/test_e2e.py"
    build_static(str(checkout), cache=store)  # branch A
    text_a = target.read_text()
    target.write_text("def test_on_branch_b():\n    pass\n")
    build_static(str(checkout), cache=FileCache(cache))  # branch B: the newest
    target.write_text(text_a)  # back on A, with a new file A's inventory lacks
    (checkout / "tests/integration/defs/test_new.py").write_text("def test_new():\n    pass\n")
    _forget_stamps(cache)
    scanned = _counting_scans(monkeypatch)
    got = build_static(str(checkout), cache=FileCache(cache))
    assert scanned == ["test_new.py"]
    monkeypatch.undo()
    want = build_static(str(checkout), cache=False)
    assert sorted(got, key=lambda i: i.nodeid) == sorted(want, key=lambda i: i.nodeid)
    assert "test_e2e.py::test_e2e" in got and "test_e2e.py::test_on_branch_b" not in got


@pytest.mark.parametrize("racy", [True, False], ids=["right-after", "later"])
def test_the_stamp_notices_every_change(checkout: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, racy: bool) -> None:
    """A warm build trusts the stat stamp (no walk, no read); any change to the test tree,
    right after the stamp (racily clean: content hashed) or later (stat alone), is seen."""
    from testdb import stamp

    if not racy:
        monkeypatch.setattr(stamp, "RACY_NS", -10**12)
    store = FileCache(tmp_path / "cache")
    build_static(str(checkout), cache=store)
    if not racy:
        def no_walk(*args: object, **kwargs: object) -> None:
            raise AssertionError("listed or read the test files although the stamp holds")

        with monkeypatch.context() as m:
            m.setattr(build, "find_test_files", no_walk)
            assert len(build_static(str(checkout), cache=store)) == 6
    defs = checkout / "tests/integration/defs"
    changes = [
        lambda: (defs / "test_e2e.py").write_text("def test_e2f():\n    pass\n"),  # same size
        lambda: (defs / "deeper" / "sub").mkdir(parents=True),
        lambda: (defs / "deeper/sub/test_new.py").write_text("def test_new():\n    pass\n"),
        lambda: (defs / "accuracy/test_llm_api_pytorch.py").unlink(),
        lambda: (checkout / "tests/unittest/llmapi").rename(checkout / "tests/unittest/llmapi2"),
    ]
    for change in changes:
        time.sleep(0.03)  # past a coarse file-system clock's tick
        change()
        got = build_static(str(checkout), cache=store)
        want = build_static(str(checkout), cache=False)
        assert sorted(got, key=lambda i: i.nodeid) == sorted(want, key=lambda i: i.nodeid)


def test_a_rebuild_scans_only_the_changed_files(checkout: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """After a test file changes, the last build's items of the other files are reused: with
    the per-file cache emptied, exactly one file is scanned."""
    store = FileCache(tmp_path / "cache")
    build_static(str(checkout), cache=store)
    for entry in (tmp_path / "cache").rglob("*.json"):
        entry.unlink()
    scanned: list[str] = []
    real = build.scan_groups

    def counting(content: bytes, file_id: str, **kw: object) -> object:
        scanned.append(file_id)
        return real(content, file_id, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "scan_groups", counting)
    (checkout / "tests/integration/defs/test_e2e.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2])\ndef test_e2e(n):\n"
        "    pass\n")
    got = build_static(str(checkout), cache=store)
    assert scanned == ["test_e2e.py"]
    want = build_static(str(checkout), cache=False)
    assert sorted(got, key=lambda i: i.nodeid) == sorted(want, key=lambda i: i.nodeid)
    assert "test_e2e.py::test_e2e[2]" in got


@pytest.mark.parametrize("damage", ["cut", "scribbled-record", "scribbled-keys",
                                    "scribbled-header", "foreign-format", "other-rows"])
def test_a_damaged_kept_inventory_is_a_miss_for_each_file(
        checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    """A kept whole inventory that is cut short, scribbled on, of another layout, or whose
    rows the scanner would not make, gives no file's scan: the files are scanned again and
    the answer is a fresh build's."""
    import marshal

    from testdb.inventory.packed import FORMAT, PackedInventory

    cache = tmp_path / "cache"
    build_static(str(checkout), cache=FileCache(cache))
    (kept,) = cache.glob("whole-*.records")
    data = bytearray(kept.read_bytes())
    if damage == "cut":
        kept.write_bytes(bytes(data[: len(data) // 2]))
    elif damage in ("scribbled-record", "scribbled-keys"):
        inv = PackedInventory.open(str(kept))
        assert inv is not None
        f = "test_e2e.py"
        key = inv.file_key(f) or ""
        blob = inv.blob_for(f, key) if damage == "scribbled-record" else marshal.dumps(
            {g: inv.file_key(g) for g in inv.files() if inv.file_key(g)})
        at = data.find(blob or b"-")
        assert at > 0
        data[at + len(blob or b"") // 2] ^= 0xFF
        kept.write_bytes(bytes(data))
    elif damage == "scribbled-header":
        data[60:70] = bytes(10)
        kept.write_bytes(bytes(data))
    else:
        inv = PackedInventory.open(str(kept))
        assert inv is not None
        if damage == "foreign-format":
            monkeypatch.setattr("testdb.inventory.packed.FORMAT", FORMAT + "-other")
            inv.materialized().write(str(kept))
            monkeypatch.undo()
        else:  # well sealed, but a row no scan makes (a keyword list without the name)
            mat = inv.materialized()
            f = "test_e2e.py"
            rows = [list(r) for r in marshal.loads(mat.blob_for(f, mat.file_key(f) or "")
                                                   or b"")]
            rows[0][7] = ("not-the-name",)
            odd = mat.replace_files(set(), {f: marshal.dumps([tuple(r) for r in rows])},
                                    keys={f: mat.file_key(f) or ""})
            odd.write(str(kept))
    (checkout / "tests/integration/defs/test_new.py").write_text("def test_new():\n    pass\n")
    _forget_stamps(cache)
    scanned = _counting_scans(monkeypatch)
    got = build_static(str(checkout), cache=FileCache(cache))
    monkeypatch.undo()
    want = build_static(str(checkout), cache=False)
    assert sorted(got, key=lambda i: i.nodeid) == sorted(want, key=lambda i: i.nodeid)
    if damage in ("other-rows", "scribbled-record"):
        assert sorted(scanned) == ["test_e2e.py", "test_new.py"]  # the others were good
    else:  # nothing of the file is used
        assert sorted(scanned) == sorted(got.files())


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir().parent == tmp_path / "c"
    monkeypatch.delenv("TESTDB_CACHE_DIR")
    assert str(default_cache_dir()).startswith(os.path.expanduser("~/.cache/testdb-audit"))


def test_parallel_scan_equals_serial(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "_PARALLEL_MIN_FILES", 1)
    serial = build_static(str(checkout), cache=False, workers=1)
    parallel = build_static(str(checkout), cache=False, workers=2)
    assert parallel.items == serial.items


def test_find_test_files_prunes_and_sorts(checkout: Path) -> None:
    files = find_test_files(str(checkout))
    assert [f.file_id for f in files] == [
        "test_e2e.py", "accuracy/test_llm_api_pytorch.py", "unittest/broken/test_syntax.py",
        "unittest/llmapi/llm_test.py", "unittest/llmapi/test_llm_pytorch.py"]
    assert files[1].dirs == ("accuracy",)


def test_a_cold_build_in_a_child_answers_as_one_built_here(
        checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold build of many test files runs in a child process, which writes the whole
    inventory to the cache; this process opens it, as a warm build does."""
    pids = tmp_path / "pids"
    real = build._build_whole

    def recorded(*args: object) -> str | None:
        with open(pids, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "_PARALLEL_MIN_FILES", 1)  # this checkout counts as many
    monkeypatch.setattr(build, "usable_cpus", lambda: 2)
    monkeypatch.setattr(build, "_build_whole", recorded)
    store = FileCache(tmp_path / "cache")
    got = build_static(str(checkout), cache=store)
    assert [int(p) for p in pids.read_text().split()] != [os.getpid()]
    want = build_static(str(checkout), cache=False, workers=1)
    assert got.items == want.items
    assert got.unparsable() == want.unparsable()  # the file that does not parse, too


def test_a_failed_child_build_is_built_here(checkout: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object) -> None:
        raise OSError("no space left on device")

    monkeypatch.setattr(build, "_PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(build, "usable_cpus", lambda: 2)
    monkeypatch.setattr(build, "_build_whole", fail)
    got = build_static(str(checkout), cache=FileCache(tmp_path / "cache"))
    assert got.items == build_static(str(checkout), cache=False, workers=1).items
