"""``testdb lint``: problems in the test plan, each with file:line, a rule and what to do."""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Any

import click

from reports.common import (
    dump_json,
    format_option,
    paint,
    plural,
    report_diagnostics,
    use_colour,
)
from testdb import __version__
from testdb.errors import EXIT_FINDINGS, Severity, UsageError

_RANK = {"info": 0, "warning": 1, "error": 2}


@click.command()
@format_option("text", "json", "sarif")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]),
              default="error", show_default=True,
              help="Exit 1 when findings at or above this severity exist.")
@click.option("--inventory/--no-inventory", default=True, show_default=True,
              help="Check entries against the static test inventory of --root.")
@click.option("--rule", "rules", multiple=True, help="Only these rule ids (repeatable).")
@click.pass_obj
def lint(opts: Any, fmt: str, fail_on: str, inventory: bool, rules: tuple[str, ...]) -> int:
    """Find entries naming no test, duplicates, stale waives, unreachable blocks and
    contexts, stages without a context, dark and half-guarded tests.

    \b
    Examples:
      testdb --root data/trtllm lint
      testdb --root ~/TensorRT-LLM lint --format sarif > lint.sarif
    """
    from testdb.lint import LINT_SCHEMA, RULES, sarif
    from testdb.lint import lint as run_lint

    unknown = [r for r in rules if r not in RULES]
    if unknown:
        near = difflib.get_close_matches(unknown[0], list(RULES), n=1)
        raise UsageError(f"unknown lint rule {unknown[0]!r}"
                         + (f" (did you mean {near[0]}?)" if near else ""),
                         hint=f"valid rules: {', '.join(RULES)}")
    index = opts.index()
    # Unreadable input first, on stderr, as stats and where print it: exit 2 whatever the
    # findings (each is also an `input` finding below, where the rest of the plan is linted).
    bad_input = report_diagnostics(index.diagnostics, quiet_warnings=True)
    if fmt == "text":  # the files stats lists as skipped: not silently left out here either
        from reports.words import skipped_note

        for s in index.skipped:
            click.echo(f"note: {skipped_note(s.path, s.reason)}", err=True)
    inv = None
    if inventory:
        from testdb.inventory import build_static

        inv = build_static(index.root)
    findings = run_lint(index, inv)
    if rules:
        findings = [f for f in findings if f.rule in rules]
    if fmt == "json":
        click.echo(dump_json({"schema": LINT_SCHEMA, "findings": [
            {"path": f.loc.path, "line": f.loc.line, "rule": f.rule,
             "severity": f.severity.value, "message": f.message} for f in findings],
            "skipped_files": [{"path": s.path, "reason": s.reason} for s in index.skipped]}))
    elif fmt == "sarif":
        click.echo(dump_json(sarif(findings, __version__)))
    else:
        colour = use_colour()
        colours = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: None}
        for f in findings:
            sev = paint(f.severity.value, colours[f.severity], colour, bold=True)
            click.echo(f"{f.loc}: {sev}: {f.message} [{f.rule}]")
        counts = Counter(f.severity.value for f in findings)
        click.echo(f"{plural(len(findings), 'finding')}: {plural(counts['error'], 'error')}, "
                   f"{plural(counts['warning'], 'warning')}, {counts['info']} info"
                   + ("" if inv is None or len(inv) else
                      "; no test sources under --root, so ids were not checked"), err=True)
    if bad_input:
        return bad_input
    if fail_on == "never":
        return 0
    worst = max((_RANK[f.severity.value] for f in findings), default=-1)
    return EXIT_FINDINGS if worst >= _RANK[fail_on] else 0
