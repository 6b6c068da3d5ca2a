"""``testdb audit``: is the behaviour this change makes guarded by tests that run pre-merge?"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from reports.common import (
    dump_json,
    format_option,
    input_note,
    report_diagnostics,
    use_colour,
    with_note,
)
from testdb.errors import EXIT_FINDINGS, InputError, SourceLoc, UsageError

if TYPE_CHECKING:
    from reports.audit_memo import Answer, Kept
    from testdb.botcmd import BotCommand

# behaviours > behaviour > guards > tier > guard: each guard (with its runs) on one line
AUDIT_JSON_DEPTH = 5

_F = TypeVar("_F", bound=Callable[..., Any])


class AuditProgress:
    """A bar on stderr while a large change is judged (``auditor.audit.Progress``), on a
    terminal only: JSON or text on stdout, and logs of CI, are never touched. Small changes
    are judged before a bar would be read, so none is drawn below ``LARGE`` behaviours."""

    LARGE = 500
    EVERY_S = 0.2

    def __init__(self, stream: Any = None) -> None:
        import sys

        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.drawn = 0.0
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        import time

        if not self.tty or total < self.LARGE:
            return
        now = time.monotonic()
        if done < total and now - self.drawn < self.EVERY_S:
            return
        self.drawn, self.shown = now, True
        fill = 30 * done // total
        self.stream.write(f"\r[{'#' * fill}{'.' * (30 - fill)}] {done:,}/{total:,} "
                          "behaviour changes judged")
        self.stream.flush()

    def __enter__(self) -> AuditProgress:
        return self

    def __exit__(self, *_: object) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def run_from_options(opts: Any, base: str | None, head: str | None, diff: str | None,
                     coverage: str | None, rules: str | None = None,
                     bot_command: str | None = None) -> dict[str, Any]:
    """Load, diff and audit; returns the audit JSON (shared by audit, comment and launch)."""
    return audit_from_options(opts, base, head, diff, coverage, rules, bot_command)[0]


def audit_from_options(opts: Any, base: str | None, head: str | None, diff: str | None,
                       coverage: str | None, rules: str | None = None,
                       bot_command: str | None = None, cbts: str = "note"
                       ) -> tuple[dict[str, Any], list[Any]]:
    """The audit JSON and the diagnostics of the plan it judged with. ``bot_command``: the
    PR's ``/bot run ...`` comment; the audit judges under its pipeline. With ``head``, the
    plan and the test sources are those of that commit (``plan_tree``)."""
    answer = _answer(opts, base, head, diff, coverage, rules, bot_command, cbts)
    return answer.load(), answer.diagnostics


def _answer(opts: Any, base: str | None, head: str | None, diff: str | None,
            coverage: str | None, rules: str | None, bot_command: str | None, cbts: str
            ) -> Answer:
    """``audit_from_options``, and where the answer is kept (``reports.audit_memo``), so that
    its printed text can be kept beside it."""
    from testdb.botcmd import parse

    if bool(base) == bool(diff):
        raise UsageError("give either --base REV (a git range) or --diff FILE")
    bot = parse(bot_command) if bot_command is not None else None  # before any slow work
    if cbts == "run" and not base:
        raise UsageError("--cbts run needs --base: it runs the base commit's CBTS code")
    if head:
        return _audit_commits(opts, base or "", head, coverage, rules, bot_command, bot, cbts)
    from auditor.audit import run_audit
    from auditor.diff import from_diff_file, from_git
    from reports.render_audit import audit_json
    from testdb.gcpause import gc_paused

    with gc_paused(freeze=True):  # (see _audit_commits)
        index = opts.index()  # the plan is the work tree's
        change = (from_diff_file(opts.root, diff) if diff
                  else from_git(opts.root, base or "", None))  # base against the work tree
        index = _with_cbts(index, change, opts.root, bot, cbts, [change.base or ""])
        with AuditProgress() as shown:
            data = audit_json(run_audit(index, change, coverage=coverage, rules=rules, bot=bot,
                                        progress=shown, measured_map=_measured_map(opts)))
    return _fresh(*_stamped(data, index, opts.root, "work tree"))


def _with_cbts(index: Any, change: Any, repo: str, bot: BotCommand | None, mode: str,
               rng: list[str]) -> Any:
    """``--cbts run``: the index with the decision of the base commit's CBTS (testdb.cbts)
    among its gates, for a change and command CBTS acts on; otherwise the index as it is.
    ``rng``: the ``git diff`` range whose per-file diffs CBTS is given."""
    from testdb.cbts import cbts_state, run_base_cbts

    if mode != "run" or not cbts_state(index.triggers.cbts, bot, tuple(change.paths)).acts:
        return index
    from auditor.replay.gitsource import git

    decision = run_base_cbts(
        repo, change.base, index.root, list(change.paths),
        lambda path: git(repo, "diff", *rng, "--", path),
        post_merge=bool(bot and bot.post_merge))
    return dataclasses.replace(index, triggers=dataclasses.replace(index.triggers,
                                                                   cbts_decision=decision))


def _measured_map(opts: Any) -> str | None:
    """The test-to-code map this audit reads: ``--map``, else the checkout's own if any."""
    from auditor.covmap.locate import find_map

    return find_map(opts.root, getattr(opts, "map_file", None))


