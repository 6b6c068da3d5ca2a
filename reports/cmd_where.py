"""``testdb where``: which stages run each parametrization, with file:line evidence."""

from __future__ import annotations

import os
from typing import Any

import click

from reports.common import (
    dump_json,
    format_option,
    report_diagnostics,
    require_test_lists,
    use_colour,
)
from reports.render_where import where_json, where_markdown, where_text


@click.command()
@click.argument("pattern")
@format_option("text", "json", "markdown")
@click.pass_obj
def where(opts: Any, pattern: str, fmt: str) -> int:
    """Which stages run PATTERN, per parametrization, and does it run before merge?

    PATTERN is an exact node id, a node id without [params] (all its parametrizations),
    a Class::function or function name, or a glob with * and ?.

    \b
    Examples:
      testdb --root data/trtllm where 'TestLlama3_1_8BInstruct::test_chunked_prefill'
      testdb --root data/trtllm where 'accuracy/test_llm_api_pytorch.py::*::test_fp8*' --format json
    """
    unit_ids = _unit_tests_named(opts.root, pattern)
    if unit_ids:
        # Unit tests are found through the selections that select them: that needs the
        # inventory and the full index.
        from testdb.inventory import build_static
        from testdb.query import test_record
        from testdb.query import where as where_query

        index = opts.index()
        records = [test_record(t) for t in where_query(index, pattern, build_static(index.root),
                                                       unit_ids)]
        diagnostics = list(index.diagnostics)
    else:
        from testdb.index import locate
        from testdb.query import where_records

        plan = locate(opts.root, stages=opts.stages, triggers=opts.triggers,
                      platform_facts=opts.platform_facts, use_cache=opts.use_cache)
        require_test_lists(plan.src, opts.root)
        records, diagnostics = where_records(plan, pattern, use_cache=opts.use_cache)
    if fmt == "json":
        click.echo(dump_json(where_json(pattern, records)))
    elif fmt == "markdown":
        click.echo(where_markdown(pattern, records))
    else:
        click.echo(where_text(records, colour=use_colour()))
    rc = report_diagnostics(diagnostics, quiet_warnings=True)
    return rc or (0 if records else 1)


def _unit_tests_named(root: str, pattern: str) -> list[str]:
    """The unit tests of the checkout's static inventory that ``pattern`` names (from its ids
    only: a warm call reads one small file). Other patterns are answered from the records of
    the listed ids alone."""
    if not os.path.isdir(os.path.join(root, "tests", "unittest")):
        return []
    from testdb.inventory import unit_test_ids
    from testdb.query import match_ids

    units = unit_test_ids(root)
    return match_ids(units, pattern) if units else []
