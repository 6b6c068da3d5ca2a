"""bench_floor.py's cold and new-diff lines, with the code of another checkout alternated in
the same run (issue 25, second pass): each round runs this code, the other code, and the
anchor, one after the other, so a busy machine slows all three alike.

    python benchmarks/bench_cold_ab.py --against DIR [--runs 5] [--only cold new-diff]

DIR is a copy of the code before (``git archive main | tar -x -C DIR``). Prints, per path,
the medians, each code's ratio to the anchor, and the ratio of the two codes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_audit import build, change
from bench_floor import PARSE_ALL, TARGETS, new_diff
from synthetic_repo import REPO, tool_env

CPU: dict[str, list[float]] = {}  # CPU seconds of each run's processes, by code


def timed(cmd: list[str], cache: str, code: Path, ok: tuple[int, ...] = (0, 1),
          cpu: str | None = None) -> float:
    """Wall time of ``cmd``; with ``cpu``, also the CPU time of it and every process it
    starts (children, their workers) into ``CPU[cpu]``: on a shared machine, wall times
    depend on how many processes compete, CPU time much less."""
    env = {**tool_env(cache), "NO_COLOR": "1", "PYTHONPATH": str(code)}
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=code,
                                start_new_session=True)
        seen: dict[int, float] = {}
        while proc.poll() is None:
            if cpu is not None:
                _sample(proc.pid, seen)
            time.sleep(0.01)
        elapsed = time.perf_counter() - t
        if cpu is not None:
            for _ in range(50):  # the children still ending after the command exited
                if not _sample(proc.pid, seen):
                    break
                time.sleep(0.01)
            CPU.setdefault(cpu, []).append(sum(seen.values()))
        if proc.returncode not in ok:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n"
                             + err.read().decode()[-2000:])
    return elapsed


_TICK = os.sysconf("SC_CLK_TCK")


def _sample(session: int, seen: dict[int, float]) -> bool:
    """Record the CPU seconds so far of every process of ``session``; whether any is left."""
    alive = False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # the session id
            alive = alive or fields[0] != "Z"
            seen[int(pid)] = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    return alive


def tool(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reports", "--root", str(root), *args]


def show(name: str, label: str, ours: list[float], theirs: list[float], anchor_name: str,
         anchor: list[float]) -> None:
    a, b, c = (statistics.median(x) for x in (ours, theirs, anchor))
    print(f"{label}: this code {a * 1000:.0f} ms = {a / c:.1f}x, before {b * 1000:.0f} ms = "
          f"{b / c:.1f}x, {anchor_name} {c * 1000:.0f} ms (medians of {len(ours)}); "
          f"this / before {a / b:.2f}; target <= {TARGETS[name]:g}x")
    for what, xs in (("this", ours), ("before", theirs), ("anchor", anchor)):
        print(f"    {what}: {', '.join(f'{x * 1000:.0f}' for x in xs)}")
    if CPU:
        a, b, c = (statistics.median(CPU[k]) for k in ("this", "before", "anchor"))
        print(f"    CPU seconds, all processes: this {a:.2f} = {a / c:.1f}x, before {b:.2f} = "
              f"{b / c:.1f}x, anchor {c:.2f}; this / before {a / b:.2f}")
        for k in ("this", "before", "anchor"):
            print(f"    cpu {k}: {', '.join(f'{x:.2f}' for x in CPU[k])}")
        CPU.clear()
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--only", nargs="*", choices=["cold", "new-diff"],
                    default=["cold", "new-diff"])
    args = ap.parse_args()
    codes = {"this": REPO, "before": args.against.resolve()}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        root = scratch / "checkout"
        root.mkdir()
        build(root, args.files)
        change(root, 1)
        empty = str(scratch / "no-cache")
        audit = tool(root, "audit", "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
        if "cold" in args.only:
            parse = [sys.executable, "-c", PARSE_ALL, str(root)]
            timed(parse, empty, REPO, ok=(0,))  # the page cache
            got: dict[str, list[float]] = {"this": [], "before": [], "anchor": []}
            for i in range(args.runs):
                for name, code in codes.items():
                    got[name].append(timed(audit, str(scratch / f"cold-{name}-{i}"), code,
                                           cpu=name))
                got["anchor"].append(timed(parse, empty, REPO, ok=(0,), cpu="anchor"))
            show("cold", "cold audit (no caches)", got["this"], got["before"],
                 "ast.parse of every file", got["anchor"])
        if "new-diff" in args.only:
            bare = [sys.executable, "-c", "pass"]
            diffs = [new_diff(root, scratch, i) for i in range(args.runs + 1)]
            warm = {name: str(scratch / f"warm-{name}") for name in codes}
            for name, code in codes.items():
                timed(audit, warm[name], code)
                # untimed: the first diff audit of the tree builds its work-tree caches once
                timed(tool(root, "audit", "--diff", str(diffs[-1]), "--format", "json"),
                      warm[name], code)
            got = {"this": [], "before": [], "anchor": []}
            for i in range(args.runs):
                for name, code in codes.items():
                    got[name].append(timed(tool(root, "audit", "--diff", str(diffs[i]),
                                                "--format", "json"), warm[name], code,
                                           cpu=name))
                got["anchor"].append(timed(bare, empty, REPO, ok=(0,), cpu="anchor"))
            show("new-diff", "a new diff on a cached tree", got["this"], got["before"],
                 "python -c pass", got["anchor"])
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
