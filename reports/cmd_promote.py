"""``testdb promote`` / ``testdb demote``: move entries between post-merge and pre-merge blocks."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from auditor.promote import (
    DEFAULT_BUDGET_MINUTES,
    DIRECTIONS,
    SCHEMA,
    Plan,
    StageBudget,
    apply_plan,
    plan_moves,
)
from reports.common import dump_json, format_option, paint, use_colour
from testdb.errors import EXIT_FINDINGS, EXIT_OK, UsageError

_HELP = """Move test-db entries from their {src} block into the {dst} block of the same
context whose condition is otherwise the same (GPU wildcard, GPU count, backend,
orchestrator, auto_trigger, every other key; only `terms.stage` differs).

ID is an exact node id or a `testdb where` pattern (id without [params], Class::function,
glob with * and ?). Only the moved lines change in the file: each keeps its exact text
(marker, comment) and goes to the end of the target block's `tests:` list. With
--create-block, a missing {dst} block is added right after the {src} one (a copy of its
condition with the stage changed); without it, that is an error naming the block.

An id that is {src} in several contexts is refused unless --context names the ones to
change (repeat it to change several): {cost}

Before anything is written the pre-merge shards it touches are priced (durations from
.test_durations, shards as pytest-split's least_duration makes them; a test with no
recorded duration counts as the average), the diff is shown, and the edit is verified:
the file is re-parsed and re-scheduled from disk without the cache, and only if exactly
the intended tests changed block is it put in place (atomically). Without --yes, a
terminal asks before writing; elsewhere --yes is required. Exit 0 when written or
--dry-run (also when the reader of the output went away, as with `| head -1`: the
file is still written), 1 when declined (nothing written), 2 on bad input (nothing
written). A line moved back (promote, then demote) returns between its old neighbours
when they are still there, so the round trip gives the file back byte for byte.

\b
Examples:
  testdb --root data/trtllm {cmd} --dry-run \\
      '*::TestLlama3_1_8BInstruct::test_chunked_prefill[attn_backend={param}]'
  testdb --root data/trtllm {cmd} --context l0_h100 --budget-minutes 60 --yes 'ID'
