"""Time `testdb audit` of a 20-file change against the full corpus and a synthetic test tree of
TensorRT-LLM's size (>= 2,000 test files, >= 100,000 parametrizations).

    python benchmarks/bench_audit.py [--runs 5] [--files 2000] [--against DIR]

Builds a git repository in a temp dir: data/trtllm's test plan, the synthetic tests from
gen_synthetic_tests.py, and a synthetic source package whose modules the tests import; commits a
change to 20 source files; then times the audit (cold: fresh caches; warm: caches filled, the
same audit asked again, which reads back the answer kept (reports.audit_memo); warm, judged:
that answer removed before each run, so the audit judges from the caches below it; new head:
the caches of the last head, and a new commit that changes 3 test files, as each push of a PR
does), and prints medians and their ratios to the targets, with ``python -c pass``
measured in the same run for scale. ``--against DIR`` alternates every audit with one by the
code in DIR (an earlier commit, unpacked), each with its own caches, and prints the ratios.
Targets (1 changed function per file): warm <= 0.5 s, cold <= 2.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from synthetic_repo import N_MODULES, REPO, base_tree, git, module_text, tool_env

CHANGED = 20
WARM_TARGET_S, COLD_TARGET_S = 0.5, 2.5


def build(root: Path, files: int) -> None:
    """The base commit: corpus lists, synthetic tests, the package (tests import it)."""
    base_tree(root, files)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")


def change(root: Path, functions: int) -> None:
    """Commit a change of ``functions`` functions in each of 20 modules (on top of base)."""
    for i in range(CHANGED):
        (root / "pkg" / f"mod{i}.py").write_text(module_text(i, lambda k: int(k < functions)))
    git(root, "commit", "-qam", f"change {functions} function(s) in each of 20 files")


def touch_tests(root: Path, step: int, n: int = 3) -> None:
    """Commit a new head that also renames a test in ``n`` test files (a new PR push)."""
    tests = sorted((root / "tests" / "integration" / "defs").rglob("test_*.py"))
    for t in tests[step * n:(step + 1) * n]:
        t.write_text(t.read_text().replace("def test_", f"def test_s{step}_", 1))
    git(root, "commit", "-qam", f"push {step}: {n} test files changed")


def forget_answers(cache: str) -> None:
    """Remove the audits' kept answers: the next audit judges (from the caches below)."""
    for kept in Path(cache).glob("audit-*.marshal"):
        kept.unlink()


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def audit_once(root: Path, cache: str, base: str = "HEAD~1", code: Path = REPO) -> float:
    """One ``testdb audit`` as a subprocess, with the package found in ``code``."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "reports", "--root", str(root), "audit",
                           "--base", base, "--head", "HEAD", "--format", "json"],
                          capture_output=True, env=tool_env(cache), cwd=code)
    elapsed = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr.decode()[-2000:])
    return elapsed


def _runs(xs: list[float]) -> str:
    return (f"median {statistics.median(xs):.2f} s over {len(xs)}"
            f"  [{', '.join(f'{x:.2f}' for x in xs)}]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another copy of the code (e.g. `git archive REV | tar -x -C DIR`): its "
                         "audits alternate with this one's, each with its own caches, and the "
                         "ratios are printed (a busy machine slows both alike)")
    args = ap.parse_args()
    codes = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkout"
        root.mkdir()
        build(root, args.files)
        n_tests = sum(1 for _ in (root / "tests").rglob("test_*.py"))
        print(f"{n_tests} test files, {N_MODULES} source modules imported by a tenth of them, "
              "the full corpus lists; audits of a 20-file change, as a subprocess"
              + (f"; alternated with the code in {args.against}" if args.against else ""))
        start = [sys.executable, "-c", "pass"]
        py = statistics.median(_timed(lambda: subprocess.run(start, check=True))
                               for _ in range(max(5, args.runs)))
        print(f"python -c pass: median {py * 1000:.0f} ms")
        for functions in (1, 10):
            if functions != 1:
                git(root, "reset", "-q", "--hard", "HEAD~1")  # back to base
            change(root, functions)
            cold: dict[str, list[float]] = {k: [] for k in codes}
            warm: dict[str, list[float]] = {k: [] for k in codes}
            judged: dict[str, list[float]] = {k: [] for k in codes}
            for i in range(max(1, args.runs // 2)):
                for k, code in codes.items():
                    cold[k].append(audit_once(root, str(Path(tmp) / f"cold-{k}-{functions}-{i}"),
                                              code=code))
            caches = {k: str(Path(tmp) / f"warm-{k}-{functions}") for k in codes}
            for k, code in codes.items():
                audit_once(root, caches[k], code=code)
            for _ in range(args.runs):
                for k, code in codes.items():
                    warm[k].append(audit_once(root, caches[k], code=code))
                for k, code in codes.items():
                    forget_answers(caches[k])
                    judged[k].append(audit_once(root, caches[k], code=code))
            print(f"{functions:>2} changed function(s) per file ({20 * functions} behaviours):")
            for k in codes:
                med, cmed = statistics.median(warm[k]), statistics.median(cold[k])
                who = f" [{k}]" if len(codes) > 1 else ""
                print(f"  cold (no caches){who}: {_runs(cold[k])}"
                      + (f"; target {COLD_TARGET_S:.2f} s: {cmed / COLD_TARGET_S:.2f}x"
                         if functions == 1 else ""))
                print(f"  warm (caches)   {who}: {_runs(warm[k])}"
                      + (f"; target {WARM_TARGET_S:.2f} s: {med / WARM_TARGET_S:.2f}x"
                         if functions == 1 else "")
                      + f"; {med / py:.0f}x python -c pass")
                print(f"  warm, judged    {who}: {_runs(judged[k])}")
            if args.against:
                print("  this / against: " + ", ".join(
                    f"{name} {statistics.median(xs['this']) / statistics.median(xs['against']):.2f}"
                    for name, xs in (("cold", cold), ("warm", warm), ("warm, judged", judged))))
            if functions == 1:
                # A new push of the same PR: caches of the last head, 3 more test files changed.
                pushes: dict[str, list[float]] = {k: [] for k in codes}
                steps = max(3, args.runs // 2)
                for step in range(steps):
                    touch_tests(root, step)
                    for k, code in codes.items():
                        pushes[k].append(audit_once(root, caches[k], base=f"HEAD~{step + 2}",
                                                    code=code))
                for k in codes:
                    who = f" [{k}]" if len(codes) > 1 else ""
                    print(f"  new head (3 test files changed, caches of the last head){who}: "
                          f"{_runs(pushes[k])}")
                git(root, "reset", "-q", "--hard", f"HEAD~{steps}")


if __name__ == "__main__":
    main()
