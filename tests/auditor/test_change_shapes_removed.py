"""Modules that go away (issue 22, section 2): a deleted module, or a renamed one's old path,
is guarded by the tests whose imports still reach it unconditionally (they fail at
collection: tier ``removed-module``); an import that may not run (under ``try``/``if``) is
context that never guards; a test that merely shares a token guards nothing; and a removal
nothing imports is no behaviour change, said so. Real git repositories, real audits."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from auditor.removed import importers_in
from tests.auditor.change_shapes import DEFS, audit_json, commit, findings, shapes_repo
from tests.gitrepo import git

CREATOR = "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py"
CREATOR_MOD = "tensorrt_llm._torch.pyexecutor.py_executor_creator"
CREATOR_TEXT = """\
def create_py_executor(config):
    return {"backend": config}


def _helper():
    return 1
"""
PKG = {"tensorrt_llm/__init__.py": "", "tensorrt_llm/_torch/__init__.py": "",
       "tensorrt_llm/_torch/pyexecutor/__init__.py": "", CREATOR: CREATOR_TEXT}

DIRECT = """\
from tensorrt_llm._torch.pyexecutor.py_executor_creator import create_py_executor


def test_creates():
    assert create_py_executor("x")
"""
# Shares the name and the token, imports nothing of the module: the trap.
SHARES = """\
import pytest


@pytest.mark.parametrize("name", ["create_py_executor"])
def test_create_py_executor(name):
    assert name
"""
MAYBE = """\
import pytest

try:
    from tensorrt_llm._torch.pyexecutor import py_executor_creator
except ImportError:
    py_executor_creator = None


def test_maybe():
    if py_executor_creator is None:
        pytest.skip("no creator")
"""
IN_BODY = """\
def test_imports_late():
    from tensorrt_llm._torch.pyexecutor.py_executor_creator import create_py_executor
    assert create_py_executor


def test_other():
    assert True
"""
VIA = """\
from tensorrt_llm._torch.pyexecutor.wrapper import make


def test_via_wrapper():
    assert make()
"""
WRAPPER = """\
from .py_executor_creator import create_py_executor


def make():
    return create_py_executor("y")
"""

WRAPPER_MAYBE = """\
try:
    from .py_executor_creator import create_py_executor
except ImportError:
    create_py_executor = None


def make():
    return create_py_executor and create_py_executor("y")
