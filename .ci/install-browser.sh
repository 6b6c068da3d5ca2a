#!/usr/bin/env bash
# Install what the browser tests (pytest -m browser) and benchmarks/bench_report.py need:
# Debian's headless Chromium (/usr/bin/chromium) and the playwright Python package.
#
#   .ci/install-browser.sh          install what is missing; print what is there
#
# Safe to repeat: nothing is installed twice. Playwright's own browser downloads are never used
# (the tests launch /usr/bin/chromium through executable_path), so this works behind a registry
# mirror without internet access to Playwright's CDN. Needs root for apt-get (or sudo).
#
# Environment: PYTHON (default python3) the interpreter whose environment gets playwright;
# TESTDB_CHROMIUM (default /usr/bin/chromium) where the browser is expected.
set -euo pipefail

PYTHON=${PYTHON:-python3}
CHROMIUM=${TESTDB_CHROMIUM:-/usr/bin/chromium}
export DEBIAN_FRONTEND=noninteractive
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n "$@"
    else
        echo "install-browser: need root (or sudo) to run: $*" >&2
        exit 2
    fi
}

if [ -x "$CHROMIUM" ]; then
    echo "install-browser: chromium already installed ($CHROMIUM)"
else
    echo "install-browser: installing Debian's chromium"
    # Only refresh the package lists when apt does not know the package yet.
    if ! apt-cache show chromium >/dev/null 2>&1; then
        as_root apt-get update -q
    fi
    as_root apt-get install -y -q --no-install-recommends chromium fonts-liberation
fi

if "$PYTHON" -c "import playwright" >/dev/null 2>&1; then
    echo "install-browser: playwright already installed for $PYTHON"
else
    echo "install-browser: installing playwright (pip) for $PYTHON"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "playwright>=1.40"
fi

"$CHROMIUM" --version 2>/dev/null || { echo "install-browser: $CHROMIUM does not run" >&2; exit 1; }
"$PYTHON" -c "import playwright, importlib.metadata as m; print('playwright', m.version('playwright'))"
