"""``auditor.behaviour_memo``: a change's behaviour changes are read back for the same change
(the same files, texts, changed lines and code) and judged afresh when any of those differs or
the record is damaged; an audit judged from the record answers as one judged afresh."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from auditor import behaviour_memo
from auditor.behaviour import behaviours
from auditor.diff import FileChange
from tests.auditor.test_warm_audit import changed, repo

__all__ = ["changed", "repo"]  # the fixtures: the example's repository, one commit changed

OLD = "def f(x):\n    return x + 1\n\n\ndef g():\n    return 'TRTLLM'\n"
NEW = "def f(x):\n    return x + 2\n\n\ndef g():\n    return 'FLASHINFER'\n"
FILES = [FileChange("pkg/a.py", "pkg/a.py", frozenset({2, 6}), frozenset({2, 6}), OLD, NEW),
         FileChange(None, "pkg/new.py", frozenset({1, 2}), frozenset(), None,
                    "def h():\n    return 1\n"),
         FileChange("pkg/b.py", "pkg/b.py", frozenset({1}), frozenset({1}), "x = (\n",
                    "x = (\n")]  # does not parse: the unparsable behaviour


def _counting() -> tuple[list[FileChange], Callable[[FileChange], behaviour_memo.Found]]:
    seen: list[FileChange] = []

    def judge(fc: FileChange) -> behaviour_memo.Found:
        seen.append(fc)
        return behaviours(fc)

    return seen, judge


def test_the_same_change_is_read_back(tmp_path: Path) -> None:
    seen, judge = _counting()
    first = behaviour_memo.behaviours_of(FILES, judge, str(tmp_path))
    assert first == [behaviours(fc) for fc in FILES] and len(seen) == 3
    again = behaviour_memo.behaviours_of(FILES, judge, str(tmp_path))
    assert again == first and len(seen) == 3  # nothing judged: all from the record
    assert any(b.parse_error for bs, _ in again for b in bs)


@pytest.mark.parametrize("edit", [
    lambda fc: dataclasses.replace(fc, new_text=fc.new_text + "# more\n"),
    lambda fc: dataclasses.replace(fc, old_text=OLD.replace("+ 1", "+ 3")),
    lambda fc: dataclasses.replace(fc, added=frozenset({2})),
    lambda fc: dataclasses.replace(fc, removed=frozenset({6})),
    lambda fc: dataclasses.replace(fc, new_path="pkg/renamed.py"),
    lambda fc: dataclasses.replace(fc, old_path=None, old_text=None),
], ids=["head text", "base text", "added lines", "removed lines", "renamed", "added file"])
def test_any_ingredient_changed_is_judged_afresh(tmp_path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    seen, judge = _counting()
    behaviour_memo.behaviours_of(FILES, judge, str(tmp_path))
    changed = [edit(FILES[0]), *FILES[1:]]
    got = behaviour_memo.behaviours_of(changed, judge, str(tmp_path))
    assert got == [behaviours(fc) for fc in changed] and len(seen) == 6


def test_other_code_or_a_damaged_record_is_judged_afresh(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seen, judge = _counting()
    behaviour_memo.behaviours_of(FILES, judge, str(tmp_path))
    monkeypatch.setattr(behaviour_memo, "code_stamp", lambda d: "edited")
    assert behaviour_memo.behaviours_of(FILES, judge, str(tmp_path)) == [
        behaviours(fc) for fc in FILES] and len(seen) == 6
    monkeypatch.undo()
    for path in glob.glob(str(tmp_path / "behaviours-*")):
        Path(path).write_bytes(Path(path).read_bytes()[:-7] + b"garbage")
    assert behaviour_memo.behaviours_of(FILES, judge, str(tmp_path)) == [
        behaviours(fc) for fc in FILES] and len(seen) == 9


def test_no_cache_dir_keeps_nothing(tmp_path: Path) -> None:
    seen, judge = _counting()
    behaviour_memo.behaviours_of(FILES, judge, None)
    behaviour_memo.behaviours_of(FILES, judge, None)
    assert len(seen) == 6


def test_an_audit_judged_from_the_record_answers_as_afresh(run_cli, changed: Path,  # type: ignore[no-untyped-def]
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # a cache of its own: the session's may hold this graph's records from another test
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(changed.parent / "own-cache"))
    args = ("--root", str(changed), "audit", "--base", "HEAD~1", "--head", "HEAD", "--format",
            "json")
    first = run_cli(*args)
    assert first.code in (0, 1), first.err
    answers = glob.glob(os.path.join(os.environ["TESTDB_CACHE_DIR"], "audit-*"))
    assert answers
    for kept in answers:
        os.unlink(kept)  # the answer memo: the next audit judges again

    def refuse(_fc: FileChange) -> None:
        raise AssertionError("judged the behaviours again")

    monkeypatch.setattr("auditor.audit.behaviours", refuse)
    again = run_cli(*args)
    assert again.code == first.code and json.loads(again.out) == json.loads(first.out)

