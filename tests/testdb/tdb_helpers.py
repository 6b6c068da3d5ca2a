"""Shared helpers for the testdb tests: the bundled corpus and tiny checkouts written to disk.

(tests/conftest.py gives every test a private cache directory.)
"""

from __future__ import annotations

import functools
from pathlib import Path

from testdb.index import Index, load

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "trtllm"
LISTS = "tests/integration/test_lists"
TESTDB = f"{LISTS}/test-db"
QA = f"{LISTS}/qa"
WAIVES = f"{LISTS}/waives.txt"
DURATIONS = "tests/integration/defs/.test_durations"
STAGES = "ci/stages.yml"


@functools.cache
def corpus() -> Index:
    """The bundled TensorRT-LLM test plan, parsed afresh once per test process."""
    return load(str(DATA), use_cache=False)


def write_checkout(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write ``{relative path: text or bytes}`` under ``root``; returns ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


STAGE_TABLE = """\
stages:
- {name: A10-PyTorch-1, platform: a10, context: l0_a10, split_id: 1, splits: 2}
- {name: A10-PyTorch-2, platform: a10, context: l0_a10, split_id: 2, splits: 2}
- {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10, split_id: 1, splits: 1}
- {name: DGX_H100-4_GPUs-PyTorch-1, platform: dgx-h100-x4, context: l0_dgx_h100, gpu_count: 4}
"""

A10_YML = """\
version: 0.0.1
l0_a10:
- condition:
    ranges:
      system_gpu_count:
        gte: 1
        lte: 1
    wildcards:
      gpu:
      - '*a10*'
    terms:
      stage: pre_merge
      backend: pytorch
  tests:
  - a.py::test_a[x=1]
  - a.py::test_a[x=2] TIMEOUT (90)
  - a.py::TestB::test_b
- condition:
    ranges:
      system_gpu_count:
        gte: 1
        lte: 1
    wildcards:
      gpu:
      - '*a10*'
    terms:
      stage: post_merge
      backend: pytorch
  tests:
  - a.py::test_post
"""

DGX_YML = """\
l0_dgx_h100:
- condition:
    ranges:
      system_gpu_count:
        gte: 4
        lte: 4
    terms:
      stage: pre_merge
  tests:
  - a.py::test_multi
  - a.py::test_a[x=1]
"""


def small_checkout(root: Path, extra: dict[str, str | bytes] | None = None) -> Path:
    """A checkout with two contexts, a waive, a QA list and a stage table."""
    files: dict[str, str | bytes] = {
        f"{TESTDB}/l0_a10.yml": A10_YML,
        f"{TESTDB}/l0_dgx_h100.yml": DGX_YML,
        WAIVES: "a.py::TestB::test_b SKIP (https://nvbugs/1)\n",
        f"{QA}/llm_function_core.txt": "a.py::test_qa\na.py::test_post\n",
        STAGES: STAGE_TABLE,
    }
    files.update(extra or {})
    return write_checkout(root, files)
