"""The printed text of a kept audit answer is kept beside it (reports.audit_memo.Kept): the same
``audit --base --head`` asked again prints it without rendering. What it prints must be the
bytes a fresh render prints, in every format and with every render option. The traps: a kept
text must not be served for other render options (colour on where it was kept without), for
another answer written under the same key, or when it is damaged. Real git repositories in
temp dirs; each case is compared with the same audit on an empty cache."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click.utils
import pytest

import auditor.audit
import reports.cmd_audit
import reports.comment
import reports.render_audit
from reports import audit_memo
from tests.audits import empty_cache
from tests.gitrepo import git, new_repo

FILES = {
    "tensorrt_llm/__init__.py": "",
    # step is named by test_a (guarded pre-merge); lone by no test (no guard: red, a finding)
    "tensorrt_llm/core.py": """\
        def step(x):
            return x + 1


        def lone(x):
            return x - 1
        """,
    "tests/integration/defs/test_a.py": """\
        from tensorrt_llm.core import step


        def test_a():
            assert step(1) == 2
        """,
    "tests/integration/test_lists/test-db/l0_a10.yml": """\
        version: 0.0.1
        l0_a10:
        - condition:
            terms: {stage: pre_merge, backend: pytorch}
          tests:
          - test_a.py::test_a
        """,
    "tests/integration/test_lists/waives.txt": "",
}
STAGES = """\
stages:
- {name: A10-PyTorch-1, platform: a10, context: l0_a10}
"""
# (format, colour): every output the memo keeps a rendering of
OUTPUTS = [("text", False), ("text", True), ("markdown", False)]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    root = new_repo(tmp_path / "repo", FILES)
    core = root / "tensorrt_llm/core.py"
    core.write_text(core.read_text().replace("x + 1", "x + 2").replace("x - 1", "x - 2"))
    git(root, "commit", "-qam", "step and lone by two")
    (tmp_path / "stages.yml").write_text(STAGES)
    return root


def printed(run_cli: Any, repo: Path, monkeypatch: pytest.MonkeyPatch, fmt: str,
            colour: bool) -> str:
    """The exit code and stdout of the audit, as printed with ``colour``."""
    monkeypatch.setattr(reports.cmd_audit, "use_colour", lambda: colour)
    # click strips colour on a pipe (capsys): here the bytes the audit writes are compared
    monkeypatch.setattr(click.utils, "should_strip_ansi", lambda *_, **__: False)
    got = run_cli("--root", str(repo), "--stages", str(repo.parent / "stages.yml"), "audit",
                  "--base", "HEAD~1", "--head", "HEAD", "--format", fmt)
    assert got.code in (0, 1), got.err
    return f"exit {got.code}\n{got.out}"  # the exit code (--fail-on) from the kept summary


def fresh(run_cli: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str,
          colour: bool) -> str:
    """The same audit judged and rendered on an empty cache."""
    with empty_cache(monkeypatch, tmp_path):
        return printed(run_cli, repo, monkeypatch, fmt, colour)


def refuse_to_render(monkeypatch: pytest.MonkeyPatch) -> None:
    """Judging or rendering from here on fails the test: a kept text must be printed."""
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("judged or rendered afresh")

    monkeypatch.setattr(auditor.audit, "run_audit", refuse)
    monkeypatch.setattr(reports.render_audit, "audit_text", refuse)
    monkeypatch.setattr(reports.comment, "render_comment", refuse)
    # nor is the kept JSON decoded: the summary and the diagnostics are read apart from it
    monkeypatch.setattr(audit_memo, "_data", refuse)


def renderings() -> list[Path]:
    return sorted(Path(os.environ["TESTDB_CACHE_DIR"]).glob("audittext-*.marshal"))


@pytest.mark.parametrize(("fmt", "colour"), OUTPUTS)
def test_a_kept_text_is_the_fresh_render(run_cli, repo: Path,  # type: ignore[no-untyped-def]
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         fmt: str, colour: bool) -> None:
    want = fresh(run_cli, repo, tmp_path, monkeypatch, fmt, colour)
    assert ("\x1b[" in want) == colour  # the colour option is really exercised
    assert printed(run_cli, repo, monkeypatch, fmt, colour) == want  # judged, kept
    assert len(renderings()) == 1
    refuse_to_render(monkeypatch)
    assert printed(run_cli, repo, monkeypatch, fmt, colour) == want  # read back


def test_a_text_kept_after_a_json_hit(run_cli, repo: Path,  # type: ignore[no-untyped-def]
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer kept by a JSON audit, then text asked: rendered from the kept answer
    once, the same bytes as a fresh render, then read back."""
    want = fresh(run_cli, repo, tmp_path, monkeypatch, "text", False)
    printed(run_cli, repo, monkeypatch, "json", False)
    assert renderings() == []  # JSON is not kept twice
    assert printed(run_cli, repo, monkeypatch, "text", False) == want
    refuse_to_render(monkeypatch)
    assert printed(run_cli, repo, monkeypatch, "text", False) == want


