"""Where the collection rules the static inventory restates differ between pytest versions.

The static inventory answers for the pytest installed beside it (the one ``--collect`` and the
cross-check tests run), from 8.3 to the newest 9.x. Ids themselves come from pytest's own
``IdMaker`` (``testdb.inventory.decorators.pytest_ids``), so its version's id rules (9.2's
fallback for long strings, for one) apply by themselves; this module holds what the scanner
must know beyond that, each from pytest's source at the version named:

- An empty ``argvalues`` gives one skipped set with the id ``NOTSET`` from 8.4; on 8.3 its id
  is the default one, argname + index (``v0``) (``_pytest/mark/structures.py``,
  ``ParameterSet._for_parametrize``).
- ``pytest.HIDDEN_PARAM`` exists from 8.4 (``_pytest/mark/structures.py``); on 8.3 a module
  naming it fails to import.
- A ``-k``/``-m`` expression that does not parse raises ``ParseError`` before 9.0, a
  ``SyntaxError`` from 9.0 (``_pytest/mark/expression.py``): ``select`` catches both.
- From 9.2 ``-k`` ignores function attributes that start with ``_`` and ``pytestmark``
  (``_pytest/mark/__init__.py``: ``_is_matchable_function_attribute``); before, every name in
  the function's ``__dict__`` was a keyword (``pytestmark``, ``__wrapped__``).
- From 9.2 an auto id of a str or bytes value longer than 100 characters is the argname and
  index (``IdMaker._apply_long_str_strategy``, ini ``parametrize_long_str_id_strategy`` at its
  default ``short``); restated in ``ids.auto_id`` for the layers IdMaker does not make here.
- From 9.2 ``Metafunc.parametrize(argnames, argvalues, *, indirect, ids, scope)`` takes those
  by keyword only (``_pytest/python.py``), and the mark passes its arguments on unchanged:
  ``pytest.mark.parametrize("a", [1], False, ["x"])`` fails collection there.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

# The oldest and newest (major, minor) checked against real collection (.ci/pytest-matrix.sh).
OLDEST = (8, 3)
NEWEST = (9, 2)


@dataclass(frozen=True)
class PytestRules:
    version: tuple[int, int]
    hidden_param: bool
    keywords_skip_private_attrs: bool
    parametrize_keyword_only: bool
    long_str_falls_back: bool
    empty_set_id_notset: bool

    def fingerprint(self) -> str:
        """What the static scan depends on of pytest (part of the inventory's cache keys)."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:12]


def rules_for(version: str) -> PytestRules:
    """The rules of pytest ``version`` ("9.1.1", "9.2.0.dev3+g..."); a version outside the
    checked range gets the rules of the nearest checked one."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a pytest version: {version!r}")
    v = (int(m.group(1)), int(m.group(2)))
    return PytestRules(
        version=v,
        hidden_param=v >= (8, 4),
        keywords_skip_private_attrs=v >= (9, 2),
        parametrize_keyword_only=v >= (9, 2),
        long_str_falls_back=v >= (9, 2),
        empty_set_id_notset=v >= (8, 4),
    )


@lru_cache(maxsize=1)
def installed() -> PytestRules:
    """The rules of the pytest this process imports (its version alone: cheap)."""
    import _pytest._version

    return rules_for(_pytest._version.version)


def supported(rules: PytestRules) -> bool:
    return OLDEST <= rules.version <= NEWEST
