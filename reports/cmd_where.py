"""``testdb where``: which stages run each parametrization, with file:line evidence."""

from __future__ import annotations

import os
from typing import Any

import click

from reports.common import dump_json, format_option, report_diagnostics, use_colour
from reports.render_where import where_json, where_markdown, where_text
from testdb.query import where as where_query


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
    index = opts.index()
    inventory = None
    if os.path.isdir(os.path.join(index.root, "tests", "unittest")):
        from testdb.inventory import build_static

        inventory = build_static(index.root)  # unit tests are found through their selections
    tests = where_query(index, pattern, inventory)
    if fmt == "json":
        click.echo(dump_json(where_json(pattern, tests)))
    elif fmt == "markdown":
        click.echo(where_markdown(pattern, tests))
    else:
        click.echo(where_text(tests, colour=use_colour()))
    rc = report_diagnostics(index.diagnostics, quiet_warnings=True)
    return rc or (0 if tests else 1)
