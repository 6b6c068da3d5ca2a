"""The words the text outputs use, each said once in a legend under the output that used it."""

from __future__ import annotations

import re
from typing import NamedTuple


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 error``, ``2 errors``, ``0 errors`` (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def skipped_note(path: str, reason: str) -> str:
    """The note for a test-list file that was read but not used (``stats`` and ``lint`` say
    the same): a file whose shape is not a test list's, e.g. a QA recipe database."""
    return f"skipped {path}: {reason}; not a test list, none of its lines were checked"


# What each verdict word means (the text legend, the HTML legend and the tiles' tooltips).
VERDICT_TEXT = {
    "pre-merge": "runs in a stage that every PR's pipeline starts",
    "gated": "runs before merge only when a gate opens (multi-GPU or auto-trigger stages)",
    "post-merge-only": "runs only after merge",
    "qa-only": "only in QA lists, outside L0 CI",
    "waived": "every stage that would run it waives it",
    "unscheduled": "no stage runs the line that names it: it never runs in CI",
    "invalid": "names no test in this checkout; CI ignores it",
}


# How the text, the comment and the HTML report introduce an evidence level's links: the
# deciding level's (its can-guard flag is auditor.evidence.CAN_GUARD), or a weaker one's.
DECIDES = "decides the verdict"
WEAK = "weak links, cannot guard"
CONTEXT = "also linked, not counted"
WEAK_PRE_MERGE = "weak links that run pre-merge"  # a behaviour's weak links, in the text


def level_lead(decides: bool, can_guard: bool) -> str:
    """The words before a level's links: ``decides the verdict``, ``weak links, cannot guard``
    (a deciding level that cannot guard) or ``also linked, not counted`` (a weaker level)."""
    return CONTEXT if not decides else DECIDES if can_guard else WEAK


class Term(NamedTuple):
    """A word of the text output: shown in the legend when ``pattern`` occurs in the output."""

    word: str
    pattern: str  # a regular expression over the uncoloured output
    meaning: str
    needs: tuple[str, ...] = ()
    """Literals one of which every match of ``pattern`` contains (used_terms checks them
    first); empty: none is known, the pattern is always searched."""


def _verdict(v: str) -> Term:
    # Upper case where a test's verdict is printed; lower case where a guard's or a stage's is.
    return Term(v, rf"(?<![\w-]){re.escape(v)}(?![\w-])|(?<![\w-]){re.escape(v.upper())}(?![\w-])",
                VERDICT_TEXT[v], (v, v.upper()))


TERMS: tuple[Term, ...] = (
    *(_verdict(v) for v in VERDICT_TEXT),
    Term("context", r"\bcontext [\w.-]+",
         "a test-db list name (the top key of its YAML file); each Jenkins stage names one",
         ("context ",)),
    Term("block at line N", r"\bblock at line \d+",
         "the test-db block (a condition and its tests) that holds the line; the stages whose "
         "facts meet its condition run it", ("block at line ",)),
    Term("shard i/n", r"\bshard \d+/\d+",
         "the stage runs part i of n of its tests (split by .test_durations, as pytest-split)",
         ("shard ",)),
    Term("assumed", r"\bassumed\b",
         "the block's condition names a fact the stage does not state (a Kubernetes stage's "
         "gpu, say); CI counts it as met, so the match rests on that assumption "
         "(--platform-facts states them)", ("assumed",)),
    Term("QA", r"(?m)^\s*QA: |\bQA [\w.-]+",
         "QA lists, run by release testing outside the L0 pipeline", ("QA",)),
    Term("changed tokens", r"(?m)^\s*changed tokens: ",
         "the names and values on the changed lines that tests are linked by",
         ("changed tokens: ",)),
    Term("[rule]", r"(?m)^\s+(?:ERROR|WARNING|INFO) \S+  \[[\w-]+\]$",
         "the finding's rule id; docs/audit.md says what each rule checks",
         ("ERROR ", "WARNING ", "INFO ")),
    Term(DECIDES, rf"(?m)^\s*{DECIDES}: ",
         "the strongest evidence found; only these tests count as guards", (f"{DECIDES}: ",)),
    Term("also linked", rf"(?m)^\s*{CONTEXT}: ",
         "weaker evidence, shown for context; never counted as a guard", (f"{CONTEXT}: ",)),
    Term("weak links", rf"(?m)^\s*(?:{WEAK}|{WEAK_PRE_MERGE}): ",
         "the strongest evidence found only imports the changed module, only shares a "
         "value or only matches a name: such tests are not shown to exercise the change, so "
         "none is a pre-merge guard even where it runs pre-merge (--coverage, or a test that "
         "calls the code, can be)",
         (f"{WEAK}: ", f"{WEAK_PRE_MERGE}: ")),
    Term("runs via", r"\bruns via `",
         "the unit-test list line (a directory, maybe with -k) that runs the test",
         ("runs via `",)),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def used_terms(text: str, terms: tuple[Term, ...] = TERMS) -> list[Term]:
    """The terms that ``text`` uses, in the legend's order.

    A term whose literals (``needs``) are all absent is not used: every match contains one,
    and ``in`` is a C substring scan, so the output is read once per literal at memchr speed
    instead of once per pattern by the regex engine, which for an absent term scans all of a
    large output (a 200-behaviour audit: 0.3 s, most of a memo hit). Only the terms whose
    literal is there are searched, and they usually match near it."""
    plain = _ANSI.sub("", text)
    return [t for t in terms
            if (not t.needs or any(n in plain for n in t.needs)) and _compiled(t.pattern)
            .search(plain)]


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    hit = _PATTERNS.get(pattern)
    if hit is None:
        hit = _PATTERNS[pattern] = re.compile(pattern)
    return hit


def used_terms_plain(text: str, terms: tuple[Term, ...] = TERMS) -> list[Term]:
    """``used_terms`` as it was: every pattern searched (the reference the tests compare)."""
    plain = _ANSI.sub("", text)
    return [t for t in terms if re.search(t.pattern, plain)]


def legend(text: str, width: int = 100, meanings: dict[str, str] | None = None) -> list[str]:
    """``Legend:`` and one wrapped line per term that ``text`` uses; nothing when none is.
    ``meanings`` overrides what a word means in this output (an audit's verdicts are for one
    PR)."""
    import textwrap

    terms = used_terms(text)
    if not terms:
        return []
    pad = max(len(t.word) for t in terms) + 4
    out = ["", "Legend:"]
    for t in terms:
        meaning = (meanings or {}).get(t.word, t.meaning)
        out.extend(textwrap.wrap(meaning, width, initial_indent=f"  {t.word:<{pad - 2}}",
                                 subsequent_indent=" " * pad, break_on_hyphens=False))
    return out


def with_legend(text: str, width: int = 100, meanings: dict[str, str] | None = None) -> str:
    """``text`` and, under it, the legend of the words it uses."""
    return "\n".join([text, *legend(text, width, meanings)])
