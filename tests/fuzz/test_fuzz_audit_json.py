"""Audit JSON fed back to `comment --audit`, `launch --from --dry-run` and `report --audit`."""

from __future__ import annotations

from hypothesis import given

from tests.fuzz.conftest import cases, fuzz_settings, run_bounded


@fuzz_settings(30)
@given(case=cases("audit_json"))
def test_audit_json_mutations(case, ws):
    run_bounded("audit_json", case, ws)


@fuzz_settings(25)
@given(case=cases("audit_json", ["struct", "snippet", "dup_keys", "truncate", "deep"]))
def test_audit_json_mutations_through_comment_launch_and_report(case, ws):
    run_bounded("audit_json", case, ws, mode="cli")
