"""The ``testdb`` entry point: a warm answer straight from its cache (``reports.warm``), else
the click CLI (``reports.cli``), imported only then: click costs several times a warm answer.
"""

from __future__ import annotations

import contextlib
import os
import sys

from reports.warm import answer, plain_stats, range_of

__all__ = ["answer", "console", "main", "plain_stats"]


def console() -> None:
    """The ``testdb`` process (console script, ``python -m reports``): ``main``, then, once the
    output is flushed, an exit that skips the interpreter's teardown. Everything is written by
    then (caches are written atomically and closed as they go, subprocesses waited for); what
    is left is freeing the loaded plan's, graph's and inventory's ~10^5 records one by one and
    waiting for idle scan workers to wind down (they are ended instead: ``_end_workers``),
    ~50 ms of a warm audit that nobody needs (mypy's ``--fast-exit`` ends the same way).
    In-process callers (tests, ``reports.cli.main``) use ``main``, which returns or raises
    ``SystemExit`` as usual."""
    shape = range_of(sys.argv[1:])
    if shape is not None:  # git's first answers to an audit of a range, while click loads
        from auditor.gitearly import start

        start(*shape)
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # sys.exit("message"): printed, exit 1, as the interpreter does
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    for stream in (sys.stdout, sys.stderr):
        # a reader gone, or a closed stream: the exit code stands, as in `run`
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    _end_workers()
    os._exit(code)


def _end_workers() -> None:
    """``testdb.parallel.end_workers``, where a worker may have been started at all."""
    if "multiprocessing" in sys.modules:
        from testdb.parallel import end_workers

        end_workers()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    code = answer(args)
    if code is not None:
        sys.exit(code)
    from reports.cli import run

    run(args)
