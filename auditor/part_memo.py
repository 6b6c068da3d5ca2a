"""The module tier's per-test-file parts (``Auditor._file_part``), kept between audits.

A part is what one test file's module-tier links decide: the same for every module that
reaches the file, and a function of the file's items, the test plan, the stages this PR's
pipeline starts and this code alone. So one file per (code, plan, started stages) holds, per
test file, the part and the key its items were built from (``PackedInventory.file_key``); a
part is used only while that key is the file's. A warm audit then judges the module tier
without asking where each of its thousands of tests runs; a new push that changes a few test
files judges only those afresh.

Parts are kept as id lists: every module-tier link is ``Evidence(id, "module", 1, REASON)``.
Unreadable or damaged files are misses (``read_cache``); a failed write only costs speed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from auditor.evidence import Evidence, Level, same_links
from auditor.verdict import Decision
from testdb.cachestore import Store
from testdb.stamp import tool_key

FORMAT = 1  # bump when the layout below changes
KEEP = 8  # one file per plan and pipeline: a checkout's branches and PRs differ in both
REASON = "imports the changed module"
MODULE = Level("module")

# (decision, the ids worth showing with their verdict's order, stages of those not pre-merge)
Part = tuple[Decision, list[tuple[int, str]], frozenset[str]]
_Stored = tuple[str, bool, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...],
                tuple[str, ...], tuple[tuple[int, str], ...], tuple[str, ...]]


def module_links(ids: Iterable[str]) -> list[Evidence]:
    """A test file's module-tier links (without the distance, which differs per module)."""
    return same_links(ids, "module", 1, REASON)


class PartMemo:
    """Parts by test file id, each with the key of the items it was judged from."""

    def __init__(self, store: Store, key: str, parts: dict[str, tuple[str, _Stored]],
                 key_of: Callable[[str], str | None]) -> None:
        self._store, self._key = store, key
        self.path = store.path(key)
        self._parts = parts
        self._key_of = key_of
        self._dirty = False

    @classmethod
    def open(cls, cache_dir: str, plan_key: str, started: Iterable[str],
             key_of: Callable[[str], str | None]) -> PartMemo:
        """The memo of this plan (``Index.key``) and this pipeline (the started stages);
        ``key_of``: a test file id's items key (None: unknown, never memoized)."""
        store = Store("parts", FORMAT, cache_dir, keep=KEEP)
        key = store.key(tool=tool_key(), plan=plan_key, started=sorted(started))
        parts = store.load(key)
        return cls(store, key, parts if isinstance(parts, dict) else {}, key_of)

    def get(self, file_id: str) -> Part | None:
        """The file's part, when it was judged from the items the file has now."""
        entry = self._parts.get(file_id)
        try:
            if entry is None or entry[0] != self._key_of(file_id):
                return None
            verdict, decided, deciding, pre, other, invalid, weak, top, stages = entry[1]
            d = Decision(MODULE if decided else None, verdict, tuple(module_links(deciding)), pre,
                         other, invalid, weak)
            return d, [(int(o), str(t)) for o, t in top], frozenset(stages)
        except (TypeError, ValueError, IndexError, KeyError):  # a layout this code does not
            return None  # know: judged afresh

    def put(self, file_id: str, part: Part) -> None:
        key = self._key_of(file_id)
        d, top, stages = part
        if key is None or d.level not in (None, MODULE):
            return
        self._parts[file_id] = (key, (
            d.verdict, d.level is not None, tuple(e.test_id for e in d.deciding), d.pre_merge,
            d.not_pre_merge, d.invalid, d.weak, tuple(top), tuple(sorted(stages))))
        self._dirty = True

    def save(self) -> None:
        if self._dirty:
            self._store.dump(self._key, self._parts)
            self._dirty = False
