"""The per-commit replay cache: one sealed JSON record per (commit, tool code, options)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os

from auditor.replay.model import RECORD_VERSION, CommitRecord, record_from_json, record_json
from auditor.replay.options import replay_dir
from testdb.errors import InputError
from testdb.files import prune, read_cache, write_cache
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
        self._salt = f"{RECORD_VERSION}|{tool_key()}|{options_key}"

    def _path(self, sha: str, parent: str | None) -> str:
        key = hashlib.sha256(f"{self._salt}|{sha}|{parent}".encode()).hexdigest()[:40]
        return os.path.join(self.dir, f"rec-{key}.json")

    def get(self, sha: str, parent: str | None) -> CommitRecord | None:
        payload = read_cache(self._path(sha, parent))
        if payload is None:
            return None
        try:
            rec = record_from_json(json.loads(payload), "replay cache")
        except (InputError, ValueError, TypeError, KeyError):
            return None
        return rec if rec.sha == sha else None

    def put(self, rec: CommitRecord) -> None:
        if rec.status == "failed":  # a failure may be the environment's: try again next time
            return
        payload = json.dumps(record_json(rec), separators=(",", ":")).encode("utf-8")
        write_cache(self._path(rec.sha, rec.parent), payload, keep=None)  # pruned per run

    def prune(self) -> None:
        """Keep the ``KEEP`` newest records (``testdb.files.prune``, as the other caches do);
        called once a run, not on every record written."""
        with contextlib.suppress(OSError):
            prune(os.path.join(self.dir, "rec-"), KEEP)
