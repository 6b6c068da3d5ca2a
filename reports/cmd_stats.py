"""``testdb stats``: what the test plan holds."""

from __future__ import annotations

from typing import Any

import click

from reports.common import format_option
from reports.render_stats import render
from testdb.stats import stats_of


@click.command()
@format_option("text", "json")
@click.pass_obj
def stats(opts: Any, fmt: str) -> int:
    """Count contexts, blocks, entries, QA lists and waives, plus warnings.

    \b
    Example:
      testdb --root data/trtllm stats --format json
    """
    index = opts.index()
    out, err, code = render(*stats_of(index, use_cache=opts.use_cache), fmt)
    for line in err:  # errors before the result
        click.echo(line, err=True)
    click.echo(out)
    return code
