"""Unified diffs and coverage.py data files under mutation (parsed, applied, audited)."""

from __future__ import annotations

from hypothesis import given

from tests.fuzz.conftest import cases, fuzz_settings, run_bounded


@fuzz_settings(30)
@given(case=cases("diff"))
def test_diff_mutations(case, ws):
    run_bounded("diff", case, ws)


@fuzz_settings(20)
@given(case=cases("coverage"))
def test_coverage_data_mutations(case, ws):
    run_bounded("coverage", case, ws)


@fuzz_settings(12)
@given(case=cases("diff"))
def test_diff_mutations_through_the_cli(case, ws):
    run_bounded("diff", case, ws, mode="cli")


@fuzz_settings(8)
@given(case=cases("coverage"))
def test_coverage_mutations_through_the_cli(case, ws):
    run_bounded("coverage", case, ws, mode="cli")
