"""List lines that run nothing (issue 22, section 4): a pre-merge name that names no test while
its nearest real id guards the change (``stale-guard-name``, a warning at the list line), and
listed ids the change removes by deleting a test function or emptying, deleting or renaming a
test file (``listed-test-removed``: an error where the line ran pre-merge, a warning
otherwise). Each beside its twin, on real git repositories; shown in the comment and HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reports.comment import render_comment
from tests.auditor.change_shapes import (
    DEFS,
    LIST,
    PRE_LINE,
    audit_json,
    commit,
    findings,
    shapes_repo,
)
from tests.gitrepo import git

SEARCH = "tensorrt_llm/search.py"
SEARCH_TEXT = "def beam_search(width):\n    return list(range(width))\n"
BEAM = """\
import pytest

from tensorrt_llm.search import beam_search


@pytest.mark.parametrize("dtype", ["float16"], ids=["dtype=float16"])
@pytest.mark.parametrize("beam_width", [4], ids=["beam_width=4"])
def test_beam_search(beam_width, dtype):
    assert beam_search(beam_width)


def test_unrelated():
    assert True
"""
REAL = "test_beam.py::test_beam_search[beam_width=4-dtype=float16]"
STALE = "test_beam.py::test_beam_search[beam_width=4]"
PKG = {"tensorrt_llm/__init__.py": "", SEARCH: SEARCH_TEXT, f"{DEFS}/test_beam.py": BEAM}


# case -> (pre-merge ids, post-merge ids, change: file -> text, stale findings expected)
STALE_CASES: dict[str, tuple[list[str], list[str], dict[str, str | None], int]] = {
    # The trap: the pre-merge line means the guard, names nothing; the real id is post-merge.
    "stale pre-merge name of the guard": ([STALE], [REAL],
                                          {SEARCH: SEARCH_TEXT.replace("range", "iter")}, 1),
    # Twins: the same stale line, but the change is not guarded by that test ...
    "stale name of a test that guards nothing here": (
        [STALE, "test_beam.py::test_unrelated"], [REAL],
        {"tensorrt_llm/other.py": "def other():\n    return 1\n"}, 0),
    # ... or the stale line is in a post-merge block: it guards nothing pre-merge either way.
    "stale name in a post-merge block": (["test_beam.py::test_unrelated"], [STALE, REAL],
                                         {SEARCH: SEARCH_TEXT.replace("range", "iter")}, 0),
    # ... or the name is right: no finding.
    "the real id listed": ([REAL], [], {SEARCH: SEARCH_TEXT.replace("range", "iter")}, 0),
}


@pytest.mark.parametrize("case", list(STALE_CASES))
def test_stale_guard_name(run_cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    pre, post, change, n = STALE_CASES[case]
    repo = shapes_repo(tmp_path / "repo", PKG, pre, post)
    commit(repo, change)
    _, data = audit_json(run_cli, repo)
    got = findings(data, "stale-guard-name")
    assert len(got) == n, got
    if n:
        [f] = got
        assert (f["severity"], f["path"], f["line"]) == ("warning", LIST, PRE_LINE)
        assert f["message"].startswith(
            f"l0_h100.yml:{PRE_LINE} lists {STALE} in a pre-merge block; it names no test (CI "
            f"ignores it): did you mean {REAL} (post-merge-only)?")
        assert f["guards"] == [REAL] and f["function"] == "beam_search"
        # the verdict itself stays what it is: the stale line guards nothing
        [b] = data["behaviours"]
        assert b["verdict"] == "post-merge-only"


# ---- listed-test-removed -------------------------------------------------------------------

N_TESTS = 40  # a long listed test file (the real one had 1,770 lines), emptied in one commit
LONG = "import pytest\n\n\n" + "".join(
    f"def test_case_{i}():\n    assert {i} >= 0\n\n\n" for i in range(N_TESTS)) + (
    "@pytest.mark.parametrize('mode', ['a', 'b'])\ndef test_modes(mode):\n    assert mode\n")
LONG_PRE = [f"test_long.py::test_case_{i}" for i in range(0, N_TESTS, 2)]
LONG_POST = [f"test_long.py::test_case_{i}" for i in range(1, N_TESTS, 2)]
MODES = ["test_long.py::test_modes[a]", "test_long.py::test_modes[b]"]
ALREADY_STALE = "test_long.py::test_case_999"  # named no test before the change: not its doing


def _long_repo(tmp_path: Path) -> Path:
    return shapes_repo(tmp_path / "repo", {f"{DEFS}/test_long.py": LONG},
                       [*LONG_PRE, MODES[0], ALREADY_STALE], [*LONG_POST, MODES[1]])


def _removed(data: dict[str, Any]) -> dict[str, tuple[str, int, str]]:
    return {f["guards"][0]: (f["severity"], f["line"], f["message"])
            for f in findings(data, "listed-test-removed")}


@pytest.mark.parametrize("how", ["emptied", "deleted", "renamed"])
def test_a_listed_test_file_that_goes_away(run_cli, tmp_path: Path, how: str) -> None:  # type: ignore[no-untyped-def]
    """Was: exit 0, "No behaviour change found in this diff", no finding, no note."""
    repo = _long_repo(tmp_path)
    path = f"{DEFS}/test_long.py"
    if how == "renamed":
        git(repo, "mv", path, f"{DEFS}/test_longer.py")
        commit(repo, {})
    else:
        commit(repo, {path: "" if how == "emptied" else None})
    code, data = audit_json(run_cli, repo)
    got = _removed(data)
    assert set(got) == {*LONG_PRE, *LONG_POST, *MODES}  # every listed id, the stale one not
    assert {t for t, (sev, _, _) in got.items() if sev == "error"} == {*LONG_PRE, MODES[0]}
    assert {t for t, (sev, _, _) in got.items() if sev == "warning"} == {*LONG_POST, MODES[1]}
    _, line, msg = got[LONG_PRE[0]]
    assert line == PRE_LINE and msg.startswith(
        f"l0_h100.yml:{PRE_LINE} lists {LONG_PRE[0]}, which this change removes (its test file "
        f"is {how}")
    assert "it ran pre-merge in DGX_H100-PyTorch-" in msg
    assert "it ran in DGX_H100-PyTorch-Post-Merge-1" in got[LONG_POST[0]][2]
    assert code == 1
    assert data["summary"]["sentence"] != "No behaviour change found in this diff"


def test_a_deleted_listed_function_and_its_twin(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A deleted listed function: its line only; a deleted unlisted function (the twin)
    and an edited listed one: nothing."""
    repo = _long_repo(tmp_path)
    path = f"{DEFS}/test_long.py"
    text = LONG.replace("def test_case_0():\n    assert 0 >= 0\n\n\n", "")
    text = text.replace("assert 2 >= 0", "assert 2 >= -1")
    text += "\n\ndef test_extra():\n    pass\n"
    (repo / path).write_text(LONG + "\n\ndef test_extra():\n    pass\n")
    commit(repo, {}, "an unlisted test")
    (repo / path).write_text(text.replace("\n\ndef test_extra():\n    pass\n", ""))
    commit(repo, {})
    code, data = audit_json(run_cli, repo)
    got = _removed(data)
    assert list(got) == ["test_long.py::test_case_0"]
    assert got["test_long.py::test_case_0"][0] == "error"
    assert "(test_case_0 is deleted)" in got["test_long.py::test_case_0"][2]
    assert code == 1


