"""Tests of GPU packing: order, reservation-based backfill and the schedule simulation."""

from __future__ import annotations

from auditor.launch.model import RunItem
from auditor.launch.packing import Busy, choose, default_duration, order_items, simulate


def it(key: str, gpus: int, duration: float | None) -> RunItem:
    return RunItem(key, key, gpus, None, 60, False, "/", ("true",), duration)


def test_order_longest_first_unknown_gets_the_mean() -> None:
    items = [it("short", 1, 1.0), it("unknown", 1, None), it("long", 1, 9.0), it("big", 4, 5.0)]
    assert default_duration(items) == 5.0
    assert [i.key for i in order_items(items)] == ["long", "big", "unknown", "short"]


def test_choose_assigns_lowest_free_gpus_without_overlap() -> None:
    items = order_items([it("a", 2, 3.0), it("b", 1, 2.0), it("c", 1, 1.0)])
    starts = choose(items, ["0", "1", "2", "3"], [], 0.0, 2.0, cpu_free=1)
    assert [(i.key, g) for i, g in starts] == [("a", ("0", "1")), ("b", ("2",)), ("c", ("3",))]


def test_a_4_gpu_item_waits_for_4_free_gpus() -> None:
    starts = choose([it("four", 4, 1.0)], ["1", "2", "3"], [Busy(("0",), 5.0)], 0.0, 1.0, 1)
    assert starts == ()


def test_backfill_only_when_it_does_not_delay_the_reservation() -> None:
    # GPU 0 frees at t=5; the 4-GPU item is reserved for then. A 2 s item fits before it,
    # a 10 s item would delay it.
    pending = order_items([it("four", 4, 20.0), it("long1", 1, 10.0), it("quick1", 1, 2.0)])
    starts = choose(pending, ["1", "2", "3"], [Busy(("0",), 5.0)], 0.0, 1.0, 1)
    assert [i.key for i, _ in starts] == ["quick1"]


def test_backfill_may_use_gpus_the_reservation_does_not_need() -> None:
    # 8 GPUs; 2 busy until t=5; a 7-GPU item leaves one GPU spare at t=5 for a long 1-GPU item.
    pending = order_items([it("seven", 7, 20.0), it("long1", 1, 10.0), it("long2", 1, 10.0)])
    starts = choose(pending, ["2", "3", "4", "5", "6", "7"],
                    [Busy(("0", "1"), 5.0)], 0.0, 1.0, 1)
    assert [i.key for i, _ in starts] == ["long1"]


def test_cpu_items_use_cpu_slots_not_gpus() -> None:
    pending = [it("cpu1", 0, 1.0), it("cpu2", 0, 1.0), it("gpu", 1, 1.0)]
    starts = choose(pending, [], [], 0.0, 1.0, cpu_free=1)
    assert [(i.key, g) for i, g in starts] == [("cpu1", ())]


def test_simulate_packs_and_never_overlaps() -> None:
    items = [it("a", 1, 4.0), it("b", 1, 4.0), it("c", 2, 2.0), it("d", 4, 1.0),
             it("e", 1, 1.0), it("huge", 8, 1.0)]
    slots = simulate(items, ["0", "1", "2", "3"])
    assert {s.key for s in slots} == {"a", "b", "c", "d", "e"}  # "huge" cannot run here
    for x in slots:
        for y in slots:
            if x is not y and x.start < y.end and y.start < x.end:
                assert not set(x.gpus) & set(y.gpus), (x, y)
    assert max(s.end for s in slots) == 5.0
