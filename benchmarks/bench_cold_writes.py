"""What a cold inventory build spends writing its caches, alternated with the code before.

    python benchmarks/bench_cold_writes.py [--runs 5] [--files 2000] [--workers 2] [--against DIR]

On the synthetic test tree of ``gen_synthetic_tests.py``, each run is a fresh process (the
code's tree on ``PYTHONPATH``) that builds the static inventory on an empty cache
(``build_static``, in a child process and worker processes as an audit builds it), then writes
the whole packed inventory once more, timed alone (``PackedInventory.write``: the records
file, ``testdb/files.py:write_records``). Printed per code tree: the medians of the build's
wall time, of its CPU time (user + system of the process and every process it waited for:
less moved by a busy machine than wall time), of the write, and the number of files the
cache directory holds. ``--against DIR`` alternates every run with the code in DIR (a second
worktree of the code before), and prints the ratios (issue 25, "The house": the per-file
scan-cache entries a cold build no longer writes, the records written one by one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = """
import json, os, resource, sys, time
from testdb.inventory import build_static
from testdb.inventory.cache import FileCache
tree, cache, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
inv = build_static(tree, cache=FileCache(cache), workers=workers)
n = len(inv)
build = time.perf_counter() - t
full = inv.materialized()  # every blob in memory: the write alone is timed below
t = time.perf_counter()
full.write(os.path.join(cache, "bench-write.records"), keep=99)
write = time.perf_counter() - t
files = sum(len(fs) for _, _, fs in os.walk(cache))
print(json.dumps({"build": build, "write": write, "items": n, "files": files}))
"""


def one(code: Path, tree: Path, workers: int) -> dict[str, float]:
    """One cold build by the code in ``code``, in a fresh process and an empty cache."""
    with tempfile.TemporaryDirectory(prefix="bench-cold-writes-") as cache:
        env = {**os.environ, "PYTHONPATH": str(code), "TESTDB_CACHE_DIR": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), cache, str(workers)],
                              capture_output=True, text=True, env=env, cwd=code)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"{code}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        got: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
        got["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="a tree of the code to alternate with (a second worktree)")
    args = ap.parse_args()
    codes = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    with tempfile.TemporaryDirectory(prefix="bench-cold-tree-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run([sys.executable, str(HERE / "gen_synthetic_tests.py"), str(tree),
                        "--files", str(args.files)], check=True, capture_output=True)
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{args.files} test files, {args.workers} workers, {args.runs} alternated runs")
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
        items = {}
        for _ in range(args.runs):
            for name, code in codes.items():
                got = one(code, tree, args.workers)
                runs[name].append(got)
                items[name] = got["items"]
        if len(set(items.values())) != 1:
            raise SystemExit(f"the code trees built other inventories: {items}")
        med = {name: {k: statistics.median(r[k] for r in rs) for k in ("build", "cpu", "write",
                                                                     "files")}
               for name, rs in runs.items()}
        for name, m in med.items():
            print(f"{name}: cold build {m['build']:.2f} s wall, {m['cpu']:.2f} s CPU; whole "
                  f"inventory written in {m['write'] * 1000:.0f} ms; {m['files']:.0f} cache "
                  f"files ({codes[name]})")
            print("    build " + ", ".join(f"{r['build']:.2f}" for r in runs[name])
                  + " | cpu " + ", ".join(f"{r['cpu']:.2f}" for r in runs[name])
                  + " | write " + ", ".join(f"{r['write'] * 1000:.0f}" for r in runs[name]))
        if "against" in med:
            t, a = med["this"], med["against"]
            print("this / against: " + ", ".join(f"{k} {t[k] / a[k]:.2f}x"
                                                 for k in ("build", "cpu", "write")))
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