"""

# case -> (test files {name: text}, extra source files, pre-merge ids, post-merge ids,
#          expected (verdict, deciding tier, pre-merge guards))
CASES: dict[str, tuple[dict[str, str], dict[str, str], list[str], list[str],
                       tuple[str, str | None, list[str]]]] = {
    "direct importer pre-merge: guarded": (
        {"test_direct.py": DIRECT}, {}, ["test_direct.py::test_creates"], [],
        ("pre-merge", "removed-module", ["test_direct.py::test_creates"])),
    "shares a token pre-merge, importer post-merge: not guarded": (
        {"test_direct.py": DIRECT, "test_shares.py": SHARES}, {},
        ["test_shares.py::test_create_py_executor[create_py_executor]"],
        ["test_direct.py::test_creates"],
        ("post-merge-only", "removed-module", [])),
    "import under try pre-merge: context, not guarded": (
        {"test_maybe.py": MAYBE}, {}, ["test_maybe.py::test_maybe"], [],
        ("unguarded", "module", [])),
    "through a module importing it unconditionally: guarded": (
        {"test_via.py": VIA}, {"tensorrt_llm/_torch/pyexecutor/wrapper.py": WRAPPER},
        ["test_via.py::test_via_wrapper"], [],
        ("pre-merge", "removed-module", ["test_via.py::test_via_wrapper"])),
    "through a module importing it under try: context, not guarded": (
        {"test_via.py": VIA}, {"tensorrt_llm/_torch/pyexecutor/wrapper.py": WRAPPER_MAYBE},
        ["test_via.py::test_via_wrapper"], [],
        ("unguarded", "module", [])),
    "import at the top of a test's body: that test guards": (
        {"test_late.py": IN_BODY}, {}, ["test_late.py::test_imports_late"], [],
        ("pre-merge", "removed-module", ["test_late.py::test_imports_late"])),
    "import in a test's body, only its sibling pre-merge: not guarded": (
        {"test_late.py": IN_BODY}, {}, ["test_late.py::test_other"],
        ["test_late.py::test_imports_late"],
        ("post-merge-only", "removed-module", [])),
}


# Where an import of the removed module `a.gone` sits -> (line, certain, scope) of each found.
POSITIONS: dict[str, tuple[str, list[tuple[int, bool, str]]]] = {
    "module level": ("import a.gone\n", [(1, True, "")]),
    "from the package": ("from a import gone\n", [(1, True, "")]),
    "a name from it": ("from a.gone import f\n", [(1, True, "")]),
    "relative, in a sibling": ("from .gone import f\n", [(1, True, "")]),
    "a class body at the top": ("class C:\n    import a.gone\n", [(2, True, "")]),
    "top of a function body": ("def test_f():\n    import a.gone\n", [(2, True, "test_f")]),
    "top of a method body": ("class TestC:\n    def test_m(self):\n        import a.gone\n",
                             [(3, True, "TestC.test_m")]),
    "under try": ("try:\n    import a.gone\nexcept ImportError:\n    pass\n",
                  [(2, False, "")]),
    "in the except handler": ("try:\n    pass\nexcept ImportError:\n    import a.gone\n",
                              [(4, False, "")]),
    "under if TYPE_CHECKING": ("if TYPE_CHECKING:\n    import a.gone\n", [(2, False, "")]),
    "under with": ("with x:\n    import a.gone\n", [(2, False, "")]),
    "in a function nested in a function": (
        "def f():\n    def g():\n        import a.gone\n", [(3, False, "")]),
    "in a function under if": ("def test_f():\n    if x:\n        import a.gone\n",
                               [(3, False, "")]),
    "another module sharing the prefix": ("import a.gone_too\nimport a\n", []),
}


@pytest.mark.parametrize("position", list(POSITIONS))
def test_which_imports_are_certain(position: str) -> None:
    text, want = POSITIONS[position]
    found = importers_in(ast.parse(text), "a/user.py", "a.gone")
    assert [(i.line, i.certain, i.scope) for i in found] == want


def _repo(tmp_path: Path, tests: dict[str, str], extra: dict[str, str], pre: list[str],
          post: list[str]) -> Path:
    files = {**PKG, **extra, **{f"{DEFS}/{name}": text for name, text in tests.items()}}
    return shapes_repo(tmp_path / "repo", files, pre, post)


def _gone(data: dict[str, Any]) -> dict[str, Any]:
    [b] = [b for b in data["behaviours"] if b["function"] == "<module>"]
    assert isinstance(b, dict)
    return b


@pytest.mark.parametrize("case", list(CASES))
def test_a_deleted_module(run_cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    tests, extra, pre, post, (verdict, tier, guards) = CASES[case]
    repo = _repo(tmp_path, tests, extra, pre, post)
    commit(repo, {CREATOR: None})
    code, data = audit_json(run_cli, repo)
    b = _gone(data)
    assert (b["path"], b["status"], b["module"]) == (CREATOR, "deleted", CREATOR_MOD)
    assert (b["verdict"], b["tier"], b["pre_merge_guards"]) == (verdict, tier, guards)
    # One behaviour for the module, not one "no test is linked" error per function.
    assert [x["function"] for x in data["behaviours"]] == ["<module>"]
    assert code == (0 if verdict == "pre-merge" else 1)
    if verdict != "pre-merge":
        [f] = [f for f in data["findings"] if f["severity"] == "error"]
        assert f"module {CREATOR_MOD} ({CREATOR}, deleted; still imported at" in f["message"]


def test_the_guard_says_why(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(tmp_path, {"test_via.py": VIA},
                 {"tensorrt_llm/_torch/pyexecutor/wrapper.py": WRAPPER},
                 ["test_via.py::test_via_wrapper"], [])
    commit(repo, {CREATOR: None})
    _, data = audit_json(run_cli, repo)
    [g] = _gone(data)["guards"]["removed-module"]
    assert g["distance"] == 2
    assert "through tensorrt_llm._torch.pyexecutor.wrapper, each unconditionally" in g["reason"]
    assert "fails at collection" in g["reason"]


@pytest.mark.parametrize("importers", [True, False])
def test_a_renamed_module(run_cli, tmp_path: Path, importers: bool) -> None:  # type: ignore[no-untyped-def]
    """A rename-only diff: with a test still importing the old path it is a behaviour
    change (that test now fails at collection: it guards the rename); with every importer
    moved to the new path in the same diff it is no behaviour change, and the audit says so
    (it was "No behaviour change found" either way)."""
    repo = _repo(tmp_path, {"test_direct.py": DIRECT}, {}, ["test_direct.py::test_creates"],
                 [])
    new = "tensorrt_llm/_torch/pyexecutor/executor_factory.py"
    git(repo, "mv", CREATOR, new)
    if not importers:
        (repo / DEFS / "test_direct.py").write_text(DIRECT.replace("py_executor_creator",
                                                                   "executor_factory"))
    commit(repo, {})
    code, data = audit_json(run_cli, repo)
    gone = [b for b in data["behaviours"] if b["function"] == "<module>"]
    if importers:
        [b] = gone
        assert (b["status"], b["path"], b["tier"]) == ("renamed", CREATOR, "removed-module")
        assert b["verdict"] == "pre-merge" and b["pre_merge_guards"] == [
            "test_direct.py::test_creates"]
    else:
        assert not gone and code == 0
        assert any(f"{CREATOR} renamed to {new}: nothing in the checkout imports "
                   f"{CREATOR_MOD} any more" in n and "no behaviour change" in n
                   for n in data["notes"]), data["notes"]
        assert data["summary"]["sentence"] == "No behaviour change found in this diff"


def test_a_deleted_module_nothing_imports_is_no_behaviour_change(run_cli, tmp_path: Path  # type: ignore[no-untyped-def]
                                                                  ) -> None:
    repo = _repo(tmp_path, {"test_shares.py": SHARES}, {},
                 ["test_shares.py::test_create_py_executor[create_py_executor]"], [])
    commit(repo, {CREATOR: None})
    code, data = audit_json(run_cli, repo)
    assert code == 0 and data["behaviours"] == [] and not findings(data, "no-guard")
    assert any("nothing in the checkout imports" in n for n in data["notes"])


def test_a_deleted_module_imported_by_code_no_test_reaches(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Imported by a module no test imports: a behaviour change with no guard, an error
    that names the importer's line."""
    repo = _repo(tmp_path, {"test_shares.py": SHARES},
                 {"tensorrt_llm/_torch/pyexecutor/wrapper.py": WRAPPER},
                 ["test_shares.py::test_create_py_executor[create_py_executor]"], [])
    commit(repo, {CREATOR: None})
    code, data = audit_json(run_cli, repo)
    assert code == 1 and _gone(data)["verdict"] == "unguarded"
    [f] = findings(data, "no-guard")
    assert "still imported at tensorrt_llm/_torch/pyexecutor/wrapper.py:1)" in f["message"]


def test_a_removal_in_the_comment_and_the_html(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    from reports.comment import render_comment

    repo = _repo(tmp_path, {"test_via.py": VIA},
                 {"tensorrt_llm/_torch/pyexecutor/wrapper.py": WRAPPER}, [],
                 ["test_via.py::test_via_wrapper"])
    commit(repo, {CREATOR: None})
    _, data = audit_json(run_cli, repo)
    md = render_comment(data)
    assert f"module {CREATOR_MOD} ({CREATOR}, deleted; still imported at" in md
    assert "its module imports the removed module's old path unconditionally" in md
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(data))
    res = run_cli("--root", str(repo), "report", "--html", str(tmp_path / "html"),
                  "--audit", str(audit))
    assert res.code == 0, res.err
    page = (tmp_path / "html" / "index.html").read_text()
    assert "removed module&#39;s old path unconditionally" in page
    assert "test_via_wrapper" in page
