"""``testdb launch --coverage``: real pytest runs of the FlashInfer example's guards under
coverage.py, one data file per job, added to the map when the run ends. The GPUs are a
stand-in ``nvidia-smi`` on PATH (this machine has none); the tests themselves run on CPU."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from auditor.covmap.store import MapStore
from auditor.launch.coverage import PLUGIN, data_file, with_coverage
from auditor.launch.model import RunItem
from tests.conftest import REPO
from tests.covmap.test_map_real import CREATOR, FI, checkout

CHUNKED = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"


@pytest.fixture
def four_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nfor i in 0 1 2 3; do echo \"$i, Stand-in H100, 81559 MiB\"; "
                   "done\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_items_get_the_plugin_and_a_file_each(tmp_path: Path) -> None:
    items = [RunItem(k, "t", 1, None, 10, False, "/x", ("py", "-m", "pytest", "-v", "t"), None)
             for k in ("a", "b")]
    items.append(RunItem("c", "t", 1, None, 10, False, "/x", ("bash", "run.sh"), None))
    out = with_coverage(items, tmp_path, str(tmp_path))
    assert out[0].argv[:5] == ("py", "-m", "pytest", "-p", PLUGIN)
    files = {dict(i.env)["TESTDB_COVERAGE_FILE"] for i in out[:2]}
    assert files == {str(data_file(tmp_path, "a")), str(data_file(tmp_path, "b"))}
    assert out[2] == items[2]  # not pytest: runs as planned, unmeasured


def test_launch_coverage_adds_the_run_to_the_map(tmp_path: Path, four_gpus: None, run_cli: Any,
                                                 monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    root, sha = checkout(tmp_path, FI)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), REPO]))
    m = tmp_path / "map.sqlite"
    r = run_cli("--root", str(root), "launch", "test_chunked_prefill", "--include-pre-merge",
                "--backend", "local", "--coverage", "--map", str(m),
                "--run-dir", str(tmp_path / "run"))
    assert r.code == 0, r.out + r.err
    assert f"2 test(s) measured at {sha[:12]}" in r.err
    assert len(list((tmp_path / "run" / "coverage").glob("*.coverage"))) == 2
    with MapStore.open(str(m)) as s:
        ran = {ln.test_id for ln in s.tests_executing(CREATOR, "create_py_executor")}
        assert ran == {f"{CHUNKED}[attn_backend=FLASHINFER]", f"{CHUNKED}[attn_backend=TRTLLM]"}
        fns = {q for _, q, _ in s.functions_of(f"{CHUNKED}[attn_backend=TRTLLM]")}
        assert {"LLM.__init__", "LLM.generate", "create_py_executor"} <= fns
        assert "executor_summary" not in fns  # TRAP: imported, never called


def test_slurm_jobs_write_their_own_data_file(tmp_path: Path) -> None:
    """On Slurm each job's script exports its own data file and loads the plugin."""
    from auditor.launch.slurmconfig import job_script

    items = [RunItem(k, f"x.py::{k}", 1, None, 10, False, "/x",
                     ("py", "-m", "pytest", "-v", f"x.py::{k}"), None) for k in ("a", "b")]
    scripts = [job_script(i, tmp_path / "j.xml") for i in with_coverage(items, tmp_path, "/x")]
    for key, script in zip(("a", "b"), scripts, strict=True):
        assert f"export TESTDB_COVERAGE_FILE={data_file(tmp_path, key)}\n" in script
        assert f"-p {PLUGIN}" in script
    assert scripts[0] != scripts[1]


