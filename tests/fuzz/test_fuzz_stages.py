"""Stage tables (YAML and Groovy) and PR trigger data under mutation."""

from __future__ import annotations

import pytest
from hypothesis import given

from testdb.groovy import load_groovy_stages_text
from tests.fuzz import fuzzkit
from tests.fuzz.conftest import cases, fuzz_settings, run_bounded
from tests.hangguard import no_hang


@fuzz_settings(25)
@given(case=cases("stages_yaml"))
def test_stage_table_yaml_mutations(case, ws):
    run_bounded("stages_yaml", case, ws)


@fuzz_settings(30)
@given(case=cases("groovy"))
def test_groovy_mutations(case, ws):
    run_bounded("groovy", case, ws)


@fuzz_settings(20)
@given(case=cases("triggers"))
def test_trigger_mutations(case, ws):
    run_bounded("triggers", case, ws)


@fuzz_settings(15)
@given(case=cases("groovy"))
def test_groovy_mutations_through_the_cli(case, ws):
    run_bounded("groovy", case, ws, mode="cli")


@fuzz_settings(10)
@given(case=cases("stages_yaml"))
def test_stage_table_mutations_through_the_cli(case, ws):
    run_bounded("stages_yaml", case, ws, mode="cli")


def _wrap(body: str) -> str:
    return "def launchTestJobs(pipeline, testFilter)\n{\n" + body + "\n}\n"


@pytest.mark.parametrize("body", [
    "x86TestConfigs = [\n" + "// " * 200_000 + '"A-1": ["a", "l0_a", 1, 1],\n]',
    "x86TestConfigs = [" + '"a": [' * 50_000,
    'x86TestConfigs = ["A-1": ["a", "l0_a", ' + "(" * 3000 + "1" + ")" * 3000 + ", 1]]",
    "x86TestConfigs = [" + "[ " * 500_000 + "]",
    "/*" + " x" * 500_000,
    "x86TestConfigs = [\"" + "\\" * 1_000_000,
], ids=["nested-line-comments", "deep-maps", "deep-parens", "token-flood", "comment-flood",
        "backslash-flood"])
def test_groovy_pathological_text_is_bounded(body):
    text = _wrap(body)
    try:
        with no_hang("pathological Groovy"):
            _stages, diags = load_groovy_stages_text(text, "jenkins/L0_Test.groovy")
    except fuzzkit.InputErrorType as exc:  # too many tokens: a clean error naming the file
        assert str(exc).startswith("jenkins/L0_Test.groovy:")
    else:
        assert not fuzzkit.check_diagnostics(diags, "jenkins/L0_Test.groovy", text)