@pytest.mark.parametrize(("kept_as", "asked"), [
    (("text", False), ("text", True)),  # NO_COLOR unset on a terminal: colour
    (("text", True), ("text", False)),  # NO_COLOR set, or a pipe: no colour
    (("text", False), ("markdown", False)),
    (("markdown", False), ("text", False)),
])
def test_other_render_options_render_afresh(  # type: ignore[no-untyped-def]
        run_cli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kept_as: tuple[str, bool], asked: tuple[str, bool]) -> None:
    want = fresh(run_cli, repo, tmp_path, monkeypatch, *asked)
    old = printed(run_cli, repo, monkeypatch, *kept_as)
    assert old != want
    assert printed(run_cli, repo, monkeypatch, *asked) == want
    assert len(renderings()) == 2  # each kept under its own options
    assert printed(run_cli, repo, monkeypatch, *kept_as) == old


@pytest.mark.parametrize("damage", ["flip a byte", "cut short", "remove"])
def test_a_damaged_or_missing_text_renders_afresh(  # type: ignore[no-untyped-def]
        run_cli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        damage: str) -> None:
    want = fresh(run_cli, repo, tmp_path, monkeypatch, "text", False)
    printed(run_cli, repo, monkeypatch, "text", False)
    [path] = renderings()
    data = bytearray(path.read_bytes())
    if damage == "flip a byte":
        data[-3] ^= 0xFF  # inside the text: the seal's sha256 no longer matches
        path.write_bytes(bytes(data))
    elif damage == "cut short":
        path.write_bytes(bytes(data[: len(data) // 2]))
    else:
        path.unlink()
    assert printed(run_cli, repo, monkeypatch, "text", False) == want
    refuse_to_render(monkeypatch)  # and kept again
    assert printed(run_cli, repo, monkeypatch, "text", False) == want


def test_an_answer_written_again_does_not_serve_the_old_text(  # type: ignore[no-untyped-def]
        run_cli, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = printed(run_cli, repo, monkeypatch, "text", False)
    [answer] = Path(os.environ["TESTDB_CACHE_DIR"]).glob("audit-*.marshal")
    key = answer.name.removeprefix("audit-").removesuffix(".marshal")
    got = audit_memo.get(key)
    assert got is not None
    data, diags = got
    data["notes"] = ["altered"]
    audit_memo.put(key, data, diags)  # the same key, other bytes
    again = printed(run_cli, repo, monkeypatch, "text", False)
    assert "note: altered" in again and "note: altered" not in first


KEPT = audit_memo.Kept("k" * 64, "d" * 64)


@pytest.mark.parametrize(("what", "kept", "options"), [
    ("another answer key (another audit, or other code: tool_key is in it)",
     audit_memo.Kept("j" * 64, KEPT.digest), "text colour=False width=100"),
    ("another answer under the same key", audit_memo.Kept(KEPT.key, "e" * 64),
     "text colour=False width=100"),
    ("colour", KEPT, "text colour=True width=100"),
    ("another width", KEPT, "text colour=False width=80"),
    ("another format", KEPT, "markdown"),
])
def test_each_part_of_the_text_key_renders_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, kept: audit_memo.Kept,
        options: str) -> None:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path))
    assert KEPT.rendered("text colour=False width=100", lambda: "kept") == "kept"
    assert kept.rendered(options, lambda: "fresh") == "fresh", what
    assert KEPT.rendered("text colour=False width=100", lambda: "again") == "kept"


def test_the_text_options_name_every_render_option() -> None:
    assert reports.cmd_audit.text_options(True) != reports.cmd_audit.text_options(False)
    assert str(reports.cmd_audit.TEXT_WIDTH) in reports.cmd_audit.text_options(False)
