"""``testdb inventory``: every test parametrization that exists, statically or from pytest."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from reports.common import dump_json, format_option, plural
from testdb.errors import UsageError


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--collect", is_flag=True,
              help="Run pytest --collect-only with the inventory plugin (exact ids).")
@click.option("--cwd", type=click.Path(file_okay=False), default=None,
              help="Where pytest runs (default: --root/tests/integration/defs).")
@click.option("--prefix", default="", help="Id prefix for collected ids (e.g. unittest/).")
@click.option("--merge/--no-merge", default=True, show_default=True,
              help="With --collect: merge into the static inventory (collected files win).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write JSON here.")
@format_option("text", "json")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def inventory(opts: Any, collect: bool, cwd: str | None, prefix: str, merge: bool,
              output: str | None, fmt: str, pytest_args: tuple[str, ...]) -> int:
    """List the test parametrizations of the checkout: statically from the sources (fast,
    no imports; what cannot be known is marked indeterminate), or exactly through pytest.

    \b
    Examples:
      testdb --root ~/TensorRT-LLM inventory
      testdb --root ~/TensorRT-LLM inventory --collect -- -p stubify_bindings accuracy/
      testdb --root . inventory --collect --cwd tests --prefix unittest/ -- unittest/llmapi
    """
    import os

    from testdb.inventory import build_static
    from testdb.inventory import merge as merge_inv

    if pytest_args and not collect:
        raise UsageError("pytest arguments need --collect")
    if not cwd:  # an explicit --cwd names what to collect; otherwise a wrong --root says so
        from reports.common import require_test_lists
        from testdb.index import Sources

        require_test_lists(Sources.discover(opts.root), opts.root)
    inv = build_static(opts.root)
    if collect:
        from testdb.inventory.collect import collect_report

        where = cwd or os.path.join(opts.root, "tests", "integration", "defs")
        args = list(pytest_args)
        if not cwd and not any(a == "--rootdir" or a.startswith("--rootdir=") for a in args):
            # As CI runs the integration tests (`--rootdir <defs>`): ids relative to defs, not
            # to some enclosing project's pytest configuration.
            args.insert(0, f"--rootdir={os.path.abspath(where)}")
        report = collect_report(where, args, prefix, import_root=opts.root)
        collected = report.inventory
        inv = merge_inv(inv, collected) if merge else collected
        skipped = _skipped_notes(report.skipped, inv, merge)
    # the inventory's own "schema" is its cache format number, not this document's
    data = {"schema": "testdb-audit/inventory@1",
            **{k: v for k, v in inv.to_json().items() if k != "schema"}}
    if collect:
        data["collection"] = {"skipped": [{"file": f, "reason": r, "static_items": n}
                                          for f, r, n in skipped]}
    if output:
        from testdb.files import write_text_atomic

        write_text_atomic(output, dump_json(data) + "\n")
    # A test file that does not parse has no items to give: say where and why first (as
    # other commands print unreadable input), list the rest, exit 2.
    rc = _unparsable(inv)
    if fmt == "json":
        click.echo(dump_json(data))
        return rc
    for file, reason, n in skipped if collect else ():
        kept = (f"; its {n} item(s) below are the static ones" if n else
                "; it has no static items either")
        click.echo(f"note: collection found nothing in {file}: pytest skipped it ({reason})"
                   + kept, err=True)
    click.echo(inventory_text(inv, opts.root, where if collect else None))
    return rc


def inventory_text(inv: Any, root: str, collected_in: str | None = None) -> str:
    """Per test file its item count (indeterminate ones and open scopes named), then the
    totals; an inventory without a test file says where it looked instead of "0 test files"."""
    files = inv.files()
    if not files:
        looked = (f"pytest collected nothing in {collected_in}" if collected_in else
                  "the static inventory reads Python test files under "
                  "tests/integration/defs and tests/unittest")
        return (f"no test sources under {root}: {looked}, and found none; pass the root of a "
                "checkout with its tests (the test lists alone name ids, not their code)")
    items = list(inv)
    open_scopes = Counter(p.file for p in inv.placeholders())
    width = min(max(len(f) for f in files), 72)
    lines = []
    for f in files:
        mine = inv.by_file(f)
        vague = sum(1 for i in mine if i.indeterminate)
        extra = "".join([f", {vague} indeterminate" if vague else "",
                         f", {plural(open_scopes[f], 'open scope')}" if open_scopes[f] else ""])
        lines.append(f"{f:<{width}}  {plural(len(mine), 'item')}{extra}")
    sources = Counter(i.source for i in items)
    lines.append(f"{plural(len(files), 'test file')}, {plural(len(items), 'item')} "
                 f"({', '.join(f'{n} {s}' for s, n in sorted(sources.items()))}); "
                 f"{sum(1 for i in items if i.indeterminate)} indeterminate, "
                 f"{plural(len(inv.placeholders()), 'scope')} that may hold tests not listed "
                 "statically")
    return "\n".join(lines)


def _unparsable(inv: Any) -> int:
    """Print each test file that does not parse as an error; the exit code that implies."""
    from testdb.errors import EXIT_BAD_INPUT

    broken = inv.unparsable()
    for p in broken:
        click.echo(f"error: {p.loc}: {p.error}; fix it: pytest cannot collect {p.file}, so CI "
                   "runs none of its tests and the inventory cannot list them", err=True)
    return EXIT_BAD_INPUT if broken else 0


def _skipped_notes(skipped: tuple[tuple[str, str], ...], inv: Any, merge: bool
                   ) -> list[tuple[str, str, int]]:
    """(file, why pytest skipped it, static items kept for it) for each skipped test file."""
    out = []
    for nodeid, reason in skipped:
        file = nodeid.split("::", 1)[0]
        if not file.endswith(".py"):
            continue  # a skipped directory or package: its files are reported one by one
        out.append((file, reason, sum(1 for _ in inv.by_file(file)) if merge else 0))
    return out
