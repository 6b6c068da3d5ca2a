#!/usr/bin/env bash
# The static inventory follows the installed pytest's id and keyword rules
# (testdb/inventory/pytest_rules.py). For each supported pytest minor, in a fresh venv with
# only that pytest (plus hypothesis and parameterized, which the cross-check tests use), run
# the tests that compare the static expansion with real `pytest --collect-only`.
#
# usage: .ci/pytest-matrix.sh [MINOR ...]     (default: 8.3 8.4 9.0 9.1 9.2)
# .ci/run passes the minors older than the one its main run installs (the newest).
# env:   PYTEST_MATRIX_JOBS  versions at a time (default 2)
#        PYTEST_MATRIX_DIR  where the venvs go (default: a temp dir, removed at the end)
#        PYTHON             the interpreter for the venvs (default: python3)
# Exit 0 when every version passes; 1 when one fails; 2 when a venv cannot be set up.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
root=$PWD
python=${PYTHON:-python3}
if [ "$#" -gt 0 ]; then versions=("$@"); else versions=(8.3 8.4 9.0 9.1 9.2); fi

tests=(
    tests/testdb/inventory/test_inventory_crosscheck.py  # static == collected, per construct
    tests/testdb/inventory/test_inventory_idfn.py        # ids= callables, per-version rules
    tests/testdb/inventory/test_inventory_ids.py         # restated id rules vs IdMaker
    tests/testdb/inventory/test_inventory_select.py      # -k/-m selections vs pytest's
    tests/testdb/inventory/test_inventory_collect.py     # the collection plugin
)

if [ -n "${PYTEST_MATRIX_DIR:-}" ]; then
    work=$PYTEST_MATRIX_DIR
    mkdir -p "$work" || exit 2
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/pytest-matrix.XXXXXX") || exit 2
    trap 'rm -rf "$work"' EXIT
fi

# One version's venv and tests; its output goes to $work/pytest-$v.log, its status line to
# $work/pytest-$v.status. Exit 2 when the venv cannot be set up, 1 when its tests fail.
one() {
    local v=$1 venv=$work/pytest-$1 t0 t1 t2 got status
    t0=$(date +%s)
    rm -rf "$venv"
    if ! "$python" -m venv "$venv" ||
        ! "$venv/bin/python" -m pip install -q --disable-pip-version-check \
            "pytest==$v.*" hypothesis parameterized -e "$root"; then
        echo "pytest-matrix: pytest $v: cannot set up the venv in $venv;" \
             "check the index ('pip download pytest==$v.*') and retry" >&2
        return 2
    fi
    got=$("$venv/bin/python" -c 'import pytest; print(pytest.__version__)')
    case $got in
        "$v".*) ;;
        *) echo "pytest-matrix: asked for pytest $v.*, the venv has $got" >&2; return 2 ;;
    esac
    t1=$(date +%s)
    # PYTHONPATH: this checkout first, whatever the caller's shell points at
    if PYTHONPATH=$root "$venv/bin/python" -m pytest -q -p no:cacheprovider -p no:randomly \
            "${tests[@]}"; then
        status=passed
    else
        status=FAILED
    fi
    t2=$(date +%s)
    echo "pytest $got: $status (install $((t1 - t0)) s, tests $((t2 - t1)) s)" \
        > "$work/pytest-$v.status"
    [ "$status" = passed ]
}

# The versions run side by side (PYTEST_MATRIX_JOBS at a time, default 2: most of a venv's
# time is its install), each into its own log, printed whole when it ends.
jobs_max=${PYTEST_MATRIX_JOBS:-2}
declare -A pids
failed=0
setup_failed=0
for v in "${versions[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
    one "$v" > "$work/pytest-$v.log" 2>&1 &
    pids[$v]=$!
done
for v in "${versions[@]}"; do
    wait "${pids[$v]}"
    rc=$?
    echo "=== pytest $v (exit $rc)"
    cat "$work/pytest-$v.log"
    [ "$rc" -eq 2 ] && setup_failed=1
    [ "$rc" -ne 0 ] && failed=1
done

echo
echo "pytest-matrix summary:"
for v in "${versions[@]}"; do
    cat "$work/pytest-$v.status" 2>/dev/null || echo "pytest $v: no venv (see its log above)"
done | sed 's/^/  /'
[ "$setup_failed" -eq 1 ] && exit 2
exit "$failed"
