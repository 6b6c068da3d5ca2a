"""``testdb launch``: run flagged guards before merge on local GPUs, on Slurm, or via the PR bot."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from reports.common import check_repo, dump_json, format_option
from testdb.errors import EXIT_FINDINGS, UsageError

FAILING = {"failed", "error", "timeout", "cancelled", "preempted", "node-fail", "oom"}
PLAN_SCHEMA = "testdb-audit/launch-plan@1"
BOT_SCHEMA = "testdb-audit/bot-command@1"


def _slurm_config(path: str | None) -> Any:
    from auditor.launch import SlurmConfig
    from auditor.launch.slurmconfig import load

    return load(path) if path else SlurmConfig()


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
@click.option("--repo", callback=check_repo, help="owner/name, for --post.")
@click.option("--pr", type=int, help="Pull request number, for --post.")
@click.option("--api-url", default=lambda: os.environ.get("GITHUB_API_URL",
                                                           "https://api.github.com"),
              show_default="$GITHUB_API_URL or https://api.github.com",
              help="GitHub REST API base URL, for --post.")
@click.option("--allow-not-runnable", is_flag=True,
              help="Exit 0 even when planned tests could not run here (too few GPUs, a "
                   "partition that cannot hold them).")
@click.option("--coverage", is_flag=True,
              help="Run each test under coverage.py (one context per test, a data file per "
                   "job) and add what ran to the test-to-code map (testdb map).")
@click.option("--map", "map_file", type=click.Path(dir_okay=False),
              help="With --coverage: the map to add to (default: the checkout's own).")
@format_option("text", "json")
@click.pass_obj
def launch(opts: Any, pattern: str | None, from_audit: str | None, backend: str,
           dry_run: bool, run_dir: str | None, include_pre_merge: bool,
           slurm_config: str | None, wait: bool, status_dir: str | None, stage_list: bool,
           post: bool, repo: str | None, pr: int | None, api_url: str,
           allow_not_runnable: bool, coverage: bool, map_file: str | None, fmt: str) -> int:
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
    if status_dir:
        from auditor.launch import status

        return _show(status(Path(status_dir)), fmt, allow_not_runnable)
    if bool(pattern) == bool(from_audit):
        raise UsageError("give a PATTERN or --from audit.json (one of them)")
    # every input read before any work (a wrong --slurm-config fails before planning)
    config = _slurm_config(slurm_config) if backend == "slurm" else None
    from auditor.launch import rundir

    # a run of its own, always (a dry run or the bot only names it)
    make = not (dry_run or backend == "bot")
    claimed = make and not (run_dir and os.path.isdir(run_dir))  # ours to remove if unused
    rdir = rundir.claim(run_dir) if make else rundir.preview(run_dir)
    try:
        planned = _plan(opts, pattern, from_audit, include_pre_merge, str(rdir))
    except BaseException:
        _drop_if_empty(rdir, claimed)
        raise
    rows, skipped = planned.rows, [skipped_to_dict(s) for s in planned.skipped]
    if not rows:
        _drop_if_empty(rdir, claimed)
    _say_skipped(planned.skipped, backend)
    if not rows:
        if skipped:  # none of the guards can be launched: no silent success (docs/launch.md)
            note = (f"nothing to launch: the {len(skipped)} selected guard(s) are in no test "
                    "list (skipped, see above)")
            code = 0 if allow_not_runnable else EXIT_FINDINGS
        else:
            note, code = "nothing to launch: every selected guard already runs pre-merge", 0
        click.echo(dump_json({"schema": PLAN_SCHEMA, "items": [], "skipped": skipped,
                              "note": note}) if fmt == "json" else note)
        return code
    if backend == "bot":
        return _bot(opts.index(), rows, stage_list, post, repo, pr, api_url, fmt,
                    *_pipeline_of(opts, from_audit), skipped=skipped)
    if coverage:
        rows = _measured_rows(rows, rdir, opts.root)
    if dry_run:
        _dry_run(rows, rdir, config, fmt, skipped)
        return 0
    _write_lists(rows)
    live = _Live()
    try:
        if backend == "slurm":
            from auditor.launch import SlurmBackend

            results = SlurmBackend(config).run(
                [r.item for r in rows], rdir, wait=wait, progress=live)
        else:
            from auditor.launch import LocalBackend

            results = LocalBackend().run([r.item for r in rows], rdir, progress=live)
    finally:
        live.close()
    code = _show(results, fmt, allow_not_runnable)
    if coverage:
        _add_to_map(opts, results, rdir, map_file, backend == "slurm" and not wait)
    return code


def _measured_rows(rows: list[Any], rdir: Path, root: str) -> list[Any]:
    """``--coverage``: each row's item run under the per-test context plugin."""
    from dataclasses import replace

    from auditor.launch.coverage import with_coverage

    items = with_coverage([r.item for r in rows], rdir, root)
    return [replace(r, item=i) for r, i in zip(rows, items, strict=True)]


