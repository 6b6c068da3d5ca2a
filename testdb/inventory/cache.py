"""On-disk cache of per-file scan results, keyed by file content and what else shapes them."""

from __future__ import annotations

import json
from pathlib import Path

from testdb.cachestore import Store, cache_key
from testdb.inventory.groups import Group, from_json, to_json

# The schema (bumped when the scanner's output for the same input changes) and the cache
# directory live in the light module a warm `stats` reads them from.
from testdb.inventory.tree import SCHEMA, default_cache_dir

__all__ = ["SCHEMA", "FileCache", "default_cache_dir", "file_key"]


def file_key(content: bytes, *context: str) -> str:
    """The key of one file's scan (``testdb.cachestore``'s ``inventory`` row): the scanner's
    ``SCHEMA``, the file's bytes and the context its items depend on, as ``build`` gives it
    (the static config's fingerprint, the file's id prefix and path, its ``-k`` dirs)."""
    return cache_key("inventory", SCHEMA, context=context, content=content)


class FileCache:
    """One small sealed JSON file per scanned file; unreadable or corrupt entries are misses."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        # plain strings: pathlib's parsing shows up when thousands of files are cached
        self._store = Store("inventory", SCHEMA, str(self.directory), suffix=".json",
                            fanout=True)

    def get(self, key: str) -> list[Group] | None:
        """The entry, or None when missing or damaged (sealed like every cache file, so a
        flipped byte is a miss, not a wrong inventory)."""
        payload = self._store.get(key)
        try:
            return from_json(json.loads(payload)) if payload is not None else None
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            return None

    def put(self, key: str, groups: list[Group]) -> None:
        # Written by scanning workers in parallel: one small file per scanned file, never
        # pruned (the whole-inventory cache is what a warm build reads).
        self._store.put(key, json.dumps(to_json(groups), separators=(",", ":")).encode())
