"""`reports.words.used_terms` checks each term's literals before its pattern (a 200-behaviour
audit's legend took 0.3 s of regex scans for terms it does not use); the answer must be the
old one's (`used_terms_plain`, every pattern searched) on any text. The figures are in
docs/benchmarks.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reports.words import TERMS, used_terms, used_terms_plain

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flashinfer-reuse"

# Pieces of real output and near misses of every pattern: a verdict inside a longer word,
# upper and lower case, a phrase not at a line start, a rule line without its brackets.
PIECES = [
    "pre-merge", "PRE-MERGE", "xpre-merge", "pre-merge-guard", "gated", "GATED-x", "waived",
    "post-merge-only", "qa-only", "unscheduled", "INVALID", "invalid_ids", "context l0_h100",
    "context", "block at line 12", "block at line x", "shard 2/3", "shard 2", "assumed",
    "unassumed", "pre-assumed", "QA llm_function_core", "  QA: list", "QAx", "changed tokens: a",
    "  changed tokens: a", "x changed tokens: a", "  WARNING a.py:1  [post-merge-guard]",
    "  ERROR a.py:1  [no-pre-merge-guard] more", "INFO x", "  decides the verdict: p (2)",
    "decides the verdict x", "  also linked, not counted: t", "  weak links, cannot guard: m",
    "weak links that run pre-merge: t", "runs via `unittest/x`", "runs via x", "\x1b[31m",
    "\x1b[0m", " ", "\n", "\n  ", "-", "_", "[", "]", ":", "`",
]


@given(st.lists(st.sampled_from(PIECES), max_size=40))
@settings(max_examples=400, deadline=None)
def test_same_terms_as_every_pattern_searched(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert used_terms(text) == used_terms_plain(text)


@pytest.mark.parametrize("term", TERMS, ids=[t.word for t in TERMS])
def test_every_match_holds_one_of_the_terms_literals(term: Any) -> None:
    """The rule the shortcut rests on, per term, over every piece and pair of pieces."""
    assert term.needs, f"{term.word}: no literal, always searched (give it one)"
    texts = PIECES + [a + b for a in PIECES for b in PIECES]
    matches = [m.group(0) for t in texts for m in re.finditer(term.pattern, t)]
    assert matches, f"{term.word}: no piece matches it (add one to PIECES)"
    assert all(any(n in m for n in term.needs) for m in matches), term.word


def test_real_outputs(run_cli: Any) -> None:
    for args in (["audit", "--diff", str(EXAMPLE / "pr.diff")],
                 ["audit", "--diff", str(EXAMPLE / "pr-no-thin-guard.diff")],
                 ["where", "TestLlama3_1_8BInstruct::test_chunked_prefill"], ["lint"],
                 ["stats"]):
        out = run_cli("--root", str(EXAMPLE), *args).out
        assert out and used_terms(out) == used_terms_plain(out), args
