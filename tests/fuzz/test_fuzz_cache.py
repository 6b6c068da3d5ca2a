"""A damaged index cache file is ignored: the checkout is parsed again, nothing fails."""

from __future__ import annotations

from hypothesis import given

from tests.fuzz.conftest import cases, fuzz_settings, run_bounded


@fuzz_settings(15)
@given(case=cases("cache"))
def test_damaged_cache_is_a_miss(case, ws):
    assert run_bounded("cache", case, ws) == "ok"


@fuzz_settings(8)
@given(case=cases("cache"))
def test_damaged_cache_is_a_miss_through_the_cli(case, ws):
    assert run_bounded("cache", case, ws, mode="cli") in ("ok", "findings")
