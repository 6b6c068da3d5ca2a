"""Audit one commit against its first parent, with the test plan read from that commit."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

from auditor.replay.gitsource import CommitInfo, ScratchTree
from auditor.replay.model import CommitRecord
from auditor.replay.options import ReplayOptions, trees_dir
from auditor.replay.record import commit_record, failed_record, root_record, waive_changes
from testdb.errors import InputError, TestDbError

WAIVES = "tests/integration/test_lists/waives.txt"
_TEST_DIRS = ("tests/integration/defs/", "tests/unittest/")
_INDEX_MEMO = 4


class CommitAuditor:
    """Holds a scratch tree and the loaded plans and inventory between commits of one worker."""

    def __init__(self, repo: str, options: ReplayOptions, slot_hint: int = 0,
                 use_cache: bool = True) -> None:
        self.repo = repo
        self.options = options
        self.use_cache = use_cache  # False: every plan parsed afresh (--no-cache)
        self.tree = ScratchTree(repo, trees_dir(repo), slot_hint)
        self._indexes: dict[str, Any] = {}
        self._inventory: Any = None

    def close(self) -> None:
        self.tree.close()

    def audit(self, info: CommitInfo) -> CommitRecord:
        if info.parent is None:
            return root_record(info)
        t0 = time.perf_counter()
        try:
            return self._audit(info, t0)
        except TestDbError as exc:
            return failed_record(info, str(exc), time.perf_counter() - t0)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # one commit's crash must not lose the others: say which
            return failed_record(info, f"internal error: {type(exc).__name__}: {exc}",
                                 time.perf_counter() - t0)

    def _audit(self, info: CommitInfo, t0: float) -> CommitRecord:
        from auditor.audit import run_audit
        from auditor.diff import from_git

        assert info.parent is not None
        changed = self.tree.checkout(info.tree)
        if any(p.startswith(_TEST_DIRS) for p in changed):
            self._inventory = None
        root = self.tree.root
        index = self.load_index()
        src = index.sources
        if src is not None and not (src.testdb or src.qa_yaml or src.qa_txt):
            # A tree without test lists has no plan to judge against: not checked, not guarded.
            raise InputError("this commit's tree has no test lists "
                             "(tests/integration/test_lists)", hint="nothing to audit against")
        # The change comes from git objects; its files are then judged against the scratch
        # tree, which holds the head side.
        change = dataclasses.replace(from_git(self.repo, info.parent, info.sha), root=root,
                                     checkout_side="head")
        if self._inventory is None:
            from testdb.inventory import build_static

            self._inventory = build_static(root)
        audit = run_audit(index, change, inventory=self._inventory,
                          rules=self.options.path("rules", root),
                          measured_map=self.options.measured_map)
        waives: tuple[Any, ...] = ()
        for fc in change.files:
            if WAIVES in (fc.old_path, fc.new_path):
                waives = waive_changes(fc.old_text if fc.old_path == WAIVES else None,
                                       fc.new_text if fc.new_path == WAIVES else None, WAIVES)
        errors = tuple(str(d) for d in index.errors)[:5]
        return commit_record(info, audit, waives=waives, plan_errors=errors,
                             seconds=time.perf_counter() - t0)

    def load_index(self) -> Any:
        """The plan of the commit in the scratch tree; loaded plans are kept by content key."""
        from testdb.index import load_sources, locate

        root = self.tree.root
        plan = locate(root, stages=self.options.path("stages", root),
                      triggers=self.options.path("triggers", root),
                      platform_facts=self.options.path("platform_facts", root),
                      use_cache=self.use_cache)
        index = self._indexes.get(plan.key)
        if index is None:
            index = load_sources(plan.src, use_cache=self.use_cache, read=plan.read,
                                 key=plan.key)
            if len(self._indexes) >= _INDEX_MEMO:
                self._indexes.pop(next(iter(self._indexes)))
            self._indexes[plan.key] = index
        return index


@contextlib.contextmanager
def plan_at(repo: str, options: ReplayOptions, info: CommitInfo) -> Iterator[Any]:
    """The test plan of one commit, loaded from a scratch tree (read-only while it is used)."""
    worker = CommitAuditor(repo, options)
    try:
        worker.tree.checkout(info.tree)
        yield worker.load_index()
    finally:
        worker.close()
