"""Benchmark ``testdb lint``: one big real-shaped test file with many dead ids, and the corpus.

    python benchmarks/bench_lint.py [--runs 5] [--keep DIR]

The case imitates TensorRT-LLM's ``accuracy/test_llm_api_pytorch.py`` checked against lists
from other commits: one test file of ~1,800 parametrizations from stacked
``parametrize_with_ids`` (model classes, a few test methods each), test-db, QA lists and waives
naming ~1,100 distinct ids of which ~450 name no test (a wrong parameter id, the bare name of a
parametrized test, a renamed function, a renamed class). The generator is this script's own and
deterministic.

Prints, as medians of ``--runs`` runs of ``testdb --root DIR lint`` (a subprocess, process start
to exit, caches warm after one untimed run): the case and ``data/trtllm``. Target for the case:
2 s warm; the corpus: no slower than before.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE_TARGET_S = 2.0
FILE = "accuracy/test_llm_api_pytorch.py"

CONFTEST = '''
import pytest


def parametrize_with_ids(argnames, argvalues, **kwargs):
    names = [n.strip() for n in argnames.split(",")]
    ids = []
    for case in argvalues:
        case = case if isinstance(case, (list, tuple)) else (case,)
        ids.append("-".join(f"{n}={v}" for n, v in zip(names, case)))
    return pytest.mark.parametrize(argnames, argvalues, ids=ids, **kwargs)
'''

MODELS = ["Llama3_1_8B", "Llama3_2_1B", "Llama3_3_70B", "Llama4Maverick", "Llama4Scout",
          "Mistral7B", "MistralSmall24B", "Mixtral8x7B", "Gemma3_1B", "Gemma3_27B",
          "Qwen2_7B", "Qwen3_8B", "Qwen3_30B_A3B", "Qwen3_235B_A22B", "Qwen3Next80B",
          "DeepSeekV3Lite", "DeepSeekR1", "DeepSeekV32", "Phi4MiniInstruct", "Phi4MM",
          "NemotronH", "NemotronNano", "NemotronSuper", "NemotronUltra", "GPTOSS",
          "Kimi", "GLM4", "Minitron4B", "StarCoder2", "EXAONE4", "Bielik", "SeedOSS"]
SUFFIXES = ["", "Instruct", "Base", "_FP8", "_NVFP4", "Chat"]
METHODS = ["test_auto_dtype", "test_fp8", "test_nvfp4", "test_bfloat16", "test_fp8_4gpus",
           "test_nvfp4_4gpus", "test_chunked_prefill", "test_eagle3", "test_ngram",
           "test_fp8_block_scales", "test_w4a8_mxfp4", "test_guided_decoding", "test_mtp"]
DIMS: list[tuple[str, list[object]]] = [
    ("attn_backend", ["TRTLLM", "FLASHINFER"]), ("cuda_graph", [False, True]),
    ("overlap_scheduler", [False, True]), ("torch_compile", [False, True]),
    ("mtp_nextn", [0, 2]), ("fp8kv", [False, True]),
    ("moe_backend", ["CUTLASS", "TRTLLM", "CUTEDSL"]), ("enable_chunked_prefill", [False, True]),
    ("tp_size,pp_size,ep_size", [(4, 1, 1), (4, 1, 4), (2, 2, 1)]),
]


def _ids(dims: list[tuple[str, list[object]]]) -> list[str]:
    """Stacked parametrize: the decorator nearest the function gives the first id piece."""
    out = [""]
    for names, values in reversed(dims):
        pieces = ["-".join(f"{n.strip()}={v}" for n, v in zip(
            names.split(","), v if isinstance(v, tuple) else (v,), strict=True))
            for v in values]
        out = [f"{a}-{p}" if a else p for a in out for p in pieces]
    return out


def generate(root: Path, seed: int = 2026, target: int = 1800) -> dict[str, int]:
    """Write the case under ``root``; returns its counts."""
    rng = random.Random(seed)
    defs = root / "tests" / "integration" / "defs"
    (defs / "accuracy").mkdir(parents=True, exist_ok=True)
    (defs / "conftest.py").write_text(CONFTEST)
    src = ["import pytest", "", "from ..conftest import parametrize_with_ids", ""]
    real: dict[str, list[str]] = {}  # base -> its ids (the bare base for a plain function)
    total = 0
    classes = [f"Test{m}{s}" for m in MODELS for s in SUFFIXES]
    rng.shuffle(classes)
    for cls in classes:
        if total >= target:
            break
        src += [f"class {cls}:", f'    MODEL_NAME = "{cls[4:]}"', ""]
        for meth in rng.sample(METHODS, k=rng.randint(3, 6)):
            dims = rng.sample(DIMS, k=rng.choice([0, 1, 2, 2, 3, 3, 4]))
            for names, values in dims:
                src.append(f"    @parametrize_with_ids({names!r}, {values!r})")
            args = ", ".join(["self", *(n.strip() for d, _ in dims for n in d.split(","))])
            src += [f"    def {meth}({args}):", "        pass", ""]
            base = f"{FILE}::{cls}::{meth}"
            real[base] = [f"{base}[{i}]" for i in _ids(dims)] if dims else [base]
            total += len(real[base])
    (defs / FILE).write_text("\n".join(src) + "\n")

    every = [i for ids in real.values() for i in ids]
    live = rng.sample(every, 650)
    dead = [_dead(rng, rng.choice(every), real) for _ in range(490)]
    dead = list(dict.fromkeys(d for d in dead if d not in set(every)))
    lists = root / "tests" / "integration" / "test_lists"
    (lists / "test-db").mkdir(parents=True, exist_ok=True)
    (lists / "qa").mkdir(exist_ok=True)
    pool = live + dead
    rng.shuffle(pool)
    tdb, qa, waives = pool[:700], pool[700:1000], pool[1000:]
    waives += rng.sample(live, 40)
    half = len(tdb) // 2
    (lists / "test-db" / "l0_h100.yml").write_text(
        "version: 0.0.1\nl0_h100:\n"
        + _block("pre_merge", tdb[:half]) + _block("post_merge", tdb[half:]))
    (lists / "qa" / "llm_function_core.txt").write_text("\n".join(qa) + "\n")
    (lists / "waives.txt").write_text("".join(f"{w} SKIP (https://nvbugs/{n})\n"
                                              for n, w in enumerate(waives)))
    (root / "ci").mkdir(exist_ok=True)
    (root / "ci" / "stages.yml").write_text(
        "stages:\n"
        "- {name: H100_PCIe-PyTorch-1, platform: h100, context: l0_h100, split_id: 1, splits: 2}\n"
        "- {name: H100_PCIe-PyTorch-2, platform: h100, context: l0_h100, split_id: 2, splits: 2}\n"
        "- {name: H100_PCIe-PyTorch-Post-Merge-1, platform: h100, context: l0_h100}\n")
    return {"parametrizations": total, "functions": len(real), "listed": len(pool),
            "dead": len(dead)}


def _block(stage: str, ids: list[str]) -> str:
    return ("- condition:\n    ranges:\n      system_gpu_count:\n        gte: 1\n        lte: 1\n"
            f"    terms:\n      stage: {stage}\n      backend: pytorch\n  tests:\n"
            + "".join(f"  - {i}\n" for i in ids))


def _dead(rng: random.Random, tid: str, real: dict[str, list[str]]) -> str:
    """A stale name for a real id, of the kinds lists from other commits hold."""
    base, _, params = tid.partition("[")
    file, cls, meth = base.split("::")
    kind = rng.random()
    if params and kind < 0.4:  # a wrong parameter id: a value, a name, or the order changed
        pieces = params[:-1].split("-")
        i = rng.randrange(len(pieces))
        name, _, value = pieces[i].partition("=")
        pieces[i] = rng.choice([f"{name}={value}X", f"{name}s={value}", f"{name}=None"])
        if len(pieces) > 1 and rng.random() < 0.3:
            pieces.reverse()
        return f"{base}[{'-'.join(pieces)}]"
    if params and kind < 0.6:  # the bare name of a parametrized test
        return base
    if kind < 0.8:  # a renamed function
        new = rng.choice([meth + "_2gpus", meth.replace("test_", "test_llm_"), meth[:-1]])
        return f"{file}::{cls}::{new}" + (f"[{params}" if params else "")
    new_cls = rng.choice([cls + "Instruct", cls.replace("_", ""), cls + "_V2"])  # renamed class
    return f"{file}::{new_cls}::{meth}" + (f"[{params}" if params else "")


def _median(runs: int, cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    times, out = [], ""
    for _ in range(runs):
        t = time.perf_counter()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t)
        out = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
    return statistics.median(times), min(times), out


def testdb_command() -> list[str]:
    here = Path(sys.executable).with_name("testdb")
    found = str(here) if here.exists() else shutil.which("testdb")
    return [found] if found else [sys.executable, "-m", "reports"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", help="write the case to this directory and keep it")
    ap.add_argument("--no-corpus", action="store_true", help="time the generated case only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="testdb-bench-lint-")
    try:
        case = Path(args.keep) if args.keep else Path(scratch) / "case"
        counts = generate(case)
        env = dict(os.environ, TESTDB_CACHE_DIR=os.path.join(scratch, "cache"), NO_COLOR="1")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        res: dict[str, object] = {"case": counts}
        targets = [("case", str(case))]
        if not args.no_corpus:
            targets.append(("corpus", str(REPO / "data" / "trtllm")))
        for name, root in targets:
            cmd = [*testdb_command(), "--root", root, "lint", "--fail-on", "never"]
            t = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=False)  # fills the caches
            cold = time.perf_counter() - t
            med, low, summary = _median(args.runs, cmd, env)
            res[name] = {"warm_median_s": med, "warm_min_s": low, "first_run_s": cold,
                         "summary": summary}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"case: one file, {counts['parametrizations']} parametrizations of "
          f"{counts['functions']} functions; {counts['listed']} listed ids, "
          f"{counts['dead']} naming no test; medians of {args.runs} runs")
    for name, _ in targets:
        r = res[name]
        assert isinstance(r, dict)
        note = ""
        if name == "case":
            note = f"  target {CASE_TARGET_S:.0f} s: " + (
                "met" if r["warm_median_s"] <= CASE_TARGET_S else "OVER")
        print(f"  lint {name:<7} warm {r['warm_median_s']:7.2f} s (min {r['warm_min_s']:.2f}); "
              f"first run {r['first_run_s']:.2f} s{note}")
        print(f"      {r['summary']}")


if __name__ == "__main__":
    main()
