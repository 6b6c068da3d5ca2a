"""``testdb audit``: is the behaviour this change makes guarded by tests that run pre-merge?"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from reports.common import dump_json, format_option, report_diagnostics, use_colour
from testdb.errors import EXIT_FINDINGS, UsageError

# behaviours > behaviour > guards > tier > guard: each guard (with its runs) on one line
AUDIT_JSON_DEPTH = 5

_F = TypeVar("_F", bound=Callable[..., Any])


def run_from_options(opts: Any, base: str | None, head: str | None, diff: str | None,
                     coverage: str | None, rules: str | None = None,
                     bot_command: str | None = None) -> dict[str, Any]:
    """Load, diff and audit; returns the audit JSON (shared by audit, comment and launch).
    ``bot_command``: the PR's ``/bot run ...`` comment; the audit judges under its pipeline."""
    from auditor.audit import run_audit
    from auditor.diff import from_diff_file, from_git
    from reports.render_audit import audit_json
    from testdb.botcmd import parse

    if bool(base) == bool(diff):
        raise UsageError("give either --base REV (a git range) or --diff FILE")
    bot = parse(bot_command) if bot_command is not None else None  # before any slow work
    index = opts.index()
    change = from_diff_file(opts.root, diff) if diff else from_git(opts.root, base or "", head)
    data = audit_json(run_audit(index, change, coverage=coverage, rules=rules, bot=bot))
    data["diagnostics"] = [str(d) for d in index.diagnostics]
    return data


def audit_options(f: _F) -> _F:
    for opt in reversed([
        click.option("--base", help="Base revision: audit the change base...head (git)."),
        click.option("--head", help="Head revision (default: the work tree)."),
        click.option("--diff", "diff", type=click.Path(dir_okay=False),
                     help="A unified diff (git diff, diff -u). The checkout under --root "
                          "may be either side of it: the head side (diff already applied) or "
                          "the base side (not yet applied); every hunk is checked against it "
                          "(docs/audit.md)."),
        click.option("--coverage", type=click.Path(dir_okay=False),
                     help="coverage.py data file with per-test contexts; relative file "
                          "names (relative_files = True) are read against --root."),
        click.option("--rules", type=click.Path(dir_okay=False),
                     help="Path rules linking non-Python files to tests "
                          "(default: ci/audit-rules.yml under --root)."),
        click.option("--bot-command", "bot_command", metavar="TEXT",
                     help="The PR's `/bot run ...` comment: judge under the pipeline it "
                          "starts (--extra-stage, --add-multi-gpu-test, --stage-list, ...)."),
    ]):
        f = opt(f)
    return f


@click.command()
@audit_options
@format_option("text", "json", "markdown")
@click.option("--fail-on", type=click.Choice(["error", "warning", "never"]), default="error",
              show_default=True, help="Exit 1 when findings at or above this severity exist.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write JSON here.")
@click.pass_obj
def audit(opts: Any, base: str | None, head: str | None, diff: str | None,
          coverage: str | None, rules: str | None, bot_command: str | None, fmt: str,
          fail_on: str, output: str | None) -> int:
    """Find the behaviour a change makes, the tests that guard it, and whether they run
    before merge.

    \b
    Examples:
      testdb --root examples/flashinfer-reuse audit --diff examples/flashinfer-reuse/pr.diff
      testdb --root ~/TensorRT-LLM audit --base origin/main --format json -o audit.json
      testdb --root ~/TensorRT-LLM audit --base origin/main \\
          --bot-command '/bot run --extra-stage "DGX_H100-4_GPUs-PyTorch-Others-1"'
    """
    data = run_from_options(opts, base, head, diff, coverage, rules, bot_command)
    if output:
        from testdb.files import write_text_atomic

        write_text_atomic(output, dump_json(data, inline_depth=AUDIT_JSON_DEPTH) + "\n")
    if fmt == "json":
        click.echo(dump_json(data, inline_depth=AUDIT_JSON_DEPTH))
    elif fmt == "markdown":
        from reports.comment import render_comment

        click.echo(render_comment(data))
    else:
        from reports.render_audit import audit_text

        click.echo(audit_text(data, colour=use_colour()))
    rc = report_diagnostics(opts.index().diagnostics, quiet_warnings=True)
    if rc:
        return rc
    s = data["summary"]
    if (fail_on == "error" and s["errors"]) or (fail_on == "warning" and (s["errors"] or
                                                                       s["warnings"])):
        return EXIT_FINDINGS
    return 0