def test_launch_coverage_on_real_slurm(tmp_path: Path, run_cli: Any,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The Slurm backend: each job runs under coverage.py and writes its own data file; the
    jobs that ran to the end are added to the map when the launch has waited for them."""
    from tests.auditor.launch.test_slurm_real import _cluster_problem
    from tests.conftest import unavailable

    problem = _cluster_problem()
    if problem:
        unavailable(problem, "TESTDB_REQUIRE_SLURM")
    root, sha = checkout(tmp_path, FI)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), REPO]))
    m = tmp_path / "map.sqlite"
    r = run_cli("--root", str(root), "launch", "test_chunked_prefill[attn_backend=FLASHINFER]",
                "--backend", "slurm", "--coverage", "--map", str(m),
                "--run-dir", str(tmp_path / "run"), "--allow-not-runnable")
    assert r.code == 0, r.out + r.err
    assert f"1 test(s) measured at {sha[:12]}" in r.err
    with MapStore.open(str(m)) as s:
        ran = {ln.test_id for ln in s.tests_executing(CREATOR, "create_py_executor")}
    assert ran == {f"{CHUNKED}[attn_backend=FLASHINFER]"}


@pytest.mark.parametrize(("outcome", "added"), [
    ("passed", True), ("failed", True),
    # TRAP: a test that did not run to its end executed only part of what it would; what it
    # did not execute must not read as evidence
    ("not-runnable", False), ("timeout", False), ("cancelled", False), ("oom", False),
    ("node-fail", False), ("error", False),
])
def test_only_tests_that_ran_to_the_end_are_added(tmp_path: Path, outcome: str,
                                                  added: bool) -> None:
    from auditor.launch.coverage import measured_files
    from auditor.launch.model import RunResult

    f = data_file(tmp_path, "k")
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    result = RunResult("k", "t", outcome, "local")  # type: ignore[arg-type]
    keep, left = measured_files([result], tmp_path)
    assert (keep == [str(f)]) is added
    assert bool(left) is not added


SPAWN_TESTS = '''import subprocess
import sys


def test_child_does_the_work():
    """The code under test runs in a child Python process only."""
    subprocess.run([sys.executable, "-c", "import spawnlib.target as t; t.work()"], check=True)


def test_unrelated_child():
    """TRAP: spawns a child that imports the module and calls nothing of it."""
    subprocess.run([sys.executable, "-c", "import spawnlib.target"], check=True)


def test_after_the_children():
    """TRAP: runs after the spawning tests in the same pytest; spawns nothing itself."""
    import spawnlib.target as t

    assert t.other() == 1
'''
SPAWN_IDS = ["spawn/test_spawn.py::test_child_does_the_work",
             "spawn/test_spawn.py::test_unrelated_child",
             "spawn/test_spawn.py::test_after_the_children"]


def test_processes_a_test_spawns_are_measured_under_its_id(tmp_path: Path, four_gpus: None,
                                                           run_cli: Any,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A test whose code under test runs in a child process (``subprocess.run([sys.executable,
    ...])``) is linked to the function the child executed, under its own id; a test that
    spawns only an unrelated child, and one that runs after the spawning ones, are not."""
    yml = Path(FI) / "tests/integration/test_lists/test-db/l0_dgx_h100.yml"
    text = yml.read_text()
    anchor = "  tests:\n"
    assert anchor in text
    listed = text.replace(anchor, anchor + "".join(f"  - {t}\n" for t in SPAWN_IDS), 1)
    root, sha = checkout(tmp_path, FI, {
        "spawnlib/__init__.py": "",
        "spawnlib/target.py": "def work():\n    return 42\n\n\ndef other():\n    return 1\n",
        "tests/integration/defs/spawn/__init__.py": "",
        "tests/integration/defs/spawn/test_spawn.py": SPAWN_TESTS,
        "tests/integration/test_lists/test-db/l0_dgx_h100.yml": listed})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), REPO]))
    monkeypatch.delenv("COVERAGE_PROCESS_START", raising=False)
    m = tmp_path / "map.sqlite"
    r = run_cli("--root", str(root), "launch", "test_spawn.py", "--include-pre-merge",
                "--backend", "local", "--coverage", "--map", str(m),
                "--run-dir", str(tmp_path / "run"))
    assert r.code == 0, r.out + r.err
    assert f"3 test(s) measured at {sha[:12]}" in r.err
    cov_dir = tmp_path / "run" / "coverage"
    assert len(list(cov_dir.glob("*.coverage"))) == 3
    assert not list(cov_dir.glob("*.child*"))  # the children's files were joined, then removed
    with MapStore.open(str(m)) as s:
        ran = {ln.test_id for ln in s.tests_executing("spawnlib/target.py", "work")}
        assert ran == {SPAWN_IDS[0]}
        assert s.tests_not_executing("spawnlib/target.py", "work", ran) == set(SPAWN_IDS[1:])
        # the unrelated child did run the module's body (import), under its parent's id
        fns = {(p, q) for p, q, _ in s.functions_of(SPAWN_IDS[1])}
        assert ("spawnlib/target.py", "<module>") in fns
        assert ("spawnlib/target.py", "work") not in fns
        assert {q for p, q, _ in s.functions_of(SPAWN_IDS[2])
                if p == "spawnlib/target.py"} == {"<module>", "other"}


@pytest.mark.parametrize(("version", "warned"), [("(7, 9, 2, 'final', 0)", True),
                                                 ("(7, 10, 0, 'final', 0)", False)])
def test_a_coverage_without_the_start_up_hook_is_said(tmp_path: Path, version: str,
                                                      warned: bool) -> None:
    """coverage.py before 7.10 has no a1_coverage.pth: the children of a test go unmeasured,
    and the run says so rather than leaving the map quietly short."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(f"import coverage\ncoverage.version_info = {version}\n")
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=REPO, TESTDB_COVERAGE_FILE=str(tmp_path / "k.coverage"))
    env.pop("COVERAGE_PROCESS_START", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, "-W",
                           "default", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = "does not start itself in the processes a test spawns" in proc.stdout + proc.stderr
    assert said is warned
    assert (tmp_path / "k.coverage").is_file()
