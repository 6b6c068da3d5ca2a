"""``testdb launch``: run flagged guards before merge on local GPUs, on Slurm, or via the PR bot."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from reports.common import dump_json, format_option
from testdb.errors import EXIT_FINDINGS, InputError, SourceLoc, UsageError

FAILING = {"failed", "error", "timeout", "cancelled", "preempted", "node-fail", "oom"}


def _slurm_config(path: str | None) -> Any:
    from auditor.launch import SlurmConfig

    if not path:
        return SlurmConfig()
    import yaml

    from testdb.files import read_text

    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", SourceLoc(path)) from None
    if not isinstance(data, dict):
        raise InputError("slurm config must be a mapping", SourceLoc(path, 1))
    gpu_types = data.pop("gpu_types", None)
    return SlurmConfig.from_mapping(gpu_types, **data)


class _Live:
    """A one-line progress bar and live summary on stderr (only when it is a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, ev: Any) -> None:
        counts = ", ".join(f"{k} {v}" for k, v in ev.counts if v)
        width = 24
        filled = int(width * ev.done / ev.total) if ev.total else width
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {ev.done}/{ev.total} done, "
                f"{ev.running} running  {counts}")
        if self.tty:
            click.echo("\r" + line[:120].ljust(120), err=True, nl=False)
        elif ev.event == "finished" and ev.result is not None:
            click.echo(f"[{ev.done}/{ev.total}] {ev.result.outcome:<12} {ev.result.test_id}",
                       err=True)

    def close(self) -> None:
        if self.tty:
            click.echo("", err=True)


@click.command()
@click.argument("pattern", required=False)
@click.option("--from", "from_audit", type=click.Path(dir_okay=False),
              help="An audit JSON: launch its guards that do not run pre-merge.")
@click.option("--backend", type=click.Choice(["local", "slurm", "bot"]), default="local",
              show_default=True)
@click.option("--dry-run", is_flag=True, help="Print the plan and exit.")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Where logs, JUnit XML and results.json go (default: ./testdb-runs/<time>).")
@click.option("--include-pre-merge", is_flag=True,
              help="With PATTERN: also run parametrizations that already run pre-merge.")
@click.option("--slurm-config", type=click.Path(dir_okay=False),
              help="YAML: gpu_types: {pattern: {partition, constraint, account}} and options.")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Slurm: wait for the jobs, or return after submitting.")
@click.option("--status", "status_dir", type=click.Path(file_okay=False),
              help="Refresh and show a Slurm run started with --no-wait.")
@click.option("--stage-list", is_flag=True, help="Bot: --stage-list instead of --extra-stage.")
@click.option("--post", is_flag=True, help="Bot: post the command on the PR (needs --repo, --pr).")
@click.option("--repo", help="owner/name, for --post.")
@click.option("--pr", type=int, help="Pull request number, for --post.")
@click.option("--api-url", default=lambda: os.environ.get("GITHUB_API_URL",
                                                           "https://api.github.com"),
              show_default="$GITHUB_API_URL or https://api.github.com",
              help="GitHub REST API base URL, for --post.")
