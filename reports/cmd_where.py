"""``testdb where``: which stages run each parametrization, with file:line evidence."""

from __future__ import annotations

import os
from typing import Any

import click

from reports.common import (
    dump_json,
    format_option,
    input_note,
    report_diagnostics,
    require_test_lists,
    use_colour,
    with_note,
)
from reports.render_where import where_json, where_markdown, where_text
from testdb.errors import UsageError


@click.command()
@click.argument("pattern")
@format_option("text", "json", "markdown")
@click.option("--map", "map_file", is_flag=False, flag_value="", default=None,
              metavar="[PATH]", help="Also list the functions each test executed, from the "
                                     "test-to-code map (default: the checkout's own).")
@click.pass_obj
def where(opts: Any, pattern: str, fmt: str, map_file: str | None) -> int:
    """Which stages run PATTERN, per parametrization, and does it run before merge?

    PATTERN is an exact node id, a node id without [params] (all its parametrizations),
    a Class::function or function name, a class, a file or a directory (file.py,
    file.py::Class, dir/: every test in it), or a glob with * and ?. With test sources in the
    checkout, every parametrization of a matching function is shown: listed ones with their
    verdict, unlisted ones as unscheduled, listed names that name no test as invalid.

    \b
    Examples:
      testdb --root data/trtllm where 'TestLlama3_1_8BInstruct::test_chunked_prefill'
      testdb --root data/trtllm where 'accuracy/test_llm_api_pytorch.py::*::test_fp8*' --format json
    """
    from testdb.whole import INTEGRATION_DIR, has_test_sources

    inventory = units = None
    # Listed ids are checked against integration sources (unit tests go through their
    # selections below): without them, no inventory is loaded.
    if has_test_sources(opts.root, (INTEGRATION_DIR,)):
        from testdb.inventory.build import static_and_units

        inventory, units = static_and_units(opts.root)
    unit_ids = _unit_tests_named(opts.root, pattern, units)
    if unit_ids:
        # Unit tests are found through the selections that select them: that needs the
        # inventory and the full index.
        from testdb.inventory import build_static
        from testdb.query import test_record
        from testdb.query import where as where_query

        index = opts.index()
        inventory = inventory if inventory is not None else build_static(index.root)
        records = [test_record(t) for t in where_query(index, pattern, inventory, unit_ids)]
        diagnostics = list(index.diagnostics)
        src = index.sources
        listed: list[str] = list(index.schedule.placements)
    else:
        from testdb.index import locate
        from testdb.query import where_lookup

        plan = locate(opts.root, stages=opts.stages, triggers=opts.triggers,
                      platform_facts=opts.platform_facts, use_cache=opts.use_cache)
        require_test_lists(plan.src, opts.root)
        got = where_lookup(plan, pattern, use_cache=opts.use_cache)
        records, diagnostics, listed = got.records, got.diagnostics, got.listed
        src = plan.src
    from testdb.caveats import verdict_caveats
    from testdb.whole import did_you_mean, unbalanced, whole_functions

    records = whole_functions(records, pattern, inventory)
    caveats = verdict_caveats(src.triggers if src is not None else None,
                              (r["verdict"] for r in records))
    nearest: list[str] = []
    if not records:
        if unbalanced(pattern):
            raise UsageError(f"the pattern {pattern!r} has an unbalanced '['",
                             hint="close it (a node id ends in [params]) and quote the "
                                  "pattern for the shell")
        ids = listed + (inventory.ids() if inventory is not None else [])
        nearest = did_you_mean(ids, pattern)
    # Errors first (stderr), then the result, headed by a note when input was left out; a
    # broken .test_durations is a warning (reports.unread.as_reported): exit 0.
    rc = report_diagnostics(diagnostics, quiet_warnings=True)
    measured = _measured(opts, map_file, records)
    if fmt == "json":
        data = where_json(pattern, records, nearest, caveats)
        if measured is not None:
            data["measured"] = measured
        click.echo(dump_json(data))
    elif fmt == "markdown":
        click.echo(where_markdown(pattern, records, nearest, caveats))
    else:
        text = where_text(records, colour=use_colour(), nearest=nearest, caveats=caveats)
        if measured is not None:
            from reports.render_where import measured_text

            text += "\n\n" + measured_text(measured)
        click.echo(with_note(input_note(diagnostics), text))
    return rc or (0 if records else 1)


def _measured(opts: Any, map_file: str | None, records: list[dict[str, Any]]
              ) -> dict[str, Any] | None:
    """``--map``: what each matching test executed, by the map."""
    if map_file is None:
        return None
    from auditor.covmap.locate import default_path, find_map
    from auditor.measured import executed_by

    path = find_map(opts.root, map_file or default_path(opts.root))
    assert path is not None  # find_map raises for a given path that is not there
    return executed_by(path, [t["id"] for t in records])


def _unit_tests_named(root: str, pattern: str, units: list[str] | None = None) -> list[str]:
    """The unit tests of the checkout's static inventory (``units``: its unit-test ids, when
    known) that ``pattern`` names (from its ids only: a warm call reads one small file).
    Other patterns are answered from the records of the listed ids alone."""
    if not os.path.isdir(os.path.join(root, "tests", "unittest")):
        return []
    from testdb.inventory import unit_test_ids
    from testdb.query import match_ids

    units = unit_test_ids(root) if units is None else units
    return match_ids(units, pattern) if units else []
