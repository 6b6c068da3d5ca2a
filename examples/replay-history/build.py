"""Build the bundled example history for `testdb replay`: a git repository in TensorRT-LLM's
layout with 31 first-parent commits after a root (one of them a merge of a two-commit branch),
and the post-merge results that score the replay.

    python examples/replay-history/build.py OUTDIR
    testdb --root OUTDIR/repo replay v0..main --outcomes OUTDIR/outcomes.jsonl

OUTDIR gets ``repo/`` (the history; tag ``v0`` is the root commit), ``outcomes.jsonl`` (JSON
lines ``{"commit", "test", "outcome"}``) and ``junit/<sha>.xml`` (the same results as JUnit XML,
one file per commit). Commits carry fixed dates and authors, so the shas are the same on every
machine with the same git object format. The story of each commit is in STORY below and in
this directory's README; the tests in tests/auditor/test_replay_history.py check every figure
the replay computes from it against expectations worked out by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

A10 = "{name: %s, map: x86TestConfigs, arch: x86_64, platform: a10, context: l0_a10, " \
      "split_id: %d, splits: %d, gpu_count: 1, node_count: 1, run_with_sbatch: false}"

# One test-db block: the condition (GPU count and type, stage term) and its tests.
BLOCK = """\
- condition:
    ranges:
      system_gpu_count:
        gte: {gpus}
        lte: {gpus}
    wildcards:
      gpu:
      - '*{gpu}*'
{distro}    terms:
      stage: {stage}
      backend: pytorch
  tests:
{tests}"""


def block(gpus: int, gpu: str, stage: str, tests: list[str], ubuntu: bool = False) -> str:
    return BLOCK.format(gpus=gpus, gpu=gpu, stage=stage,
                        distro="      linux_distribution_name: ubuntu*\n" if ubuntu else "",
                        tests="".join(f"  - {t}\n" for t in tests))


FILES: dict[str, str] = {
    "ci/stages.yml": "\n".join([
        "# Four Jenkins L0 stages in the shape of data/trtllm/ci/stages.yml.",
        "stages:",
        "- " + A10 % ("A10-PyTorch-1", 1, 2),
        "- " + A10 % ("A10-PyTorch-2", 2, 2),
        "- " + A10 % ("A10-PyTorch-Post-Merge-1", 1, 1),
        "- {name: DGX_H100-4_GPUs-PyTorch-1, map: x86SlurmTestConfigs, arch: x86_64, "
        "platform: auto:dgx-h100-x4, context: l0_dgx_h100, split_id: 1, splits: 1, gpu_count: 4, "
        "node_count: 1, run_with_sbatch: false}",
        ""]),
    "ci/pr-triggers.yml": """\
# The PR gate rules (shape of data/trtllm/ci/pr-triggers.yml).
multi_gpu_file_changed:
  match_rule: substring of the changed files joined with ", "
  related_paths:
  - tinyllm/distributed/
  - tests/integration/test_lists/test-db/l0_dgx_h100.yml
auto_trigger_tags:
  map: []
