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
_Key = tuple[bytes, tuple[tuple[str, str], ...], str, str]
_MEMO: dict[_Key, Effect] = {}
_WORDS: dict[bytes, frozenset[str]] = {}
_MEMO_MAX = 100_000
# config.fingerprint() by (config, the pytest rules it depends on): one digest per module
# cost the benchmark tree's scan 0.05 s.
_FINGERPRINTS: dict[tuple[StaticConfig, pytest_rules.PytestRules], str] = {}


class DecoratorMemo:
    """``decorators.classify`` with a process-wide memo, for one module's source.

    The same literal decorators recur across a test tree (``parametrize_with_ids(
    "torch_compile", [False, True])``); evaluating each once is most of the scan's speed.
    A decorator is self-contained when every identifier in its text is unbound in the module
    (builtins, keywords, attribute names, words inside strings) or an import alias, whose
    meaning goes into the key. Anything naming a module constant or def is classified afresh.
    The memo lives in this process only, keyed by a tuple (hashing each key, as the caches on
    disk do, would cost the scan what the memo saves); its row in ``testdb/cachestore.py``'s
    key table says what the key holds.
    """

    def __init__(self, raw: bytes, config: StaticConfig) -> None:
        self.raw = raw
        self.config = config
        self.fingerprint = _fingerprint(config)
        self.line_starts = line_starts(raw)

    def classify(self, node: ast.expr, scope: Scope, line: int, func_name: str = "") -> Effect:
        text = self._segment(node)
        if text is None:
            return classify(node, scope, line, self.config, func_name)
        words = _WORDS.get(text)
        if words is None:
            words = frozenset(w.decode() for w in _IDENT.findall(text))
            if len(_WORDS) >= _MEMO_MAX:
                _WORDS.clear()
            _WORDS[text] = words
        if not words.isdisjoint(scope.bound_names):
            return classify(node, scope, line, self.config, func_name)
        module_aliases = scope.module().aliases
        aliases = tuple(sorted((w, module_aliases[w]) for w in words if w in module_aliases))
        # parameterized.expand names its functions after the decorated one
        key = (text, aliases, self.fingerprint, func_name if b"expand" in text else "")
        effect = _MEMO.get(key)
        if effect is None:
            effect = classify(node, scope, line, self.config, func_name)
            if len(_MEMO) >= _MEMO_MAX:
                _MEMO.clear()
            _MEMO[key] = effect
        return effect

    def _segment(self, node: ast.expr) -> bytes | None:
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        starts = self.line_starts
        if node.end_lineno > len(starts):
            return None
        # ast offsets are UTF-8 byte offsets: slice the bytes
        return self.raw[starts[node.lineno - 1] + node.col_offset:
                        starts[node.end_lineno - 1] + node.end_col_offset]


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
