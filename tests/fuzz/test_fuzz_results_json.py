"""Launch results JSON (results.json) fed back to `comment --results` and `report --results`."""

from __future__ import annotations

from hypothesis import given

from tests.fuzz.conftest import cases, fuzz_settings, run_bounded


@fuzz_settings(30)
@given(case=cases("results_json"))
def test_results_json_mutations(case, ws):
    run_bounded("results_json", case, ws)


@fuzz_settings(20)
@given(case=cases("results_json", ["struct", "snippet", "dup_keys", "truncate", "deep"]))
def test_results_json_mutations_through_comment_and_report(case, ws):
    run_bounded("results_json", case, ws, mode="cli")
