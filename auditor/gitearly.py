"""git's answers to ``audit --base B [--head H]``, asked before the command line is parsed.

A warm audit of a commit range starts and imports click and its own modules (78-83 ms on this
project's 2-core machine) before it runs its first git command, and then waits for git's
answers (``rev-parse``, ``diff``: ~15 ms) with the other core idle. The console script, before
anything else, reads the command line (``reports.warm.range_of``) and, when it is an audit of
a commit range, calls ``start``: those commands start with the very arguments
``auditor.diff.from_git`` gives them, and ``run_git`` takes the answer of a command started so
(same directory, same arguments) instead of running it again. A command line of another shape
starts nothing; one that click rejects, or whose audit never asks, leaves read-only git
processes that end on their own. Nothing here runs code of the checkout: these are the git
commands the audit runs anyway.
"""

from __future__ import annotations

import subprocess

_STARTED: dict[tuple[str, ...], subprocess.Popen[str]] = {}


def from_git_commands(base: str, head: str | None) -> tuple[list[str], list[str]]:
    """The ``git`` arguments of ``from_git``'s two first questions: one ``rev-parse`` (the
    prefix, head, base and merge base) and the ``diff``."""
    revs = [head, base, f"{base}...{head}"] if head else ["HEAD", base]
    rng = [f"{base}...{head}"] if head else [base]
    return (["rev-parse", "--show-prefix", *revs],
            ["diff", "--relative", "--no-color", "--no-ext-diff", "-M", "-U3", *rng, "--"])


def start(root: str, base: str, head: str | None) -> None:
    """Start ``from_git(root, base, head)``'s first commands (see the module's docstring)."""
    for args in from_git_commands(base, head):
        key = (root, *args)
        try:
            _STARTED[key] = subprocess.Popen(["git", "-C", root, *args], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)
        except OSError:  # no git: the audit says so when it asks
            return


def take(root: str, args: tuple[str, ...]) -> subprocess.Popen[str] | None:
    """The process started for ``git -C root ARGS``, once (None: none was)."""
    return _STARTED.pop((root, *args), None) if _STARTED else None
