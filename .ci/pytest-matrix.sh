#!/usr/bin/env bash
# The static inventory follows the installed pytest's id and keyword rules
# (testdb/inventory/pytest_rules.py). For each supported pytest minor, in a fresh venv with
# only that pytest (plus hypothesis and parameterized, which the cross-check tests use), run
# the tests that compare the static expansion with real `pytest --collect-only`.
#
# usage: .ci/pytest-matrix.sh [MINOR ...]     (default: 8.3 8.4 9.0 9.1 9.2)
# env:   PYTEST_MATRIX_DIR  where the venvs go (default: a temp dir, removed at the end)
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

declare -a summary
failed=0
for v in "${versions[@]}"; do
    venv=$work/pytest-$v
    t0=$(date +%s)
    rm -rf "$venv"
    if ! "$python" -m venv "$venv" ||
        ! "$venv/bin/python" -m pip install -q --disable-pip-version-check \
            "pytest==$v.*" hypothesis parameterized -e "$root"; then
        echo "pytest-matrix: pytest $v: cannot set up the venv in $venv;" \
             "check the index ('pip download pytest==$v.*') and retry" >&2
        exit 2
    fi
    got=$("$venv/bin/python" -c 'import pytest; print(pytest.__version__)')
    case $got in
        "$v".*) ;;
        *) echo "pytest-matrix: asked for pytest $v.*, the venv has $got" >&2; exit 2 ;;
    esac
    t1=$(date +%s)
    # PYTHONPATH: this checkout first, whatever the caller's shell points at
    if PYTHONPATH=$root "$venv/bin/python" -m pytest -q -p no:cacheprovider -p no:randomly \
            "${tests[@]}"; then
        status=passed
    else
        status=FAILED
        failed=1
    fi
    t2=$(date +%s)
    summary+=("pytest $got: $status (install $((t1 - t0)) s, tests $((t2 - t1)) s)")
done

echo
echo "pytest-matrix summary:"
printf '  %s\n' "${summary[@]}"
exit "$failed"
