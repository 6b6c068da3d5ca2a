"""``testdb comment``: the PR comment as markdown, printed or upserted on the pull request."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from reports.cmd_audit import audit_options, run_from_options
from reports.common import check_repo, dump_json, format_option
from testdb.errors import EXIT_FINDINGS, UsageError

DEFAULT_API_URL = "https://api.github.com"


F = TypeVar("F", bound=Callable[..., Any])


def _typed(decorator: Any) -> Callable[[F], F]:
    """Give the shared (untyped) option decorators a type, for mypy --strict."""
    return cast("Callable[[F], F]", decorator)


@click.command()
@click.option("--audit", "audit_file", type=click.Path(dir_okay=False),
              help="Audit JSON from `testdb audit --format json -o FILE` (default: audit now).")
@_typed(audit_options)
@click.option("--repo", metavar="OWNER/NAME", callback=check_repo,
              help="GitHub repository: evidence links point at its files at the head SHA.")
@click.option("--head-sha", metavar="SHA",
              help="Commit the evidence links point at (default: the audit's head).")
@click.option("--report-url", metavar="URL", help="Where the HTML report is published.")
@click.option("--results", "results_file", type=click.Path(dir_okay=False),
              help="Launch results JSON (results.json of `testdb launch`) to fold in.")
@click.option("--post", is_flag=True,
              help="Create or update the one testdb-audit comment on --pr (token: GITHUB_TOKEN).")
@click.option("--pr", type=click.IntRange(min=1), help="Pull request number for --post.")
@click.option("--api-url", default=DEFAULT_API_URL, show_default=True,
              help="GitHub REST API base URL (GitHub Enterprise: https://HOST/api/v3).")
@click.option("--fail-on", type=click.Choice(["never", "error", "warning"]), default="never",
              show_default=True,
              help="Exit 1 after printing or posting when the audit has findings at or above "
                   "this severity (as `audit --fail-on`).")
@_typed(format_option("markdown", "json"))
@click.pass_obj
def comment(opts: Any, audit_file: str | None, base: str | None, head: str | None,
            diff: str | None, coverage: str | None, rules: str | None,
            bot_command: str | None, repo: str | None, head_sha: str | None,
            report_url: str | None, results_file: str | None, post: bool, pr: int | None,
            api_url: str, fail_on: str, fmt: str) -> int:
    """Render the pre-merge PR comment: the verdict sentence, the findings (errors first), the
    `/bot run --extra-stage` command for the missing guards and, folded in, launch results.

    Without --post the markdown is printed; with --post it becomes the one sticky comment on
    the pull request (created once, then updated in place). --format json prints the body and
    its length as JSON instead. The exit is 0 (the comment is a report; the check fails on
    `audit`'s exit) unless --fail-on error|warning asks for 1 on such findings.

    \b
    Examples:
      testdb --root examples/flashinfer-reuse comment --diff examples/flashinfer-reuse/pr.diff
      testdb comment --audit audit.json --results run/results.json --repo NVIDIA/TensorRT-LLM \\
          --post --pr 1234 --report-url https://ci.example.com/report/
    """
    from reports.comment import render_comment
    from reports.inputs import read_audit, read_results

    if post and not (pr and repo):
        raise UsageError("--post needs --pr N and --repo OWNER/NAME")
    if audit_file and (base or diff or coverage or head or bot_command is not None):
        raise UsageError("give either --audit FILE or --base/--diff to audit now, not both",
                         hint="--bot-command belongs to the audit: it is recorded in the FILE")
    token = os.environ.get("GITHUB_TOKEN", "").strip() if post else ""
    if post and not token:
        raise UsageError("--post needs a GitHub token in the environment variable GITHUB_TOKEN",
                         hint="in GitHub Actions: env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}")
    data = read_audit(audit_file) if audit_file else run_from_options(opts, base, head, diff,
                                                                      coverage, rules,
                                                                      bot_command)
    results = read_results(results_file) if results_file else None
    body = render_comment(data, repo=repo, report_url=report_url, results=results,
                          head_sha=head_sha)
    if not post:
        if fmt == "json":
            click.echo(dump_json({"schema": "testdb-audit/comment@1", "chars": len(body),
                                  "body": body}))
        else:
            click.echo(body, nl=False)
        return _exit(data, fail_on)
    from reports.github import upsert_comment

    assert repo is not None and pr is not None
    res = upsert_comment(repo, pr, body, token=token, api_url=api_url,
                         on_retry=lambda line: click.echo(f"comment: {line}", err=True))
    if fmt == "json":
        click.echo(dump_json({"schema": "testdb-audit/comment@1", "action": res.action,
                              "id": res.id, "url": res.url, "chars": len(body)}))
    else:
        click.echo(f"{res.action} comment {res.id} on {repo}#{pr}: {res.url}")
    return _exit(data, fail_on)


def _exit(data: dict[str, Any], fail_on: str) -> int:
    """1 when the audit has findings at or above ``fail_on`` (the rule of `audit --fail-on`),
    after the comment is out: a failing check still gets its comment."""
    s = data.get("summary") or {}
    errors, warnings = int(s.get("errors") or 0), int(s.get("warnings") or 0)
    if (fail_on == "error" and errors) or (fail_on == "warning" and (errors or warnings)):
        return EXIT_FINDINGS
    return 0
