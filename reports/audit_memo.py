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

The printed text and markdown are kept too (``Kept.rendered``): rendering 200 behaviours' text
again cost as much as the rest of a hit. A rendering is a function of the answer, the render
options (colour, width) and this code, so it is kept under the answer's key (the code is in
it), the digest of the answer's bytes (an answer written again under the same key never
serves the text of the one before) and the options in words; any other options, or a kept
text that cannot be read, render afresh.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testdb.errors import Diagnostic, Severity, SourceLoc
from testdb.files import read_cache, write_cache
from testdb.stamp import cache_dir, tool_key

FORMAT = 2  # bump when the layout below changes
KEEP = 64  # answers kept: a PR's heads, a reviewer's ranges
TEXT_FORMAT = 2  # bump when the layout of a kept rendering changes
TEXT_KEEP = 2 * KEEP  # renderings kept: text and markdown, with and without colour


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


@dataclass(frozen=True)
class Kept:
    """Where the answer of one audit lies: its key and the sha256 of its bytes."""

    key: str
    digest: str

    def rendered(self, options: str, render: Callable[[], str]) -> str:
        """The output kept for this answer under ``options`` (every render option that can
        change a byte of it, in words), else ``render()``, kept for the next time."""
        path = self._text_path(options)
        payload = read_cache(path)
        if payload is not None:
            try:
                version, kept_options, text = marshal.loads(payload)
                if version == TEXT_FORMAT and kept_options == options and isinstance(text, str):
                    return text
            except (ValueError, EOFError, TypeError):
                pass  # another layout: rendered afresh below
        text = render()
        with contextlib.suppress(ValueError):  # a string marshal cannot write: not kept
            write_cache(path, marshal.dumps((TEXT_FORMAT, options, text)), keep=TEXT_KEEP)
        return text

    def _text_path(self, options: str) -> str:
        h = hashlib.sha256(f"audit-text-v{TEXT_FORMAT}\0".encode())
        for part in (self.key, self.digest, options):
            _add(h, part)
        return os.path.join(cache_dir(), f"audittext-{h.hexdigest()}.marshal")


@dataclass(frozen=True)
class Answer:
    """An audit's answer as the command prints it: its summary (the exit code) and the plan's
    diagnostics at once, the audit JSON when asked (``load``). A kept answer's JSON is decoded
    only then: a text hit prints the kept text, and 5 MB for 200 behaviours took a fifth of
    it to decode."""

    summary: dict[str, Any]
    diagnostics: list[Diagnostic]
    load: Callable[[], dict[str, Any]]
    kept: Kept | None = None


def get(key: str) -> tuple[dict[str, Any], list[Diagnostic]] | None:
    """The audit JSON and the plan's diagnostics kept under ``key``, or None."""
    got = get_answer(key)
    return None if got is None else (got.load(), got.diagnostics)


def get_answer(key: str) -> Answer | None:
    """``get``, the JSON decoded when asked, and where the answer lies (for its renderings)."""
    payload = read_cache(_path(key))
    if payload is None:
        return None
    try:
        version, diags, summary, blob = marshal.loads(payload)
        if version != FORMAT or not isinstance(summary, dict) or not isinstance(blob, bytes):
            return None
        return Answer(summary, [Diagnostic(SourceLoc(path, line), Severity(sev), message, rule)
                                for path, line, sev, message, rule in diags],
                      functools.cache(lambda: _data(blob)), _kept(key, payload))
    except (ValueError, EOFError, TypeError):
        return None


def _data(blob: bytes) -> dict[str, Any]:
    # sealed (read_cache) and written by this layout: a dict, or the seal would have failed
    data = marshal.loads(blob)
    assert isinstance(data, dict)
    return data


def put(key: str, data: dict[str, Any], diagnostics: list[Diagnostic]) -> Kept | None:
    """Keep an answer; where it lies, or None when marshal cannot write it."""
    diags = [(d.loc.path, d.loc.line, d.severity.value, d.message, d.rule) for d in diagnostics]
    try:
        payload = marshal.dumps((FORMAT, diags, data["summary"], marshal.dumps(data)))
    except ValueError:  # a value marshal cannot write: nothing kept
        return None
    write_cache(_path(key), payload, keep=KEEP)
    return _kept(key, payload)


def _kept(key: str, payload: bytes) -> Kept:
    return Kept(key, hashlib.sha256(payload).hexdigest())
