"""A guard's JSON record says where the test is and how far its import chain runs (issue 25,
item 18): a listed id of a function parametrized at run time (no item of its own in the static
inventory) had `path: ""`, though its class is in the file; the parameter tier's guards had
`distance: null` though their module's import of the changed module was checked.

The trap beside it: a listed id whose file is not in the checkout keeps `path: ""` and
`distance: null`: nothing says where it is or that it imports anything.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
ACC = "tests/integration/defs/accuracy/test_llm_api_pytorch.py"
LIST = "tests/integration/test_lists/test-db/l0_h100.yml"
RUNTIME = "accuracy/test_llm_api_pytorch.py::TestLlama4Runtime::test_chunked_prefill"
MISSING = "accuracy/test_not_here.py::test_x[attn_backend=FLASHINFER]"

# Appended (the PR's diff touches the file's first lines): a class whose parametrization is
# computed at run time, the shape of `@parametrize_with_ids` without its definition at hand.
CLASS = '''


import pytest  # noqa: E402


def backends():
    return ["TRTLLM", "FLASHINFER"]


@pytest.mark.timeout(14400)
class TestLlama4Runtime:
    MODEL = "llama4"

    @pytest.mark.skip_less_device(8)
    @pytest.mark.parametrize("attn_backend", backends())
    def test_chunked_prefill(self, attn_backend):
        llm = LLM(self.MODEL, attn_backend=attn_backend, enable_chunked_prefill=True)
        assert llm
'''


def _guards(run_cli: Any, tmp_path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    root = tmp_path / "ex"
    shutil.copytree(EXAMPLE, root)
    with open(root / ACC, "a", encoding="utf-8") as fh:
        fh.write(CLASS)
    path = root / LIST
    text = path.read_text(encoding="utf-8")
    anchor = "TestLlama3_1_8BInstruct::test_chunked_prefill[attn_backend=FLASHINFER] TIMEOUT (90)\n"
    assert anchor in text
    path.write_text(text.replace(anchor, anchor + f"  - {RUNTIME}[attn_backend=FLASHINFER]\n"
                                 f"  - {MISSING}\n", 1), encoding="utf-8")
    res = run_cli("--root", str(root), "audit", "--diff", str(root / "pr.diff"),
                  "--format", "json")
    assert res.code in (0, 1), res.err
    data = json.loads(res.out)
    return {(tier, g["test_id"]): g for b in data["behaviours"]
            for tier, gs in b["guards"].items() for g in gs}


def test_guard_records_carry_path_and_distance(run_cli: Any, tmp_path: Path) -> None:
    guards = _guards(run_cli, tmp_path)
    runtime = guards[("parameter", f"{RUNTIME}[attn_backend=FLASHINFER]")]
    assert runtime["path"] == ACC and runtime["line"] > 1, runtime
    params = [g for (tier, _), g in guards.items() if tier == "parameter"]
    known = [g for g in params if g["test_id"] != MISSING]
    assert known and all(isinstance(g["distance"], int) and g["distance"] >= 1 for g in known)
    # the trap: no source, so no place and no import chain to state
    missing = guards[("parameter", MISSING)]
    assert missing["path"] == "" and missing["distance"] is None
