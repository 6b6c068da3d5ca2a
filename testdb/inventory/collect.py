"""Ask pytest itself: run ``pytest --collect-only`` with our plugin and read back the items."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import testdb
from testdb.errors import ExternalError
from testdb.inventory.model import Inventory, InventoryItem

PLUGIN = "testdb.inventory.plugin"
_TAIL_LINES = 40
_NO_TESTS_COLLECTED = 5


@dataclass(frozen=True)
class Collection:
    """What pytest collected, and the test files it skipped whole (file, reason): for those
    collection says nothing, and a merged inventory keeps their static items."""

    inventory: Inventory
    skipped: tuple[tuple[str, str], ...] = ()


def collect(cwd: str, pytest_args: Sequence[str], prefix: str = "", *,
            python: str | None = None, env: Mapping[str, str] | None = None,
            timeout: float | None = 1800, import_root: str | None = None) -> Inventory:
    """The items ``python -m pytest --collect-only <pytest_args>`` collects in ``cwd``."""
    return collect_report(cwd, pytest_args, prefix, python=python, env=env, timeout=timeout,
                          import_root=import_root).inventory


def collect_report(cwd: str, pytest_args: Sequence[str], prefix: str = "", *,
                   python: str | None = None, env: Mapping[str, str] | None = None,
                   timeout: float | None = 1800, import_root: str | None = None) -> Collection:
    """The items ``python -m pytest --collect-only <pytest_args>`` collects in ``cwd``, and the
    modules it skipped.

    ``pytest_args`` pass through untouched (paths, ``-p stubify_bindings``, ``-k``...).
    ``prefix`` goes before each node id and file (``unittest/`` for items collected from
    ``tests/unittest``). ``import_root`` (the checkout) goes at the end of ``sys.path``, so the
    project's own packages import from the checkout when they are not installed. Raises
    ExternalError with the tail of pytest's output when collection fails; no test collected
    is an empty inventory, not an error.
    """
    with tempfile.TemporaryDirectory(prefix="testdb-collect-") as tmp:
        out = os.path.join(tmp, "inventory.json")
        cmd = [python or sys.executable, "-m", "pytest", "--collect-only", "-q",
               "-p", PLUGIN, f"--testdb-inventory={out}", *pytest_args]
        if import_root:
            cmd.insert(cmd.index(f"--testdb-inventory={out}") + 1,
                       f"--testdb-import-root={os.path.abspath(import_root)}")
        run_env = dict(os.environ if env is None else env)
        # The plugin must import from this checkout of testdb, whatever the target's sys.path.
        here = str(Path(testdb.__file__).resolve().parent.parent)
        run_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (here, run_env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=run_env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ExternalError(f"cannot run pytest collection in {cwd}: {e}") from e
        output = (proc.stdout or "") + (proc.stderr or "")
        if proc.returncode not in (0, _NO_TESTS_COLLECTED) or not os.path.exists(out):
            if proc.returncode == _NO_TESTS_COLLECTED and not os.path.exists(out):
                return Collection(Inventory())
            tail = "\n".join(output.rstrip().splitlines()[-_TAIL_LINES:])
            raise ExternalError(
                f"pytest collection failed in {cwd} (exit {proc.returncode}): "
                f"{' '.join(cmd[1:])}\n{tail}",
                hint="fix the collection errors above, or pass the options the suite needs "
                     "(e.g. -p stubify_bindings)")
        with open(out, encoding="utf-8") as f:
            data = json.load(f)
    skipped = tuple((prefix + str(d.get("nodeid", "")), str(d.get("reason", "")))
                    for d in data.get("skipped", ()) if isinstance(d, dict))
    return Collection(inventory_from_plugin_json(data, prefix), skipped)


def inventory_from_plugin_json(data: Mapping[str, object], prefix: str = "") -> Inventory:
    """Turn the plugin's JSON into collected inventory items, ids prefixed."""
    rootdir = str(data.get("rootdir", ""))
    raw = data.get("items", [])
    assert isinstance(raw, list)
    items = []
    for d in raw:
        file = prefix + str(d["file"])
        items.append(InventoryItem(
            nodeid=prefix + str(d["nodeid"]), file=file, line=int(d["line"]),
            function=str(d["function"]), classes=tuple(d.get("classes", ())),
            params=d.get("params"), markers=tuple(d.get("markers", ())),
            keywords=tuple(d.get("keywords", ())), indeterminate=False, source="collected",
            path=os.path.join(rootdir, str(d["file"])) if rootdir else file))
    return Inventory(items)
