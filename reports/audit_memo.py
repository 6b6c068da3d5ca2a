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

import functools
import hashlib
import marshal
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testdb.cachestore import Store, add, cache_key
from testdb.errors import Diagnostic, Severity, SourceLoc
from testdb.stamp import cache_dir, tool_key

FORMAT = 3  # bump when the layout below changes (3: the version in the store's tag)
KEEP = 64  # answers kept: a PR's heads, a reviewer's ranges
TEXT_FORMAT = 3  # bump when the layout of a kept rendering changes
TEXT_KEEP = 2 * KEEP  # renderings kept: text and markdown, with and without colour


def memo_key(change: Any, *, root: str, options_key: str, coverage: str | None,
             bot_command: str | None) -> str | None:
    """The key of one ``audit --head`` answer, or None when an input cannot be read here
    (the audit itself then says what is wrong with it). ``change``: ``auditor.diff.Change``
    from git; ``options_key``: ``ReplayOptions.key()`` of --stages, --triggers,
    --platform-facts and --rules."""
    coverage_digest = None
    if coverage is not None:
        try:
            with open(coverage, "rb") as fh:
                coverage_digest = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            return None
    return cache_key("audit", FORMAT, tool=tool_key(), root=root,
                     resolved_root=os.path.realpath(root), options=options_key,
                     bot_command=bot_command, coverage=coverage,
                     coverage_digest=coverage_digest, change=change_digest(change))


def change_digest(change: Any) -> str:
    """Everything of a change the audit reads: both commits, its files' paths, changed lines
    and texts, the files outside --root."""
    h = hashlib.sha256(b"change\0")
    for part in (change.base, change.head, change.source, change.checkout_side):
        add(h, part)
    add(h, list(change.outside_root))
    add(h, len(change.files))
    for f in change.files:
        for part in (f.old_path, f.new_path, ",".join(map(str, sorted(f.added))),
                     ",".join(map(str, sorted(f.removed))), f.old_text, f.new_text):
            add(h, part)
    return h.hexdigest()


def _answers() -> Store:
    return Store("audit", FORMAT, cache_dir(), keep=KEEP)


def _texts() -> Store:
    return Store("audittext", TEXT_FORMAT, cache_dir(), keep=TEXT_KEEP)


@dataclass(frozen=True)
class Kept:
    """Where the answer of one audit lies: its key and the sha256 of its bytes."""

    key: str
    digest: str

    def rendered(self, options: str, render: Callable[[], str]) -> str:
        """The output kept for this answer under ``options`` (every render option that can
        change a byte of it, in words), else ``render()``, kept for the next time."""
        store = _texts()
        key = self._text_key(options)
        try:
            kept_options, text = store.load(key)
            if kept_options == options and isinstance(text, str):
                return text
        except (ValueError, TypeError):
            pass  # missing, damaged, another layout: rendered afresh below
        text = render()
        store.dump(key, (options, text))  # a string marshal cannot write: not kept
        return text

    def _text_key(self, options: str) -> str:
        return _texts().key(answer=self.key, answer_digest=self.digest, options=options)


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
    payload = _answers().get(key)
    if payload is None:
        return None
    try:
        diags, summary, blob = marshal.loads(payload)
        if not isinstance(summary, dict) or not isinstance(blob, bytes):
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
        payload = marshal.dumps((diags, data["summary"], marshal.dumps(data)))
    except ValueError:  # a value marshal cannot write: nothing kept
        return None
    _answers().put(key, payload)
    return _kept(key, payload)


def _kept(key: str, payload: bytes) -> Kept:
    return Kept(key, hashlib.sha256(payload).hexdigest())
