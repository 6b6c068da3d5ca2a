"""Where a guard parametrization runs for *this* change: runs, started stages, verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from auditor.model import Run
from testdb.grammar import Entry
from testdb.index import Index
from testdb.pipeline import PrPipeline, effective
from testdb.schedule import VERDICTS, Placement

_ORDER = {v: i for i, v in enumerate(VERDICTS)}


def best(verdicts: list[str]) -> str:
    """The best of ``verdicts`` by ``VERDICTS``' order (the first of equals); each distinct
    verdict is ranked once (a module tier has thousands of links and a handful of verdicts)."""
    if not verdicts:
        return "unscheduled"
    return min(dict.fromkeys(verdicts), key=lambda v: _ORDER.get(v, 99))


@dataclass
class GuardLocator:
    """Answers, for a test id (integration or unit), which list lines run it and where."""

    index: Index
    pipeline: PrPipeline  # the stages this PR's pipeline starts (testdb.pipeline.pr_stages)
    inventory: Any = None
    cache_dir: str | None = None  # where unit-test selections are kept between runs (None: not)
    _lines: Any = None  # testdb.inventory.select.SelectionIndex, built on first use
    _names: Any = None  # testdb.names.NameChecker over the inventory, built on first use
    _via: dict[tuple[str, ...], tuple[str, str, tuple[Run, ...], str]] = field(
        default_factory=dict)  # runs() of tests not listed by id, by the selections naming them

    @classmethod
    def build(cls, index: Index, pipeline: PrPipeline, inventory: Any,
              cache_dir: str | None = None) -> GuardLocator:
        return cls(index, pipeline, inventory=inventory, cache_dir=cache_dir)

    def save(self) -> None:
        """Keep what was learnt for the next run (the selections evaluated)."""
        if self._lines is not None:
            self._lines.save()

    def selections_for(self, test_id: str) -> list[Entry]:
        """The ``unittest/...`` list lines that select one unit-test id."""
        item = self.inventory.get(test_id) if self.inventory is not None else None
        if item is None:
            return []
        if self._lines is None:
            from testdb.inventory.select import SelectionIndex

            self._lines = SelectionIndex((e for c in self.index.contexts.values()
                                          for e in c.entries), self.inventory, self.cache_dir)
        found: list[Entry] = self._lines.lines_for(item)
        return found

    def names_no_test(self, test_id: str) -> bool:
        """A listed integration id that names no test of the checkout (``testdb.names``:
        ``invalid``); unknowable ones (no sources, ids computed at run time) are not."""
        if self.inventory is None or test_id.startswith("unittest/"):
            return False
        if self._names is None:
            from testdb.names import NameChecker

            self._names = NameChecker(self.inventory)
        return bool(self._names.is_invalid(test_id))

    def placements(self, test_id: str) -> tuple[list[Placement], str]:
        sched = self.index.schedule
        direct = list(sched.placements.get(test_id, ()))
        via = ""
        units = (self.selections_for(test_id)
                 if test_id.startswith("unittest/") and "::" in test_id else ())
        for sel in units:
            direct += sched.placements.get(sel.test, ())
            via = via or sel.test
        return direct, via

    def runs(self, test_id: str) -> tuple[str, str, tuple[Run, ...], str]:
        """(schedule verdict, effective verdict for this change, runs, via-selection)."""
        if self.names_no_test(test_id):
            return "invalid", "invalid", (), ""  # CI ignores the lines: nothing runs, ever
        if self.index.schedule.placements.get(test_id) is None:
            # Not listed by its own id: the answer is that of the selections that run it (most
            # unit tests share a few; an integration id has none), once for each set of them.
            key = (tuple(sel.test for sel in self.selections_for(test_id))
                   if test_id.startswith("unittest/") and "::" in test_id else ())
            got = self._via.get(key)
            if got is None:
                got = self._via[key] = self._runs_from(*self.placements(test_id))
            return got
        return self._runs_from(*self.placements(test_id))

    def _runs_from(self, placements: list[Placement], via: str
                ) -> tuple[str, str, tuple[Run, ...], str]:
        """``runs`` of a test placed by ``placements`` (``via``: the selection that does)."""
        runs: list[Run] = []
        plain: list[str] = []
        for_pr: list[str] = []
        qa_open = False
        would_run = False
        for p in placements:
            if p.kind == "qa":
                would_run = True
                qa_open = qa_open or not p.waived_by
                runs.append(Run(f"QA {p.context}", "qa", 0, 0, p.entry.loc.path, p.entry.loc.line,
                                p.block.loc.line if p.block else None, bool(p.waived_by),
                                why="QA list: runs outside L0 CI"))
                continue
            kept = self.pipeline.keeps(p.context, p.block, p.entry)
            for r in p.runs:
                would_run = True
                started = self.pipeline.starts(r.stage) and kept
                runs.append(Run(r.stage, "stage", r.shard, r.splits, p.entry.loc.path,
                                p.entry.loc.line, p.block.loc.line if p.block else None,
                                bool(r.waived_by), r.placement, started,
                                self.pipeline.why(r.stage) if kept
                                else self.pipeline.dropped_why()))
                if r.waived_by:
                    continue
                plain.append(r.verdict)
                for_pr.append(effective(r.placement, started))
        tail = "qa-only" if qa_open else ("waived" if would_run else "unscheduled")
        return (best(plain) if plain else tail, best(for_pr) if for_pr else tail,
                tuple(runs), via)
