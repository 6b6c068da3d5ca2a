"""Benchmark loading the test plan and answering `testdb where`.

    python benchmarks/bench_load.py [--root data/trtllm] [--runs 15] [--pattern PATTERN]

Measures, as medians over ``--runs`` runs:

- cold load: ``testdb.index.load(root)`` with an empty cache (a fresh TESTDB_CACHE_DIR per
  run): read, parse, schedule, write the cache. In-process, so imports are not counted.
- warm load: the same call when the cache holds this checkout.
- where end to end: ``testdb --root ROOT where PATTERN`` as a subprocess, process start to exit,
  warm cache; compared with ``grep -rn PATTERN`` over the same files.
- stats end to end: ``testdb --root ROOT stats``, warm, as a subprocess; compared with
  ``python -c pass`` in the same interpreter, measured in the same run (target: <= 3x).

The subprocess runs with Python's default bytecode caching even when the calling shell sets
PYTHONDONTWRITEBYTECODE (an installed tool has its .pyc files; recompiling every module on
every start would dominate the number). ``--keep-env`` measures with the environment as is.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the checkout's own packages, installed or not
TARGETS = {"cold_load_s": 0.3, "warm_load_s": 0.05, "where_e2e_s": 0.15}
STATS_RATIO = 3.0  # warm `testdb stats` / `python -c pass`
DEFAULT_PATTERN = "TestLlama3_1_8BInstruct::test_chunked_prefill"


def median_of(runs: int, fn: Callable[[], None], before: Callable[[], None] | None = None
              ) -> tuple[float, float]:
    """Median and minimum wall time of ``fn``; ``before`` runs untimed ahead of each call."""
    times = []
    for _ in range(runs):
        if before:
            before()
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def testdb_command(given: str | None) -> list[str]:
    """``--testdb``, else ``python -m reports`` from this checkout: what the console script
    runs (``reports.entry:console``), without a version manager's shim or a console script
    installed from an older entry point."""
    return given.split() if given else [sys.executable, "-m", "reports"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(REPO / "data" / "trtllm"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--pattern", default=DEFAULT_PATTERN)
    ap.add_argument("--testdb", help="the command to time (default: the `testdb` script)")
    ap.add_argument("--keep-env", action="store_true",
                    help="run the subprocess with the environment unchanged")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()

    from testdb.index import Sources, load

    scratch = tempfile.mkdtemp(prefix="testdb-bench-")
    try:
        def fresh_cache() -> None:
            os.environ["TESTDB_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch)

        fresh_cache()
        load(args.root)  # imports, page cache
        res: dict[str, float] = {}
        res["cold_load_s"], res["cold_load_min_s"] = median_of(
            max(3, args.runs // 3), lambda: load(args.root), before=fresh_cache)

        warm_dir = tempfile.mkdtemp(dir=scratch)
        os.environ["TESTDB_CACHE_DIR"] = warm_dir
        load(args.root)
        res["warm_load_s"], res["warm_load_min_s"] = median_of(args.runs, lambda: load(args.root))

        env = dict(os.environ, TESTDB_CACHE_DIR=warm_dir, NO_COLOR="1")
        if not args.keep_env:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmd = [*testdb_command(args.testdb), "--root", args.root, "where", args.pattern]

        def where() -> None:
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=False, cwd=REPO)

        where()  # writes .pyc files and checks the cache
        res["where_e2e_s"], res["where_e2e_min_s"] = median_of(args.runs, where)
        python = [sys.executable, "-c", "pass"]
        res["python_start_s"], _ = median_of(
            args.runs, lambda: subprocess.run(python, env=env, check=False))
        stats = [*testdb_command(args.testdb), "--root", args.root, "stats"]

        def run_stats() -> None:
            subprocess.run(stats, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False, cwd=REPO)

        run_stats()
        res["stats_e2e_s"], res["stats_e2e_min_s"] = median_of(args.runs, run_stats)

        src = Sources.discover(args.root)
        files = [os.path.join(args.root, f) for f in src.all_files()]
        grep = ["grep", "-rn", "--", args.pattern, *files]
        res["grep_s"], res["grep_min_s"] = median_of(
            args.runs, lambda: subprocess.run(grep, stdout=subprocess.DEVNULL, check=False))
        res["files"] = len(files)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"root {args.root}: {res['files']:.0f} files; medians of {args.runs} runs "
          f"(cold: {max(3, args.runs // 3)})")
    for key, label in (("cold_load_s", "cold load (no cache)"), ("warm_load_s", "warm load"),
                       ("where_e2e_s", "where, process start to exit")):
        verdict = "ok" if res[key] <= TARGETS[key] else "OVER"
        low = res[key.removesuffix("_s") + "_min_s"]
        print(f"  {label:<30} {res[key] * 1000:7.1f} ms  (min {low * 1000:6.1f})  "
              f"target {TARGETS[key] * 1000:.0f} ms  {verdict}")
    print(f"  {'python -c pass':<30} {res['python_start_s'] * 1000:7.1f} ms  (interpreter start-up,"
          " part of the where number)")
    ratio = res["stats_e2e_s"] / res["python_start_s"]
    print(f"  {'stats, process start to exit':<30} {res['stats_e2e_s'] * 1000:7.1f} ms  "
          f"(min {res['stats_e2e_min_s'] * 1000:6.1f})  = {ratio:.1f}x python -c pass; "
          f"target {STATS_RATIO:.0f}x  {'ok' if ratio <= STATS_RATIO else 'OVER'}")
    print(f"  {'grep -rn, same files':<30} {res['grep_s'] * 1000:7.1f} ms  "
          f"-> where / grep = {res['where_e2e_s'] / res['grep_s']:.1f}x")


if __name__ == "__main__":
    main()
