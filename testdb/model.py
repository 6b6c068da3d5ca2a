"""Parsed records of the test plan: conditions, blocks, contexts, QA lists, waives."""

from __future__ import annotations

from dataclasses import dataclass

from testdb.errors import SourceLoc
from testdb.grammar import Entry


@dataclass(frozen=True)
class Range:
    """A numeric condition: every given bound must hold."""

    key: str
    gte: float | None = None
    lte: float | None = None
    gt: float | None = None
    lt: float | None = None

    def holds(self, value: float) -> bool:
        return not (
            (self.gte is not None and value < self.gte)
            or (self.lte is not None and value > self.lte)
            or (self.gt is not None and value <= self.gt)
            or (self.lt is not None and value >= self.lt)
        )

    def describe(self) -> str:
        parts = [f"{op} {v:g}" for op, v in
                 ((">=", self.gte), ("<=", self.lte), (">", self.gt), ("<", self.lt))
                 if v is not None]
        return f"{self.key} " + " and ".join(parts)


@dataclass(frozen=True)
class Condition:
    terms: tuple[tuple[str, str], ...] = ()
    ranges: tuple[Range, ...] = ()
    wildcards: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def term(self, key: str) -> str | None:
        return next((v for k, v in self.terms if k == key), None)

    def range(self, key: str) -> Range | None:
        return next((r for r in self.ranges if r.key == key), None)

    def wildcard(self, key: str) -> tuple[str, ...] | None:
        return next((v for k, v in self.wildcards if k == key), None)

    def describe(self) -> str:
        bits = [f"{k}={v}" for k, v in self.terms]
        bits += [r.describe() for r in self.ranges]
        bits += [f"{k}~{'|'.join(v)}" for k, v in self.wildcards]
        return ", ".join(bits)


@dataclass(frozen=True)
class Block:
    """One ``- condition: ... tests: [...]`` item of a context."""

    context: str
    index: int  # 0-based position in its context
    loc: SourceLoc  # the line of the ``- condition:`` item
    condition: Condition
    entries: tuple[Entry, ...]

    @property
    def stage_term(self) -> str | None:
        return self.condition.term("stage")


@dataclass(frozen=True)
class Context:
    """A named list of blocks; ``kind`` is ``l0`` (test-db) or ``qa`` (QA-side YAML)."""

    name: str
    loc: SourceLoc
    kind: str
    blocks: tuple[Block, ...]

    @property
    def entries(self) -> tuple[Entry, ...]:
        return tuple(e for b in self.blocks for e in b.entries)


@dataclass(frozen=True)
class QaList:
    """A QA ``.txt`` list: one run on the QA schedule, no conditions."""

    name: str
    loc: SourceLoc
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str
