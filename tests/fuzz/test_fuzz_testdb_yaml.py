"""test-db YAML (L0 and QA side) under mutation: every case parses or fails with path:line."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import pytest
from hypothesis import given

from testdb.testdb_yaml import load_testdb_text
from tests.fuzz import fuzzkit
from tests.fuzz.conftest import cases, fuzz_settings, run_bounded
from tests.hangguard import HANG_S, no_hang

PATH = "tests/integration/test_lists/test-db/l0_fuzz.yml"


@fuzz_settings(40)
@given(case=cases("testdb_yaml"))
def test_l0_yaml_mutations(case, ws):
    run_bounded("testdb_yaml", case, ws)


@fuzz_settings(25)
@given(case=cases("qa_yaml"))
def test_qa_yaml_mutations(case, ws):
    run_bounded("qa_yaml", case, ws)


@fuzz_settings(15)
@given(case=cases("testdb_yaml"))
def test_l0_yaml_mutations_through_the_cli(case, ws):
    run_bounded("testdb_yaml", case, ws, mode="cli")


def _bomb(levels: int, width: int) -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]"
              for i in range(1, levels)]
    return "\n".join(lines) + f"\nctx:\n- condition: {{}}\n  tests: *l{levels - 1}\n"


@pytest.mark.parametrize("text", [
    _bomb(9, 9),  # the classic billion laughs: 9**9 strings by reference
    _bomb(12, 10),
    "ctx:\n- condition: {terms: &t {a: b}}\n  tests: &x [a.py::b, a.py::c]\n"
    "ctx2:\n- condition: {terms: *t}\n  tests: *x\n",  # small, legal reuse stays fine
    "a: &a [*a]\n",
    "m: &m {a: 1}\nctx: {<<: [*m, *m, *m]}\n",
], ids=["billion-laughs", "12-levels", "legal-reuse", "recursive-alias", "merge-keys"])
def test_alias_expansion_is_bounded(text):
    tracemalloc.start()
    try:
        with no_hang("alias expansion"):
            res = load_testdb_text(text, PATH)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * fuzzkit.MB
    assert not fuzzkit.check_diagnostics(res.diagnostics, PATH, text)


@pytest.mark.parametrize("unit", ["[", "{a: ", "- ", "? ", "[a, {b: "])
@pytest.mark.parametrize("n", [600, 5_000, 100_000])
def test_deep_nesting_is_refused_in_a_child_process(unit, n):
    """libyaml's composer recurses in C: past ~30,000 levels it kills the process, so this runs
    in a child; before the depth guard it was also quadratic (100,000 `[` took minutes)."""
    code = (f"from testdb.testdb_yaml import load_testdb_text\n"
            f"r = load_testdb_text({unit!r} * {n} + 'x', 'deep.yml')\n"
            f"print(r.diagnostics[0] if r.diagnostics else 'no diagnostic')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=HANG_S)  # the hang guard: a child past it is killed
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("deep.yml:"), proc.stdout


@pytest.mark.parametrize("seed", fuzzkit.formats()["testdb_yaml"].seeds[::3]
                         + fuzzkit.formats()["qa_yaml"].seeds[::4],
                         ids=lambda p: p.rsplit("/", 1)[-1])
def test_every_real_file_survives_crlf_bom_tabs_and_a_cut_multibyte_char(seed, ws):
    import random

    fmt = fuzzkit.formats()["testdb_yaml"]
    raw = fuzzkit.seed_bytes(seed, fmt)
    for name in ("newlines", "bom", "tabs", "truncate", "invalid_utf8"):
        for k in range(2):
            data = fuzzkit.MUTATORS[name](raw, random.Random(k), fmt)
            outcome, detail = fuzzkit.run_parser(fmt, data, ws, random.Random(k))
            assert outcome in ("ok", "error"), f"{name}: {detail}"
