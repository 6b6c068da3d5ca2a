"""``testdb replay REV_RANGE``: audit a history commit by commit, score it, plan promotions."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from reports.common import dump_json, format_option, use_colour
from testdb.errors import EXIT_BAD_INPUT, EXIT_OK

EXIT_INTERRUPTED = 130


class _Progress:
    """A bar on a terminal; one line per commit otherwise (both on stderr)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, rec: Any, cached: bool) -> None:
        what = ("from the cache" if cached else
                f"not checked: {rec.error[:80]}" if rec.status == "failed" else
                "root commit" if rec.status == "root" else
                f"{len(rec.behaviours)} behaviour change(s), "
                f"{sum(1 for f in rec.findings if f.severity == 'error')} error(s), "
                f"{_measured_part(rec)}{rec.seconds:.2f} s")
        if self.tty:
            width = 30
            fill = int(width * done / total) if total else width
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} "
                              f"{rec.sha[:10]} {rec.subject[:40]:<40}")
            if done == total:
                self.stream.write(f"\n{total} commits in {time.perf_counter() - self.t0:.1f} s\n")
        else:
            self.stream.write(f"[{done}/{total}] {rec.sha[:10]} {rec.subject[:50]}: {what}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _measured_part(rec: Any) -> str:
    """``2 by measured links, `` where the map decided any (nothing without a map)."""
    n = sum(1 for b in rec.behaviours if b.tier == "coverage")
    return f"{n} by measured links, " if n else ""


@click.command()
@click.argument("rev_range", metavar="REV_RANGE")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Audit this many commits at once, in worker processes.")
@click.option("--outcomes", type=click.Path(exists=True),
              help="Post-merge results: a directory of <sha>.xml JUnit files (or <sha>/ "
                   "directories), or JSON lines {commit, test, outcome}. Without it the waive "
                   "list is the (weaker) signal.")
@click.option("--plan-promotions", is_flag=True,
              help="Choose post-merge tests to move pre-merge (needs --budget-minutes).")
@click.option("--budget-minutes", type=click.FloatRange(min=0, min_open=True),
              help="No pre-merge shard may grow past this many minutes.")
@click.option("--rules", type=click.Path(dir_okay=False),
              help="Path rules (default: ci/audit-rules.yml of each commit).")
@click.option("--map", "map_file", type=click.Path(dir_okay=False),
              help="Test-to-code map (testdb map) every commit's audit reads: measured links "
                   "decide first (default: the checkout's own map, when one exists).")
@click.option("--all-commits", is_flag=True, help="Text: list commits without changes too.")
@format_option("text", "json")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Also write the JSON here (for `testdb report --replay`).")
@click.pass_obj
def replay(opts: Any, rev_range: str, jobs: int, outcomes: str | None, plan_promotions: bool,
           budget_minutes: float | None, rules: str | None, map_file: str | None,
           all_commits: bool, fmt: str, output: str | None) -> int:
    """Replay REV_RANGE (A..B): audit each first-parent commit against its first parent,
    with the test plan as it was in that commit, read from git objects (the work tree is
    never touched). Each commit's record is cached, so a rerun or a longer range audits only
    new commits; Ctrl-C stops and keeps what was done.

    Then: the share of behaviour changes guarded pre-merge, only gated, only post-merge,
    QA-only or unguarded; the post-merge tests changes leaned on; recall per faulty change
    and the precision of error findings, against --outcomes or the waive list; and with
    --plan-promotions, the post-merge tests to move pre-merge within --budget-minutes, the
    `testdb promote` commands and the guarded share before and after. docs/replay.md
    explains the scoring. With a measured map (--map, or the checkout's own), each commit is
    audited with it, and the summary says how many changes its links decided.

    \b
    Examples:
      testdb --root ~/TensorRT-LLM replay v1.0..main --jobs 2 -o replay.json
      testdb --root repo replay v0..main --outcomes results/ --plan-promotions \\
          --budget-minutes 60
    """
    from auditor.covmap.locate import find_map
    from auditor.covmap.store import map_token
    from auditor.replay.analysis import analyze
    from auditor.replay.options import ReplayOptions
    from auditor.replay.runner import replay as run_replay
    from reports.render_replay import replay_json, replay_text
    from testdb.errors import UsageError

    if plan_promotions and budget_minutes is None:
        raise UsageError("--plan-promotions needs --budget-minutes M",
                         hint="the largest pre-merge shard may grow to M minutes")
    if budget_minutes is not None and not plan_promotions:
        raise UsageError("--budget-minutes is for --plan-promotions")
    measured_map = find_map(opts.root, map_file)
    # Read now: a damaged map is exit 2 before any commit, not a range of failed audits.
    generation = map_token(measured_map) if measured_map else None
    options = ReplayOptions.given(opts.root, stages=opts.stages, triggers=opts.triggers,
                                  platform_facts=opts.platform_facts, rules=rules,
                                  measured_map=measured_map)
    if outcomes is not None:
        _check_outcomes(opts.root, rev_range, outcomes)
    progress = _Progress()
    try:
        run = run_replay(opts.root, rev_range, options, jobs=jobs, use_cache=opts.use_cache,
                         progress=progress)
    finally:
        progress.close()
    analysis = analyze(run, options, outcomes=outcomes,
                       budget_minutes=budget_minutes if plan_promotions else None)
    doc = replay_json(run, analysis)
    if measured_map is not None:
        doc["map"] = _map_json(measured_map, generation or "", run.records)
    if output:
        from testdb.files import write_text_atomic

        write_text_atomic(output, dump_json(doc, inline_depth=4) + "\n")
    if fmt == "json":
        click.echo(dump_json(doc, inline_depth=4))
    else:
        click.echo(replay_text(doc, colour=use_colour(), all_commits=all_commits))
        if "map" in doc:
            click.echo(_map_text(doc["map"]))
    if run.interrupted:
        return EXIT_INTERRUPTED
    failed = [r for r in run.records if r.status == "failed"]
    if failed and not any(r.audited for r in run.records):
        # Nothing was checked: no silent success.
        click.echo(f"error: none of the {len(failed)} commit(s) could be audited; the first: "
                   f"{failed[0].short}: {failed[0].error}", err=True)
        return EXIT_BAD_INPUT
    return EXIT_OK


def _map_json(path: str, token: str, records: Any) -> dict[str, Any]:
    """The map the replay read and what it decided (only present when one was read)."""
    from auditor.replay.totals import measured_counts

    measured, static_only = measured_counts(records)
    return {"path": path, "generation": token, "measured": measured,
            "static_only": static_only}


def _map_text(m: dict[str, Any]) -> str:
    from auditor.measured import summary_phrase

    phrase = summary_phrase(m["measured"], m["static_only"]).strip(" ()")
    return f"\nMeasured map {m['path']}: {phrase or 'no behaviour change was linked'}"


def _check_outcomes(root: str, rev_range: str, outcomes: str) -> None:
    """Read --outcomes against the range's commits before auditing any of them: a file that
    cannot be read is exit 2 now, not after the whole range was audited (the analysis reads
    it again with the tests the audits found, which only names the JUnit cases better)."""
    from auditor.replay.gitsource import first_parent_commits
    from auditor.replay.outcomes import read_outcomes
    from auditor.replay.runner import top_level

    top_level(root)
    read_outcomes(outcomes, [c.sha for c in first_parent_commits(root, rev_range)])