""",
    "tests/integration/test_lists/test-db/l0_a10.yml": "version: 0.0.1\nl0_a10:\n"
    + block(1, "a10", "pre_merge", ["unittest/test_tokenizer.py", "test_sampling.py::test_top_k",
                                    "test_sampling.py::test_top_p",
                                    "test_attention.py::test_attention[attn_backend=TRTLLM]"],
            ubuntu=True)
    + block(1, "a10", "post_merge", ["test_attention.py::test_attention[attn_backend=FLASHINFER]",
                                     "test_cache.py::test_cache_eviction",
                                     "test_e2e.py::test_generate"], ubuntu=True),
    "tests/integration/test_lists/test-db/l0_dgx_h100.yml": "version: 0.0.1\nl0_dgx_h100:\n"
    + block(4, "h100", "pre_merge", ["test_allreduce.py::test_allreduce"]),
    "tests/integration/test_lists/qa/llm_function_core.txt": "test_quant.py::test_quantize\n",
    "tests/integration/test_lists/waives.txt": "",
    "tests/integration/defs/.test_durations": json.dumps({
        "unittest/test_tokenizer.py": 120.0,
        "test_sampling.py::test_top_k": 300.0,
        "test_sampling.py::test_top_p": 240.0,
        "test_attention.py::test_attention[attn_backend=TRTLLM]": 600.0,
        "test_attention.py::test_attention[attn_backend=FLASHINFER]": 480.0,
        "test_cache.py::test_cache_eviction": 900.0,
        "test_e2e.py::test_generate": 1200.0,
        "test_allreduce.py::test_allreduce": 700.0,
    }, indent=1) + "\n",
    "tests/integration/defs/conftest.py": '''\
"""Shared helpers (the shape of TensorRT-LLM's defs/conftest.py)."""
import pytest


def parametrize_with_ids(argnames, argvalues, **kwargs):
    names = [n.strip() for n in argnames.split(",")]
    ids = []
    for values in argvalues:
        values = values if len(names) > 1 else (values,)
        ids.append("-".join(f"{n}={v}" for n, v in zip(names, values)))
    return pytest.mark.parametrize(argnames, argvalues, ids=ids, **kwargs)
''',
    "tests/integration/defs/test_sampling.py": '''\
from tinyllm.sampling import top_k, top_p


def test_top_k():
    assert top_k([3, 1, 2], 2) == [3, 2]


def test_top_p():
    assert top_p([5, 3, 2], 0.5) == [5]
''',
    "tests/integration/defs/test_attention.py": '''\
from defs.conftest import parametrize_with_ids
from tinyllm.attention import run_attention


@parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
def test_attention(attn_backend):
    assert run_attention(attn_backend, [1.0, 2.0]) == [1.0, 2.0]
''',
    "tests/integration/defs/test_cache.py": '''\
from tinyllm.cache import evict


def test_cache_eviction():
    assert evict([1, 2, 3], 1) == [2, 3]
''',
    "tests/integration/defs/test_allreduce.py": '''\
from tinyllm.comm import ring_order
from tinyllm.distributed.allreduce import all_reduce


def test_allreduce():
    assert ring_order([0, 1]) == [0, 1]
    assert all_reduce([[1], [2]]) == [3]
''',
    "tests/integration/defs/test_quant.py": '''\
from tinyllm.quant import quantize


def test_quantize():
    assert quantize(1.0, 0.5) == 2
''',
    "tests/integration/defs/test_e2e.py": '''\
from tinyllm.generate import generate


def test_generate():
    assert generate([3, 1, 2])
''',
    "tests/unittest/test_tokenizer.py": '''\
from tinyllm.tokenizer import encode


def test_encode():
    assert encode("a b") == ["a", "b"]
''',
    "tinyllm/__init__.py": '"""A tiny stand-in for an LLM library."""\n',
    "tinyllm/sampling.py": '''\
"""Token sampling."""


def top_k(logits, k):
    """Keep the k largest logits."""
    ranked = sorted(logits, reverse=True)
    return ranked[:k]


def top_p(logits, p):
    """Keep the smallest prefix whose mass reaches p."""
    total = sum(logits)
    kept, mass = [], 0.0
    for x in sorted(logits, reverse=True):
        kept.append(x)
        mass += x
        if mass >= p * total:
            break
    return kept
''',
    "tinyllm/generate.py": '''\
"""End-to-end generation."""
from tinyllm.sampling import top_k

# Samplers by name, looked up at run time: no call the audit's resolver can follow
# (auditor.resolve), so test_generate reaches top_k only through its imports.
_SAMPLERS = {"greedy": top_k}


def generate(logits, sampler="greedy"):
    return _SAMPLERS[sampler](logits, 1)
''',
    "tinyllm/attention.py": '''\
"""Attention backends."""


def _log(kind, n):
    return (kind, n)


def run_attention(backend, q):
    """Dispatch to a backend, looked up at run time: no call the audit's resolver can
    follow (auditor.resolve), so test_attention's links are by value only."""
    return _BACKENDS[backend](q)


def _flashinfer(q):
    scale = 1.0
    return [x * scale for x in q]


def _trtllm(q):
    return list(q)


_BACKENDS = {"FLASHINFER": _flashinfer, "TRTLLM": _trtllm}
''',
    "tinyllm/cache.py": '''\
"""KV-cache block eviction."""


def evict(blocks, n):
    """Drop n blocks."""
    order = list(blocks)
    return order[n:]
''',
    "tinyllm/comm.py": '''\
"""Communicator helpers."""


def ring_order(ranks):
    return list(ranks)
''',
    "tinyllm/distributed/__init__.py": "",
    "tinyllm/distributed/allreduce.py": '''\
"""All-reduce over ranks."""


def all_reduce(parts):
    total = 0
    for p in parts:
        total += sum(p)
    return [total]
''',
    "tinyllm/quant.py": '''\
"""Quantization."""


def quantize(x, scale):
    return round(x / scale)
''',
    "tinyllm/tokenizer.py": '''\
"""Tokenizer."""


def encode(text):
    return text.split()
''',
    "tinyllm/telemetry.py": '''\
"""Usage counters (nothing tests them)."""


def count(tokens):
    return len(tokens)


def flush(buffer):
    buffer.clear()
''',
}

L0_A10 = "tests/integration/test_lists/test-db/l0_a10.yml"
WAIVES = "tests/integration/test_lists/waives.txt"
CACHE_WAIVE = "test_cache.py::test_cache_eviction SKIP (https://nvbugs/1001 eviction order)\n"


class History:
    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.n = 0
        self.names: dict[str, str] = {}  # story label -> sha

    def git(self, *args: str) -> str:
        stamp = f"2026-01-01T{self.n // 60:02d}:{self.n % 60:02d}:00+00:00"
        env = {**os.environ, "GIT_AUTHOR_NAME": "Replay Example", "GIT_AUTHOR_EMAIL": "r@e",
               "GIT_COMMITTER_NAME": "Replay Example", "GIT_COMMITTER_EMAIL": "r@e",
               "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        return subprocess.run(["git", "-C", str(self.repo), *args], check=True, text=True,
                              capture_output=True, env=env).stdout

    def write(self, rel: str, text: str) -> None:
        p = self.repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def edit(self, rel: str, old: str, new: str) -> None:
        text = (self.repo / rel).read_text()
        if text.count(old) != 1:
            raise SystemExit(f"build.py: {old!r} is not once in {rel}")
        self.write(rel, text.replace(old, new))

    def commit(self, label: str, message: str) -> None:
        self.n += 1
        self.git("add", "-A")
        self.git("commit", "-q", "--no-verify", "-m", message)
        self.names[label] = self.git("rev-parse", "HEAD").strip()

    def merge(self, label: str, message: str, branch: str) -> None:
        self.n += 1
        self.git("merge", "-q", "--no-ff", "-m", message, branch)
        self.names[label] = self.git("rev-parse", "HEAD").strip()


def _top_k(h: History, new: str) -> None:
    h.edit("tinyllm/sampling.py", "    ranked = sorted(logits, reverse=True)\n",
           f"    ranked = sorted(logits, reverse=True)\n{new}")


def _top_p(h: History, new: str) -> None:
    h.edit("tinyllm/sampling.py", "    total = sum(logits)\n", f"    total = sum(logits)\n{new}")


def _flashinfer(h: History, new: str) -> None:
    h.edit("tinyllm/attention.py", "    scale = 1.0\n", f"    scale = 1.0\n{new}")


def _evict(h: History, path: str, new: str) -> None:
    h.edit(path, "    order = list(blocks)\n", f"    order = list(blocks)\n{new}")


def _comm(h: History, new: str) -> None:
    h.edit("tinyllm/comm.py", "    return list(ranks)\n", f"{new}    return list(ranks)\n")


def _allreduce(h: History, new: str) -> None:
    h.edit("tinyllm/distributed/allreduce.py", "    total = 0\n", f"    total = 0\n{new}")


def _quant(h: History, new: str) -> None:
    anchor = "    return round(x / scale)\n"
    h.edit("tinyllm/quant.py", anchor, f"{new}{anchor}")


def _tokenizer(h: History, new: str) -> None:
    h.edit("tinyllm/tokenizer.py", "    return text.split()\n", f"{new}    return text.split()\n")


def _telemetry(h: History, func: str, new: str) -> None:
    anchor = {"count": "    return len(tokens)\n", "flush": "    buffer.clear()\n"}[func]
    h.edit("tinyllm/telemetry.py", anchor, f"{new}{anchor}")


KV = "tinyllm/kv_cache.py"
BRANCH = "quant-rounding"


def _rename(h: History) -> None:
    h.git("mv", "tinyllm/cache.py", KV)
    _evict(h, KV, "    order = [b for b in order if b != 'pinned']\n")
    h.edit("tests/integration/defs/test_cache.py", "from tinyllm.cache import evict",
           "from tinyllm.kv_cache import evict")


def _demote(h: History) -> None:
    text = (h.repo / L0_A10).read_text()
    line = "  - test_sampling.py::test_top_p\n"
    text = text.replace(line, "", 1)
    text = text.replace("  - test_e2e.py::test_generate\n",
                        f"  - test_e2e.py::test_generate\n{line}", 1)
    h.write(L0_A10, text)


def _branch(h: History) -> None:
    """The two commits of the branch c18 merges (the build merges it: no commit of its own)."""
    h.git("checkout", "-q", "-b", BRANCH)
    _quant(h, "    x = float(x)\n")
    h.commit("s1", "quant: accept ints")
    _telemetry(h, "flush", "    buffer = buffer or []\n")
    h.commit("s2", "telemetry: flush tolerates None")
    h.git("checkout", "-q", "main")


def _both(h: History) -> None:
    _top_k(h, "    shared = True\n")
    _top_p(h, "    shared = True\n")


# (label, commit message, what it does to the tree). Labels c02..c32 are the first-parent
# commits after the root c01; the merge c18 brings in the branch commits s1 and s2.
STORY: list[tuple[str, str, Callable[[History], None]]] = [
    ("c02", "sampling: clamp k in top_k", lambda h: _top_k(h, "    k = min(k, len(ranked))\n")),
    ("c03", "attention: log the FLASHINFER path",
     lambda h: _flashinfer(h, '    _log("FLASHINFER", len(q))\n')),
    ("c04", "cache: evict oldest blocks first",
     lambda h: _evict(h, "tinyllm/cache.py", "    order.sort()\n")),
    ("c05", "cache: rename to kv_cache, evict skips pinned blocks", _rename),
    ("c06", "waive test_cache_eviction (nvbugs/1001)",
     lambda h: h.write(WAIVES, CACHE_WAIVE)),
    ("c07", "sampling: top_p renormalises", lambda h: _top_p(h, "    total = total or 1\n")),
    ("c08", "comm: reverse the ring", lambda h: _comm(h, "    ranks = ranks[::-1]\n")),
    ("c09", "unwaive test_cache_eviction (fixed)", lambda h: h.write(WAIVES, "")),
    ("c10", "move test_top_p to post-merge", _demote),
    ("c11", "tokenizer: strip before splitting",
     lambda h: _tokenizer(h, "    text = text.strip()\n")),
    ("c12", "sampling: top_p keeps ties", lambda h: _top_p(h, "    ties = True\n")),
    ("c13", "docs: sampling notes", lambda h: h.write("docs/sampling.md", "# Sampling\n")),
    ("c14", "distributed: all_reduce counts parts",
     lambda h: _allreduce(h, "    seen = len(parts)\n")),
    ("c15", "telemetry: count skips empty",
     lambda h: _telemetry(h, "count", "    tokens = [t for t in tokens if t]\n")),
    ("c16", "kv_cache: evict keeps the newest block",
     lambda h: _evict(h, KV, "    keep = order[-1:]\n")),
    ("c17", "waive test_cache_eviction again (nvbugs/1002)",
     lambda h: h.write(WAIVES, CACHE_WAIVE.replace("1001 eviction order", "1002 newest block"))),
    ("c18", f"Merge branch '{BRANCH}' (#18)", _branch),
    ("c19", "attention: log the TRTLLM path",
     lambda h: h.edit("tinyllm/attention.py", "    return list(q)\n",
                      '    _log("TRTLLM", len(q))\n    return list(q)\n')),
    ("c20", "sampling: top_k drops negative logits",
     lambda h: _top_k(h, "    ranked = [r for r in ranked if r >= 0]\n")),
    ("c21", "quant: clamp the scale", lambda h: _quant(h, "    scale = max(scale, 1e-6)\n")),
    ("c22", "attention: FLASHINFER sliding window",
     lambda h: _flashinfer(h, '    window = _log("FLASHINFER", 4096)\n')),
    ("c23", "telemetry: flush returns nothing",
     lambda h: _telemetry(h, "flush", "    size = len(buffer)\n")),
    ("c24", "comm: rotate the ring", lambda h: _comm(h, "    ranks = ranks[1:] + ranks[:1]\n")),
    ("c25", "sampling: top_k and top_p share a sort", _both),
    ("c26", "kv_cache: evict in place", lambda h: _evict(h, KV, "    order.reverse()\n")),
    ("c27", "unwaive test_cache_eviction (fixed again)", lambda h: h.write(WAIVES, "")),
    ("c28", "tokenizer: lower-case", lambda h: _tokenizer(h, "    text = text.lower()\n")),
    ("c29", "distributed: all_reduce skips empty parts",
     lambda h: _allreduce(h, "    parts = [p for p in parts if p]\n")),
    ("c30", "quant: round half up", lambda h: _quant(h, "    x = x + 1e-9\n")),
    ("c31", "attention: FLASHINFER scale from config",
     lambda h: _flashinfer(h, '    scale = _log("FLASHINFER", 1)[1]\n')),
    ("c32", "sampling: top_p early exit", lambda h: _top_p(h, "    early = p >= 1\n")),
]


# Post-merge results (commit label -> {test: outcome}), as the post-merge pipeline reported
# them: it ran every few commits and not every test each time.
TOP_P = "test_sampling.py::test_top_p"
GENERATE = "test_e2e.py::test_generate"
ALLREDUCE = "test_allreduce.py::test_allreduce"
FLASHINFER = "test_attention.py::test_attention[attn_backend=FLASHINFER]"
OUTCOMES: dict[str, dict[str, str]] = {
    "c11": {TOP_P: "passed", GENERATE: "passed"},
    "c13": {TOP_P: "failed", GENERATE: "passed"},  # the c12 change broke test_top_p
    "c19": {GENERATE: "passed", TOP_P: "failed"},  # still failing: no new faulty change
    "c21": {GENERATE: "failed"},  # broken by c20, which the audit judged guarded pre-merge
    "c23": {ALLREDUCE: "passed", FLASHINFER: "passed"},
    "c25": {ALLREDUCE: "failed", FLASHINFER: "passed"},  # broken by c24 (gated)
    "c27": {FLASHINFER: "failed", ALLREDUCE: "failed"},  # c26, c27 link no FLASHINFER test
}


def _junit(results: dict[str, str]) -> str:
    cases = []
    for test, outcome in sorted(results.items()):
        file, _, name = test.partition("::")
        classname = file[:-3].replace("/", ".")
        body = '<failure message="assert">AssertionError</failure>' if outcome == "failed" else ""
        cases.append(f'    <testcase classname="A10-PyTorch-Post-Merge-1.{classname}" '
                     f'name="{name}" time="1.0">{body}</testcase>')
    failures = sum(1 for o in results.values() if o == "failed")
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n'
            f'  <testsuite name="pytest" tests="{len(results)}" failures="{failures}">\n'
            + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n")


def build(out: Path) -> dict[str, str]:
    """Write the history and its results under ``out``; returns story label -> sha."""
    repo = out / "repo"
    repo.mkdir(parents=True)
    h = History(repo)
    h.git("init", "-q", "-b", "main")
    for rel, text in FILES.items():
        h.write(rel, text)
    h.commit("c01", "initial test plan and library")
    h.git("tag", "v0")
    for label, message, step in STORY:
        step(h)
        if label == "c18":
            h.merge(label, message, BRANCH)
        else:
            h.commit(label, message)
    with open(out / "outcomes.jsonl", "w", encoding="utf-8") as fh:
        for label, results in OUTCOMES.items():
            for test, outcome in results.items():
                fh.write(json.dumps({"commit": h.names[label], "test": test,
                                     "outcome": outcome}) + "\n")
    (out / "junit").mkdir()
    for label, results in OUTCOMES.items():
        (out / "junit" / f"{h.names[label]}.xml").write_text(_junit(results))
    with open(out / "shas.json", "w", encoding="utf-8") as fh:
        json.dump(h.names, fh, indent=1)
    return h.names


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    out = Path(argv[0])
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"build.py: {out} exists and is not empty")
    names = build(out)
    print(f"{out / 'repo'}: {len(STORY)} first-parent commits after v0 "
          f"(main at {names['c32'][:10]}); results in {out / 'outcomes.jsonl'} and {out / 'junit'}")


if __name__ == "__main__":
    main(sys.argv[1:])