def _remember_map(ctx: click.Context, _param: Any, value: str | None) -> None:
    # ``--map`` rides on the options object, so audit, comment and launch (which share
    # audit_options) read it without a parameter of their own.
    if value is not None and ctx.obj is not None:
        ctx.obj.map_file = value


def _audit_commits(opts: Any, base: str, head: str, coverage: str | None, rules: str | None,
                   bot_command: str | None, bot: BotCommand | None, cbts: str = "note"
                   ) -> Answer:
    """``audit --base --head``: judged in a tree of the head commit, or the answer kept for
    the same audit (``reports.audit_memo``)."""
    from auditor.diff import from_git
    from reports import audit_memo

    change = from_git(opts.root, base, head)
    sha = change.head or head  # from_git resolves --head to its commit
    measured_map = _measured_map(opts)
    key = (_memo_key(opts, change, coverage, rules, bot_command, measured_map)
           if cbts != "run" else None)
    kept = audit_memo.get_answer(key) if key is not None else None
    if kept is not None:
        return kept
    from testdb.gcpause import gc_paused

    # The plan, the graph, the inventory and the judgement are ~10^5 records that live until
    # the audit is answered, in no reference cycle: a collection after the plan is read walked
    # them all (~20 ms of a warm audit's ~40 ms of collections), each generation in turn; the
    # modules imported here make more (their classes and functions, which live as long).
    started: dict[str, Any] = {}

    def tree_written(root: str) -> None:
        # The change's files are judged against the scratch tree, which holds the head side;
        # the scans of its import graph and of its test files start now, while the commit's
        # plan is parsed.
        from auditor.linking import start_head_graph, start_head_inventory
        from testdb.gcpause import gc_paused

        in_tree = dataclasses.replace(change, root=root)
        with gc_paused(freeze=True):  # as the Auditor loads them: they live as long as the audit
            started["graph"] = start_head_graph(in_tree)
            started["inventory"] = start_head_inventory(in_tree)

    with gc_paused(freeze=True):
        from auditor.audit import run_audit  # here: a kept answer needs neither
        from reports.render_audit import audit_json

        with plan_tree(opts, sha, rules, tree_written) as (index, root, in_tree_rules):
            change = dataclasses.replace(change, root=root, checkout_side="head")
            index = _with_cbts(index, change, opts.root, bot, cbts,
                               [f"{change.base}...{change.head}"])
            with AuditProgress() as shown:
                data = audit_json(run_audit(index, change, graph=started.get("graph"),
                                            inventory=started.get("inventory"),
                                            coverage=coverage, rules=in_tree_rules, bot=bot,
                                            progress=shown, measured_map=measured_map))
    answer = _stamped(data, index, opts.root, sha)
    return _fresh(*answer, audit_memo.put(key, *answer) if key is not None else None)


def _fresh(data: dict[str, Any], diagnostics: list[Any], kept: Kept | None = None) -> Answer:
    from reports.audit_memo import Answer

    return Answer(data["summary"], diagnostics, lambda: data, kept)


def _memo_key(opts: Any, change: Any, coverage: str | None, rules: str | None,
              bot_command: str | None, measured_map: str | None = None) -> str | None:
    """The key of this ``audit --head`` in ``reports.audit_memo`` (None: not memoized)."""
    if not opts.use_cache:
        return None
    from auditor.replay.options import ReplayOptions
    from reports.audit_memo import memo_key

    given = ReplayOptions.given(opts.root, stages=opts.stages, triggers=opts.triggers,
                                platform_facts=opts.platform_facts, rules=rules)
    key = given.key()
    if measured_map is not None:  # the map's content is an input of the answer
        from auditor.covmap.store import map_token

        key += "|map:" + map_token(measured_map)
    return memo_key(change, root=opts.root, options_key=key, coverage=coverage,
                    bot_command=bot_command)


def _stamped(data: dict[str, Any], index: Any, root: str, plan_from: str
             ) -> tuple[dict[str, Any], list[Any]]:
    """Provenance names --root (not a scratch tree) and which tree the plan came from; its
    data_files hashes are that tree's (``index.files``)."""
    prov = data["provenance"]
    prov["root"] = root
    prov["plan_from"] = plan_from
    decision = getattr(index.triggers, "cbts_decision", None)
    if decision is not None:  # --cbts run: whose CBTS code decided, and what
        prov["cbts"] = decision.to_json()
    data["diagnostics"] = [str(d) for d in index.diagnostics]
    return data, list(index.diagnostics)


