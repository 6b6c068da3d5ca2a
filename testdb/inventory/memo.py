"""Classify each distinct self-contained decorator once per process, whatever module it is in."""

from __future__ import annotations

import ast
import itertools
import re

from testdb.inventory import pytest_rules
from testdb.inventory.config import StaticConfig
from testdb.inventory.decorators import Effect, classify
from testdb.inventory.values import Scope

_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# (text, aliases, fingerprint, function name or "", (constant, its value's text) each)
_Key = tuple[bytes, tuple[tuple[str, str], ...], str, str, tuple[tuple[str, bytes], ...]]
_MEMO: dict[_Key, Effect] = {}
_WORDS: dict[bytes, frozenset[str]] = {}
_MEMO_MAX = 100_000
# config.fingerprint() by (config, the pytest rules it depends on): one digest per module
# cost the benchmark tree's scan 0.05 s.
_FINGERPRINTS: dict[tuple[StaticConfig, pytest_rules.PytestRules], str] = {}


class DecoratorMemo:
    """``decorators.classify`` with a process-wide memo, for one module's source (every scope
    given to ``classify`` is of that module).

    The same literal decorators recur across a test tree (``parametrize_with_ids(
    "torch_compile", [False, True])``); evaluating each once is most of the scan's speed.
    A decorator is self-contained when every identifier in its text is unbound in the module
    (builtins, keywords, attribute names, words inside strings) or an import alias, whose
    meaning goes into the key; or a constant whose value's text is self-contained in the same
    way (``parametrize("model", MODELS)``, 3,015 of the benchmark tree's 3,127 decorators
    that were classified afresh), whose name and text go into the key. Anything naming a def,
    a name with no known value where it is read, or a constant whose value names one of
    those or another constant is classified afresh.
    The memo lives in this process only, keyed by a tuple (hashing each key, as the caches on
    disk do, would cost the scan what the memo saves); its row in ``testdb/cachestore.py``'s
    key table says what the key holds.
    """

    def __init__(self, raw: bytes, config: StaticConfig) -> None:
        self.raw = raw
        self.config = config
        self.fingerprint = _fingerprint(config)
        self.line_starts = line_starts(raw)
        # words -> the import aliases among them and what they name, in this module
        self._aliases: dict[frozenset[str], tuple[tuple[str, str], ...]] = {}

    def classify(self, node: ast.expr, scope: Scope, line: int, func_name: str = "") -> Effect:
        text = self._segment(node)
        if text is None or not text.isascii():  # _IDENT sees ASCII names only
            return classify(node, scope, line, self.config, func_name)
        words = _words(text)
        # parameterized.expand names its functions after the decorated one
        expands = b"expand" in text
        consts: tuple[tuple[str, bytes], ...] = ()
        if not words.isdisjoint(scope.bound_names):
            read = (self._constants(words & scope.bound_names, scope, line)
                    if b"lambda" not in text else None)
            if read is None:
                return classify(node, scope, line, self.config, func_name)
            consts, more = read
            words |= more
            expands = expands or any(b"expand" in c for _, c in consts)
        aliases = self._aliases.get(words)
        if aliases is None:  # the same words recur in a module's decorators: sorted once
            module_aliases = scope.module().aliases
            aliases = self._aliases[words] = tuple(sorted(
                (w, module_aliases[w]) for w in words if w in module_aliases))
        key = (text, aliases, self.fingerprint, func_name if expands else "", consts)
        effect = _MEMO.get(key)
        if effect is None:
            effect = classify(node, scope, line, self.config, func_name)
            if len(_MEMO) >= _MEMO_MAX:
                _MEMO.clear()
            _MEMO[key] = effect
        return effect

    def _constants(self, names: frozenset[str], scope: Scope, line: int
                   ) -> tuple[tuple[tuple[str, bytes], ...], frozenset[str]] | None:
        """What ``names`` (bound in ``scope``) mean at ``line``, where each is a constant
        whose value is self-contained in its own scope (``scope.lookup`` reads it, as the
        classification does): (name, the value's text) each, and the words of those texts;
        else None. (The caller keeps out decorators with a lambda: its free names are read
        at the module's end, not at ``line``.) A text that is not ASCII may hold names
        ``_IDENT`` does not see."""
        consts = []
        words: frozenset[str] = frozenset()
        for name in sorted(names):
            found = scope.lookup(name, line)
            if not isinstance(found, tuple):
                return None  # a def, or a name with no known value at ``line``
            value, value_scope = found
            text = self._segment(value)
            if text is None or not text.isascii():
                return None
            value_words = _words(text)
            if not value_words.isdisjoint(value_scope.bound_names):
                return None
            consts.append((name, text))
            words |= value_words
        return tuple(consts), words

    def _segment(self, node: ast.expr) -> bytes | None:
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        starts = self.line_starts
        if node.end_lineno > len(starts):
            return None
        # ast offsets are UTF-8 byte offsets: slice the bytes
        return self.raw[starts[node.lineno - 1] + node.col_offset:
                        starts[node.end_lineno - 1] + node.end_col_offset]


def _words(text: bytes) -> frozenset[str]:
    """The identifiers in a decorator's (or a constant's) text."""
    words = _WORDS.get(text)
    if words is None:
        words = frozenset(w.decode() for w in _IDENT.findall(text))
        if len(_WORDS) >= _MEMO_MAX:
            _WORDS.clear()
        _WORDS[text] = words
    return words


def _fingerprint(config: StaticConfig) -> str:
    key = (config, pytest_rules.installed())
    got = _FINGERPRINTS.get(key)
    if got is None:
        got = _FINGERPRINTS[key] = config.fingerprint()
    return got


def line_starts(raw: bytes) -> list[int]:
    """The byte offset each line of ``raw`` starts at (lines end at ``\\r\\n``, ``\\r`` or
    ``\\n``, as for the parser), the first line's 0 first."""
    starts = [0, *itertools.accumulate(map(len, raw.splitlines(keepends=True)))]
    if raw and raw[-1] not in b"\r\n":
        starts.pop()  # the offset past the last line, which ends without a line break
    return starts
