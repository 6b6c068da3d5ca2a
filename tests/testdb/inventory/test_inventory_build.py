"""build_static on a checkout layout: id convention, directories, cache, parallel scan."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from inventory_suites import write_tree

from testdb.errors import InputError
from testdb.files import write_cache
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
    entries = list((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 5
    assert not list((tmp_path / "cache").rglob(".tmp-*"))  # atomic writes leave no temp files

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("scanned although cached")

    monkeypatch.setattr(build, "scan_groups", no_scan)
    assert build_static(str(checkout), cache=store).items == first.items
    monkeypatch.undo()

    target = checkout / "tests/integration/defs/test_e2e.py"
    target.write_text("def test_e2e_renamed():\n    pass\n")
    again = build_static(str(checkout), cache=store)
    assert "test_e2e.py::test_e2e_renamed" in again and "test_e2e.py::test_e2e" not in again


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


def test_corrupt_cache_entry_is_a_miss(checkout: Path, tmp_path: Path) -> None:
    store = FileCache(tmp_path / "cache")
    first = build_static(str(checkout), cache=store)
    entries = list((tmp_path / "cache").rglob("*.json"))
    damages = [
        lambda p: p.write_text("{not json"),
        lambda p: p.write_bytes(p.read_bytes()[:-3]),  # cut short: the seal no longer holds
        # well sealed, but nested too deep for json, or of the wrong shape
        lambda p: write_cache(str(p), b"[" * 100_000 + b"]" * 100_000, keep=None),
        lambda p: write_cache(str(p), b'[{"a": 1}]', keep=None),
    ]
    for damage in damages:
        for entry in entries:
            damage(entry)
        for whole in (tmp_path / "cache").glob("whole-*"):
            whole.unlink()  # so the per-file entries are read
        for stamp in (tmp_path / "cache").glob("stamp-*"):
            stamp.unlink()
        assert build_static(str(checkout), cache=store).items == first.items


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
