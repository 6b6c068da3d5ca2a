"""Time the suggestion's search (auditor.suggest.cheapest_covers) on random instances far past
what an audit meets, and say how often the exact search beats the greedy cover.

    python benchmarks/bench_suggest.py [--runs 5] [--needs 5 30 100] [--options 10]

An audit's findings are a handful of needs with a few stages each: the search is exhaustive in
a few dozen steps. Here each need is ``--options`` stages of 60, their GPU-minutes uniform in
5..200; per size, 5 seeded instances, each timed ``--runs`` times (median), and the cost of the
cheapest set against the greedy one's. Prints medians, never asserts them (docs/audit.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.suggest import SEARCH_BUDGET, _greedy, cheapest_covers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--needs", type=int, nargs="+", default=[5, 30, 100])
    ap.add_argument("--options", type=int, default=10)
    args = ap.parse_args()
    stages = [f"S{i}" for i in range(60)]
    print(f"budget {SEARCH_BUDGET} steps; {args.options} stages per need of 60")
    for n in args.needs:
        times, exact, better = [], 0, 0
        for seed in range(5):
            rnd = random.Random(seed)
            cost = {s: rnd.uniform(5, 200) for s in stages}
            wants = [frozenset(rnd.sample(stages, args.options)) for _ in range(n)]
            runs = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                sets, done = cheapest_covers(wants, cost)
                runs.append(time.perf_counter() - t0)
            times.append(statistics.median(runs))
            exact += done
            greedy = sum(cost[s] for s in _greedy(wants, cost))
            better += sum(cost[s] for s in sets[0]) < greedy - 1e-9
        print(f"{n:4d} needs: median {1000 * statistics.median(times):8.1f} ms, "
              f"max {1000 * max(times):8.1f} ms; exhaustive {exact}/5; "
              f"cheaper than greedy {better}/5")


if __name__ == "__main__":
    main()
