"""Time the HTML coverage report: generation on the full corpus and page loads in Chromium.

    python benchmarks/bench_report.py [--root data/trtllm] [--runs 5]

Generation: the index load (parse, or the content-keyed cache) and build + write of the report,
each the median of --runs runs. Page load: a fresh browser context per run (cold HTTP cache)
against a local http.server; reports navigation start -> load event and -> first rows drawn
(the page's `testdb-ready` performance mark), for the index and for one function page.
Needs Debian's chromium and playwright (`.ci/install-browser.sh`) for the page-load half;
without them only generation is timed.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reports.html import build_view, write_report  # noqa: E402
from testdb.index import load  # noqa: E402

CHROMIUM = os.environ.get("TESTDB_CHROMIUM", "/usr/bin/chromium")


def median_of(runs: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def page_loads(out: Path, runs: int, function_hash: str) -> dict[str, tuple[float, float]]:
    from playwright.sync_api import sync_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    timings: dict[str, tuple[float, float]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])
            for name, url in (("index", f"{base}/index.html"),
                              ("function", f"{base}/function.html#{function_hash}")):
                loads, readies = [], []
                for _ in range(runs):
                    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                    page = ctx.new_page()
                    page.goto(url, wait_until="load")
                    page.wait_for_selector("body[data-ready='1']")
                    load_ms, ready_ms = page.evaluate(
                        "() => [performance.getEntriesByType('navigation')[0].loadEventEnd,"
                        " performance.getEntriesByName('testdb-ready')[0].startTime]")
                    loads.append(load_ms)
                    readies.append(ready_ms)
                    ctx.close()
                timings[name] = (statistics.median(loads), statistics.median(readies))
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return timings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(REPO / "data" / "trtllm"))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("TESTDB_CACHE_DIR", os.path.join(tmp, "cache"))
        parse_s, index = median_of(max(1, args.runs // 2), lambda: load(args.root,
                                                                       use_cache=False))
        load(args.root)  # fill the cache
        cached_s, index = median_of(args.runs, lambda: load(args.root))
        out = Path(tmp) / "report"
        build_s, view = median_of(args.runs, lambda: build_view(index))
        write_s, _ = median_of(args.runs, lambda: write_report(str(out), view))
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(f"corpus         {args.root}: {view.page['total']} test ids, "
              f"{view.page['n_functions']} functions, {view.page['n_stages']} stages")
        print(f"report         {sum(1 for _ in out.rglob('*'))} files, {size / 1e6:.1f} MB; "
              f"data.js {(out / 'data.js').stat().st_size / 1e3:.0f} kB, "
              f"index.html {(out / 'index.html').stat().st_size / 1e3:.0f} kB")
        print(f"generation     index parse {parse_s:.2f} s (cached load {cached_s:.2f} s); "
              f"build {build_s:.2f} s + write {write_s:.2f} s = {build_s + write_s:.2f} s "
              f"(median of {args.runs})")
        total = cached_s + build_s + write_s
        print(f"  end to end   `testdb report` with a warm cache ≈ {total:.2f} s")
        if not os.access(CHROMIUM, os.X_OK):
            print(f"page load      skipped: no Chromium at {CHROMIUM} (.ci/install-browser.sh)")
            return 0
        try:
            import playwright  # noqa: F401
        except ImportError:
            print("page load      skipped: playwright is not installed (.ci/install-browser.sh)")
            return 0
        fn = max(view.data["functions"], key=lambda r: sum(r[3:]))
        for name, (load_ms, ready_ms) in page_loads(out, args.runs,
                                                    f"f={fn[0]}&n={fn[2]}").items():
            what = "index" if name == "index" else f"function page ({fn[1]}, "
            what += "" if name == "index" else f"{sum(fn[3:])} parametrizations)"
            print(f"page load      {what}: load event {load_ms:.0f} ms, first rows drawn "
                  f"{ready_ms:.0f} ms (median of {args.runs}, cold cache)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
