"""The ``testdb`` command line: a thin click layer over the library (commands load lazily)."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import click

from reports.warm import command_at, hoist_globals
from testdb import __version__
from testdb.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, TestDbError

__all__ = ["cli", "command_at", "hoist_globals", "main", "run"]

# name -> (module, attribute, one-line help); modules import only when their command runs,
# which keeps `testdb where` start-up fast.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "stats": ("reports.cmd_stats", "stats", "Count contexts, blocks, entries, QA lists, waives."),
    "where": ("reports.cmd_where", "where", "Which stages run a test, per parametrization."),
    "audit": ("reports.cmd_audit", "audit", "Is a change guarded by tests that run pre-merge?"),
    "comment": ("reports.cmd_comment", "comment", "The PR comment (markdown); --post upserts it."),
    "report": ("reports.cmd_report", "report", "Offline HTML coverage report (--html DIR)."),
    "inventory": ("reports.cmd_inventory", "inventory",
                  "List every test parametrization (static, or collected by pytest)."),
    "lint": ("reports.cmd_lint", "lint", "Find problems in the test lists, with file:line."),
    "launch": ("reports.cmd_launch", "launch", "Run flagged guards on GPUs, Slurm or the PR bot."),
    "promote": ("reports.cmd_promote", "promote", "Move post-merge test-db entries to pre-merge."),
    "demote": ("reports.cmd_promote", "demote", "Move pre-merge test-db entries to post-merge."),
    "map": ("reports.cmd_map", "map_group", "The measured test-to-code map: add, merge, stats."),
    "replay": ("reports.cmd_replay", "replay",
               "Audit a history commit by commit; score it; plan promotions."),
}


class LazyGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        at = command_at(args)
        cmd = self.get_command(ctx, args[at]) if at < len(args) else None
        opts = frozenset(o for p in (cmd.params if cmd else ()) for o in p.opts)
        return super().parse_args(ctx, hoist_globals(args, opts))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        cmd = getattr(importlib.import_module(spec[0]), spec[1])
        assert isinstance(cmd, click.Command)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec[2]) for name, spec in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@dataclass
class Options:
    root: str = "."
    stages: str | None = None
    triggers: str | None = None
    platform_facts: str | None = None
    use_cache: bool = True
    _index: Any = field(default=None, repr=False)

    def index(self) -> Any:
        if self._index is None:
            from testdb.index import load

            self._index = load(self.root, stages=self.stages, triggers=self.triggers,
                               platform_facts=self.platform_facts, use_cache=self.use_cache)
            from reports.common import require_test_lists

            require_test_lists(self._index.sources, self.root)
            # The index lives until the command exits: keep the cyclic GC from walking its
            # tens of thousands of records on every collection (that cost more than the load).
            gc.freeze()
        return self._index


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "max_content_width": 100})
@click.option("--root", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Checkout root in the TensorRT-LLM layout.")
@click.option("--stages", "stages", default=None, type=click.Path(dir_okay=False),
              help="Stage table: jenkins/L0_Test.groovy or a YAML table like ci/stages.yml "
                   "(default: found under --root).")
@click.option("--triggers", default=None, type=click.Path(dir_okay=False),
              help="PR gate data like ci/pr-triggers.yml (default: found under --root).")
@click.option("--platform-facts", default=None, type=click.Path(dir_okay=False),
              help="Known per-platform facts (YAML: platforms: {name: {fact: value}}).")
@click.option("--no-cache", is_flag=True, help="Parse everything afresh.")
@click.version_option(__version__, prog_name="testdb")
@click.pass_context
def cli(ctx: click.Context, root: str, stages: str | None, triggers: str | None,
        platform_facts: str | None, no_cache: bool) -> None:
    """testdb-audit: which CI stages run each test, and is your change guarded before merge?

    \b
    Examples:
      testdb --root ~/TensorRT-LLM stats
      testdb --root ~/TensorRT-LLM where 'TestLlama3_1_8BInstruct::test_chunked_prefill'
    """
    ctx.obj = Options(root, stages, triggers, platform_facts, not no_cache)


def main(argv: list[str] | None = None) -> None:
    """The command line in-process, as the console script runs it (``reports.entry.main``: a
    warm answer when one is cached, else ``run``; the script then exits without the
    interpreter's teardown, ``reports.entry.console``). Written out here rather than calling
    ``reports.entry``, which imports this module: the two would import each other."""
    from reports.warm import answer

    args = sys.argv[1:] if argv is None else list(argv)
    code = answer(args)
    if code is not None:
        sys.exit(code)
    run(args)


def run(argv: list[str] | None = None) -> None:
    """The click CLI: library errors become `error: path:line: ...` and exit 2, never a
    traceback."""
    try:
        rv = cli.main(args=argv, prog_name="testdb", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except TestDbError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # the environment, not a bug: a missing or read-only dir, a full disk
        if os.environ.get("TESTDB_DEBUG"):
            raise
        click.echo(f"error: {exc.filename or 'output'}: {exc.strerror or exc}; check the path, "
                   "its permissions and the free disk space", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:
        if os.environ.get("TESTDB_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc}\n"
                   "This is a bug in testdb-audit; rerun with TESTDB_DEBUG=1 for a traceback "
                   "and report it.", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(rv if isinstance(rv, int) else 0)
