"""The replay loop: cached records first, then the rest audited in order or in processes."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from auditor.replay.cache import RecordCache
from auditor.replay.gitsource import CommitInfo, first_parent_commits, git
from auditor.replay.model import CommitRecord
from auditor.replay.options import ReplayOptions
from auditor.replay.worker import CommitAuditor
from testdb.errors import UsageError

# (records done so far, commits in all, the record just done, whether it came from the cache)
Progress = Callable[[int, int, CommitRecord, bool], None]


@dataclass
class ReplayRun:
    repo: str
    rev_range: str
    commits: list[CommitInfo]
    records: list[CommitRecord] = field(default_factory=list)  # in commit order
    cached: int = 0
    interrupted: bool = False

    @property
    def missing(self) -> list[CommitInfo]:
        done = {r.sha for r in self.records}
        return [c for c in self.commits if c.sha not in done]


def top_level(root: str) -> str:
    """The repository's work tree top: replay reads whole trees, so --root must be it."""
    top = git(root, "rev-parse", "--show-toplevel").strip()
    if os.path.realpath(top) != os.path.realpath(root):
        raise UsageError(f"{root} is inside the git work tree {top}, not its top",
                         hint=f"pass --root {top}")
    return root


def replay(repo: str, rev_range: str, options: ReplayOptions, *, jobs: int = 1,
           use_cache: bool = True, progress: Progress | None = None) -> ReplayRun:
    """Audit every first-parent commit of ``rev_range`` against its first parent. A Ctrl-C
    stops the run: the records done so far are returned (and cached), ``interrupted`` set."""
    top_level(repo)
    commits = first_parent_commits(repo, rev_range)
    run = ReplayRun(repo, rev_range, commits)
    cache = RecordCache(options.key()) if use_cache else None
    got: dict[str, CommitRecord] = {}
    todo: list[CommitInfo] = []
    for c in commits:
        hit = cache.get(c.sha, c.parent) if cache else None
        if hit is None:
            todo.append(c)
        else:
            got[c.sha] = hit
            run.cached += 1
            if progress:
                progress(len(got), len(commits), hit, True)

    def done(rec: CommitRecord) -> None:
        got[rec.sha] = rec
        if cache:
            cache.put(rec)
        if progress:
            progress(len(got), len(commits), rec, False)

    try:
        if jobs <= 1 or len(todo) <= 1:
            _serial(repo, options, todo, done, use_cache)
        else:
            _parallel(repo, options, todo, done, jobs, use_cache)
    except KeyboardInterrupt:
        run.interrupted = True
    if cache and len(got) > run.cached:  # records were written
        cache.prune()
    run.records = [got[c.sha] for c in commits if c.sha in got]
    return run


def _serial(repo: str, options: ReplayOptions, todo: list[CommitInfo],
            done: Callable[[CommitRecord], None], use_cache: bool) -> None:
    if not todo:
        return
    worker = CommitAuditor(repo, options, use_cache=use_cache)
    try:
        for c in todo:
            done(worker.audit(c))
    finally:
        worker.close()


# ---- processes ------------------------------------------------------------------------------

_WORKER: CommitAuditor | None = None


def _init(repo: str, options: ReplayOptions, use_cache: bool) -> None:
    global _WORKER
    # The parent answers Ctrl-C: it stops handing out commits and keeps what came back.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = CommitAuditor(repo, options, use_cache=use_cache)


def _audit_one(info: CommitInfo) -> CommitRecord:
    assert _WORKER is not None
    return _WORKER.audit(info)


def _parallel(repo: str, options: ReplayOptions, todo: list[CommitInfo],
              done: Callable[[CommitRecord], None], jobs: int, use_cache: bool) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx,
                               initializer=_init, initargs=(repo, options, use_cache))
    pending: set[Future[CommitRecord]] = set()
    try:
        pending = {pool.submit(_audit_one, c) for c in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                done(fut.result())
    except KeyboardInterrupt:
        for fut in pending:
            fut.cancel()
        # Commits already being audited finish (a second or so) and are kept.
        for fut in pending:
            if not fut.cancelled():
                try:
                    done(fut.result())
                except Exception:  # a worker that died on the way out: nothing to keep
                    continue
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
