"""A test file that does not parse: pytest cannot import it, so CI runs none of its tests (QA 3).
The static inventory keeps where and why; `where` says invalid, `lint` reports the file at
path:line, `inventory` exits 2; the state survives every cache (per file, packed, warm).
Real scans of a fixture file shaped like TensorRT-LLM's accuracy tests, in a temp checkout."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "testdb"))

from tdb_helpers import A10_YML, TESTDB, small_checkout  # noqa: E402

from tests.reports.helpers import LLAMA_CHUNKED_PREFILL  # noqa: E402

FILE = "accuracy/test_llm_api_pytorch.py"
PATH = f"tests/integration/defs/{FILE}"
FUNC = f"{FILE}::TestLlama3_1_8BInstruct::test_chunked_prefill"
TRTLLM = f"{FUNC}[attn_backend=TRTLLM]"
GOOD = LLAMA_CHUNKED_PREFILL
BROKEN = GOOD + "\n\ndef test_broken(:\n    pass\n"
BROKEN_LINE = GOOD.count("\n") + 3  # where the parser stops
REASON = (f"the test file does not parse ({PATH}:{BROKEN_LINE}: syntax error: invalid syntax): "
          "pytest cannot collect it, so CI runs none of its tests")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    a10 = A10_YML.replace("  - a.py::TestB::test_b\n", f"  - a.py::TestB::test_b\n  - {TRTLLM}\n")
    return small_checkout(tmp_path / "co", {f"{TESTDB}/l0_a10.yml": a10, PATH: BROKEN})


def _verdict(run_cli, root: Path) -> tuple[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    r = run_cli("--root", str(root), "where", TRTLLM, "--format", "json")
    assert r.code == 0, r.err
    [t] = json.loads(r.out)["tests"]
    return t["verdict"], t["check"]


def test_where_says_invalid_not_pre_merge(run_cli, root: Path) -> None:  # type: ignore[no-untyped-def]
    verdict, check = _verdict(run_cli, root)
    assert verdict == "invalid"
    assert check["status"] == "invalid" and check["reason"] == REASON
    text = run_cli("--root", str(root), "where", FUNC).out
    assert text.splitlines()[0] == "1 parametrization of 1 function: invalid 1"
    assert f"[attn_backend=TRTLLM]  INVALID  {REASON}" in text
    assert "A10-PyTorch-1" not in text  # no stage runs a line of a file CI cannot collect
    md = run_cli("--root", str(root), "where", FUNC, "--format", "markdown").out
    assert f"**invalid** ({REASON})" in md


def test_lint_reports_the_file_at_its_line(run_cli, root: Path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("--root", str(root), "lint", "--format", "json")
    assert r.code == 1
    findings = json.loads(r.out)["findings"]
    [f] = [f for f in findings if f["rule"] == "unparsable-test-file"]
    assert (f["path"], f["line"], f["severity"]) == (PATH, BROKEN_LINE, "error")
    assert f["message"].startswith("syntax error: invalid syntax: pytest cannot collect")
    assert "(1 listed id(s) run nowhere); fix it" in f["message"]
    # one finding for the file, not one per listed line of it
    assert not [f for f in findings if f["rule"] == "unknown-test" and TRTLLM in f["message"]]
    text = run_cli("--root", str(root), "lint").out
    assert f"{PATH}:{BROKEN_LINE}: error: syntax error: invalid syntax" in text


def test_inventory_exits_2_naming_the_place(run_cli, root: Path) -> None:  # type: ignore[no-untyped-def]
    for fmt in ("text", "json"):
        r = run_cli("--root", str(root), "inventory", "--format", fmt)
        assert r.code == 2
        assert r.err.startswith(f"error: {PATH}:{BROKEN_LINE}: syntax error: invalid syntax; "
                                "fix it: pytest cannot collect")


def test_the_state_survives_every_cache(run_cli, root: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))  # this checkout's alone
    from testdb.inventory import build_static
    from testdb.inventory.cache import FileCache
    from testdb.inventory.packed import PackedInventory

    assert _verdict(run_cli, root)[0] == "invalid"  # cold
    assert _verdict(run_cli, root)[0] == "invalid"  # warm: the packed inventory, by stamp
    inv = build_static(str(root))
    assert isinstance(inv, PackedInventory)
    [p] = inv.unparsable()
    assert (p.loc.path, p.loc.line, p.error) == (PATH, BROKEN_LINE, "syntax error: invalid syntax")
    cache = FileCache()
    # the records file as written, opened afresh: its header keeps the error
    [whole] = [n for n in os.listdir(cache.directory) if n.startswith("whole-")]
    again = PackedInventory.open(str(cache.directory / whole))
    assert again is not None and [x.error for x in again.unparsable()] == [p.error]
    # without the packed file and its stamp, rebuilt from the per-file cache alone
    for n in os.listdir(cache.directory):
        if n.startswith(("whole-", "units-", "stamp")):
            os.unlink(cache.directory / n)
    assert [x.error for x in build_static(str(root)).unparsable()] == [p.error]
    assert [x.error for x in build_static(str(root), cache=False).unparsable()] == [p.error]
    # fixed, then broken again: the incremental rebuilds follow the file
    (root / PATH).write_text(GOOD)
    assert _verdict(run_cli, root)[0] == "pre-merge"
    assert run_cli("--root", str(root), "inventory").code == 0
    (root / PATH).write_text(BROKEN.replace("(:", "(: "))
    assert _verdict(run_cli, root)[0] == "invalid"


def test_the_checker_never_counts_such_an_id(root: Path) -> None:
    """The audit asks ``is_invalid`` of each guard (auditor.guards.GuardLocator): such an id
    is one, so it is never a guard, never a suggested stage."""
    from testdb.inventory import build_static
    from testdb.names import NameChecker

    checker = NameChecker(build_static(str(root)))
    assert checker.is_invalid(TRTLLM) and checker.is_invalid(f"{FILE}::test_broken")
    assert checker.check(FUNC).reason == REASON


def test_the_note_words_are_the_checkers() -> None:
    from reports.render_where import INVALID_WORDS
    from testdb.names import INVALID_MEANING

    assert INVALID_WORDS == INVALID_MEANING
