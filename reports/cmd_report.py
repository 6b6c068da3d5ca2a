"""``testdb report``: the offline HTML coverage report of a checkout (and an audit)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from auditor.promote import DEFAULT_BUDGET_MINUTES
from reports.common import (
    dump_json,
    format_option,
    input_note,
    paint,
    report_diagnostics,
    use_colour,
)
from testdb.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])


def _typed(decorator: Any) -> Callable[[F], F]:
    """Give the shared (untyped) option decorators a type, for mypy --strict."""
    return cast("Callable[[F], F]", decorator)


@click.command()
@click.option("--html", "html_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Write the report into DIR (replaced atomically; made if missing).")
@click.option("--audit", "audit_file", type=click.Path(dir_okay=False),
              help="Audit JSON (`testdb audit --format json -o FILE`): its findings come first.")
@click.option("--results", "results_file", type=click.Path(dir_okay=False),
              help="Launch results JSON to show beside the guards.")
@click.option("--replay", "replay_file", type=click.Path(dir_okay=False),
              help="Replay JSON (`testdb replay RANGE -o FILE`): adds history.html.")
@click.option("--budget-minutes", type=click.FloatRange(min=0, min_open=True),
              default=None,
              show_default=f"the --replay file's own, else {DEFAULT_BUDGET_MINUTES:g}",
              help="The pre-merge shard budget drawn on the shard charts (as `promote`).")
@click.option("--map", "map_file", type=click.Path(dir_okay=False),
              help="Test-to-code map (testdb map): draws its reach per test file (default: "
                   "the checkout's own, when one exists).")
@_typed(format_option("text", "json"))
@click.pass_obj
def report(opts: Any, html_dir: str | None, audit_file: str | None, results_file: str | None,
           replay_file: str | None, budget_minutes: float | None, map_file: str | None,
           fmt: str) -> int:
    """Write a self-contained HTML coverage report (works offline, no CDN, pictures drawn at
    build time): per test file and function, parametrizations by verdict; each stage group's
    shard minutes against the pre-merge budget; lint; audit findings first when given.

    \b
    Examples:
      testdb --root data/trtllm report --html out/report
      testdb --root examples/flashinfer-reuse report --html out/fi --audit audit.json
      python -m http.server -d out/report   # or open out/report/index.html directly
    """
    from reports.html import generate
    from reports.inputs import read_audit, read_results

    if not html_dir:
        raise UsageError("give --html DIR (the only report format so far)")
    audit = read_audit(audit_file) if audit_file else None
    results = read_results(results_file) if results_file else None
    t0 = time.perf_counter()
    index = opts.index()
    from auditor.covmap.locate import find_map

    map_path = find_map(opts.root, map_file)
    if replay_file:
        from os.path import join

        from reports.replay_html import PAGE, read_replay

        info = generate(index, html_dir, audit, results, budget_minutes,
                        replay=read_replay(replay_file), map_path=map_path)
        info["history"] = join(html_dir, PAGE)
    else:
        info = generate(index, html_dir, audit, results, budget_minutes, map_path=map_path)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    rc = report_diagnostics(index.diagnostics, quiet_warnings=True)  # errors before the result
    if fmt == "json":
        click.echo(dump_json(info))
    else:
        colour = use_colour()
        note = input_note(index.diagnostics, "this report")
        if note:
            click.echo(note)
        click.echo(f"{paint('wrote', 'green', colour, bold=True)} {info['index']}  "
                   f"({info['test_ids']} test ids, {info['functions']} functions, "
                   f"{info['stages']} stages, {info['seconds']:.2f} s)")
        if "history" in info:
            click.echo(f"{paint('wrote', 'green', colour, bold=True)} {info['history']}")
    return rc
