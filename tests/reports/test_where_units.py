"""`where` finds unit tests through the `unittest/... -m/-k` selections that select them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

LISTS = "tests/integration/test_lists"


def checkout_with_unit_tests(tmp_path: Path) -> Path:
    root = tmp_path / "co"
    (root / LISTS / "test-db").mkdir(parents=True)
    (root / LISTS / "test-db" / "l0_a10.yml").write_text(textwrap.dedent("""\
        version: 0.0.1
        l0_a10:
        - condition:
            terms: {stage: pre_merge, backend: pytorch}
          tests:
          - unittest/llmapi/test_llm_pytorch.py -m "part3"
          - unittest/llmapi/test_llm_pytorch.py -m "part0"
        - condition:
            terms: {stage: post_merge, backend: pytorch}
          tests:
          - unittest/llmapi -k "not prefix"
        """))
    (root / "ci").mkdir()
    (root / "ci/stages.yml").write_text(textwrap.dedent("""\
        stages:
        - {name: A10-PyTorch-1, platform: a10, context: l0_a10, split_id: 1, splits: 1}
        - {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10}
        """))
    unit = root / "tests/unittest/llmapi"
    unit.mkdir(parents=True)
    (unit / "test_llm_pytorch.py").write_text(textwrap.dedent("""\
        import pytest

        @pytest.mark.part3
        def test_llm_prefix_cache_reuse():
            pass

        @pytest.mark.part1
        def test_other():
            pass
        """))
    (root / "tests/integration/defs").mkdir(parents=True)
    (root / "tests/integration/defs/test_e2e.py").write_text("def test_e2e():\n    pass\n")
    (root / LISTS / "test-db" / "l0_a10.yml").write_text(
        (root / LISTS / "test-db" / "l0_a10.yml").read_text()
        + "- condition:\n    terms: {stage: pre_merge, backend: pytorch}\n"
          "  tests:\n  - test_e2e.py::test_e2e\n")
    return root


def test_where_finds_a_unit_test_through_its_marker_selection(run_cli, tmp_path: Path
                                                              ) -> None:  # type: ignore[no-untyped-def]
    root = checkout_with_unit_tests(tmp_path)
    res = run_cli("--root", str(root), "where", "test_llm_prefix_cache_reuse", "--format",
                  "json")
    assert res.code == 0, res.err
    [t] = json.loads(res.out)["tests"]
    assert t["id"] == "unittest/llmapi/test_llm_pytorch.py::test_llm_prefix_cache_reuse"
    assert t["verdict"] == "pre-merge"
    assert t["via"] == 'unittest/llmapi/test_llm_pytorch.py -m "part3"'
    assert [p["line"] for p in t["placements"]] == [6]
    # test_other carries part1: no pre-merge line selects it; -k "not prefix" runs it post-merge.
    res = run_cli("--root", str(root), "where", "test_other", "--format", "json")
    [t] = json.loads(res.out)["tests"]
    assert t["verdict"] == "post-merge-only" and t["via"] == 'unittest/llmapi -k "not prefix"'


def test_a_pattern_naming_no_unit_test_needs_no_inventory_items(run_cli, tmp_path: Path,
                                                                 monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With tests/unittest present, a pattern that names no unit test is answered from the
    listed ids' records: once the unit-test ids are known, the index is not loaded (the
    inventory is: listed ids are checked against the integration sources); a pattern that
    does name one still goes through the selections."""
    from testdb import index as index_module
    from testdb import stamp

    monkeypatch.setattr(stamp, "RACY_NS", -10**12)  # as a call seconds after the files changed
    root = checkout_with_unit_tests(tmp_path)
    first = run_cli("--root", str(root), "where", "test_e2e", "--format", "json")
    assert first.code == 0, first.err

    def no_index(*args: object, **kwargs: object) -> None:
        raise AssertionError("loaded the index for a pattern that names no unit test")

    real_load = index_module.load_sources
    monkeypatch.setattr(index_module, "load_sources", no_index)
    again = run_cli("--root", str(root), "where", "test_e2e", "--format", "json")
    assert (again.code, again.out) == (first.code, first.out)
    [t] = json.loads(again.out)["tests"]
    assert (t["id"], t["verdict"]) == ("test_e2e.py::test_e2e", "pre-merge")
    monkeypatch.setattr(index_module, "load_sources", real_load)
    res = run_cli("--root", str(root), "where", "test_other", "--format", "json")
    assert json.loads(res.out)["tests"][0]["via"] == 'unittest/llmapi -k "not prefix"'


def test_stages_path_is_relative_to_the_current_directory(run_cli, tmp_path: Path,
                                                           monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`testdb --root ../x --stages ../x/ci/stages.yml` (the issue's own command) must read the
    table the user named, not `../x/../x/ci/stages.yml` under the root."""
    import os

    from tests.conftest import CORPUS

    monkeypatch.chdir(tmp_path)
    root = os.path.relpath(CORPUS, tmp_path)
    res = run_cli("--root", root, "--stages", f"{root}/ci/stages.yml", "where",
                  "TestLlama3_1_8BInstruct::test_chunked_prefill[attn_backend=FLASHINFER]",
                  "--format", "json")
    assert res.code == 0, res.err
    [t] = json.loads(res.out)["tests"]
    assert t["verdict"] == "gated"