@format_option("text", "json")
@click.pass_obj
def launch(opts: Any, pattern: str | None, from_audit: str | None, backend: str,
           dry_run: bool, run_dir: str | None, include_pre_merge: bool,
           slurm_config: str | None, wait: bool, status_dir: str | None, stage_list: bool,
           post: bool, repo: str | None, pr: int | None, api_url: str, fmt: str) -> int:
    """Run the guards that would not run before merge: on local GPUs, on Slurm, or by
    producing the PR bot command.

    \b
    Examples:
      testdb audit --diff pr.diff --format json -o audit.json
      testdb launch --from audit.json --dry-run
      testdb launch --from audit.json --backend local
      testdb launch 'test_chunked_prefill[attn_backend=FLASHINFER]' --backend slurm --no-wait
      testdb launch --status testdb-runs/20261130-101500
      testdb launch --from audit.json --backend bot --post --repo NVIDIA/TensorRT-LLM --pr 123
    """
    from auditor.launch.model import item_to_dict

    if status_dir:
        from auditor.launch import status

        return _show(status(Path(status_dir)), fmt)
    if bool(pattern) == bool(from_audit):
        raise UsageError("give a PATTERN or --from audit.json (one of them)")
    rows = _plan(opts, pattern, from_audit, include_pre_merge, run_dir)
    if not rows:
        click.echo("nothing to launch: every selected guard already runs pre-merge")
        return 0
    if backend == "bot":
        from auditor.launch.plan import bot_command

        cmd = bot_command(rows, replace=stage_list)
        if not cmd:
            raise UsageError("no CI stage runs the selected tests; the bot cannot run them")
        click.echo(cmd)
        if post:
            _post(cmd, repo, pr, api_url)
        return 0
    if dry_run:
        if fmt == "json":
            click.echo(dump_json({"schema": "testdb-audit/launch-plan@1",
                                  "items": [{**item_to_dict(r.item), "verdict": r.verdict,
                                             "why": r.why, "entry": f"{r.entry.loc}"}
                                            for r in rows]}))
        else:
            for r in rows:
                i = r.item
                click.echo(f"{i.test_id}\n  {r.verdict}; {r.why}; list line {r.entry.loc}\n"
                           f"  gpus {i.gpus} {i.gpu_type or ''}  timeout {i.timeout_minutes} min"
                           f"{'  ISOLATION' if i.isolation else ''}  expected "
                           f"{f'{i.duration_s:.0f} s' if i.duration_s else 'unknown'}\n"
                           f"  cd {i.cwd}\n  {' '.join(i.argv)}")
        return 0
    rdir = Path(run_dir or os.path.join("testdb-runs", time.strftime("%Y%m%d-%H%M%S")))
    _write_lists(rows)
    live = _Live()
    try:
        if backend == "slurm":
            from auditor.launch import SlurmBackend

            results = SlurmBackend(_slurm_config(slurm_config)).run(
                [r.item for r in rows], rdir, wait=wait, progress=live)
        else:
            from auditor.launch import LocalBackend

            results = LocalBackend().run([r.item for r in rows], rdir, progress=live)
    finally:
        live.close()
    return _show(results, fmt)


def _plan(opts: Any, pattern: str | None, from_audit: str | None, include_pre_merge: bool,
          run_dir: str | None) -> list[Any]:
    from auditor.launch.plan import ids_from_audit, ids_from_pattern, plan
    from reports.inputs import read_audit

    index = opts.index()
    ids = (ids_from_audit(read_audit(from_audit)) if from_audit
           else ids_from_pattern(index, pattern or "", include_pre_merge))
    selections = None
    if any(t.startswith("unittest/") and "::" in t for t, _, _ in ids):
        from auditor.guards import GuardLocator, compute_gates
        from testdb.inventory import build_static

        loc = GuardLocator.build(index, compute_gates([], index.triggers),
                                 build_static(index.root))
        selections = {t: loc.selections_for(t) for t, _, _ in ids}
    return plan(index, ids, run_dir or "testdb-runs", selections)


def _write_lists(rows: list[Any]) -> None:
    """TensorRT-LLM runs take the chosen ids through --test-list=<file>."""
    for r in rows:
        for arg in r.item.argv:
            if arg.startswith("--test-list="):
                path = arg.split("=", 1)[1]
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).write_text(r.entry.test + "\n", encoding="utf-8")


def _show(results: Any, fmt: str) -> int:
    from auditor.launch.model import result_to_dict

    if fmt == "json":
        click.echo(dump_json({"schema": "testdb-audit/run-results@1", "run_dir": results.run_dir,
                              "results": [result_to_dict(r) for r in results.results]}))
    else:
        for r in results.results:
            dur = f"{r.duration_s:.1f} s" if r.duration_s is not None else "-"
            click.echo(f"{r.outcome:<12} {dur:>9}  {r.test_id}  {r.where}")
            if r.detail and r.outcome != "passed":
                click.echo(f"{'':<24}{r.detail}")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(results.counts().items()))
        click.echo(f"{len(results.results)} run(s): {counts}; results in "
                   f"{os.path.join(results.run_dir, 'results.json')}")
    if results.interrupted:
        return 130
    return EXIT_FINDINGS if any(r.outcome in FAILING for r in results.results) else 0


def _post(cmd: str, repo: str | None, pr: int | None, api_url: str) -> None:
    from reports.github import upsert_comment

    if not repo or not pr:
        raise UsageError("--post needs --repo owner/name and --pr N")
    token = os.environ.get("GITHUB_TOKEN")
    if not token:
        raise UsageError("--post needs a token in GITHUB_TOKEN")
    body = ("<!-- testdb-audit-launch -->\nRunning the guards that would not run before merge:"
            f"\n\n{cmd}\n")
    res = upsert_comment(repo, pr, body, token=token, marker="<!-- testdb-audit-launch -->",
                         api_url=api_url)
    click.echo(f"{res.action} comment {res.url}", err=True)
