"""How far each audit path is from its floor: every figure is a median alternated with its
anchor in one run, so a busy machine slows both alike (issue 25, "the cold audit near its floor").

    python benchmarks/bench_floor.py [--runs 9] [--files 2000] [--only NAME ...] [--against DIR]

The synthetic checkout of bench_audit.py (data/trtllm's plan, ``--files`` test files, the
package they import; a commit that changes 20 modules). Paths and anchors:

- cold audit (no caches) against a script that only runs ``ast.parse`` on every Python file of
  the tree (one parse per file: the floor of any audit that reads the sources); target <= 2.5x;
- warm audit, judged (the kept answer removed, so it judges from the caches below it) against
  ``python -c pass``; target <= 8x;
- a new diff on a cached tree (``audit --diff`` of a change no earlier audit saw, every cache of
  the checkout filled, one other diff audited first, untimed) against ``python -c pass``;
  target <= 8x;
- warm ``where`` in a checkout with test sources (a pattern naming no unit test, as in
  docs/benchmarks.md) against ``python -c pass``; target <= 3x;
- a memo hit (the same audit asked again) of a 200-behaviour change, text output, against
  ``python -c pass``; target <= 5x.

Each line prints both medians, the ratio, and whether the target is met; the load average is
printed at the start and the end (this project's machine is shared). ``--against DIR``: the
warm paths (judged, where, memo-200) also run the code in DIR (an earlier commit, unpacked:
``git archive REV | tar -x -C DIR``), each code with its own caches, alternated with this
code and the anchor in one run; each code's ratio and this / against are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_audit import build, change, forget_answers
from synthetic_repo import REPO, git, module_text, tool_env

# The anchor of the cold audit: one ast.parse per Python file of the tree, nothing else.
PARSE_ALL = """
import ast, os, sys
for d, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = [x for x in dirs if x != '.git']
    for f in files:
        if f.endswith('.py'):
            with open(os.path.join(d, f), 'rb') as fh:
                ast.parse(fh.read())
