"""Shared CLI helpers: output formats, colour policy, diagnostics on stderr, JSON output."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from reports.unread import LIMIT, diagnostic_lines, unread_note
from reports.words import plural as plural  # here for the commands; words.py has no click
from testdb.errors import Diagnostic, Severity

_F = TypeVar("_F", bound=Callable[..., Any])

VERDICT_COLOURS = {"pre-merge": "green", "gated": "yellow", "post-merge-only": "red",
                   "qa-only": "magenta", "waived": "bright_black", "unscheduled": "red",
                   "invalid": "red"}


def format_option(*choices: str) -> Callable[[_F], _F]:
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=choices[0],
                        show_default=True, help="Output format.")


def use_colour(stream: Any = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    stream = stream or sys.stdout
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def paint(text: str, colour: str | None, enabled: bool, bold: bool = False) -> str:
    return click.style(text, fg=colour, bold=bold) if enabled and colour else text


def dump_json(data: Any, *, inline_depth: int | None = None) -> str:
    """Indented JSON. With ``inline_depth``, each value nested that deep is written on one
    line: json's C encoder writes it (the indenting encoder is pure Python, and a large audit
    document took most of a second), and one guard per line reads as well as twenty."""
    if inline_depth is None:
        return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False)
    compact = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode

    def render(value: Any, depth: int, pad: str) -> str:
        if depth >= inline_depth or not value or not isinstance(value, (dict, list)):
            return compact(value)
        inner = pad + "  "
        if isinstance(value, dict):
            rows = [f"{inner}{compact(str(k))}: {render(v, depth + 1, inner)}"
                    for k, v in value.items()]
            return "{\n" + ",\n".join(rows) + f"\n{pad}}}"
        rows = [inner + render(v, depth + 1, inner) for v in value]
        return "[\n" + ",\n".join(rows) + f"\n{pad}]"

    return render(data, 0, "")


def report_diagnostics(diags: Iterable[Diagnostic], *, quiet_warnings: bool = False,
                       limit: int = LIMIT) -> int:
    """Print diagnostics to stderr (errors first; reports.unread.diagnostic_lines, which the
    warm stats answer prints too); return the exit code they imply. Commands call it before
    printing their result, so the errors come first."""
    lines, code = diagnostic_lines(((d.loc.path, d.loc.line, d.severity.value, d.message, d.rule)
                                    for d in diags), quiet_warnings=quiet_warnings, limit=limit)
    for line in lines:
        click.echo(line, err=True)
    return code


def input_note(diags: Iterable[Diagnostic], what: str = "these verdicts") -> str:
    """The line a text result starts with when input could not be read ("" when all was):
    the files of its error diagnostics (reports.unread)."""
    return unread_note((d.loc.path for d in diags if d.severity is Severity.ERROR), what)


def with_note(note: str, text: str) -> str:
    return f"{note}\n{text}" if note else text


def require_test_lists(src: Any, root: str) -> None:
    """A --root without test lists is a wrong --root, not an empty plan: say so (exit 2)."""
    from testdb.errors import InputError

    if src is not None and not (src.testdb or src.qa_yaml or src.qa_txt):
        raise InputError(f"no test lists under {root}",
                         hint="pass --root (a checkout with tests/integration/test_lists)")


# GitHub's rules: an owner is letters, digits and single hyphens (not first or last); a
# repository name is letters, digits, '.', '-' and '_' (not "." or "..").
_OWNER = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9])*")
_NAME = re.compile(r"[A-Za-z0-9._-]+")


def repo_problem(repo: str) -> str:
    """What is wrong with ``repo`` as a GitHub OWNER/NAME (empty: nothing)."""
    owner, slash, name = repo.partition("/")
    if not slash:
        return "expected OWNER/NAME, e.g. NVIDIA/TensorRT-LLM"
    if len(owner) > 39 or not _OWNER.fullmatch(owner):
        return f"{owner!r} is not a GitHub owner (letters, digits, single hyphens)"
    if not _NAME.fullmatch(name) or name in (".", ".."):
        return f"{name!r} is not a GitHub repository name (letters, digits, '.', '-', '_')"
    return ""


def check_repo(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for ``--repo OWNER/NAME``: a wrong one is a usage error (exit 2), not
    links to ``github.com/not-a-repo/...``."""
    if value is not None:
        problem = repo_problem(value)
        if problem:
            raise click.BadParameter(f"{value!r}: {problem}", ctx=ctx, param=param)
    return value
