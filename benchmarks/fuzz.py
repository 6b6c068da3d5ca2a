"""Fuzz testdb-audit with mutations of the real input files; count the outcomes.

    python benchmarks/fuzz.py --cases 10000 --workers 2 --seed 1

Each case takes a real file (test-db YAML, QA list, waives, stage table in YAML or Groovy,
PR triggers, .test_durations, a diff, a coverage data file, an audit JSON), applies one to three
mutations (byte flips, truncation mid-line/-token/-multibyte char, tabs, CRLF, BOM, invalid
UTF-8, a 1 MB line, deep nesting, duplicate keys, YAML alias bombs, unusual node ids, spliced
lines of other formats, type changes in the parsed tree, SQLite row changes) and runs it either
through the parser function directly or through the CLI in-process (``reports.cli.main``) on a
private copy of examples/flashinfer-reuse. Outcomes: ok, error (clean exit 2 / TestDbError naming
the file), findings (exit 1), crash (exit 3, an uncaught exception, a traceback, a diagnostic
without path:line) and hang (over --timeout; a worker stuck in C code is killed by a watchdog).
Each worker runs under an address-space limit (--mem-mb), so a runaway allocation is a
MemoryError (a crash), not a dead machine. Exit status 1 when any case crashed or hung.

Cases are deterministic for a given --seed: ``--only N`` reruns case N alone and prints it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection, wait
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import contextlib

from tests.fuzz import fuzzkit

# How often each format is picked, and the share of cases that go through the CLI.
WEIGHTS = {"testdb_yaml": 16, "qa_yaml": 8, "qa_list": 10, "waives": 8, "stages_yaml": 8,
           "groovy": 10, "triggers": 5, "durations": 7, "diff": 12, "coverage": 6,
           "audit_json": 12, "results_json": 8, "cache": 4}
CLI_SHARE = 0.35


def make_case(i: int, seed: int, only_formats: list[str] | None = None,
              only_mutators: list[str] | None = None) -> dict[str, Any]:
    rng = random.Random(seed * 1_000_003 + i)
    fmts = fuzzkit.formats()
    names = [n for n in WEIGHTS if not only_formats or n in only_formats]
    name = rng.choices(names, weights=[WEIGHTS[n] for n in names])[0]
    fmt = fmts[name]
    muts = [m for m in fuzzkit.mutators_for(fmt) if not only_mutators or m in only_mutators] \
        or list(fuzzkit.mutators_for(fmt))
    chain = [rng.choice(muts) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    mode = "cli" if rng.random() < CLI_SHARE else "parser"
    return {"i": i, "fmt": name, "seed": rng.choice(fmt.seeds), "mutators": chain,
            "rng_seed": rng.randrange(2**32), "mode": mode,
            "use_cache": mode == "cli" and rng.random() < 0.2}


def _limit_memory(mb: int) -> None:
    import resource

    if mb > 0:
        soft = mb * fuzzkit.MB
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def worker(conn: Connection, base: str, timeout: float, mem_mb: int) -> None:
    os.environ["TESTDB_CACHE_DIR"] = os.path.join(base, "cache")
    os.environ.setdefault("NO_COLOR", "1")
    ws = fuzzkit.Workspace.make(base)
    ws.index()
    fuzzkit.seed_bytes("<generated>", fuzzkit.formats()["coverage"], ws.root)
    fuzzkit.seed_bytes("<generated>", fuzzkit.formats()["audit_json"], ws.root)
    fuzzkit.seed_bytes("<generated>", fuzzkit.formats()["cache"], ws.root)
    _limit_memory(mem_mb)
    conn.send(("ready", None))
    done = 0
    while True:
        case = conn.recv()
        if case is None:
            break
        res = fuzzkit.run_case(case["fmt"], case["seed"], case["mutators"], case["rng_seed"],
                               case["mode"], ws, timeout=timeout, use_cache=case["use_cache"])
        res.peak_rss_mb = fuzzkit.peak_rss_mb()
        conn.send(("done", (case["i"], res.outcome, res.detail, res.seconds, res.peak_rss_mb)))
        done += 1
        if done % 200 == 0:
            import shutil

            shutil.rmtree(ws.cache, ignore_errors=True)  # the cache only grows during a fuzz run
    conn.close()


class Pool:
    """Workers fed one case at a time; a worker silent past the hard timeout is killed."""

    def __init__(self, n: int, timeout: float, mem_mb: int, base: str) -> None:
        self.n, self.timeout, self.mem_mb, self.base = n, timeout, mem_mb, base
        self.slots: list[dict[str, Any]] = []
        self.ctx = mp.get_context("fork")
        for k in range(n):
            self.slots.append(self._start(k))

    def _start(self, k: int) -> dict[str, Any]:
        parent, child = self.ctx.Pipe()
        base = os.path.join(self.base, f"w{k}-{time.monotonic_ns()}")
        p = self.ctx.Process(target=worker, args=(child, base, self.timeout, self.mem_mb),
                             daemon=True)
        p.start()
        child.close()
        if not parent.poll(120):
            raise RuntimeError("a fuzz worker did not start")
        parent.recv()
        return {"k": k, "proc": p, "conn": parent, "case": None, "since": 0.0, "base": base}

    def run(self, cases: list[dict[str, Any]], report: Any) -> None:
        todo = list(reversed(cases))
        busy = 0
        for s in self.slots:
            if todo:
                self._give(s, todo.pop())
                busy += 1
        hard = self.timeout * 2 + 10
        while busy:
            conns = [s["conn"] for s in self.slots if s["case"] is not None]
            ready = wait(conns, timeout=1.0)
            now = time.monotonic()
            for s in self.slots:
                if s["case"] is None:
                    continue
                if s["conn"] in ready:
                    try:
                        _kind, payload = s["conn"].recv()
                    except (EOFError, OSError):
                        report(s["case"], "crash", "worker died (signal "
                               f"{s['proc'].exitcode}): native crash or out of memory",
                               now - s["since"], 0.0)
                        self._restart(s)
                    else:
                        _, outcome, detail, secs, rss = payload
                        report(s["case"], outcome, detail, secs, rss)
                    s["case"] = None
                    busy -= 1
                elif now - s["since"] > hard:
                    report(s["case"], "hang", f"killed by the watchdog after {hard:.0f} s "
                           "(stuck outside Python code)", now - s["since"], 0.0)
                    self._restart(s)
                    s["case"] = None
                    busy -= 1
                if s["case"] is None and todo:
                    self._give(s, todo.pop())
                    busy += 1

    def _give(self, s: dict[str, Any], case: dict[str, Any]) -> None:
        s["case"], s["since"] = case, time.monotonic()
        s["conn"].send(case)

    def _restart(self, s: dict[str, Any]) -> None:
        s["proc"].kill()
        s["proc"].join(5)
        fresh = self._start(s["k"])
        s.update({k: v for k, v in fresh.items() if k not in ("case", "since")})

    def close(self) -> None:
        for s in self.slots:
            with contextlib.suppress(OSError):
                s["conn"].send(None)
            s["proc"].join(10)
            if s["proc"].is_alive():
                s["proc"].kill()


def describe(case: dict[str, Any]) -> str:
    seed = os.path.relpath(case["seed"], fuzzkit.REPO) if case["seed"].startswith("/") \
        else case["seed"]
    return (f"case {case['i']}: {case['fmt']} via {case['mode']}"
            f"{' (cache)' if case.get('use_cache') else ''}, seed {seed}, "
            f"mutations {'+'.join(case['mutators'])}, rng {case['rng_seed']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--timeout", type=float, default=10.0, help="per-case time bound, seconds")
    ap.add_argument("--mem-mb", type=int, default=3072, help="per-worker address-space limit")
    ap.add_argument("--only", type=int, default=None, help="run case N alone, verbosely")
    ap.add_argument("--show", type=int, default=20, help="failures to print in full")
    ap.add_argument("--formats", default="", help="comma-separated formats (default: all)")
    ap.add_argument("--mutators", default="", help="comma-separated mutators (default: all)")
    args = ap.parse_args(argv)

    import tempfile

    base = tempfile.mkdtemp(prefix="testdb-fuzz-run-")
    only_f = [f for f in args.formats.split(",") if f] or None
    only_m = [m for m in args.mutators.split(",") if m] or None
    cases = [make_case(i, args.seed, only_f, only_m) for i in range(args.cases)]
    if args.only is not None:
        cases = [make_case(args.only, args.seed, only_f, only_m)]
        args.workers = 1
    counts: Counter[str] = Counter()
    by_fmt: dict[str, Counter[str]] = {}
    failures: list[tuple[dict[str, Any], str, str]] = []
    slowest: list[tuple[float, str]] = []
    peak = [0.0]
    t0 = time.monotonic()

    def report(case: dict[str, Any], outcome: str, detail: str, secs: float, rss: float) -> None:
        counts[outcome] += 1
        by_fmt.setdefault(f"{case['fmt']}/{case['mode']}", Counter())[outcome] += 1
        slowest.append((secs, describe(case)))
        slowest.sort(reverse=True)
        del slowest[5:]
        peak[0] = max(peak[0], rss)
        if outcome in ("crash", "hang"):
            failures.append((case, outcome, detail))
        n = sum(counts.values())
        if args.only is not None or n % 500 == 0:
            print(f"  {n}/{len(cases)} cases, {time.monotonic() - t0:.0f} s: "
                  + ", ".join(f"{k} {counts[k]}" for k in fuzzkit.OUTCOMES), file=sys.stderr)
        if args.only is not None:
            print(f"{describe(case)}\n  -> {outcome} in {secs:.3f} s {detail}")

    pool = Pool(args.workers, args.timeout, args.mem_mb, base)
    try:
        pool.run(cases, report)
    finally:
        pool.close()
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    total = sum(counts.values())
    wall = time.monotonic() - t0
    print(f"\n{total} cases in {wall:.0f} s ({args.workers} workers, per-case bound "
          f"{args.timeout:g} s, memory bound {args.mem_mb} MB per worker, seed {args.seed})")
    print("outcome    count")
    labels = {"ok": "ok (exit 0 / accepted)", "error": "clean error (exit 2 / path:line)",
              "findings": "findings (exit 1)", "crash": "crash", "hang": "hang"}
    for k in fuzzkit.OUTCOMES:
        print(f"  {labels[k]:<34} {counts[k]:>6}")
    print("\nby format/mode: " + "; ".join(
        f"{f} " + "/".join(str(c[k]) for k in fuzzkit.OUTCOMES) for f, c in sorted(by_fmt.items()))
        + "   (ok/error/findings/crash/hang)")
    print(f"\npeak worker RSS {peak[0]:.0f} MB")
    print("slowest cases:")
    for secs, what in slowest:
        print(f"  {secs:7.3f} s  {what}")
    if failures:
        print(f"\n{len(failures)} failing case(s); rerun one with --only N --seed {args.seed}:")
        for case, outcome, detail in failures[: args.show]:
            print(f"- {outcome}: {describe(case)}\n    {detail.strip()[:1200]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
