"""A hang guard for tests of inputs that once hung, blew up or killed the process: a bound far
above normal, never a speed check (issue 25, item 20: 2-10 s bounds failed on a shared 2-core
machine while nothing was wrong).

Every guarded step takes well under a few seconds there; the bugs they pin took minutes or
hours, or recursed out of the stack. ``HANG_S`` catches those, not a loaded machine. How fast
the steps are, and that they scale linearly, is measured in
``benchmarks/bench_pathological.py`` (medians, the ratio of a size to a quarter of it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

HANG_S = 60.0


@contextmanager
def no_hang(what: str, bound_s: float = HANG_S) -> Iterator[None]:
    """Fail when the block takes longer than ``bound_s``: it hung (or went quadratic)."""
    start = time.perf_counter()
    yield
    took = time.perf_counter() - start
    assert took < bound_s, (f"{what}: {took:.1f} s, past the {bound_s:.0f} s hang guard "
                            "(normal is well under a few seconds; see benchmarks)")