def test_a_removed_parametrization(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = _long_repo(tmp_path)
    path = f"{DEFS}/test_long.py"
    commit(repo, {path: LONG.replace("['a', 'b']", "['a']")})
    _, data = audit_json(run_cli, repo)
    got = _removed(data)
    assert list(got) == [MODES[1]] and got[MODES[1]][0] == "warning"
    assert "(that parametrization is removed)" in got[MODES[1]][2]


def test_the_findings_are_in_the_comment_and_the_html(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = shapes_repo(tmp_path / "repo", {**PKG, f"{DEFS}/test_long.py": LONG},
                       [STALE, LONG_PRE[0]], [REAL])
    commit(repo, {SEARCH: SEARCH_TEXT.replace("range", "iter"),
                  f"{DEFS}/test_long.py": None})
    _, data = audit_json(run_cli, repo)
    assert findings(data, "stale-guard-name") and findings(data, "listed-test-removed")
    md = render_comment(data)
    assert f"lists {STALE} in a pre-merge block" in md
    assert f"lists {LONG_PRE[0]}, which this change removes" in md
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(data))
    out = tmp_path / "html"
    res = run_cli("--root", str(repo), "report", "--html", str(out), "--audit", str(audit))
    assert res.code == 0, res.err
    # ids carry <wbr> break points in the page (reports.html: ids break only at safe points)
    page = "".join(p.read_text() for p in out.glob("*.html")).replace("<wbr>", "")
    assert "stale-guard-name" in page and "listed-test-removed" in page
    assert f"lists {STALE} in a pre-merge block" in page
