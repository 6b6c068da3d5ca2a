"""On-disk cache of per-file scan results, keyed by file content and what else shapes them."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from testdb.files import read_cache, write_cache
from testdb.inventory.groups import Group, from_json, to_json

# The schema (bumped when the scanner's output for the same input changes) and the cache
# directory live in the light module a warm `stats` reads them from.
from testdb.inventory.tree import SCHEMA, default_cache_dir

__all__ = ["SCHEMA", "FileCache", "default_cache_dir", "file_key"]


def file_key(content: bytes, *context: str) -> str:
    """sha256 of the content and of the context the items depend on (id prefix, config)."""
    h = hashlib.sha256(f"testdb-inventory-v{SCHEMA}\0".encode())
    for part in context:
        h.update(part.encode())
        h.update(b"\0")
    h.update(content)
    return h.hexdigest()


class FileCache:
    """One small JSON file per scanned file; unreadable or corrupt entries are misses."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._root = str(self.directory)

    def _path(self, key: str) -> str:
        # plain strings: pathlib's parsing shows up when thousands of files are cached
        return os.path.join(self._root, key[:2], f"{key}.json")

    def get(self, key: str) -> list[Group] | None:
        """The entry, or None when missing or damaged (sealed like every cache file, so a
        flipped byte is a miss, not a wrong inventory)."""
        payload = read_cache(self._path(key))
        try:
            return from_json(json.loads(payload)) if payload is not None else None
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            return None

    def put(self, key: str, groups: list[Group]) -> None:
        # Written by scanning workers in parallel: one small file per scanned file, never
        # pruned (the whole-inventory cache is what a warm build reads).
        write_cache(self._path(key), json.dumps(to_json(groups), separators=(",", ":")).encode(),
                    keep=None)
