"""A listed name that names no test guards nothing: the audit never counts it, and never
suggests a stage only such a line brings (a real git repo in a temp dir)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gitrepo import git, new_repo

STALE_PRE = "test_foo.py::test_pick[backend=FANCY]"  # an id from another commit's lists
STALE_POST = "test_foo.py::test_pick[FANCY-tp2]"
REAL = "test_foo.py::test_pick[FANCY]"
FILES = {
    "tensorrt_llm/__init__.py": "",
    "tensorrt_llm/foo.py": """\
        def pick(backend):
            if backend == "FANCY":
                return 1
            return 0
        """,
    "tests/integration/defs/test_foo.py": """\
        import pytest

        from tensorrt_llm.foo import pick


        @pytest.mark.parametrize("backend", ["FANCY", "PLAIN"])
        def test_pick(backend):
            assert pick(backend) in (0, 1)
        """,
    # The stale name sits in the pre-merge block (the trap: it shares `backend=FANCY` with the
    # change); the real id runs post-merge only; another stale name is the only test of the
    # H100 post-merge stage.
    "tests/integration/test_lists/test-db/l0_a10.yml": f"""\
        version: 0.0.1
        l0_a10:
        - condition:
            terms: {{stage: pre_merge, backend: pytorch}}
          tests:
          - {STALE_PRE}
        - condition:
            terms: {{stage: post_merge, backend: pytorch}}
          tests:
          - {REAL}
        """,
    "tests/integration/test_lists/test-db/l0_h100.yml": f"""\
        version: 0.0.1
        l0_h100:
        - condition:
            terms: {{stage: post_merge, backend: pytorch}}
          tests:
          - {STALE_POST}
        """,
    "tests/integration/test_lists/waives.txt": "",
    "ci/stages.yml": """\
        stages:
        - {name: A10-PyTorch-1, platform: a10, context: l0_a10}
        - {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10}
        - {name: H100_PCIe-PyTorch-Post-Merge-1, platform: h100, context: l0_h100}
        """,
}



@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path / "repo", FILES)
    foo = root / "tensorrt_llm/foo.py"
    foo.write_text(foo.read_text().replace('backend == "FANCY"', 'backend in ("FANCY",)'))
    git(root, "commit", "-qam", "stop special-casing FANCY")
    return root


def test_a_stale_listed_name_is_no_pre_merge_guard(run_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--root", str(repo), "audit", "--base", "HEAD~1", "--head", "HEAD",
                  "--format", "json")
    assert res.code == 1, res.err  # not guarded: the only pre-merge line names no test
    data = json.loads(res.out)
    [b] = data["behaviours"]
    assert b["verdict"] != "pre-merge" and b["pre_merge_guards"] == []
    guards = {g["test_id"]: g for tier in b["guards"].values() for g in tier}
    assert guards[STALE_PRE]["effective"] == guards[STALE_PRE]["verdict"] == "invalid"
    assert guards[STALE_PRE]["runs"] == []  # CI ignores its line: nothing runs
    assert guards[STALE_POST]["effective"] == "invalid"  # linked too, and never counted
    assert guards[REAL]["effective"] == "post-merge-only"
    # The suggestion runs the real guard's stage, never one only a stale line brings.
    stages = {s["stage"] for s in data["suggestion"]["stages"]}
    assert "A10-PyTorch-Post-Merge-1" in stages
    assert "H100_PCIe-PyTorch-Post-Merge-1" not in stages
    assert "H100_PCIe-PyTorch-Post-Merge-1" not in data["suggestion"]["command"]


def test_where_and_lint_say_the_same(run_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--root", str(repo), "where", "test_pick", "--format", "json")
    verdicts = {t["id"]: t["verdict"] for t in json.loads(res.out)["tests"]}
    assert verdicts == {STALE_PRE: "invalid", STALE_POST: "invalid", REAL: "post-merge-only",
                        "test_foo.py::test_pick[PLAIN]": "unscheduled"}
    res = run_cli("--root", str(repo), "lint", "--rule", "unknown-test", "--format", "json")
    found = {f["message"].split()[0] for f in json.loads(res.out)["findings"]}
    assert found == {STALE_PRE, STALE_POST}
