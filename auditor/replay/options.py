"""What besides the commit decides an audit of it, and where scratch trees are kept: apart
from ``auditor.replay.worker`` so that ``audit --head`` imports neither it nor the replay
records."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from auditor.replay.gitsource import repo_key
from testdb.errors import TestDbError
from testdb.files import read_text
from testdb.stamp import cache_dir


@dataclass(frozen=True)
class ReplayOptions:
    """What besides the commit decides an audit. A given file inside the repository is read
    from each commit's own tree (``in_tree``); one outside it is the same file throughout."""

    stages: str | None = None
    triggers: str | None = None
    platform_facts: str | None = None
    rules: str | None = None
    in_tree: tuple[str, ...] = ()  # which of the four are paths relative to the tree
    # The measured map (auditor.covmap.locate.find_map) every commit's audit reads, or None. It is
    # never in a commit's tree: one file throughout, its identity in ``key``.
    measured_map: str | None = None

    @classmethod
    def given(cls, repo: str, *, measured_map: str | None = None,
              **paths: str | None) -> ReplayOptions:
        base = os.path.realpath(repo)
        out: dict[str, str | None] = {}
        inside: list[str] = []
        for name, p in paths.items():
            if p is None:
                out[name] = None
                continue
            full = os.path.realpath(p)
            rel = os.path.relpath(full, base)
            if rel.startswith(".."):
                out[name] = full
            else:
                out[name] = rel.replace(os.sep, "/")
                inside.append(name)
        return cls(stages=out.get("stages"), triggers=out.get("triggers"),
                   platform_facts=out.get("platform_facts"), rules=out.get("rules"),
                   in_tree=tuple(sorted(inside)),
                   measured_map=os.path.realpath(measured_map) if measured_map else None)

    def path(self, name: str, root: str) -> str | None:
        p: str | None = getattr(self, name)
        if p is None:
            return None
        return os.path.join(root, p) if name in self.in_tree else p

    def key(self) -> str:
        """Distinguishes cached records: in-tree paths by name (their text is in the commit),
        outside files by content, the measured map by path and generation (as the audit memo
        keys it: a map that gained or lost a guard gives new records, never kept ones). No
        map adds nothing: the keys of replays without one are as they were."""
        h = hashlib.sha256()
        for name in ("stages", "triggers", "platform_facts", "rules"):
            p = getattr(self, name)
            h.update(f"{name}={p}|".encode())
            if p is not None and name not in self.in_tree:
                try:
                    h.update(read_text(p).encode("utf-8"))
                except TestDbError as exc:
                    h.update(str(exc).encode())
        if self.measured_map is not None:
            from auditor.covmap.store import map_token  # raises MapError on a damaged map

            h.update(f"map={map_token(self.measured_map)}|".encode())
        return h.hexdigest()


def replay_dir() -> str:
    """Where replay keeps its records and scratch trees, under the tool's cache directory."""
    return os.path.join(cache_dir(), "replay")


def trees_dir(repo: str) -> str:
    return os.path.join(replay_dir(), "trees", repo_key(repo))
