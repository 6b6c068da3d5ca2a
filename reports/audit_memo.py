"""The answers of ``audit --base REV --head REV``, kept: the same audit asked again is read back.

Between two commits the audit is a function of git objects and a few named inputs, as a
replay record of a commit is (``auditor.replay.cache``): the change (every changed file's
paths, changed lines and both texts), the head commit (its tree is the plan, the test
sources and the import graph the audit judged with), the stage table, triggers, platform
facts and path rules given outside the checkout (by content; inside it they are the head
commit's), the coverage data (by content), the ``/bot run`` command, the checkout as named
(the provenance shows it) and this code (``testdb.stamp.tool_key``: the tool's modules,
Python's and pytest's versions).
The key covers all of them; any other answer is computed afresh. The bot comment, ``launch``
and a reviewer re-running the query ask for the same audit of a PR's head, and only the first
pays for it.

The work tree is never memoized (``--diff``, or ``--base`` without ``--head``): it changes
without a commit to name it. ``--no-cache`` neither reads nor writes the memo. A memo that
cannot be read (damaged, another layout) is a miss; one that cannot be written costs speed.
The versions of PyYAML and networkx are not in the key, as they are not in the keys of the
caches below it (the plan's, the graph's): after upgrading one, run once with ``--no-cache``
or empty the cache directory. GPU run results are not part of an audit (the comment and the
report fold them in when they render), so a kept answer never hides a new result.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from typing import Any

from testdb.errors import Diagnostic, Severity, SourceLoc
from testdb.files import read_cache, write_cache
from testdb.stamp import cache_dir, tool_key

FORMAT = 1  # bump when the layout below changes
KEEP = 64  # answers kept: a PR's heads, a reviewer's ranges


def memo_key(change: Any, *, root: str, options_key: str, coverage: str | None,
             bot_command: str | None) -> str | None:
    """The key of one ``audit --head`` answer, or None when an input cannot be read here
    (the audit itself then says what is wrong with it). ``change``: ``auditor.diff.Change``
    from git; ``options_key``: ``ReplayOptions.key()`` of --stages, --triggers,
    --platform-facts and --rules."""
    h = hashlib.sha256(f"audit-memo-v{FORMAT}\0{tool_key()}\0".encode())
    for part in (root, os.path.realpath(root), options_key, bot_command):
        _add(h, part)
    if coverage is not None:
        try:
            with open(coverage, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        _add(h, coverage)
        h.update(hashlib.sha256(data).digest())
    h.update(change_digest(change).encode())
    return h.hexdigest()


def change_digest(change: Any) -> str:
    """Everything of a change the audit reads: both commits, its files' paths, changed lines
    and texts, the files outside --root."""
    h = hashlib.sha256(b"change\0")
    for part in (change.base, change.head, change.source, change.checkout_side,
                 *change.outside_root, "\0files"):
        _add(h, part)
    for f in change.files:
        for part in (f.old_path, f.new_path, ",".join(map(str, sorted(f.added))),
                     ",".join(map(str, sorted(f.removed))), f.old_text, f.new_text):
            _add(h, part)
    return h.hexdigest()


def _add(h: Any, part: str | None) -> None:
    """One field, told apart from its neighbours and from None."""
    if part is None:
        h.update(b"\1")
        return
    data = part.encode("utf-8", "surrogatepass")
    h.update(b"\2" + len(data).to_bytes(8, "little") + data)


def _path(key: str) -> str:
    return os.path.join(cache_dir(), f"audit-{key}.marshal")


def get(key: str) -> tuple[dict[str, Any], list[Diagnostic]] | None:
    """The audit JSON and the plan's diagnostics kept under ``key``, or None."""
    payload = read_cache(_path(key))
    if payload is None:
        return None
    try:
        version, data, diags = marshal.loads(payload)
        if version != FORMAT or not isinstance(data, dict):
            return None
        return data, [Diagnostic(SourceLoc(path, line), Severity(sev), message, rule)
                      for path, line, sev, message, rule in diags]
    except (ValueError, EOFError, TypeError):
        return None


def put(key: str, data: dict[str, Any], diagnostics: list[Diagnostic]) -> None:
    diags = [(d.loc.path, d.loc.line, d.severity.value, d.message, d.rule) for d in diagnostics]
    try:
        payload = marshal.dumps((FORMAT, data, diags))
    except ValueError:  # a value marshal cannot write: nothing kept
        return
    write_cache(_path(key), payload, keep=KEEP)
