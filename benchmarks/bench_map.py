"""The measured map at TensorRT-LLM's size: ingest rate, bytes per link, the audit's look-up and
``map merge``'s linearity, on a synthetic map (issue 24's targets).

    python benchmarks/bench_map.py [--tests 500] [--functions 20000] [--per-test 2000]
    python benchmarks/bench_map.py --tests 5000          # the full size: 10 M links

Builds, in a temp dir: a source tree of ``--functions`` functions (20 a file) and
``--tests`` tests each executing ``--per-test`` of them (a tenth of them shared by every
test, the way start-up code is, the rest drawn at random), written as real coverage.py data
files of 50 tests each (contexts and lines through its ``CoverageData`` API); then

- ingest, end to end: tests per second of ``testdb map add`` (``add_files``: read and
  store) of all the data files in one call into a new map (target >= 100), and in ten
  stage-sized calls into a map that grows to the full size; ``--serial`` adds the design
  before (read every file, then store) for comparison;
- small adds: a data file of 50 tests added to the full map, five times;
- coverage data read alone, one process (``Reader.read``), and the store alone (one
  ``MapStore.add`` of a partial map's tests, as the merge's inputs are built);
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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditor.covmap.add import add_files, ingest
from auditor.covmap.fingerprint import units
from auditor.covmap.ingest import Reader, Sources
from auditor.covmap.store import FuncRef, MapStore, merge_files

PER_FILE = 20
BATCH = 50  # tests a data file
# What the data-file writers read (set before the pool forks: inherited, not pickled).
GEN: dict[str, object] = {}


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
    # a git checkout, as `map add --commit SHA` reads one: the sources from git objects
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c0"],
                 ["commit", "-q", "--allow-empty", "-m", "c1"]):
        subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c",
                        "user.email=bench@example.com", *args], check=True)
    return refs


def commit(root: Path, rev: str) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", rev], check=True,
                          capture_output=True, text=True).stdout.strip()


def executed(rng: random.Random, refs: list[FuncRef], per_test: int) -> list[set[int]]:
    common = list(range(per_test // 10))
    return [set(common) | set(rng.sample(range(len(common), len(refs)),
                                         per_test - len(common))) for _ in range(ARGS.tests)]


def name(n: int) -> str:
    return f"tests/t{n:05d}.py::test_{n}"


def _write_data_file(k: int) -> str:
    """Data file ``k``: tests k*50 .. k*50+49, each its context, two lines a function."""
    from coverage import CoverageData

    root, refs, tests = GEN["root"], GEN["refs"], GEN["tests"]
    assert isinstance(root, Path) and isinstance(refs, list) and isinstance(tests, list)
    path = root / f".coverage.{k:04d}"
    d = CoverageData(basename=str(path))
    for t in range(k * BATCH, min(len(tests), (k + 1) * BATCH)):
        d.set_context(f"{name(t)}|run")
        lines: dict[str, list[int]] = {}
        for j in tests[t]:
            r = refs[j]
            fn = int(r.qualname[2:])
            lines.setdefault(str(root / r.path), []).extend([fn * 5 + 2, fn * 5 + 3])
        d.add_lines(lines)
    d.write()
    return str(path)


def data_files(root: Path, refs: list[FuncRef], tests: list[set[int]]) -> list[str]:
    from concurrent.futures import ProcessPoolExecutor

    GEN.update(root=root, refs=refs, tests=tests)
    n = -(-len(tests) // BATCH)
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(_write_data_file, range(n)))


def build(path: str, refs: list[FuncRef], tests: list[set[int]], commit: str, names: range
          ) -> float:
    """The store alone: one ``MapStore.add`` of the tests (a partial map of the merge)."""
    t0 = time.perf_counter()
    with MapStore.open_or_create(path) as s:
        batch = {name(n): {refs[j] for j in tests[n]} for n in names}
        s.add(commit, 1_700_000_000 + names[0], batch, refs)
    return time.perf_counter() - t0


def links_of(path: str) -> int:
    with MapStore.open(path) as s:
        return s.stats().links


def end_to_end(tmp: str, root: Path, files: list[str], n_links: int) -> str:
    """``map add`` of every data file in one call, then in ten calls; the map of one call."""
    n = ARGS.tests
    one = os.path.join(tmp, "map-one.sqlite")
    c0 = commit(root, "HEAD~1")
    t0, cpu0 = time.perf_counter(), time.process_time()
    res = add_files(files, str(root), c0, one, measured_at=1_700_000_000).result
    dt, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert res.added == n and res.links == n_links == links_of(one), (res, n_links)
    print(f"ingest, end to end: `map add` of {len(files)} data files ({n:,} tests) in one "
          f"call: {n / dt:,.0f} tests/s ({dt:.1f} s; this process {cpu:.1f} s CPU; "
          f"target >= 100: {n / dt / 100:.1f}x)", flush=True)
    staged = os.path.join(tmp, "map-staged.sqlite")
    step = max(1, -(-len(files) // 10))
    t0 = time.perf_counter()
    rates = []
    for i in range(0, len(files), step):
        t1 = time.perf_counter()
        part = files[i:i + step]
        add_files(part, str(root), c0, staged, measured_at=1_700_000_000 + i)
        rates.append(min(n, len(part) * BATCH) / (time.perf_counter() - t1))
    dt = time.perf_counter() - t0
    assert links_of(staged) == n_links
    print(f"ingest, end to end: the same in {len(rates)} calls of {step * BATCH} tests into a "
          f"map growing to the full size: {n / dt:,.0f} tests/s overall ({dt:.1f} s); the "
          f"first call {rates[0]:,.0f}, the last {rates[-1]:,.0f} tests/s", flush=True)
    if ARGS.serial:
        serial = os.path.join(tmp, "map-serial.sqlite")
        t0 = time.perf_counter()
        got, sha = ingest(files, str(root), c0)
        t1 = time.perf_counter()
        for k in range(0, n, BATCH):  # the store as the benchmark fed it before
            with MapStore.open_or_create(serial) as s:
                names = sorted(got.tests)[k:k + BATCH]
                s.add(sha, 1_700_000_000, {t: got.tests[t] for t in names},
                      got.scanned if k == 0 else ())
        t2 = time.perf_counter()
        print(f"  before (read every file in workers, then store 50 tests an add): read "
              f"{n / (t1 - t0):,.0f} tests/s, store {n / (t2 - t1):,.0f}, together "
              f"{n / (t2 - t0):,.0f} tests/s", flush=True)
    return one


def small_adds(tmp: str, root: Path, full: str, files: list[str]) -> None:
    """One data file (50 tests, measured again at a newer commit) added to the full map."""
    path = os.path.join(tmp, "map-small.sqlite")
    shutil.copyfile(full, path)
    times = []
    c1 = commit(root, "HEAD")
    for i, f in enumerate(files[:5]):
        t0 = time.perf_counter()
        add_files([f], str(root), c1, path, measured_at=1_800_000_000 + i)
        times.append(time.perf_counter() - t0)
    print(f"small adds: a data file of {BATCH} tests into the full map, median of "
          f"{len(times)}: {statistics.median(times):.2f} s = "
          f"{BATCH / statistics.median(times):,.0f} tests/s", flush=True)


def read_rate(root: Path, files: list[str]) -> None:
    """Tests per second read from the data files by one process (``Reader.read``)."""
    files = files[:2]
    reader = Reader(Sources(str(root), commit(root, "HEAD")))
    rates = []
    for _ in range(2):  # cold: the sources parsed and fingerprinted; warm: once per process
        t0 = time.perf_counter()
        n = sum(len(reader.read(f).tests) for f in files)
        rates.append(n / (time.perf_counter() - t0))
    print(f"coverage data read alone ({n} tests, one process): sources cold {rates[0]:,.0f} "
          f"tests/s, parsed once {rates[1]:,.0f} tests/s", flush=True)


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
        float, int, float]:
    names = list(range(len(tests)))
    chunk = -(-len(names) // parts)
    inputs = []
    built = 0.0
    for p in range(parts):
        path = os.path.join(tmp, f"part{parts}-{p}.sqlite")
        built += build(path, refs, tests, f"c{p}",
                       range(p * chunk, min(len(names), (p + 1) * chunk)))
        inputs.append(path)
    out = os.path.join(tmp, f"merged{parts}.sqlite")
    t0 = time.perf_counter()
    res = merge_files(inputs, out)
    return time.perf_counter() - t0, res.links, len(tests) / built


def main() -> None:
    rng = random.Random(24)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"this machine: python -c pass {1000 * (time.perf_counter() - t0):.0f} ms, "
          f"{os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        root = Path(tmp) / "src"
        refs = source_tree(root, ARGS.functions)
        tests = executed(rng, refs, ARGS.per_test)
        n_links = sum(map(len, tests))
        print(f"map: {ARGS.tests:,} tests x {len(refs):,} functions, "
              f"{ARGS.per_test:,} a test = {n_links:,} links", flush=True)
        t0 = time.perf_counter()
        files = data_files(root, refs, tests)
        print(f"data: {len(files)} coverage data files of {BATCH} tests written in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        full = end_to_end(tmp, root, files, n_links)
        small_adds(tmp, root, full, files)
        read_rate(root, files)
        size = os.path.getsize(full)
        print(f"size: {size:,} bytes = {size / n_links:.1f} bytes a link (target <= 22)")
        ms = lookups(full, refs, rng)
        print(f"look-up, 20 changed functions, warm: {ms:.1f} ms (target < 50: "
              f"{50 / ms:.1f}x under)", flush=True)
        t5, l5, _ = merge_time(tmp, refs, tests[: len(tests) // 2], 5)
        t10, l10, store_rate = merge_time(tmp, refs, tests, 10)
        merged = os.path.getsize(os.path.join(tmp, "merged10.sqlite"))
        print(f"store alone (one MapStore.add of {len(tests) // 10} tests a partial map): "
              f"{store_rate:,.0f} tests/s")
        print(f"merge: 5 partial maps ({l5:,} links) {t5:.1f} s, 10 ({l10:,} links) "
              f"{t10:.1f} s; time per link 10 vs 5: {(t10 / l10) / (t5 / l5):.2f} (linear ~ 1)")
        print(f"size after merge (vacuumed): {merged / l10:.1f} bytes a link")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=500)
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--per-test", type=int, default=2000)
    ap.add_argument("--serial", action="store_true",
                    help="also time the design before: read every file, then store")
    ARGS = ap.parse_args()
    main()
