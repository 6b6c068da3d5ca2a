"""The legend's term scan (`reports.words.used_terms`) on a 200-behaviour audit's text.

    python benchmarks/bench_words.py [--runs 7] [--behaviours 200]

Prints the median of the literal-first scan and of the old one (every pattern searched,
`used_terms_plain`), alternated in one run, and their ratio; both must name the same terms.
The text is the bundled fixture audit with its behaviour repeated (as a large memo hit prints).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    from reports.render_audit import audit_text
    from reports.words import used_terms, used_terms_plain

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--behaviours", type=int, default=200)
    args = ap.parse_args()
    data = json.loads((REPO / "tests/reports/fixtures/flashinfer-audit.json").read_text())
    b = data["behaviours"][0]
    data["behaviours"] = [dict(copy.deepcopy(b), function=f"fn_{i}")
                          for i in range(args.behaviours)]
    text = audit_text(data)
    assert used_terms(text) == used_terms_plain(text)
    new: list[float] = []
    old: list[float] = []
    for _ in range(args.runs):
        for fn, out in ((used_terms, new), (used_terms_plain, old)):
            t = time.perf_counter()
            fn(text)
            out.append(time.perf_counter() - t)
    n, o = statistics.median(new), statistics.median(old)
    print(f"{len(text)} chars, {args.behaviours} behaviours: literal-first {n * 1000:.1f} ms, "
          f"every pattern {o * 1000:.1f} ms, {o / n:.1f}x")


if __name__ == "__main__":
    main()