"""
_COST = {"promote": "promoting a test everywhere multiplies its pre-merge cost.",
         "demote": "demoting a test everywhere may drop more guards than meant."}


def _options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for deco in reversed((
        click.argument("ids", nargs=-1, required=True, metavar="ID..."),
        click.option("--context", "contexts", multiple=True, metavar="CTX",
                     help="Only move entries of this context (repeatable); required when an id "
                          "is in several contexts."),
        click.option("--dry-run", is_flag=True, help="Show the diff and the budget; change "
                                                     "nothing."),
        click.option("--create-block", is_flag=True,
                     help="Add the target block after the source one when none exists."),
        click.option("--budget-minutes", type=click.FloatRange(min=0, min_open=True),
                     default=DEFAULT_BUDGET_MINUTES, show_default=True,
                     help="Warn when a touched pre-merge shard grows past this."),
        click.option("--yes", "-y", is_flag=True, help="Write without asking."),
        format_option("text", "json"),
        click.pass_obj,
    )):
        fn = deco(fn)
    return fn


def _say(text: str) -> None:
    """Print, but let a reader that went away (`| head -1`) not stop the edit: --yes asked for
    it, and the exit code must say what happened to the file, not to the pipe."""
    try:
        click.echo(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _run(opts: Any, direction: str, ids: tuple[str, ...], contexts: tuple[str, ...],
         dry_run: bool, create_block: bool, budget_minutes: float, yes: bool, fmt: str) -> int:
    index = opts.index()
    plan = plan_moves(index, ids, direction, contexts=contexts, create_block=create_block,
                      budget_minutes=budget_minutes)
    colour = use_colour()
    if fmt == "text":
        _say(plan_text(plan, colour))
    if dry_run:
        if fmt == "json":
            _say(dump_json(plan_json(plan, ids, dry_run=True, applied=False)))
        else:
            _say("dry run: nothing changed")
        return EXIT_OK
    if not yes:
        if not _interactive():
            raise UsageError("not writing without confirmation",
                             hint="pass --yes to write, or --dry-run to only look")
        if not click.confirm(f"Write {len(plan.edits)} file(s)?", default=False, err=True):
            click.echo("declined: nothing changed", err=True)
            return EXIT_FINDINGS
    apply_plan(index, plan)
    if fmt == "json":
        _say(dump_json(plan_json(plan, ids, dry_run=False, applied=True)))
    else:
        for ed in plan.edits:
            _say(f"wrote {ed.path} (verified: only the moved tests changed block)")
    return EXIT_OK


def _interactive() -> bool:
    return sys.stdin.isatty()


def _command(direction: str) -> click.Command:
    src, dst = DIRECTIONS[direction]

    def cmd(opts: Any, ids: tuple[str, ...], contexts: tuple[str, ...], dry_run: bool,
            create_block: bool, budget_minutes: float, yes: bool, fmt: str) -> int:
        return _run(opts, direction, ids, contexts, dry_run, create_block, budget_minutes, yes,
                    fmt)

    cmd.__doc__ = _HELP.format(src=src, dst=dst, cost=_COST[direction], cmd=direction,
                               param="FLASHINFER" if direction == "promote" else "TRTLLM")
    return click.command(name=direction)(_options(cmd))


promote = _command("promote")
demote = _command("demote")


# ---- rendering ----------------------------------------------------------------------------------

def _min(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def plan_text(plan: Plan, colour: bool = False) -> str:
    src, dst = DIRECTIONS[plan.direction]
    verdicts = {t: (a, b) for t, a, b in plan.verdicts}
    files = ", ".join(e.path for e in plan.edits)
    out = [paint(f"{plan.direction}: {len(plan.moves)} line(s) in {files}", None, colour,
                 bold=True)]
    for m in plan.moves:
        for t in m.tests:
            before, after = verdicts.get(t, ("?", "?"))
            out.append(f"  {t}  ({m.context})")
            out.append(f"    verdict: {before} -> {after}")
        out.append(f"    from: {src} block {m.source.loc}, line {m.loc.line}")
        out.append(f"    to:   {dst} block {m.target.loc}" if m.target else
                   f"    to:   a new {dst} block after {m.source.loc} (--create-block)")
    out.append("")
    for ed in plan.edits:
        for line in ed.diff.splitlines():
            fg = None if line.startswith(("+++", "---")) else (
                "green" if line.startswith("+") else "red" if line.startswith("-") else
                "cyan" if line.startswith("@@") else None)
            out.append(paint(line, fg, colour))
    out.append("")
    out.append(f"budget: pre-merge shards touched, minutes (limit {plan.budget_minutes:g})")
    if not plan.budget:
        out.append("  no pre-merge stage renders a changed list")
    for b in plan.budget:
        out += _budget_text(b)
    for key in plan.missing_durations:
        out.append(f"note: {key} has no recorded duration; it counts as the average of its "
                   "stage's known durations, as pytest-split does")
    for w in plan.warnings:
        out.append(paint(f"warning: {w}", "yellow", colour))
    return "\n".join(out)


def _budget_text(b: StageBudget) -> list[str]:
    out = [f"  {b.stage}  ({b.context}, {b.placement}, {len(b.shards)} shard(s), "
           f"average test {_min(b.average_s)})",
           f"    {'shard':<6}{'before':>8}{'after':>8}{'change':>8}"]
    for s in b.shards:
        out.append(f"    {s.shard:<6}{_min(s.before_s):>8}{_min(s.after_s):>8}"
                   f"{(s.after_s - s.before_s) / 60:>+8.1f}")
    out.append(f"    largest shard {_min(b.largest_before_s)} -> {_min(b.largest_after_s)} "
               f"({b.growth_s / 60:+.1f})")
    return out


def plan_json(plan: Plan, ids: tuple[str, ...], *, dry_run: bool, applied: bool
              ) -> dict[str, Any]:
    verdicts = {t: (a, b) for t, a, b in plan.verdicts}
    over = {b.stage for b in plan.over_budget()}
    return {
        "schema": SCHEMA,
        "command": plan.direction,
        "ids": list(ids),
        "dry_run": dry_run,
        "applied": applied,
        "moves": [{"tests": [{"id": t, "verdict_before": verdicts[t][0],
                              "verdict_after": verdicts[t][1]} for t in m.tests],
                   "context": m.context, "line": m.text,
                   "from": {"path": m.loc.path, "line": m.loc.line,
                            "block_line": m.source.loc.line},
                   "to": {"path": m.loc.path,
                          "block_line": m.target.loc.line if m.target else None,
                          "block_index": m.target_index,
                          "created_block": m.target is None}}
                  for m in plan.moves],
        "files": [{"path": e.path, "diff": e.diff} for e in plan.edits],
        "budget": {"limit_minutes": plan.budget_minutes,
                   "stages": [{"stage": b.stage, "context": b.context, "placement": b.placement,
                               "average_s": b.average_s,
                               "shards": [{"stage": s.stage, "shard": s.shard,
                                           "before_s": s.before_s, "after_s": s.after_s}
                                          for s in b.shards],
                               "largest_before_s": b.largest_before_s,
                               "largest_after_s": b.largest_after_s,
                               "growth_s": b.growth_s, "over_budget": b.stage in over}
                              for b in plan.budget]},
        "missing_durations": list(plan.missing_durations),
        "warnings": list(plan.warnings),
    }