"""
TARGETS = {"cold": 2.5, "judged": 8.0, "new-diff": 8.0, "where": 3.0, "memo-200": 5.0}
WHERE_PATTERN = "TestLlama3_1_8BInstruct::test_chunked_prefill"


def _run(cmd: list[str], cache: str, ok: tuple[int, ...] = (0, 1), code: Path = REPO) -> float:
    """Wall time of ``cmd`` as a subprocess, start to exit, with the package found in
    ``code``; a failure stops the benchmark."""
    env = {**tool_env(cache), "NO_COLOR": "1", "PYTHONPATH": str(code)}
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, cwd=code)
    elapsed = time.perf_counter() - t
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n"
                         + proc.stderr.decode()[-2000:])
    return elapsed


def testdb(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reports", "--root", str(root), *args]


def audit(root: Path, fmt: str = "json") -> list[str]:
    return testdb(root, "audit", "--base", "HEAD~1", "--head", "HEAD", "--format", fmt)


def alternate(runs: int, path: Callable[[int], float], anchor: Callable[[int], float]
              ) -> tuple[list[float], list[float]]:
    """``runs`` pairs, path and anchor one after the other (run ``i`` is passed to each)."""
    xs: list[float] = []
    ys: list[float] = []
    for i in range(runs):
        xs.append(path(i))
        ys.append(anchor(i))
    return xs, ys


def report(name: str, label: str, xs: list[float], anchor: str, ys: list[float]) -> None:
    mx, my = statistics.median(xs), statistics.median(ys)
    ratio, target = mx / my, TARGETS[name]
    verdict = "met" if ratio <= target else "NOT met"
    print(f"{label}: {mx * 1000:.0f} ms against {anchor} {my * 1000:.0f} ms "
          f"(medians of {len(xs)} alternated): {ratio:.1f}x; target <= {target:g}x: {verdict}")
    print(f"    runs {', '.join(f'{x * 1000:.0f}' for x in xs)}"
          f" | anchor {', '.join(f'{y * 1000:.0f}' for y in ys)}", flush=True)


def versus(name: str, label: str, runs: int, path: Callable[[Path, int], float],
           anchor: Callable[[int], float], codes: dict[str, Path]) -> None:
    """``report`` of ``path`` run by each code in ``codes``, all alternated with the anchor;
    with two codes, also this code's median over the other's."""
    xs: dict[str, list[float]] = {k: [] for k in codes}
    ys: list[float] = []
    for i in range(runs):
        for k, code in codes.items():
            xs[k].append(path(code, i))
        ys.append(anchor(i))
    for k in codes:
        report(name, label + (f" [{k}]" if len(codes) > 1 else ""), xs[k], "python -c pass", ys)
    if len(codes) > 1:
        this, other = (statistics.median(xs[k]) for k in codes)
        print(f"    this / against: {this / other:.2f}", flush=True)


def new_diff(root: Path, scratch: Path, i: int) -> Path:
    """A diff of the work tree no audit has seen: function ``k`` of module ``i % 40`` bumped by
    a run-specific amount (the diff's text differs every run, so no kept answer matches)."""
    mod = root / "pkg" / f"mod{i % 40}.py"
    mod.write_text(module_text(i % 40, lambda k: 100 + i if k == i % 10 else 0))
    out = scratch / f"new-{i}.diff"
    proc = subprocess.run(["git", "-C", str(root), "diff", "HEAD"], capture_output=True,
                          check=True)
    out.write_bytes(proc.stdout)
    git(root, "checkout", "-q", "--", ".")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--only", nargs="*", choices=sorted(TARGETS), default=sorted(TARGETS))
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another copy of the code: the warm paths alternate with it")
    args = ap.parse_args()
    codes = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        root = scratch / "checkout"
        root.mkdir()
        build(root, args.files)
        change(root, 1)
        n_py = sum(1 for p in root.rglob("*.py") if ".git" not in p.parts)
        print(f"{n_py} Python files; a 20-file change, 1 function each; "
              f"{args.runs} alternated pairs per line", flush=True)
        bare = [sys.executable, "-c", "pass"]
        empty = str(scratch / "no-cache")

        def py(_: int) -> float:
            return _run(bare, empty, ok=(0,))

        if "cold" in args.only:
            parse = [sys.executable, "-c", PARSE_ALL, str(root)]
            _run(parse, empty, ok=(0,))  # the page cache
            xs, ys = alternate(
                max(3, args.runs // 2),
                lambda i: _run(audit(root), str(scratch / f"cold-{i}")),
                lambda i: _run(parse, empty, ok=(0,)))
            report("cold", "cold audit (no caches)", xs, "ast.parse of every file", ys)
        warm = str(scratch / "warm")
        _run(audit(root), warm)
        caches = {code: warm if k == "this" else str(scratch / f"warm-{k}")
                  for k, code in codes.items()}
        for code in codes.values():
            _run(audit(root), caches[code], code=code)
        if "judged" in args.only:
            def judged(code: Path, _: int) -> float:
                forget_answers(caches[code])
                return _run(audit(root), caches[code], code=code)
            versus("judged", "warm audit, judged (answer removed)", args.runs, judged, py,
                   codes)
        if "new-diff" in args.only:
            diffs = [new_diff(root, scratch, i) for i in range(args.runs + 1)]
            # Making the diffs rewrote modules of the tree (and so their directory): a stamp
            # taken within 2 s of that is racy (testdb.stamp.RACY_NS) and does not hold, and
            # the first audits would rebuild the graph. A user's diff touches no file.
            time.sleep(2.1)
            # untimed: the first diff audit of the tree builds its work-tree caches once
            _run(testdb(root, "audit", "--diff", str(diffs.pop()), "--format", "json"), warm)
            xs, ys = alternate(
                args.runs,
                lambda i: _run(testdb(root, "audit", "--diff", str(diffs[i]), "--format",
                                      "json"), warm),
                py)
            report("new-diff", "a new diff on a cached tree", xs, "python -c pass", ys)
        if "where" in args.only:
            where = testdb(root, "where", WHERE_PATTERN)
            for code in codes.values():
                _run(where, caches[code], code=code)
            versus("where", "warm where, checkout with test sources", args.runs,
                   lambda code, _: _run(where, caches[code], code=code), py, codes)
        if "memo-200" in args.only:
            git(root, "reset", "-q", "--hard", "HEAD~1")
            change(root, 10)
            memos = {code: str(scratch / f"memo-{k}") for k, code in codes.items()}
            for code in codes.values():
                _run(audit(root, "text"), memos[code], code=code)
            versus("memo-200", "memo hit, 200 behaviours, text", args.runs,
                   lambda code, _: _run(audit(root, "text"), memos[code], code=code), py,
                   codes)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
