"""How fast the inputs that once hung are read now, and that they scale linearly.

    python benchmarks/bench_pathological.py [--runs 3]

The tests (tests/fuzz/test_regressions.py, test_fuzz_*.py) only guard against a hang, with a
bound far above normal (tests/hangguard.py); the figures are here. For each case: the median
time at size N and at N/4 and their ratio (linear: ~4; the quadratic bugs these pin: ~16).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _cases() -> dict[str, tuple[Callable[[int], object], int]]:
    from testdb.errors import InputError
    from testdb.groovy import load_groovy_stages_text
    from testdb.lists import load_list_text
    from testdb.testdb_yaml import load_testdb_text

    def mako(n: int) -> object:
        return load_testdb_text("%if x:\n" * n, "l0_x.yml")

    def long_line(n: int) -> object:
        return load_list_text("a.py::b " * n, "qa.txt")

    def brackets(n: int) -> object:
        return load_list_text("a/b.py " + "[ " * n, "qa.txt")

    def groovy_comments(n: int) -> object:
        body = "x86TestConfigs = [\n" + "// a // b // c\n" * n + "]"
        try:
            return load_groovy_stages_text("def launchTestJobs(p, f)\n{\n" + body + "\n}\n",
                                           "jenkins/L0_Test.groovy")
        except InputError as exc:
            return exc

    return {"mako lines (test-db YAML)": (mako, 300_000),
            "list line of ids": (long_line, 100_000),
            "list line of brackets": (brackets, 50_000),
            "Groovy comment lines": (groovy_comments, 50_000)}


def _median(fn: Callable[[int], object], n: int, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"{'case':<28} {'N':>8} {'t(N) s':>8} {'t(N/4) s':>9} {'ratio':>6}")
    for name, (fn, n) in _cases().items():
        full, quarter = _median(fn, n, args.runs), _median(fn, n // 4, args.runs)
        print(f"{name:<28} {n:>8} {full:>8.3f} {quarter:>9.3f} {full / quarter:>6.1f}")


if __name__ == "__main__":
    main()
