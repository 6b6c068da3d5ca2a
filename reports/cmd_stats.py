"""``testdb stats``: what the test plan holds."""

from __future__ import annotations

from typing import Any

import click

from reports.common import format_option
from reports.render_stats import checks_names, render
from testdb.stats import stats_of


@click.command()
@format_option("text", "json")
@click.pass_obj
def stats(opts: Any, fmt: str) -> int:
    """Count contexts, blocks, entries, QA lists and waives, plus warnings. With test
    sources in the checkout, verdicts are counted as `where` gives them (a listed name that
    names no test is invalid); without, they say "not checked against sources".

    \b
    Example:
      testdb --root data/trtllm stats --format json
    """
    index = opts.index()
    checker = inventory_key = None
    if checks_names(index.root):
        from testdb.inventory import build_static
        from testdb.inventory.tree import inventory_key as key_of
        from testdb.names import NameChecker

        checker = NameChecker(build_static(index.root))
        inventory_key = key_of(index.root)  # of the inventory just built or read
    out, err, code = render(*stats_of(index, use_cache=opts.use_cache, checker=checker,
                                      inventory_key=inventory_key), fmt)
    for line in err:  # errors before the result
        click.echo(line, err=True)
    click.echo(out)
    return code
