#!/usr/bin/env bash
# `testdb launch --coverage` of examples/gpu-smoke on real GPUs, and what the map then holds
# (docs/gpu-verification.md, "The measured map"). From the repository root:
#   PYTHONPATH=. bash docs/gpu-run/map/verify-map.sh OUTDIR
set -uo pipefail
OUT=${1:-out/gpu-map}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TOOL=$(pwd)
step() { printf '\n$ %s\n' "$*"; }
export TESTDB_CACHE_DIR="$OUT/cache"

step nvidia-smi -L; nvidia-smi -L
python3 -c 'import sys, torch, coverage, pytest; print("python", sys.version.split()[0], "torch",
torch.__version__, "cuda devices", torch.cuda.device_count(), "coverage", coverage.__version__,
"pytest", pytest.__version__)'

# The example as a checkout of its own (a git repository: the map names the commit).
CO=$(mktemp -d)/gpu-smoke
cp -r examples/gpu-smoke "$CO"
(cd "$CO" && git init -q -b main && git add -A &&
 git -c user.name=t -c user.email=t@e commit -qm "gpu-smoke at the PR's head side")
T=(python3 -m reports --root "$CO")

step testdb launch "'test_gpu_smoke.py::*'" --include-pre-merge --backend local --coverage
"${T[@]}" launch 'test_gpu_smoke.py::*' --include-pre-merge --backend local --coverage \
  --map "$OUT/map.sqlite" --run-dir "$OUT/run"; echo "exit $?"
ls -l "$OUT/run/coverage"

step testdb map stats; "${T[@]}" map stats --map "$OUT/map.sqlite"; echo "exit $?"
"${T[@]}" map stats --map "$OUT/map.sqlite" --format json > "$OUT/map-stats.json"

step testdb where "'test_gpu_smoke.py::*'" --map
"${T[@]}" where 'test_gpu_smoke.py::*' --map "$OUT/map.sqlite" | sed -n '/^Measured/,$p'
"${T[@]}" where 'test_gpu_smoke.py::*' --map "$OUT/map.sqlite" --format json > "$OUT/where.json"

step testdb audit --diff pr.diff "(static)"
"${T[@]}" audit --diff "$CO/pr.diff" -o "$OUT/audit-static.json" | head -3; echo "exit $?"
step testdb audit --diff pr.diff --map
"${T[@]}" audit --diff "$CO/pr.diff" --map "$OUT/map.sqlite" -o "$OUT/audit-map.json"; echo "exit $?"
step testdb report --html report --map
"${T[@]}" report --html "$OUT/report" --map "$OUT/map.sqlite"; echo "exit $?"
grep -o '<g class="reach-row"[^>]*>' "$OUT/report/index.html"
grep -o '<text class="ftotal"[^<]*pre-merge[^<]*' "$OUT/report/index.html"
rm -rf "$OUT/cache" "$OUT/report"
cd "$TOOL"
