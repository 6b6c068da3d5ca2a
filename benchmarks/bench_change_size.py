"""Time `testdb audit --diff` of a new-file change as it grows: one new module of N functions
(2k, 5k, 10k by default; each function a few lines), in a small checkout with a test plan.

    python benchmarks/bench_change_size.py [--runs 3] [--sizes 2000,5000,10000] [--classes]

Prints the median of each size and the ratio of the largest to the smallest. Linear work
makes 10k functions 5x 2k; the target is <= 7x (issue 22, section 5: it was 17x, 2.2 s ->
37 s, quadratic in `auditor/behaviour.py`'s `unit_at` and its caller). ``--classes`` puts
the functions into classes of 20 methods (nested units). Each run is a fresh process with a
fresh cache directory, so the figures include the start-up; ``python -c pass`` is printed for
scale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "flashinfer-reuse"


def module(n: int, classes: bool) -> str:
    if not classes:
        return "".join(f"def f{i}(x):\n    y = x + {i}\n    return y * 2\n\n\n"
                       for i in range(n))
    out = []
    for c in range(0, n, 20):
        out.append(f"class C{c}:\n")
        out += [f"    def m{i}(self, x):\n        return x + {i}\n\n"
                for i in range(c, min(c + 20, n))]
        out.append("\n")
    return "".join(out)


def checkout(root: Path, n: int, classes: bool) -> Path:
    """The example's plan and sources, the new module written (the checkout is the head
    side), and the diff that adds it."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff"))
    text = module(n, classes)
    (root / "tensorrt_llm" / "big.py").write_text(text)
    lines = text.splitlines(keepends=True)
    diff = root.parent / f"big-{n}.diff"
    diff.write_text("--- /dev/null\n+++ b/tensorrt_llm/big.py\n"
                    f"@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + ln for ln in lines))
    return diff


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="2000,5000,10000")
    ap.add_argument("--classes", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    medians: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        base = [timed([sys.executable, "-c", "pass"], env) for _ in range(args.runs)]
        for n in sizes:
            root = Path(tmp) / f"tree-{n}"
            diff = checkout(root, n, args.classes)
            took = []
            for r in range(args.runs):
                run_env = {**env, "TESTDB_CACHE_DIR": str(Path(tmp) / f"cache-{n}-{r}")}
                took.append(timed([sys.executable, "-m", "reports", "--root", str(root),
                                   "audit", "--diff", str(diff), "--format", "json"], run_env))
            medians[n] = statistics.median(took)
            print(f"{n:>6} functions: median {medians[n]:.2f} s  "
                  f"(runs {', '.join(f'{t:.2f}' for t in took)})", flush=True)
    lo, hi = sizes[0], sizes[-1]
    ratio = medians[hi] / medians[lo]
    print(f"python -c pass: median {statistics.median(base) * 1000:.0f} ms")
    print(f"ratio {hi} / {lo}: {ratio:.1f}x (linear: {hi / lo:.1f}x; target <= 7x for 10k/2k)")


if __name__ == "__main__":
    main()
