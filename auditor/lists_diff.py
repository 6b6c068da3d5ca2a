"""Test-list lines added, removed or moved between pre-merge and post-merge blocks by a change."""

from __future__ import annotations

from typing import Any

from auditor.diff import FileChange


def _placements(fc: FileChange, text: str | None, path: str) -> dict[tuple[str, str],
                                                                    tuple[str, int]]:
    """(context, test) -> (stage term, line) for one side of a list file."""
    if text is None:
        return {}
    # Imported here: most changes touch no list file, and PyYAML is slow to import.
    from testdb.lists import load_list_text
    from testdb.testdb_yaml import load_testdb_text

    out: dict[tuple[str, str], tuple[str, int]] = {}
    if path.endswith((".yml", ".yaml")):
        res = load_testdb_text(text, path, "qa" if "/qa/" in path else "l0")
        for ctx in res.contexts:
            for block in ctx.blocks:
                for e in block.entries:
                    out.setdefault((ctx.name, e.test), (block.stage_term or "any", e.loc.line))
    elif path.endswith(".txt"):
        for e in load_list_text(text, path, waive=path.endswith("waives.txt")).entries:
            out.setdefault(("(list)", e.test), ("qa", e.loc.line))
    return out


def list_changes(files: list[FileChange]) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    for fc in files:
        old = _placements(fc, fc.old_text, fc.old_path or fc.path)
        new = _placements(fc, fc.new_text, fc.path)
        for key in sorted(set(old) | set(new)):
            ctx, test = key
            before, after = old.get(key), new.get(key)
            if before == after or (before and after and before[0] == after[0]):
                continue
            if before is None:
                kind, line = "added", after[1] if after else 0
            elif after is None:
                kind, line = "removed", before[1]
            elif before[0] == "pre_merge" and after[0] == "post_merge":
                kind, line = "moved-to-post-merge", after[1]
            elif before[0] == "post_merge" and after[0] == "pre_merge":
                kind, line = "moved-to-pre-merge", after[1]
            else:
                kind, line = "moved", after[1]
            changes.append({"kind": kind, "path": fc.path, "line": line, "context": ctx,
                            "test": test, "before": before[0] if before else None,
                            "after": after[0] if after else None})
    return changes
