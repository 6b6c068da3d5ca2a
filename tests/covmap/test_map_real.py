"""Real pytest under real coverage.py (the ``auditor.covmap.plugin`` contexts) on the bundled
examples, ingested with ``testdb map add``, and audits whose verdict the map changes, both
ways: a static post-merge-only turned green by a measured pre-merge guard, and a static green
overturned by a test that ran without executing the changed function."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.gitrepo import git

FI = os.path.join(REPO, "examples", "flashinfer-reuse")
SMOKE = os.path.join(REPO, "examples", "gpu-smoke")
CREATOR = "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py"
# A unit test that names create_py_executor but never enters it: the backend name is
# rejected while its argument is built (the shape of `llm.generate()`-style name links).
REJECTED = '''\
"""The executor refuses unknown attention backends."""
import pytest

from tensorrt_llm._torch.attention_backend import AttentionBackend
from tensorrt_llm._torch.pyexecutor.py_executor_creator import KvCacheConfig, create_py_executor


def test_unknown_backend_rejected():
    with pytest.raises(ValueError):
        create_py_executor(AttentionBackend("NO_SUCH_BACKEND"), KvCacheConfig())
'''


ACCURACY = "tests/integration/defs/accuracy/test_llm_api_pytorch.py"


def checkout(tmp: Path, src: str, extra: dict[str, str | None] | None = None
             ) -> tuple[Path, str]:
    """A git checkout of ``src`` with ``extra`` files written (None: removed)."""
    root = tmp / "co"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for rel, text in (extra or {}).items():
        if text is None:
            (root / rel).unlink()
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def cap_diff(root: Path) -> str:
    """A change to create_py_executor that spells no parameter value (so the name link, not
    the parameter tier, decides statically), as a diff against the base-side checkout."""
    path = root / CREATOR
    text = path.read_text()
    path.write_text(text.replace(
        "        kv_cache_config.enable_block_reuse = False\n",
        "        kv_cache_config.enable_block_reuse = False\n"
        "    kv_cache_config.max_tokens = min(kv_cache_config.max_tokens, 4096)\n"))
    (root / "cap.diff").write_text(git(root, "diff"))
    git(root, "checkout", "--", CREATOR)
    return "cap.diff"


def run_pytest(root: Path, cwd: str, args: list[str], data: Path
               ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), REPO]),
           "TESTDB_COVERAGE_FILE": str(data), "TESTDB_COVERAGE_ROOT": str(root)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "auditor.covmap.plugin", *args], cwd=root / cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def audit(run_cli: Any, root: Path, diff: str, *extra: str) -> tuple[int, dict[str, Any]]:
    r = run_cli("--root", str(root), "audit", "--diff", str(root / diff), "--format", "json",
                *extra)
    assert r.code in (0, 1), r.err
    return r.code, json.loads(r.out)


def creator(data: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in data["behaviours"] if b["function"] == "create_py_executor")


def test_measured_pre_merge_guard_turns_post_merge_only_green(tmp_path: Path,
                                                               run_cli: Any) -> None:
    root, sha = checkout(tmp_path, FI)
    data = tmp_path / "int.coverage"
    p = run_pytest(root, "tests/integration/defs", ["accuracy"], data)
    assert p.returncode == 0, p.stdout + p.stderr
    m = tmp_path / "map.sqlite"
    r = run_cli("--root", str(root), "map", "add", str(data), "--map", str(m))
    assert r.code == 0, r.err
    assert "6 test(s) measured at " + sha[:12] in r.out

    # where --map: what the guard executed, top modules first
    w = run_cli("--root", str(root), "where", "test_chunked_prefill[attn_backend=TRTLLM]",
                "--map", str(m), "--format", "json")
    assert w.code == 0, w.err
    (got,) = json.loads(w.out)["measured"].values()
    assert got["commit"] == sha and got["functions"] == 3
    assert got["modules"][0] == {"module": "tensorrt_llm.llmapi.llm",
                                 "functions": ["LLM.__init__", "LLM.generate"]}
    w = run_cli("--root", str(root), "where", "test_summary", "--map", str(m))
    assert "not in the map" in w.out

    code, static = audit(run_cli, root, "pr-no-thin-guard.diff")
    assert code == 1 and creator(static)["verdict"] != "pre-merge"
    assert "measured" not in static["summary"]

    code, measured = audit(run_cli, root, "pr-no-thin-guard.diff", "--map", str(m))
    b = creator(measured)
    assert code == 0 and b["verdict"] == "pre-merge" and b["tier"] == "coverage"
    guard = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill" \
            "[attn_backend=TRTLLM]"
    assert guard in b["pre_merge_guards"]
    reason = next(g["reason"] for g in b["guards"]["coverage"] if g["test_id"] == guard)
    assert reason.startswith(f"executed the changed function at {sha[:7]}, ")
    assert measured["summary"]["measured"] == 1 and measured["summary"]["static_only"] == 0
    assert "(1 decided by measured links)" in measured["summary"]["sentence"]
    assert measured["provenance"]["map"]["tests"] == 6
    # every face says it: the text and the PR comment carry the guard's reason
    text = run_cli("--root", str(root), "audit", "--diff", str(root / "pr-no-thin-guard.diff"),
                   "--map", str(m)).out
    assert "executed the changed function at " + sha[:7] in text
    md = run_cli("--root", str(root), "audit", "--diff", str(root / "pr-no-thin-guard.diff"),
                 "--map", str(m), "--format", "markdown").out
    assert "decided by measured links" in md


def test_map_overturns_a_static_green(tmp_path: Path, run_cli: Any) -> None:
    rel = "tests/unittest/_torch/executor/test_backend_names.py"
    # Without the accuracy tests, whose LLM(...) reaches create_py_executor by a resolved call
    # path (auditor.resolve) and which no CPU run can measure, the unit test's call is the only
    # static pre-merge guard: the map's silence is what must turn it off.
    root, sha = checkout(tmp_path, FI, {rel: REJECTED, ACCURACY: None})
    diff = cap_diff(root)
    code, static = audit(run_cli, root, diff)
    b = creator(static)
    rejected = "unittest/_torch/executor/test_backend_names.py::test_unknown_backend_rejected"
    # statically the name link guards: the trap this test sets
    assert code == 0 and b["verdict"] == "pre-merge" and rejected in b["pre_merge_guards"]

    data = tmp_path / "unit.coverage"
    p = run_pytest(root, "tests", ["unittest"], data)
    assert p.returncode == 0, p.stdout + p.stderr
    m = tmp_path / "map.sqlite"
    assert run_cli("--root", str(root), "map", "add", str(data), "--commit", sha,
                   "--map", str(m)).code == 0
    code, measured = audit(run_cli, root, diff, "--map", str(m))
    b = creator(measured)
    assert code == 1 and b["verdict"] != "pre-merge"
    assert rejected not in b["pre_merge_guards"]
    assert all(g["test_id"] != rejected for gs in b["guards"].values() for g in gs
               if g["tier"] != "module")
    # the behaviour was decided by static links only (nothing measured executed it)
    assert measured["summary"]["measured"] == 0 and measured["summary"]["static_only"] == 1
    assert "(1 decided by static links only)" in measured["summary"]["sentence"]
    assert any(n.startswith("create_py_executor: 1 test(s) linked to it statically ran")
               and rejected in n for n in measured["notes"])


def test_tests_not_in_the_map_are_judged_statically(tmp_path: Path, run_cli: Any) -> None:
    """GUARDED: a map that knows only the integration tests leaves the unit test's static
    name link (REJECTED is not in it) as it was: the verdict stays the static one."""
    rel = "tests/unittest/_torch/executor/test_backend_names.py"
    root, _ = checkout(tmp_path, FI, {rel: REJECTED})
    diff = cap_diff(root)
    data = tmp_path / "summary.coverage"
    p = run_pytest(root, "tests", ["unittest/_torch/executor/test_executor_config.py"], data)
    assert p.returncode == 0, p.stdout + p.stderr
    m = tmp_path / "map.sqlite"
    assert run_cli("--root", str(root), "map", "add", str(data), "--map", str(m)).code == 0
    code, measured = audit(run_cli, root, diff, "--map", str(m))
    b = creator(measured)
    assert code == 0 and b["verdict"] == "pre-merge"
    assert "unittest/_torch/executor/test_backend_names.py::test_unknown_backend_rejected" \
        in b["pre_merge_guards"]


def test_gpu_smoke_on_cpu_measures_no_test(tmp_path: Path, run_cli: Any) -> None:
    """The gpu-smoke tests skip without torch and CUDA: the data file holds no test context,
    and `map add` says so (exit 2) rather than adding an empty measurement."""
    pytest.importorskip("coverage")
    if _has_torch():
        pytest.skip("torch is installed here: the smoke tests would run")
    root, _ = checkout(tmp_path, SMOKE)
    data = tmp_path / "smoke.coverage"
    p = run_pytest(root, "tests/integration/defs", ["test_gpu_smoke.py"], data)
    assert p.returncode in (0, 5), p.stdout + p.stderr
    r = run_cli("--root", str(root), "map", "add", str(data), "--map", str(tmp_path / "m"))
    assert r.code == 2 and "no dynamic contexts" in r.err
    assert not (tmp_path / "m").exists()


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def test_audit_head_memo_follows_the_map(tmp_path: Path, run_cli: Any) -> None:
    """``audit --base --head`` keeps its answer; the map is an input of it: a map that gains
    a measured guard gives the new verdict, never the kept one."""
    root, base = checkout(tmp_path, FI)
    data = tmp_path / "unit.coverage"
    assert run_pytest(root, "tests", ["unittest"], data).returncode == 0
    integ = tmp_path / "int.coverage"
    assert run_pytest(root, "tests/integration/defs", ["accuracy"], integ).returncode == 0
    git(root, "apply", "pr-no-thin-guard.diff")
    git(root, "commit", "-qam", "the PR")
    m = tmp_path / "map.sqlite"
    assert run_cli("--root", str(root), "map", "add", str(data), "--commit", base,
                   "--map", str(m)).code == 0

    def verdict() -> str:
        r = run_cli("--root", str(root), "audit", "--base", base, "--head", "HEAD",
                    "--map", str(m), "--format", "json")
        assert r.code in (0, 1), r.err
        return str(creator(json.loads(r.out))["verdict"])

    assert verdict() != "pre-merge"
    assert verdict() != "pre-merge"  # asked again: the kept answer
    assert run_cli("--root", str(root), "map", "add", str(integ), "--commit", base,
                   "--map", str(m)).code == 0
    assert verdict() == "pre-merge"