@contextlib.contextmanager
def plan_tree(opts: Any, sha: str, rules: str | None,
              tree_written: Callable[[str], None] | None = None
              ) -> Iterator[tuple[Any, str, str | None]]:
    """(index, root, rules) of commit ``sha``: its tree read from git objects into a scratch
    tree under the cache directory (``testdb replay``'s, auditor.replay), never the work tree,
    which may be at another commit or dirty. A --stages/--triggers/--platform-facts/--rules
    path inside the checkout is read from that tree too; one outside it as given.
    ``tree_written(root)`` is called once the tree is written, before its plan is parsed."""
    from auditor.replay.gitsource import head_facts, scratch
    from auditor.replay.options import ReplayOptions, replay_dir
    from reports.common import require_test_lists
    from testdb.index import load

    given = ReplayOptions.given(opts.root, stages=opts.stages, triggers=opts.triggers,
                                platform_facts=opts.platform_facts, rules=rules)
    # --root below the top; the slots' directory (``trees_dir``); the commit's tree
    prefix, repo_key, sha_tree = head_facts(opts.root, sha)
    with scratch(opts.root, os.path.join(replay_dir(), "trees", repo_key)) as tree:
        tree.checkout(sha_tree)
        root = os.path.join(tree.root, prefix) if prefix else tree.root
        for name in given.in_tree:
            rel = getattr(given, name)
            if not os.path.isfile(given.path(name, root) or ""):
                flag = "--" + name.replace("_", "-")
                raise InputError(f"{flag} {rel} is not in the tree of {sha[:12]}: --head reads "
                                 "the plan from that commit", SourceLoc(rel),
                                 "commit the file, or give a path outside the checkout")
        if tree_written is not None:
            tree_written(root)
        index = load(root, stages=given.path("stages", root),
                     triggers=given.path("triggers", root),
                     platform_facts=given.path("platform_facts", root), use_cache=opts.use_cache)
        require_test_lists(index.sources, f"{opts.root} at {sha[:12]}")
        yield index, root, given.path("rules", root)


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
        click.option("--map", "map_file", type=click.Path(dir_okay=False), expose_value=False,
                     callback=_remember_map, is_eager=False,
                     help="Test-to-code map (testdb map): measured links decide first "
                          "(default: the checkout's own map, when one exists)."),
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
@click.option("--cbts", type=click.Choice(["note", "run"]), default="note", show_default=True,
              help="CBTS (jenkins/scripts/cbts/) may narrow a PR's stages: `note` says so; "
                   "`run` runs the BASE commit's CBTS offline (it executes that commit's "
                   "code, never the PR head's) and judges under its decision.")
@click.pass_obj
def audit(opts: Any, base: str | None, head: str | None, diff: str | None,
          coverage: str | None, rules: str | None, bot_command: str | None, fmt: str,
          fail_on: str, output: str | None, cbts: str) -> int:
    """Find the behaviour a change makes, the tests that guard it, and whether they run
    before merge.

    \b
    Examples:
      testdb --root examples/flashinfer-reuse audit --diff examples/flashinfer-reuse/pr.diff
      testdb --root ~/TensorRT-LLM audit --base origin/main --format json -o audit.json
      testdb --root ~/TensorRT-LLM audit --base origin/main \\
          --bot-command '/bot run --extra-stage "DGX_H100-4_GPUs-PyTorch-Others-1"'
    """
    answer = _answer(opts, base, head, diff, coverage, rules, bot_command, cbts)
    diagnostics, kept = answer.diagnostics, answer.kept
    rc = report_diagnostics(diagnostics, quiet_warnings=True)  # errors before the result
    if output:
        from testdb.files import write_text_atomic

        write_text_atomic(output, dump_json(answer.load(), inline_depth=AUDIT_JSON_DEPTH)
                          + "\n")
    if fmt == "json":
        click.echo(dump_json(answer.load(), inline_depth=AUDIT_JSON_DEPTH))
    elif fmt == "markdown":
        click.echo(rendered(kept, "markdown", lambda: _markdown(answer.load())))
    else:
        colour = use_colour()
        click.echo(rendered(kept, text_options(colour),
                            lambda: _text(answer.load(), diagnostics, colour)))
    if rc:
        return rc
    s = answer.summary
    if (fail_on == "error" and s["errors"]) or (fail_on == "warning" and (s["errors"] or
                                                                       s["warnings"])):
        return EXIT_FINDINGS
    return 0


# The text's width: a fixed layout, never the terminal's, so a kept text fits every terminal.
TEXT_WIDTH = 100


def text_options(colour: bool) -> str:
    """Every option of ``_text`` that can change a byte of it, in words: the key of a kept
    text beside its answer (``reports.audit_memo.Kept.rendered``)."""
    return f"text colour={colour} width={TEXT_WIDTH}"


def rendered(kept: Kept | None, options: str, render: Callable[[], str]) -> str:
    """The output kept beside a kept answer (the same audit asked again prints it without
    rendering), else rendered afresh."""
    return render() if kept is None else kept.rendered(options, render)


def _text(data: dict[str, Any], diagnostics: list[Any], colour: bool) -> str:
    from reports.render_audit import audit_text

    return with_note(input_note(diagnostics, "this audit"),
                     audit_text(data, colour=colour, width=TEXT_WIDTH))


def _markdown(data: dict[str, Any]) -> str:
    from reports.comment import render_comment

    return render_comment(data)
