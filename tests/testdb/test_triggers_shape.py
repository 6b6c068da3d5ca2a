"""The PR trigger file is checked for shape: a file the tool cannot read gates from is exit 2,
naming the key, never a silently closed gate."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testdb.errors import InputError
from testdb.index import _load_triggers
from tests.conftest import CORPUS

REAL = os.path.join(CORPUS, "ci", "pr-triggers.yml")


@pytest.mark.parametrize(("text", "message", "line"), [
    ('{"hello": 1}\n', "unknown key 'hello' in the PR trigger file", 1),
    ("multi_gpu_file_changed:\n  related_paths: [a/]\nhello: 1\n", "unknown key 'hello'", 3),
    ("sources: []\n", "has none of multi_gpu_file_changed, auto_trigger_tags", 1),
    ("[1, 2]\n", "PR trigger file must be a mapping", 1),
    ("multi_gpu_file_changed: [a/, b/]\n", "multi_gpu_file_changed must be a mapping", 1),
    ("multi_gpu_file_changed:\n  related_paths: [{a: 1}]\n", "a list of path strings", 1),
    ("auto_trigger_tags:\n  map: [{tags: [-X-]}]\n", "needs a path_prefix string", 1),
])
def test_bad_shapes_name_the_key_and_line(text: str, message: str, line: int) -> None:
    with pytest.raises(InputError) as exc:
        _load_triggers(text, "t.yml")
    assert message in str(exc.value)
    assert exc.value.loc is not None and exc.value.loc.line == line


def test_the_real_trigger_file_and_its_documentation_sections_load() -> None:
    with open(REAL, encoding="utf-8") as fh:
        t = _load_triggers(fh.read(), REAL)
    assert len(t.multi_gpu_paths) > 100 and t.auto_trigger


def test_cli_exits_2_naming_the_key(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "trig.json"
    bad.write_text('{"hello": 1}\n')
    res = run_cli("--root", CORPUS, "--triggers", str(bad), "stats")
    assert res.code == 2
    assert f"error: {bad}:1: unknown key 'hello'" in res.err


def test_a_broken_trigger_file_under_root_is_exit_2_for_where(run_cli, tmp_path: Path
                                                               ) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "trtllm"
    shutil.copytree(CORPUS, root)
    (root / "ci" / "pr-triggers.yml").write_text("hello: 1\n")
    res = run_cli("--root", str(root), "where", "TestLlama3_1_8BInstruct::test_chunked_prefill")
    assert res.code == 2 and "unknown key 'hello'" in res.err