def _add_to_map(opts: Any, results: Any, rdir: Path, map_file: str | None,
                submitted: bool) -> None:
    """The data files of the tests that ran, added to the map (stderr: stdout is the run)."""
    from auditor.covmap.add import add_files
    from auditor.covmap.locate import default_path
    from auditor.launch.coverage import data_file, measured_files

    path = map_file or default_path(opts.root)
    if submitted:
        click.echo(f"note: the jobs are submitted; when they end, add their data: testdb map "
                   f"add {data_file(rdir, '*')} --map {path}", err=True)
        return
    files, left = measured_files(results.results, rdir)
    if left:
        click.echo(f"note: {len(left)} test(s) not added to the map: they did not run to the "
                   f"end ({', '.join(left[:3])}{', ...' if len(left) > 3 else ''})", err=True)
    if not files:
        click.echo("note: no coverage data to add to the map", err=True)
        return
    got = add_files(files, opts.root, None, path, work_tree=True)
    click.echo(f"map {path}: {got.tests} test(s) measured at {got.commit[:12]} "
               f"({got.result.links:,} links)", err=True)


def _drop_if_empty(rdir: Path, claimed: bool) -> None:
    """Remove the directory claimed for a launch that ran nothing (an error, nothing to launch)."""
    if claimed:
        with contextlib.suppress(OSError):  # not empty, or gone: keep what is there
            rdir.rmdir()


def _pipeline_of(opts: Any, from_audit: str | None
                 ) -> tuple[frozenset[str], Any, dict[str, Any] | None]:
    """The stages the PR's pipeline already starts, its own bot command and the audit
    (``--from``), or a plain ``/bot run`` of a PR that opens nothing and no audit."""
    from testdb.botcmd import parse

    if from_audit:
        from reports.inputs import read_audit

        data = read_audit(from_audit)
        text = (data.get("provenance") or {}).get("bot_command")
        return (frozenset((data.get("pipeline") or {}).get("started") or ()),
                parse(text) if text else None, data)
    from testdb.pipeline import pr_stages

    index = opts.index()
    return pr_stages(index.stages, index.triggers, []).started, None, None


def skipped_to_dict(s: Any) -> dict[str, str]:
    return {"test_id": s.test_id, "verdict": s.verdict, "why": s.why, "reason": s.reason,
            "shell": s.shell}


def _say_skipped(skipped: list[Any], backend: str) -> None:
    """One line per guard not launched (stderr: a bot command on stdout stays pasteable)."""
    for s in skipped:
        then = ("the bot cannot start it" if backend == "bot"
                else f"run it by hand: {s.shell}")
        click.echo(f"warning: skipped {s.test_id} ({s.verdict}): {s.reason}; {then}", err=True)


def _bot(index: Any, rows: list[Any], stage_list: bool, post: bool, repo: str | None,
         pr: int | None, api_url: str, fmt: str, started: frozenset[str] = frozenset(),
         base: Any = None, audit: dict[str, Any] | None = None,
         skipped: list[dict[str, str]] | None = None) -> int:
    """The audit's own choice (auditor.suggest.choose) over its findings' needs, or over the
    planned tests' with a PATTERN: the same line ``audit`` and ``comment`` print."""
    from auditor.suggest import choose, needs_of_findings, needs_of_tests

    have = frozenset() if stage_list else started
    wants = needs_of_findings(audit, have) if audit is not None else []
    if not wants:  # a pattern, or an audit whose findings name no stage (an older audit)
        wants = needs_of_tests(index, [(r.item.test_id, (r.entry.test,)) for r in rows], have,
                               replace_all=stage_list)
    sug = choose(index, wants, base, stage_list=stage_list)
    if not sug:
        raise UsageError("no CI stage runs the selected tests; the bot cannot run them")
    cmd = sug["command"]
    posted = _post(cmd, repo, pr, api_url) if post else None
    if fmt == "json":
        click.echo(dump_json({
            "schema": BOT_SCHEMA, "command": cmd,
            "stages": [r["stage"] for r in sug["stages"]], "suggestion": sug,
            "tests": [r.item.test_id for r in rows], "skipped": skipped or [],
            "posted": ({"action": posted.action, "id": posted.id, "url": posted.url}
                       if posted else None)}))
    else:
        click.echo(cmd)
    return 0


def shell_line(item: Any, junit: str, test_list: tuple[str, str] | None = None) -> str:
    """One line that runs ``item`` as the launch would, safe to paste into a POSIX shell: every
    word quoted (node ids hold ``[``, ``*``, spaces), the JUnit path filled in, the test list
    written first when the command reads one."""
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in item.env)
    cmd = shlex.join(item.command(junit))
    steps = [f"cd {shlex.quote(item.cwd)}"]
    if test_list is not None:
        path, test = test_list
        steps.insert(0, f"mkdir -p {shlex.quote(os.path.dirname(path) or '.')}")
        steps.insert(1, f"printf '%s\\n' {shlex.quote(test)} > {shlex.quote(path)}")
    steps.append(f"{env} {cmd}" if env else cmd)
    return " && ".join(steps)


