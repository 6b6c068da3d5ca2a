"""What a cold inventory build spends writing its caches, alternated with the code before.

    python benchmarks/bench_cold_writes.py [--runs 5] [--files 2000] [--workers 2]
        [--against DIR]

On the synthetic test tree of ``gen_synthetic_tests.py``, each run is a fresh process (the
code's tree on ``PYTHONPATH``) that builds the static inventory on an empty cache
(``build_static``, in a child process and worker processes as an audit builds it), then writes
the whole packed inventory once more, timed alone (``PackedInventory.write``: the records
file, ``testdb/files.py:write_records``), then builds a second checkout of the same tree with
one file more (no stamp and no last inventory of its own: every other file's scan is looked
up in the cache). Printed per code tree: the medians of the cold build's wall time, of its
CPU time (user + system of the process, the build's child and every scan worker: less moved
by a busy machine than wall time), of the write and of the second checkout's build, the
number of files the cache directory holds, and the whole inventory's size. ``--against DIR``
alternates every run with the code in DIR (a second worktree of the code before), and prints
the ratios (issue 25, "The house": the per-file scan-cache entries a cold build no longer
writes, the records written one by one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = """
import ctypes, json, os, resource, shutil, sys, time
from testdb.inventory import build_static
from testdb.inventory.cache import FileCache
# Orphaned descendants (the build child's scan workers, ended without a wait) come to this
# process, which waits for them, so their CPU time is counted (Linux: PR_SET_CHILD_SUBREAPER).
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)

def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

def reap():
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return

tree, cache, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
c, t = cpu(), time.perf_counter()
inv = build_static(tree, cache=FileCache(cache), workers=workers)
n = len(inv)
build = time.perf_counter() - t
reap()
build_cpu = cpu() - c
files = sum(len(fs) for _, _, fs in os.walk(cache))
full = inv.materialized()  # every blob in memory: the write alone is timed below
t = time.perf_counter()
full.write(os.path.join(cache, "bench-write.records"), keep=99)
write = time.perf_counter() - t
size = os.path.getsize(os.path.join(cache, "bench-write.records"))
# A second checkout of the same tree with one more file: no stamp, no last inventory of its
# own, so every other file's scan is looked up in the cache.
copy = cache + "-copy"
shutil.copytree(tree, copy)
with open(os.path.join(copy, "tests/integration/defs/test_bench_new.py"), "w") as fh:
    fh.write("def test_new():\\n    pass\\n")
t = time.perf_counter()
again = len(build_static(copy, cache=FileCache(cache), workers=workers))
other = time.perf_counter() - t
shutil.rmtree(copy)
print(json.dumps({"build": build, "cpu": build_cpu, "write": write, "items": n,
                  "files": files, "size": size, "copy": other, "copy_items": again}))
"""


def one(code: Path, tree: Path, workers: int) -> dict[str, float]:
    """One cold build by the code in ``code``, in a fresh process and an empty cache."""
    with tempfile.TemporaryDirectory(prefix="bench-cold-writes-") as cache:
        env = {**os.environ, "PYTHONPATH": str(code), "TESTDB_CACHE_DIR": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), cache, str(workers)],
                              capture_output=True, text=True, env=env, cwd=code)
        if proc.returncode != 0:
            raise SystemExit(f"{code}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        got: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
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
                items[name] = (got["items"], got["copy_items"])
        if len(set(items.values())) != 1:
            raise SystemExit(f"the code trees built other inventories: {items}")
        keys = ("build", "cpu", "write", "copy", "files", "size")
        med = {name: {k: statistics.median(r[k] for r in rs) for k in keys}
               for name, rs in runs.items()}
        for name, m in med.items():
            print(f"{name} ({codes[name]}): cold build {m['build']:.2f} s wall, {m['cpu']:.2f} s "
                  f"CPU, {m['files']:.0f} cache files; the whole inventory "
                  f"({m['size'] / 1e6:.0f} MB) written in {m['write'] * 1000:.0f} ms; a second "
                  f"checkout, one file more: {m['copy']:.2f} s")
            for k in ("build", "cpu", "write", "copy"):
                print(f"    {k} " + ", ".join(f"{r[k]:.3f}" for r in runs[name]))
        if "against" in med:
            t, a = med["this"], med["against"]
            print("this / against: " + ", ".join(f"{k} {t[k] / a[k]:.2f}x"
                                                 for k in ("build", "cpu", "write", "copy")))
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
