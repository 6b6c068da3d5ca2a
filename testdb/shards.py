"""Split a stage's test list into shards exactly as pytest-split's ``least_duration`` does."""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def item_sort_name(nodeid: str) -> str:
    """pytest-split breaks ties by ``str(item)``, which for a pytest Function is
    ``<Function name>`` where name is the last node-id part (``test_f[params]``)."""
    bracket = nodeid.find("[")
    head = nodeid if bracket < 0 else nodeid[:bracket]
    last = head.rsplit("::", 1)[-1] + ("" if bracket < 0 else nodeid[bracket:])
    return f"<Function {last}>"


def least_duration(nodeids: Sequence[str], durations: dict[str, float], splits: int,
                   names: Sequence[str] | None = None) -> list[list[int]]:
    """Indices of ``nodeids`` in each of ``splits`` groups, in their original order.

    ``nodeids`` are the keys the durations are looked up by; ``names`` are the items' ``str()``
    that pytest-split sorts ties by (default: ``item_sort_name`` of each node id). A unit-test
    line's item is ``test_unittests.py::test_unittests_v2[LINE]`` whatever key its duration is
    recorded under, so callers pass ``item_sort_name(entry.ci_node_id)`` for it.

    Re-implemented rather than imported because pytest-split needs live pytest items; the test
    suite checks this against pytest-split itself on the real corpus. Unknown durations get the
    average of the known durations *of these items* (pytest-split drops irrelevant ones first).
    """
    if splits < 1:
        raise ValueError("splits must be >= 1")
    if names is not None and len(names) != len(nodeids):
        raise ValueError("names must give one item name per node id")
    avg = average_duration(nodeids, durations)
    sort_names = names if names is not None else [item_sort_name(n) for n in nodeids]
    indexed = [(sort_names[i], durations.get(n, avg), i) for i, n in enumerate(nodeids)]
    indexed.sort(key=lambda t: t[0])  # stable: same-name items keep list order
    indexed.sort(key=lambda t: t[1], reverse=True)
    heap = [(0.0, g) for g in range(splits)]
    groups: list[list[int]] = [[] for _ in range(splits)]
    for _, dur, i in indexed:
        total, g = heapq.heappop(heap)
        groups[g].append(i)
        heapq.heappush(heap, (total + dur, g))
    return [sorted(g) for g in groups]


def shard_durations(nodeids: Sequence[str], durations: dict[str, float], groups: list[list[int]]
                    ) -> list[float]:
    avg = average_duration(nodeids, durations)
    return [sum(durations.get(nodeids[i], avg) for i in g) for g in groups]


def average_duration(nodeids: Sequence[str], durations: dict[str, float]) -> float:
    """pytest-split's stand-in for an unknown duration: the mean over distinct known items."""
    relevant = {n: durations[n] for n in nodeids if n in durations}
    return sum(relevant.values()) / len(relevant) if relevant else 1.0
