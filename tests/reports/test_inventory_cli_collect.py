"""`inventory --collect` on the bundled examples: collection with the defaults works, and a
module pytest skips whole is said to have collected nothing (its items stay static)."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import EXAMPLE, REPO

SMOKE = os.path.join(REPO, "examples", "gpu-smoke")


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is installed: the smoke module is not skipped")
def test_a_module_pytest_skips_is_reported_not_passed_off_as_collected(
        run_cli: Callable[..., Any]) -> None:
    res = run_cli("--root", SMOKE, "inventory", "--collect")
    assert res.code == 0
    assert ("note: collection found nothing in test_gpu_smoke.py: pytest skipped it "
            "(could not import 'torch'") in res.err
    assert "its 8 item(s) below are the static ones" in res.err  # ids= lambdas evaluated
    data = json.loads(run_cli("--root", SMOKE, "inventory", "--collect", "--format",
                              "json").out)
    assert [(s["file"], s["static_items"]) for s in data["collection"]["skipped"]] == [
        ("test_gpu_smoke.py", 8)]
    assert {i["source"] for i in data["items"]} == {"static"}


def test_the_flashinfer_example_collects_with_the_defaults(run_cli: Callable[..., Any]) -> None:
    static = json.loads(run_cli("--root", EXAMPLE, "inventory", "--format", "json").out)
    res = run_cli("--root", EXAMPLE, "inventory", "--collect", "--format", "json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    accuracy = "accuracy/test_llm_api_pytorch.py"
    collected = sorted(i["nodeid"] for i in data["items"] if i["source"] == "collected")
    # pytest's own ids (rooted at tests/integration/defs, as CI runs it) equal the static ones
    assert collected == sorted(i["nodeid"] for i in static["items"]
                               if i["file"] == accuracy)
    assert len(collected) == 6 and data["collection"]["skipped"] == []
