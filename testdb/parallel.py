"""A map over worker processes for the cold scans (test modules, import graph)."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")


class Scans(Protocol):
    """What runs a build's per-file scans: ``parallel_map``, or a caller that runs two builds'
    scans of the same files as one (``auditor.graph``: each file parsed once)."""

    def __call__(self, fn: Callable[[_T], _R], items: list[_T], /) -> Iterator[_R]: ...

# Below this many items, starting worker processes costs more than it saves.
MIN_ITEMS = 400


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # honours taskset and container CPU sets
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parallel_map(fn: Callable[[_T], _R], items: list[_T], *, workers: int | None = None,
                 min_items: int = MIN_ITEMS) -> Iterator[_R]:
    """``map(fn, items)`` in order, streamed (the caller uses results while workers still
    work); in worker processes when there are ``min_items`` or more. The workers start on
    their chunks when this is called, not when the results are first asked for, so a caller
    can do other work meanwhile (the audit builds the inventory while the import graph's
    modules are scanned). ``fn`` must be a module level function (it is pickled by name)."""
    n = workers if workers is not None else usable_cpus()
    if n <= 1 or not items or len(items) < min_items:
        return map(fn, items)
    # A few chunks per worker: each result crosses the process boundary once, and item sizes
    # vary enough that one chunk per worker would leave a worker idle.
    size = -(-len(items) // (n * 4))
    chunks = [(fn, items[i:i + size]) for i in range(0, len(items), size)]
    try:
        from concurrent.futures import ProcessPoolExecutor  # ~20 ms: only for a cold scan

        pool = ProcessPoolExecutor(max_workers=n, initializer=gc.disable)
    except (OSError, RuntimeError, NotImplementedError):
        # No process pool here (sandbox, frozen interpreter): serially is correct.
        return map(fn, items)
    return _results(pool, pool.map(_apply, chunks))


def _results(pool: Any, chunks: Iterator[list[_R]]) -> Iterator[_R]:
    done = False
    try:
        for chunk in chunks:
            yield from chunk
        done = True
    finally:
        # Not waiting for the workers to exit: a worker that scanned thousands of modules
        # takes a while to tear down, and the caller has other work meanwhile.
        pool.shutdown(wait=False, cancel_futures=not done)


def _apply(job: tuple[Callable[[Any], Any], list[Any]]) -> list[Any]:
    fn, chunk = job
    return [fn(x) for x in chunk]


def in_child(fn: Callable[..., _R], *args: Any) -> Callable[[], _R | None]:
    """``fn(*args)`` in a forked child process, started now; the function returned waits for
    its result (pickled back over a pipe), or None when the child failed or no child could
    be started: the caller then does the work itself, and meets any error there. A cold
    build runs in one (its own scans in its own workers, its records written to the caches)
    while this process parses the test plan, which then never waits for the GIL behind the
    scans' results; it opens what the child wrote, as a warm run does."""
    import multiprocessing

    try:
        ctx = multiprocessing.get_context("fork")  # the child needs no imports, no pickled fn
        received, sent = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_child, args=(sent, fn, args))
        child.start()
    except (OSError, RuntimeError, ValueError):  # no fork here (Windows, a sandbox)
        return lambda: None
    sent.close()

    def result() -> _R | None:
        # Not joined: once it has answered, the child ends by itself (``_child``).
        try:
            got: _R | None = received.recv()
        except (EOFError, OSError):  # the child died before answering
            got = None
        received.close()
        return got

    return result


def in_child_parts(fn: Callable[..., None], *args: Any) -> Callable[[str], Any]:
    """``in_child`` of a build with several answers: ``fn(tell, *args)`` runs in a forked
    child, and ``tell(name, value)`` sends one answer as soon as it is ready. The function
    returned waits for the answer of that name (None when the child ended without it: the
    caller then does that work itself, as with ``in_child``)."""
    import multiprocessing

    try:
        ctx = multiprocessing.get_context("fork")
        received, sent = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_parts_child, args=(sent, fn, args))
        child.start()
    except (OSError, RuntimeError, ValueError):
        return lambda _: None
    sent.close()
    got: dict[str, Any] = {}
    ended: list[bool] = []

    def answer(name: str) -> Any:
        while name not in got and not ended:
            try:
                tag, value = received.recv()
            except (EOFError, OSError):  # the child ended (or died)
                ended.append(True)
                received.close()
                break
            got[tag] = value
        return got.get(name)

    return answer


def in_fork(fn: Callable[[], None]) -> None:
    """``fn()`` in a fork of this process, which ends when ``fn`` returns, while this one
    goes on; here, first, where no fork can be made. For the last steps of a child's build
    that write files of their own and answer through ``in_child_parts``' ``tell`` (the
    import graph's while this process writes the inventory's): nothing comes back, and an
    error leaves the answer untold (the caller then does that work itself)."""
    fork = getattr(os, "fork", None)
    try:
        pid = fork() if fork is not None else -1
    except OSError:
        pid = -1
    if pid < 0:
        with contextlib.suppress(Exception):
            fn()
        return
    if pid == 0:
        try:
            with contextlib.suppress(Exception):
                fn()
        finally:
            os._exit(0)  # not this process's teardown nor exit handlers: the parent's


def _parts_child(sent: Any, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
    def tell(name: str, value: Any) -> None:
        sent.send((name, value))

    # The caller does what was not answered again, and meets any error there.
    with contextlib.suppress(Exception):
        fn(tell, *args)
    try:
        sent.close()
    finally:
        end_workers()
        os._exit(0)


def _child(sent: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        out = fn(*args)
    except Exception:  # the caller does the work again and reports the error itself
        out = None
    try:
        sent.send(out)
        sent.close()
    finally:
        # Everything is written (caches atomically, as they go): the child ends here, its
        # own idle scan workers with it, without the teardown of what it built (as the
        # ``testdb`` process ends: reports.entry.console).
        end_workers()
        os._exit(0)


def end_workers() -> None:
    """End this process's worker processes that are still alive: idle ones, or ones whose
    work is no longer wanted. Before an exit that skips the interpreter's teardown, which
    would have told them to go: left running, they would wait for work forever, holding
    the streams they inherited open (a caller reading them to the end would hang)."""
    import multiprocessing

    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            child.terminate()
