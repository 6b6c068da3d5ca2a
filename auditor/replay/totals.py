"""What the replayed history adds up to: shares per bucket, per commit, and the post-merge
guards changes leaned on (pure functions over replay records)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from auditor.replay.model import SHARES, BehaviourRecord, CommitRecord, is_specific


@dataclass(frozen=True)
class Totals:
    commits: int
    audited: int
    failed: int
    roots: int
    behaviours: int
    counts: tuple[tuple[str, int], ...]  # (share, behaviour changes), in SHARES order

    def count(self, share: str) -> int:
        return dict(self.counts).get(share, 0)

    def share(self, share: str) -> float | None:
        return self.count(share) / self.behaviours if self.behaviours else None


def totals(records: Sequence[CommitRecord]) -> Totals:
    """Buckets of every behaviour change of the audited commits; failed commits are counted
    apart (not checked), never as guarded."""
    c: Counter[str] = Counter(b.share for r in records if r.audited for b in r.behaviours)
    return Totals(len(records), sum(1 for r in records if r.audited),
                  sum(1 for r in records if r.status == "failed"),
                  sum(1 for r in records if r.status == "root"), sum(c.values()),
                  tuple((s, c[s]) for s in SHARES))


@dataclass(frozen=True)
class Point:
    """One commit on the history chart: its own guarded share and the running share."""

    sha: str
    subject: str
    behaviours: int
    guarded: int
    running_behaviours: int
    running_guarded: int

    @property
    def share(self) -> float | None:
        return self.guarded / self.behaviours if self.behaviours else None

    @property
    def running_share(self) -> float | None:
        return self.running_guarded / self.running_behaviours if self.running_behaviours else None


def share_series(records: Sequence[CommitRecord]) -> list[Point]:
    out: list[Point] = []
    n = g = 0
    for r in records:
        if not r.audited:
            continue
        bn = len(r.behaviours)
        bg = sum(1 for b in r.behaviours if b.share == "pre-merge")
        n, g = n + bn, g + bg
        out.append(Point(r.sha, r.subject, bn, bg, n, g))
    return out


def post_merge_guards(b: BehaviourRecord) -> tuple[str, ...]:
    """The specific guards of a change not guarded pre-merge that ran post-merge only."""
    if b.share == "pre-merge" or not is_specific(b.tier):
        return ()
    return tuple(dict.fromkeys(g.test_id for g in b.deciding if g.effective == "post-merge-only"))


@dataclass(frozen=True)
class LeanedOn:
    """A post-merge-only test that behaviour changes leaned on."""

    test: str
    only: int  # changes whose only specific guard it was
    changes: int  # changes it was one of the post-merge-only specific guards of
    commits: tuple[str, ...]  # where it was the only one


def leaned_on(records: Sequence[CommitRecord], limit: int = 10) -> list[LeanedOn]:
    """Tests most often a change's only specific guard while running post-merge only (then
    by how many changes they guarded post-merge at all)."""
    only: Counter[str] = Counter()
    changes: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    for r in records:
        if not r.audited:
            continue
        for b in r.behaviours:
            pm = post_merge_guards(b)
            changes.update(pm)
            if pm and len({g.test_id for g in b.deciding}) == 1:
                only[pm[0]] += 1
                where.setdefault(pm[0], []).append(r.sha)
    rows = [LeanedOn(t, only[t], changes[t], tuple(dict.fromkeys(where.get(t, []))))
            for t in changes]
    rows.sort(key=lambda x: (-x.only, -x.changes, x.test))
    return rows[:limit]


def measured_counts(records: Sequence[CommitRecord]) -> tuple[int, int]:
    """(decided by measured links, decided only by static ones) of the audited commits'
    behaviour changes, as the audit's summary counts them (``auditor.measured``): a replay
    has no ``--coverage``, so its coverage tier is the map's."""
    from auditor.measured import summary_counts

    return summary_counts(b.tier for r in records if r.audited for b in r.behaviours)
