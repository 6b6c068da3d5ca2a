"""Time `testdb replay` over 100 commits of a checkout the size of TensorRT-LLM's: the full
corpus lists, the 2,000-file synthetic test tree (gen_synthetic_tests.py) and a source package
the tests import.

    python benchmarks/bench_replay.py [--commits 100] [--files 2000] [--runs 3] [--jobs 2]

Builds a git repository in a temp dir, then 100 commits on top of it (each changes one to
three functions in one or two source modules; every tenth also changes a test file, every
25th reorders two entries of a test-db file, so the plan changes). Times, as a subprocess
(start to exit), printing seconds per commit:

- cold: empty caches (the scratch tree, the plan, inventory and import-graph caches are built);
- warm: the tool's caches filled by an earlier replay, the per-commit records dropped, so
  every commit is audited again (what a replay of new commits costs); target <= 1 s/commit;
- warm with --jobs N;
- cached: every record cached (a rerun).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic_repo import N_MODULES, REPO, base_tree, git, module_text, tool_env

TARGET = 1.0


def build(root: Path, files: int, commits: int) -> None:
    base_tree(root, files)
    pkg = root / "pkg"
    bumps: dict[tuple[int, int], int] = {}
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "tag", "base")
    rng = random.Random(7)
    defs = sorted((root / "tests" / "integration" / "defs").rglob("test_*.py"))
    h100 = root / "tests" / "integration" / "test_lists" / "test-db" / "l0_h100.yml"
    for c in range(commits):
        for i in rng.sample(range(N_MODULES), rng.randint(1, 2)):
            for k in rng.sample(range(10), rng.randint(1, 3)):
                bumps[(i, k)] = bumps.get((i, k), 0) + 1
            (pkg / f"mod{i}.py").write_text(
                module_text(i, lambda k, i=i: bumps.get((i, k), 0)))
        if c % 10 == 9:
            t = defs[c]
            t.write_text(t.read_text().replace("def test_", f"def test_r{c}_", 1))
        if c % 25 == 24:  # the plan changes: two neighbouring entries swap places
            lines = h100.read_text().splitlines(keepends=True)
            j = next(n for n, ln in enumerate(lines) if "::" in ln and "::" in lines[n + 1]
                     and ln.lstrip().startswith("- ") and lines[n + 1].lstrip().startswith("- "))
            lines[j], lines[j + 1] = lines[j + 1], lines[j]
            h100.write_text("".join(lines))
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"change {c}")


def replay_once(root: Path, cache: str, *extra: str) -> float:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "reports", "--root", str(root), "replay",
                           "base..main", "--format", "json", *extra],
                          capture_output=True, env=tool_env(cache), cwd=REPO)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode()[-3000:])
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    n = args.commits
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkout"
        root.mkdir()
        t0 = time.perf_counter()
        build(root, args.files, n)
        tests = sum(1 for _ in (root / "tests").rglob("test_*.py"))
        print(f"{tests} test files, {N_MODULES} source modules, the full corpus lists; "
              f"{n} commits built in {time.perf_counter() - t0:.0f} s")
        cache = str(Path(tmp) / "cache")
        cold = replay_once(root, cache)
        print(f"cold  (empty caches)          : {cold / n:.2f} s/commit ({cold:.0f} s)")
        records = Path(cache) / "replay" / "records"
        warm = []
        for _ in range(args.runs):
            shutil.rmtree(records, ignore_errors=True)
            warm.append(replay_once(root, cache))
        med = statistics.median(warm)
        print(f"warm  (tool caches, no records): {med / n:.2f} s/commit, median of "
              f"{len(warm)} [{', '.join(f'{w / n:.2f}' for w in warm)}]; "
              f"target {TARGET:.2f}: {med / n / TARGET:.2f}x")
        par = []
        for _ in range(max(1, args.runs - 1)):
            shutil.rmtree(records, ignore_errors=True)
            par.append(replay_once(root, cache, "--jobs", str(args.jobs)))
        print(f"warm, --jobs {args.jobs}               : "
              f"{statistics.median(par) / n:.2f} s/commit")
        cached = [replay_once(root, cache) for _ in range(args.runs)]
        print(f"cached (every record)          : {statistics.median(cached):.2f} s for "
              f"{n} commits")


if __name__ == "__main__":
    main()
