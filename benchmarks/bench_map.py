"""The measured map at TensorRT-LLM's size: ingest rate, bytes per link, the audit's look-up and
``map merge``'s linearity, on a synthetic map (issue 24's targets).

    python benchmarks/bench_map.py [--tests 500] [--functions 20000] [--per-test 2000]
    python benchmarks/bench_map.py --tests 5000          # the full size: 10 M links

Builds, in a temp dir: a source tree of ``--functions`` functions (20 a file), a map of
``--tests`` tests each executing ``--per-test`` of them (a tenth of them shared by every
test, the way start-up code is, the rest drawn at random), added 50 tests per ``add`` (one
``map add`` of 50 data files); then

- ingest, store: tests per second of ``MapStore.add`` (target >= 100);
- ingest, coverage: tests per second of ``testdb map add``'s reading of real coverage.py data
  files (``CoverageData``, 50 tests each, contexts and lines written through its API) into
  functions, without the store;
- size: bytes per link of the map file, as added and after ``map merge`` (target <= 22, CBTS's
  compacted touch DB);
- look-up: what an audit asks per changed function (the tests that executed it, and those of
  the map that did not), for 20 functions, warm, median of 5 (target < 50 ms);
- merge: ``map merge`` of 10 partial maps vs of 5 (linear: the ratio of time per link ~ 1).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditor.covmap.fingerprint import units
from auditor.covmap.ingest import Ingest, Sources, ingest, read_coverage
from auditor.covmap.store import FuncRef, MapStore, merge_files

PER_FILE = 20
BATCH = 50
CPU: dict[str, float] = {}


def source_tree(root: Path, n_funcs: int) -> list[FuncRef]:
    refs: list[FuncRef] = []
    for f in range(n_funcs // PER_FILE):
        rel = f"pkg/mod{f:05d}.py"
        body = "".join(f"def fn{i}(x):\n    y = x + {f * PER_FILE + i}\n    return y\n\n\n"
                       for i in range(PER_FILE))
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)
        refs += [FuncRef(rel, u.qualname, u.kind, u.fp) for u in units(body)
                 if u.kind == "function"]
    return refs


def executed(rng: random.Random, refs: list[FuncRef], per_test: int) -> list[set[int]]:
    common = list(range(per_test // 10))
    return [set(common) | set(rng.sample(range(len(common), len(refs)),
                                         per_test - len(common))) for _ in range(ARGS.tests)]


def build(path: str, refs: list[FuncRef], tests: list[set[int]], commit: str, names: range
          ) -> float:
    t0 = time.perf_counter()
    CPU["build"] = time.process_time()
    with MapStore.open_or_create(path) as s:
        for i in range(0, len(names), BATCH):
            batch = {f"tests/t{n:05d}.py::test_{n}": {refs[j] for j in tests[n]}
                     for n in names[i:i + BATCH]}
            s.add(commit, 1_700_000_000 + i, batch, refs if i == 0 else ())
    CPU["build"] = time.process_time() - CPU["build"]
    return time.perf_counter() - t0


def coverage_read_rate(root: Path, refs: list[FuncRef], tests: list[set[int]], n: int
                       ) -> list[tuple[float, float]]:
    """Tests per second read from real coverage data files (CoverageData API)."""
    from coverage import CoverageData

    files = []
    for k in range(0, n, BATCH):
        d = CoverageData(basename=str(root / f".coverage.{k}"))
        for t in range(k, min(n, k + BATCH)):
            d.set_context(f"tests/t{t:05d}.py::test_{t}|run")
            lines: dict[str, list[int]] = {}
            for j in tests[t]:
                r = refs[j]
                fn = int(r.qualname[2:])
                lines.setdefault(str(root / r.path), []).extend([fn * 5 + 2, fn * 5 + 3])
            d.add_lines(lines)
        d.write()
        files.append(str(root / f".coverage.{k}"))
    src = Sources(str(root), None)
    rates = []
    for _ in range(2):  # cold: the sources parsed and fingerprinted; warm: once per commit
        t0, c0 = time.perf_counter(), time.process_time()
        into = Ingest()
        for f in files:
            read_coverage(f, src, into)
        rates.append((n / (time.perf_counter() - t0), n / (time.process_time() - c0)))
        got = sum(len(v) for v in into.tests.values())
        want = sum(len(tests[t]) for t in range(n))
        assert got == want, (got, want)
    t0 = time.perf_counter()  # as `testdb map add` reads them: a group of files per CPU
    into, _ = ingest(files, str(root), "bench")
    rates.append((n / (time.perf_counter() - t0), 0.0))
    assert sum(len(v) for v in into.tests.values()) == want
    return rates


def lookups(path: str, refs: list[FuncRef], rng: random.Random) -> float:
    changed = rng.sample(refs, 20)
    times = []
    with MapStore.open(path) as s:
        for _ in range(6):
            t0 = time.perf_counter()
            for r in changed:
                ran = s.tests_executing(r.path, r.qualname)  # as auditor.measured asks
                s.tests_not_executing(r.path, r.qualname, [ln.test_id for ln in ran])
            times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]) * 1000  # warm: the first run fills the page cache


def merge_time(tmp: str, refs: list[FuncRef], tests: list[set[int]], parts: int) -> tuple[
        float, int]:
    names = list(range(len(tests)))
    chunk = -(-len(names) // parts)
    inputs = []
    for p in range(parts):
        path = os.path.join(tmp, f"part{parts}-{p}.sqlite")
        build(path, refs, tests, f"c{p}", range(p * chunk, min(len(names), (p + 1) * chunk)))
        inputs.append(path)
    out = os.path.join(tmp, f"merged{parts}.sqlite")
    t0 = time.perf_counter()
    res = merge_files(inputs, out)
    return time.perf_counter() - t0, res.links


def main() -> None:
    rng = random.Random(24)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"this machine: python -c pass {1000 * (time.perf_counter() - t0):.0f} ms, "
          f"{os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        root = Path(tmp) / "src"
        refs = source_tree(root, ARGS.functions)
        tests = executed(rng, refs, ARGS.per_test)
        n_links = sum(map(len, tests))
        print(f"map: {ARGS.tests:,} tests x {len(refs):,} functions, "
              f"{ARGS.per_test:,} a test = {n_links:,} links")
        path = os.path.join(tmp, "map.sqlite")
        dt = build(path, refs, tests, "c0", range(len(tests)))
        rate = len(tests) / dt
        print(f"ingest, store: {rate:,.0f} tests/s wall, {len(tests) / CPU['build']:,.0f} "
              f"tests/s of CPU time ({dt:.1f} s; target >= 100: {rate / 100:.1f}x)")
        n_cov = min(len(tests), ARGS.coverage_tests)
        (cw, cc), (ww, wc), (pw, _) = coverage_read_rate(root, refs, tests, n_cov)
        print(f"ingest, coverage data read ({n_cov} tests, {len(refs) // PER_FILE} files): "
              f"one process: sources cold {cw:,.0f} tests/s wall ({cc:,.0f} CPU), parsed once "
              f"per commit {ww:,.0f} tests/s wall ({wc:,.0f} CPU); `map add` (a worker per "
              f"CPU, sources cold): {pw:,.0f} tests/s")
        size = os.path.getsize(path)
        print(f"size: {size:,} bytes = {size / n_links:.1f} bytes a link (target <= 22)")
        ms = lookups(path, refs, rng)
        print(f"look-up, 20 changed functions, warm: {ms:.1f} ms (target < 50: "
              f"{50 / ms:.1f}x under)")
        t5, l5 = merge_time(tmp, refs, tests[: len(tests) // 2], 5)
        t10, l10 = merge_time(tmp, refs, tests, 10)
        merged = os.path.getsize(os.path.join(tmp, "merged10.sqlite"))
        print(f"merge: 5 partial maps ({l5:,} links) {t5:.1f} s, 10 ({l10:,} links) "
              f"{t10:.1f} s; time per link 10 vs 5: {(t10 / l10) / (t5 / l5):.2f} (linear ~ 1)")
        print(f"size after merge (vacuumed): {merged / l10:.1f} bytes a link")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=500)
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--per-test", type=int, default=2000)
    ap.add_argument("--coverage-tests", type=int, default=100)
    ARGS = ap.parse_args()
    main()
