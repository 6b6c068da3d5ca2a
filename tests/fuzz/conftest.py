"""Fixtures and the one case checker of the fuzz tests (CI-sized; benchmarks/fuzz.py runs more)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.fuzz import fuzzkit

# Per-case bounds: hypothesis' deadline flags a slow case; the alarm stops a hung one (a case
# stuck in C is caught by benchmarks/fuzz.py's watchdog instead); the address-space cap turns
# a runaway allocation into a MemoryError.
DEADLINE = timedelta(seconds=8)
TIME_BOUND_S = 20.0
MEMORY_MB = 1536


def fuzz_settings(n: int) -> Any:
    return settings(max_examples=n, deadline=DEADLINE, derandomize=True, database=None,
                    print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture,
                                           HealthCheck.large_base_example])


def cases(fmt_name: str, mutators: list[str] | None = None) -> Any:
    """(seed file, mutation chain, rng) for one format, drawn from the real files."""
    fmt = fuzzkit.formats()[fmt_name]
    names = sorted(mutators or fuzzkit.mutators_for(fmt))
    # An integer seeds the mutators' random.Random: drawing every choice from hypothesis
    # (st.randoms) overruns its buffer on big files and makes half the examples invalid.
    return st.tuples(st.sampled_from(fmt.seeds), st.lists(st.sampled_from(names), min_size=1,
                                                          max_size=3),
                     st.integers(0, 2**32 - 1))


@pytest.fixture(scope="session")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fuzzkit.Workspace]:
    """A private copy of examples/flashinfer-reuse the CLI cases write mutated files into."""
    w = fuzzkit.Workspace.make(str(tmp_path_factory.mktemp("fuzz-ws")))
    w.index()
    yield w
    w.cleanup()


def run_bounded(fmt_name: str, case: tuple[str, list[str], int],
                ws: fuzzkit.Workspace, mode: str = "parser", **kw: Any) -> str:
    """Mutate, run, and assert the outcome is ok / clean error / findings within the bounds."""
    seed, names, rng_seed = case
    rng = random.Random(rng_seed)
    fmt = fuzzkit.formats()[fmt_name]
    data = fuzzkit.mutate(fuzzkit.seed_bytes(seed, fmt, ws.root), rng, fmt, names)
    t0 = time.perf_counter()
    try:
        with fuzzkit.memory_cap(MEMORY_MB), fuzzkit.time_bound(TIME_BOUND_S):
            if mode == "parser":
                outcome, detail = fuzzkit.run_parser(fmt, data, ws, rng)
            else:
                outcome, detail = fuzzkit.run_cli_case(fmt, data, ws, rng, **kw)
    except fuzzkit.Hang:
        raise AssertionError(f"hang: {fmt_name} {names} over {TIME_BOUND_S} s") from None
    assert outcome in ("ok", "error", "findings"), \
        f"{outcome} ({fmt_name} {names} rng {rng_seed} on {seed}): {detail}"
    assert time.perf_counter() - t0 < TIME_BOUND_S
    return outcome
