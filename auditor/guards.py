"""Where a guard parametrization runs for *this* change: runs, gates opened, effective verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auditor.model import Run
from testdb.grammar import Entry
from testdb.index import Index, Triggers
from testdb.schedule import VERDICTS, Placement

_ORDER = {v: i for i, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class Gates:
    """Which PR gates this change's files open (trtllm-ci.md section 5)."""

    multi_gpu: bool
    multi_gpu_hits: tuple[str, ...]
    tags: tuple[str, ...]

    def opens(self, pr_class: str) -> bool:
        if pr_class == "gated-multi-gpu":
            return self.multi_gpu
        if pr_class.startswith("gated-auto-trigger:"):
            return pr_class.split(":", 1)[1] in self.tags
        return False

    def to_json(self) -> dict[str, Any]:
        return {"multi_gpu": self.multi_gpu, "multi_gpu_paths_hit": list(self.multi_gpu_hits),
                "auto_trigger_tags": list(self.tags)}


def compute_gates(paths: list[str], triggers: Triggers) -> Gates:
    # The real multi-GPU check is a substring test on the changed files joined with ", ".
    joined = ", ".join(paths)
    hits = tuple(p for p in triggers.multi_gpu_paths if p in joined)
    tags = tuple(dict.fromkeys(t for prefix, ts in triggers.auto_trigger
                               for path in paths if path.startswith(prefix) for t in ts))
    return Gates(bool(hits), hits, tags)


def best(verdicts: list[str]) -> str:
    return min(verdicts, key=lambda v: _ORDER.get(v, 99)) if verdicts else "unscheduled"


@dataclass
class GuardLocator:
    """Answers, for a test id (integration or unit), which list lines run it and where."""

    index: Index
    gates: Gates
    inventory: Any = None
    _lines: Any = None  # testdb.inventory.select.SelectionIndex, built on first use

    @classmethod
    def build(cls, index: Index, gates: Gates, inventory: Any) -> GuardLocator:
        return cls(index, gates, inventory=inventory)

    def selections_for(self, test_id: str) -> list[Entry]:
        """The ``unittest/...`` list lines that select one unit-test id."""
        item = self.inventory.get(test_id) if self.inventory is not None else None
        if item is None:
            return []
        if self._lines is None:
            from testdb.inventory.select import SelectionIndex

            self._lines = SelectionIndex(e for c in self.index.contexts.values()
                                         for e in c.entries)
        found: list[Entry] = self._lines.lines_for(item)
        return found

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
        placements, via = self.placements(test_id)
        runs: list[Run] = []
        plain: list[str] = []
        effective: list[str] = []
        qa_open = False
        would_run = False
        for p in placements:
            if p.kind == "qa":
                would_run = True
                qa_open = qa_open or not p.waived_by
                runs.append(Run(f"QA {p.context}", "qa", 0, 0, p.entry.loc.path, p.entry.loc.line,
                                p.block.loc.line if p.block else None, bool(p.waived_by)))
                continue
            for r in p.runs:
                would_run = True
                opened = self.gates.opens(r.pr_class)
                runs.append(Run(r.stage, r.pr_class, r.shard, r.splits, p.entry.loc.path,
                                p.entry.loc.line, p.block.loc.line if p.block else None,
                                bool(r.waived_by), opened))
                if r.waived_by:
                    continue
                plain.append(r.verdict)
                effective.append("pre-merge" if opened else r.verdict)
        tail = "qa-only" if qa_open else ("waived" if would_run else "unscheduled")
        return (best(plain) if plain else tail, best(effective) if effective else tail,
                tuple(runs), via)