def _test_list(row: Any) -> tuple[str, str] | None:
    arg = next((a for a in row.item.argv if a.startswith("--test-list=")), None)
    return (arg.split("=", 1)[1], row.entry.test) if arg else None


def _dry_run(rows: list[Any], rdir: Path, config: Any, fmt: str,
             skipped: list[dict[str, str]]) -> None:
    """The plan, each run as a line a shell accepts; with a Slurm config, the sbatch line."""
    from auditor.launch.model import item_to_dict, run_paths
    from auditor.launch.slurmconfig import sbatch_dry_run

    root = rdir.resolve()
    docs = []
    for r in rows:
        i = r.item
        junit = str(run_paths(root, i.key).junit)
        line = shell_line(i, junit, _test_list(r))
        doc = {**item_to_dict(i), "verdict": r.verdict, "why": r.why, "entry": f"{r.entry.loc}",
               "junit": junit, "shell": line}
        if config is not None:
            doc["sbatch"] = sbatch_dry_run(i, config, root, line)
        docs.append(doc)
        if fmt != "json":
            click.echo(f"{i.test_id}\n  {r.verdict}; {r.why}; list line {r.entry.loc}\n"
                       f"  gpus {i.gpus} {i.gpu_type or ''}  timeout {i.timeout_minutes} min"
                       f"{'  ISOLATION' if i.isolation else ''}  expected "
                       f"{f'{i.duration_s:.0f} s' if i.duration_s else 'unknown'}\n"
                       f"  {doc.get('sbatch') or line}")
    if fmt == "json":
        click.echo(dump_json({"schema": PLAN_SCHEMA, "run_dir": str(root), "items": docs,
                              "skipped": skipped}))


def _plan(opts: Any, pattern: str | None, from_audit: str | None, include_pre_merge: bool,
          run_dir: str | None) -> Any:
    from auditor.launch.plan import ids_from_audit, ids_from_pattern, plan_launch
    from reports.inputs import read_audit

    index = opts.index()
    ids = (ids_from_audit(read_audit(from_audit)) if from_audit
           else ids_from_pattern(index, pattern or "", include_pre_merge))
    selections = None
    if any(t.startswith("unittest/") and "::" in t for t, _, _ in ids):
        from auditor.guards import GuardLocator
        from testdb.inventory import build_static
        from testdb.pipeline import pr_stages

        # Only the selections matter here; the pipeline is that of a PR that opens nothing.
        loc = GuardLocator.build(index, pr_stages(index.stages, index.triggers, []),
                                 build_static(index.root))
        selections = {t: loc.selections_for(t) for t, _, _ in ids}
    return plan_launch(index, ids, run_dir or "testdb-runs", selections)


def _write_lists(rows: list[Any]) -> None:
    """TensorRT-LLM runs take the chosen ids through --test-list=<file>."""
    for r in rows:
        for arg in r.item.argv:
            if arg.startswith("--test-list="):
                path = arg.split("=", 1)[1]
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).write_text(r.entry.test + "\n", encoding="utf-8")


def _show(results: Any, fmt: str, allow_not_runnable: bool = False) -> int:
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
    code, why = launch_exit([r.outcome for r in results.results], results.interrupted,
                            allow_not_runnable)
    if why:
        stuck = "; ".join(f"{r.test_id}: {r.detail}" if r.detail else r.test_id
                          for r in results.results if r.outcome == "not-runnable")
        click.echo(f"{'error' if code else 'warning'}: {why}: {stuck}"
                   "; run them where they fit (--backend slurm, a bigger machine)"
                   + (" or pass --allow-not-runnable" if code else ""), err=True)
    return code


def launch_exit(outcomes: list[str], interrupted: bool, allow_not_runnable: bool
                ) -> tuple[int, str]:
    """The exit code of a launch, and what to say when tests could not run here: 130
    interrupted; 1 when a test failed; 1 when no test ran because none can run here (no
    silent success) unless ``allow_not_runnable``; 0 with a warning when only some could."""
    if interrupted:
        return 130, ""
    if any(o in FAILING for o in outcomes):
        return EXIT_FINDINGS, ""
    stuck = sum(1 for o in outcomes if o == "not-runnable")
    if not stuck or allow_not_runnable:
        return 0, ""
    n = len(outcomes)
    if stuck == n:
        return EXIT_FINDINGS, f"none of the {n} planned tests ran: not runnable here"
    return 0, f"{stuck} of the {n} planned tests did not run: not runnable here"


def _post(cmd: str, repo: str | None, pr: int | None, api_url: str) -> Any:
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
    return res
