"""`where` of a class, a file or a directory names every test in it (QA 7); suggestions stop
past an edit budget instead of naming unrelated ids (QA 12d). Real scans of fixture sources
shaped like TensorRT-LLM's accuracy tests, through the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from testdb.caveats import GATES_UNKNOWN

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "testdb"))

from tdb_helpers import A10_YML, TESTDB, small_checkout  # noqa: E402

from tests.reports.helpers import LLAMA_CHUNKED_PREFILL  # noqa: E402

PYTORCH = "accuracy/test_llm_api_pytorch.py"
OTHER = "accuracy/test_llm_api.py"
LLAMA = f"{PYTORCH}::TestLlama3_1_8BInstruct"
SOURCE = LLAMA_CHUNKED_PREFILL + '''
    def test_bfloat16(self):
        pass


class TestLlama3_2_1B:
    def test_fp8_prequantized(self):
        pass

    def test_auto_dtype(self):
        pass


def test_module_level():
    pass
'''
OTHER_SOURCE = '''\
class TestLlama3_1_8BInstruct:
    def test_gather_generation_logits(self):
        pass
'''


@pytest.fixture
def root(tmp_path: Path) -> str:
    """TRTLLM listed pre-merge, FLASHINFER post-merge, a class that does not exist listed
    pre-merge; the other tests are in no list."""
    a10 = (A10_YML.replace("  - a.py::TestB::test_b\n",
                           f"  - a.py::TestB::test_b\n"
                           f"  - {LLAMA}::test_chunked_prefill[attn_backend=TRTLLM]\n"
                           f"  - {PYTORCH}::TestLagunaXS_2_1::test_fp8_dflash\n")
           .replace("  - a.py::test_post\n",
                    f"  - a.py::test_post\n"
                    f"  - {LLAMA}::test_chunked_prefill[attn_backend=FLASHINFER]\n"))
    return str(small_checkout(tmp_path, {
        f"{TESTDB}/l0_a10.yml": a10,
        f"tests/integration/defs/{PYTORCH}": SOURCE,
        f"tests/integration/defs/{OTHER}": OTHER_SOURCE}))


def _where(run_cli, root: str, pattern: str) -> tuple[int, dict[str, str]]:  # type: ignore[no-untyped-def]
    r = run_cli("--root", root, "where", pattern, "--format", "json")
    tests = json.loads(r.out)["tests"] if r.code in (0, 1) else []
    return r.code, {t["id"]: t["verdict"] for t in tests}


LLAMA_ROWS = {
    f"{LLAMA}::test_bfloat16": "unscheduled",
    f"{LLAMA}::test_chunked_prefill[attn_backend=FLASHINFER]": "post-merge-only",
    f"{LLAMA}::test_chunked_prefill[attn_backend=TRTLLM]": "pre-merge",
}
FILE_ROWS = {
    **LLAMA_ROWS,
    f"{PYTORCH}::TestLagunaXS_2_1::test_fp8_dflash": "invalid",
    f"{PYTORCH}::TestLlama3_2_1B::test_auto_dtype": "unscheduled",
    f"{PYTORCH}::TestLlama3_2_1B::test_fp8_prequantized": "unscheduled",
    f"{PYTORCH}::test_module_level": "unscheduled",
}
OTHER_ROWS = {f"{OTHER}::TestLlama3_1_8BInstruct::test_gather_generation_logits":
              "unscheduled"}


@pytest.mark.parametrize("pattern, want", [
    ("TestLlama3_1_8BInstruct", {**LLAMA_ROWS, **OTHER_ROWS}),  # the class in every file
    (LLAMA, LLAMA_ROWS),
    ("test_llm_api_pytorch.py::TestLlama3_1_8BInstruct", LLAMA_ROWS),
    (PYTORCH, FILE_ROWS),
    ("test_llm_api_pytorch.py", FILE_ROWS),
    ("accuracy/", {**FILE_ROWS, **OTHER_ROWS}),
    ("TestLlama3_1_8BInstruct::*", {**LLAMA_ROWS, **OTHER_ROWS}),  # as the glob did already
])
def test_a_scope_names_every_test_in_it(run_cli, root: str, pattern: str,  # type: ignore[no-untyped-def]
                                        want: dict[str, str]) -> None:
    code, got = _where(run_cli, root, pattern)
    assert code == 0
    assert got == want


def test_a_scope_in_text(run_cli, root: str) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("--root", root, "where", "TestLlama3_1_8BInstruct")
    assert r.code == 0
    # a post-merge-only verdict in a checkout with no gate rules says so (testdb.caveats)
    assert r.out.splitlines()[0] == ("4 parametrizations of 3 functions: pre-merge 1, "
                                     f"post-merge-only 1, unscheduled 2 ({GATES_UNKNOWN})")


def test_no_suggestion_past_the_edit_budget(run_cli, root: str) -> None:  # type: ignore[no-untyped-def]
    """TestLagunaXS_2_1 does not exist; TestLlama3_2_1B::test_fp8_prequantized is near it by
    difflib's ratio alone and was suggested: noise. A near typo still gets its suggestion."""
    r = run_cli("--root", root, "where", f"{PYTORCH}::TestLagunaXS_2_1::test_fp8_dflash",
                "--format", "json")
    [t] = json.loads(r.out)["tests"]
    assert t["verdict"] == "invalid" and t["check"]["nearest"] == []
    lint = run_cli("--root", root, "lint")
    [line] = [ln for ln in lint.out.splitlines() if "TestLagunaXS_2_1" in ln]
    assert "did you mean" not in line and "TestLlama3_2_1B" not in line
    r = run_cli("--root", root, "where", "TestMistralNemo12B", "--format", "json")
    assert r.code == 1 and json.loads(r.out)["did_you_mean"] == []
    r = run_cli("--root", root, "where", "TestLama3_2_1B", "--format", "json")
    assert r.code == 1
    assert json.loads(r.out)["did_you_mean"] == [f"{PYTORCH}::TestLlama3_2_1B"]
    r = run_cli("--root", root, "where", "test_fp8_prequantised")
    assert r.code == 1 and r.out.startswith(
        f"no test matches; did you mean {PYTORCH}::TestLlama3_2_1B::test_fp8_prequantized?")
