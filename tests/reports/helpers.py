"""Pieces two reports tests share: a test module shaped like TensorRT-LLM's accuracy tests, and
what a warm ``testdb stats`` answer imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

# The head of accuracy/test_llm_api_pytorch.py's shape: a model class, one test parametrized
# over attention backends with ids as `parametrize_with_ids` writes them.
LLAMA_CHUNKED_PREFILL = '''\
import pytest


class TestLlama3_1_8BInstruct:
    @pytest.mark.parametrize("attn_backend", ["TRTLLM", "FLASHINFER"],
                             ids=["attn_backend=TRTLLM", "attn_backend=FLASHINFER"])
    def test_chunked_prefill(self, attn_backend):
        pass
'''

# No file counts as racily clean: the checkouts of the tests are written just before they are
# stamped (tests/testdb/test_stamp.py).
_FRESH = "import testdb.stamp\ntestdb.stamp.RACY_NS = -10**12\n"


def warm_stats_imports(root: str, cache: Path, heavy: set[str]) -> tuple[str, list[str]]:
    """Fill ``cache`` with ``testdb --root ROOT stats`` in one interpreter, answer it warm
    (``reports.entry.answer``) in another: its exit code as printed ("None": no warm answer),
    and which of the ``heavy`` modules that answer imported."""
    env = {**os.environ, "TESTDB_CACHE_DIR": str(cache)}
    fill = f"{_FRESH}from reports.entry import main\nmain(['--root', {root!r}, 'stats'])\n"
    subprocess.run([sys.executable, "-c", fill], env=env, check=True, capture_output=True,
                   cwd=REPO)
    probe = (f"{_FRESH}import sys, io, contextlib\n"
             "from reports.entry import answer\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    code = answer(['--root', {root!r}, 'stats'])\n"
             f"print(code, *sorted(set({sorted(heavy)!r}) & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                         capture_output=True, text=True, cwd=REPO).stdout.split()
    return out[0], out[1:]
