"""Pack run items onto GPUs: longest expected duration first, with reservation-based backfill."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from auditor.launch.model import RunItem


@dataclass(frozen=True)
class Busy:
    """GPUs held by a running item and when it is expected to let them go."""

    gpus: tuple[str, ...]
    expected_end: float


@dataclass(frozen=True)
class Slot:
    """One item's place in a simulated schedule."""

    key: str
    gpus: tuple[str, ...]
    start: float
    end: float


def default_duration(items: Sequence[RunItem]) -> float:
    """What an item without a recorded duration is assumed to take: the mean of the known ones.

    pytest-split does the same, so the local order resembles what CI's shards would see.
    """
    known = [i.duration_s for i in items if i.duration_s is not None]
    return sum(known) / len(known) if known else 0.0


def expected(item: RunItem, default: float) -> float:
    return item.duration_s if item.duration_s is not None else default


def order_items(items: Sequence[RunItem]) -> tuple[RunItem, ...]:
    """Longest first (ties: more GPUs first, then key), so the long tail starts early."""
    default = default_duration(items)
    return tuple(sorted(items, key=lambda i: (-expected(i, default), -i.gpus, i.key)))


def choose(pending: Sequence[RunItem], free: Sequence[str], busy: Sequence[Busy], now: float,
           default: float, cpu_free: int) -> tuple[tuple[RunItem, tuple[str, ...]], ...]:
    """Which pending items to start now, and on which GPUs.

    ``pending`` is in priority order. GPU items start greedily while they fit; the first one
    that does not fit gets a reservation (EASY backfilling): later items may jump ahead only
    if they are expected to finish before the reserved GPUs free up, or if they use GPUs the
    reservation does not need. Without that, a stream of 1-GPU tests could keep a 4-GPU test
    waiting far longer than its turn. Items with no GPUs use separate CPU slots.
    """
    free_left = list(free)
    starts: list[tuple[RunItem, tuple[str, ...]]] = []
    shadow: float | None = None
    spare = 0
    for item in pending:
        if item.gpus == 0:
            if cpu_free > 0:
                cpu_free -= 1
                starts.append((item, ()))
            continue
        fits = item.gpus <= len(free_left)
        if shadow is None:
            if fits:
                starts.append((item, tuple(free_left[:item.gpus])))
                del free_left[:item.gpus]
                continue
            shadow, spare = _reservation(item.gpus, len(free_left), busy, now)
            continue
        if not fits:
            continue
        if now + expected(item, default) > shadow:
            if item.gpus > spare:
                continue
            spare -= item.gpus
        starts.append((item, tuple(free_left[:item.gpus])))
        del free_left[:item.gpus]
    return tuple(starts)


def _reservation(need: int, free_now: int, busy: Sequence[Busy], now: float) -> tuple[float, int]:
    """When ``need`` GPUs are expected to be free, and how many beyond ``need`` are free then."""
    available = free_now
    for b in sorted(busy, key=lambda b: b.expected_end):
        available += len(b.gpus)
        if available >= need:
            return max(b.expected_end, now), available - need
    return now, 0  # cannot happen for items that fit the machine; start nothing around it


def simulate(items: Sequence[RunItem], gpus: Sequence[str], cpu_slots: int = 1) -> tuple[Slot, ...]:
    """The schedule the local backend would follow if every item took its expected time.

    Items needing more GPUs than exist are left out (they are not runnable here).
    """
    default = default_duration(items)
    pending = [i for i in order_items(items) if i.gpus <= len(gpus)]
    free = list(gpus)
    cpu_free = cpu_slots
    running: list[Slot] = []
    done: list[Slot] = []
    now = 0.0
    while pending or running:
        busy = [Busy(s.gpus, s.end) for s in running]
        for item, got in choose(pending, free, busy, now, default, cpu_free):
            pending.remove(item)
            free = [g for g in free if g not in got]
            cpu_free -= 0 if got else 1
            running.append(Slot(item.key, got, now, now + expected(item, default)))
        if not running:
            break  # only reachable with cpu_slots=0 and CPU items left
        now = min(s.end for s in running)
        for slot in [s for s in running if s.end <= now]:
            running.remove(slot)
            done.append(slot)
            free = sorted([*free, *slot.gpus], key=list(gpus).index)
            cpu_free += 0 if slot.gpus else 1
    return tuple(sorted(done, key=lambda s: (s.start, s.key)))
