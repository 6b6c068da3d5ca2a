"""The README's quoted verdicts of the bundled examples are what the tool prints (its first
screen is checked line by line in test_paths_and_words.py; these are the sentences after it)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def readme_text() -> str:
    return " ".join(REPO.joinpath("README.md").read_text(encoding="utf-8").split())


def quoted_after(anchor: str) -> str:
    """The first backquoted span after ``anchor ... exits N with`` in the README."""
    m = re.search(re.escape(anchor) + r".*?exits (\d) with `([^`]+)`", readme_text())
    assert m, f"README.md no longer quotes the verdict after {anchor!r}"
    return m.group(1) + " " + m.group(2)


@pytest.mark.parametrize("anchor, root, diff", [
    ("(`pr-no-thin-guard.diff`)", "examples/flashinfer-reuse",
     "examples/flashinfer-reuse/pr-no-thin-guard.diff"),
    ("`examples/gpu-smoke/pr.diff`", "examples/gpu-smoke", "examples/gpu-smoke/pr.diff"),
])
def test_the_readmes_quoted_verdicts_are_the_first_lines(
        run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, anchor: str, root: str,
        diff: str) -> None:
    code, sentence = quoted_after(anchor).split(" ", 1)
    monkeypatch.chdir(REPO)
    res = run_cli("--root", root, "audit", "--diff", diff)
    assert res.code == int(code)
    assert res.out.splitlines()[0] == sentence  # the whole first line, caveats included


def test_the_bot_command_the_readme_suggests_leaves_no_warning(
        run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    text = readme_text()
    cmd = re.search(r"`testdb --root examples/flashinfer-reuse audit --diff "
                    r"examples/flashinfer-reuse/pr.diff --bot-command '([^']+)'` reports no "
                    r"warning", text)
    assert cmd, "README.md no longer shows the --bot-command run"
    monkeypatch.chdir(REPO)
    plain = run_cli("--root", "examples/flashinfer-reuse", "audit", "--diff",
                    "examples/flashinfer-reuse/pr.diff")
    assert cmd.group(1) in plain.out  # the line the audit suggests is the one the README posts
    res = run_cli("--root", "examples/flashinfer-reuse", "audit", "--diff",
                  "examples/flashinfer-reuse/pr.diff", "--bot-command", cmd.group(1))
    assert res.code == 0
    assert res.out.splitlines()[0] == "The behaviour change is guarded pre-merge"


@pytest.mark.parametrize("minutes, words", [
    (0.0, "<0.1 min"),  # a few seconds: not "~0 min" beside a total that counts it
    (0.04, "<0.1 min"),
    (0.1, "~0.1 min"),
    (23.4, "~23.4 min"),
    (None, "duration unknown"),
])
def test_a_shards_minutes_in_words(minutes: float | None, words: str) -> None:
    from reports.render_audit import shard_text

    assert shard_text({"stage": "S", "minutes": minutes, "gpus": 2}) == f"S (2 GPUs x {words})"
