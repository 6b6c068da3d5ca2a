#!/usr/bin/env bash
# Prove the audit-to-launch path on real GPUs (see docs/gpu-verification.md for a recorded run).
#   bash examples/gpu-smoke/verify.sh OUTDIR
# Runs from the repository root; needs python3 with torch + CUDA, and testdb importable
# (installed, or PYTHONPATH=. with its dependencies).
set -uo pipefail
OUT=${1:-out/gpu-smoke}
mkdir -p "$OUT"
T=(python3 -m reports --root examples/gpu-smoke)
step() { printf '\n$ %s\n' "$*"; }

step nvidia-smi -L; nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "cuda devices", torch.cuda.device_count())'

step testdb audit --diff examples/gpu-smoke/pr.diff
"${T[@]}" audit --diff examples/gpu-smoke/pr.diff -o "$OUT/audit.json"; echo "exit $?"

step testdb launch --from audit.json --dry-run
"${T[@]}" launch --from "$OUT/audit.json" --dry-run; echo "exit $?"

step testdb launch --from audit.json --backend local   "(all GPUs)"
s=$(date +%s.%N)
"${T[@]}" launch --from "$OUT/audit.json" --backend local --run-dir "$OUT/run-all-gpus"; echo "exit $?"
e=$(date +%s.%N); echo "wall $(python3 -c "print(round($e-$s,2))") s"
cp "$OUT/run-all-gpus/results.json" "$OUT/results-all-gpus.json"

step CUDA_VISIBLE_DEVICES=0 testdb launch --from audit.json --backend local   "(one GPU)"
CUDA_VISIBLE_DEVICES=0 "${T[@]}" launch --from "$OUT/audit.json" --backend local \
  --run-dir "$OUT/run-one-gpu"; echo "exit $?"
cp "$OUT/run-one-gpu/results.json" "$OUT/results-one-gpu.json"

step testdb launch 'test_gpu_smoke.py::*' --include-pre-merge --backend local
"${T[@]}" launch 'test_gpu_smoke.py::*' --include-pre-merge --backend local \
  --run-dir "$OUT/run-every-test"; echo "exit $?"
cp "$OUT/run-every-test/results.json" "$OUT/results-every-test.json"

# Launch overhead per test: wall time of `testdb launch` minus the wall time of the test
# process it started (the backend's duration_s), and the same pytest command run directly.
step overhead: test_gpu_smoke.py::test_device_visible, 5 runs each
python3 - "$OUT" <<'PY'
import json, statistics, subprocess, sys, time
out = sys.argv[1]
defs = "examples/gpu-smoke/tests/integration/defs"
direct, launched, child, overhead = [], [], [], []
for i in range(5):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "test_gpu_smoke.py::test_device_visible", "--junit-xml",
                    f"/tmp/direct-{i}.xml"], cwd=defs, check=True, capture_output=True)
    direct.append(time.perf_counter() - t)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "reports", "--root", "examples/gpu-smoke", "launch",
                    "test_gpu_smoke.py::test_device_visible", "--include-pre-merge",
                    "--backend", "local", "--run-dir", f"/tmp/launch-{i}"], check=True,
                   capture_output=True)
    launched.append(time.perf_counter() - t)
    res = json.load(open(f"/tmp/launch-{i}/results.json"))["results"][0]
    child.append(res["duration_s"])
    overhead.append(launched[-1] - res["duration_s"])
m = statistics.median
print(f"direct pytest: median {m(direct):.2f} s (runs {', '.join(f'{x:.2f}' for x in direct)})")
print(f"testdb launch: median {m(launched):.2f} s; its test process {m(child):.2f} s")
print(f"launch overhead per test (launch wall - test process wall): median {m(overhead):.2f} s "
      f"(runs {', '.join(f'{x:.2f}' for x in overhead)})")
json.dump({"direct_s": direct, "launched_s": launched, "child_s": child,
           "overhead_s": overhead}, open(f"{out}/overhead.json", "w"))
PY
