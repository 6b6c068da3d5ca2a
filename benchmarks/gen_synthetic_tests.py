"""Write a synthetic test tree the size of TensorRT-LLM's, for timing the static inventory.

    python benchmarks/gen_synthetic_tests.py OUTDIR --files 2000

OUTDIR gets ``tests/integration/defs`` (with a ``conftest.py`` holding ``parametrize_with_ids``)
and ``tests/unittest``; about 80% of the files are integration modules. Each module mixes the
constructs real test modules use: stacked ``parametrize_with_ids``, ``pytest.mark.parametrize``
with ``ids=`` and ``pytest.param``, class and module marks, module constants. The generator is
deterministic for a given ``--seed``. It prints the number of files and parametrizations.
"""

from __future__ import annotations

import argparse
import random
import textwrap
from pathlib import Path

CONFTEST = '''
import pytest
from _pytest.mark.structures import ParameterSet


def parametrize_with_ids(argnames, argvalues, **kwargs):
    if isinstance(argnames, str):
        argname_list = [n.strip() for n in argnames.split(",")]
    else:
        argname_list = argnames
    case_ids = []
    for case_argvalues in argvalues:
        if isinstance(case_argvalues, ParameterSet):
            case_argvalues = case_argvalues.values
        elif case_argvalues is None or isinstance(case_argvalues, (str, float, int, bool)):
            case_argvalues = (case_argvalues,)
        case_ids.append("-".join(f"{n}={v}" for n, v in zip(argname_list, case_argvalues)))
    return pytest.mark.parametrize(argnames, argvalues, ids=case_ids, **kwargs)
'''

BACKENDS = ["TRTLLM", "FLASHINFER", "VANILLA"]
AREAS = ["accuracy", "disaggregated", "examples", "llmapi", "perf", "triton_server", "cpp"]
UNIT_AREAS = ["_torch/attention", "_torch/modeling", "_torch/speculative", "llmapi",
              "executor", "bindings"]


def _method(rng: random.Random, idx: int) -> tuple[str, int]:
    """One parametrized test method; returns its source and its number of items."""
    stack = []
    count = 1
    names = []
    choices: list[tuple[str, list[object]]] = [
        ("torch_compile", [False, True]),
        ("attn_backend", list(BACKENDS[: rng.randint(2, 3)])),
        ("fp8kv", [False, True]),
        ("cuda_graph", [False, True]),
        ("overlap_scheduler", [False, True]),
        ("mtp_nextn", [0, 2]),
    ]
    for name, values in rng.sample(choices, k=rng.randint(1, 3)):
        stack.append(f"    @parametrize_with_ids({name!r}, {values!r})")
        count *= len(values)
        names.append(name)
    if rng.random() < 0.3:
        stack.append('    @pytest.mark.parametrize("tp_size,pp_size", [(4, 1), (2, 2), (1, 4)], '
                     'ids=["tp4", "tp2pp2", "pp4"])')
        count *= 3
        names += ["tp_size", "pp_size"]
    if rng.random() < 0.2:
        stack.append('    @pytest.mark.parametrize("model", [pytest.param("llama", id="llama"), '
                     'pytest.param("mistral", marks=pytest.mark.skip_less_device(2))])')
        count *= 2
        names.append("model")
    if rng.random() < 0.3:
        stack.append("    @pytest.mark.skip_less_device(4)")
    args = ", ".join(["self", *names])
    body = "\n".join(stack) + f"\n    def test_case_{idx}({args}):\n        assert True\n"
    return body, count


def _module(rng: random.Random, n_classes: int, unit: bool) -> tuple[str, int]:
    parts = ["import pytest", ""]
    if not unit:
        parts.insert(1, "from defs.conftest import parametrize_with_ids")
    else:
        parts.insert(1, "from utils.util import parametrize_with_ids")
    models = [f"model_{i}" for i in range(rng.randint(2, 4))]
    parts.append(f"MODELS = {models!r}")
    if unit:
        parts.append(f"pytestmark = pytest.mark.part{rng.randint(0, 3)}")
    parts.append("")
    total = 0
    for c in range(n_classes):
        parts.append(f"\n@pytest.mark.timeout({rng.randint(10, 100)})")
        parts.append(f"class TestSynthetic{c}:")
        for m in range(rng.randint(2, 5)):
            body, count = _method(rng, m)
            parts.append(body)
            total += count
        parts.append('    @pytest.mark.parametrize("model", MODELS)\n'
                     "    def test_models(self, model):\n        pass\n")
        total += len(models)
    parts.append("\ndef test_module_level():\n    pass\n")
    total += 1
    return "\n".join(parts), total


def generate(out: Path, files: int, seed: int = 0) -> tuple[int, int]:
    rng = random.Random(seed)
    defs = out / "tests" / "integration" / "defs"
    unit_root = out / "tests" / "unittest"
    defs.mkdir(parents=True, exist_ok=True)
    (defs / "conftest.py").write_text(textwrap.dedent(CONFTEST).lstrip())
    total = 0
    for i in range(files):
        unit = i % 5 == 4
        area = rng.choice(UNIT_AREAS if unit else AREAS)
        folder = (unit_root if unit else defs) / area / f"group{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        text, count = _module(rng, rng.randint(1, 2), unit)
        (folder / f"test_synthetic_{i:05d}.py").write_text(text)
        total += count
    return files, total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n_files, n_items = generate(args.outdir, args.files, args.seed)
    print(f"wrote {n_files} test files, {n_items} parametrizations under {args.outdir}")


if __name__ == "__main__":
    main()
