"""The per-commit replay cache: one sealed JSON record per (commit, tool code, options)."""

from __future__ import annotations

import json
import os

from auditor.replay.model import RECORD_VERSION, CommitRecord, record_from_json, record_json
from auditor.replay.options import replay_dir
from testdb.cachestore import Store
from testdb.errors import InputError
from testdb.stamp import tool_key

# Records kept (a few KB each), the newest written; every change of the tool's code or of the
# options is a new key, so without a bound the directory grows without end. A record pruned
# only costs its commit's audit again.
KEEP = 10_000


class RecordCache:
    """Records keyed by commit sha, its first parent, the tool's code and the options that
    change an audit (stage table, triggers, path rules). A record of a commit is the same in
    every clone (a sha names its whole tree and history), so the cache is shared."""

    def __init__(self, options_key: str, directory: str | None = None) -> None:
        self.dir = directory or os.path.join(replay_dir(), "records")
        # pruned once a run (``prune``), not on every record written
        self._store = Store("rec", RECORD_VERSION, self.dir, keep=KEEP, suffix=".json",
                            prune_each=False)
        self._tool, self._options = tool_key(), options_key

    def _key(self, sha: str, parent: str | None) -> str:
        return self._store.key(tool=self._tool, options=self._options, sha=sha,
                               parent=parent)[:40]

    def _path(self, sha: str, parent: str | None) -> str:
        return self._store.path(self._key(sha, parent))

    def get(self, sha: str, parent: str | None) -> CommitRecord | None:
        payload = self._store.get(self._key(sha, parent))
        if payload is None:
            return None
        try:
            rec = record_from_json(json.loads(payload), "replay cache")
        except (InputError, ValueError, TypeError, KeyError, RecursionError):
            return None
        return rec if rec.sha == sha and rec.parent == parent else None

    def put(self, rec: CommitRecord) -> None:
        if rec.status == "failed":  # a failure may be the environment's: try again next time
            return
        payload = json.dumps(record_json(rec), separators=(",", ":")).encode("utf-8")
        self._store.put(self._key(rec.sha, rec.parent), payload)

    def prune(self) -> None:
        """Keep the ``KEEP`` newest records (``Store.prune``, as the other caches do);
        called once a run, not on every record written."""
        self._store.prune()
