"""pytest's parametrize id rules (``_pytest/python.py`` IdMaker), over statically known values."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from testdb.inventory import pytest_rules


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# A value the source computes at run time: never guessed.
OPAQUE = _Sentinel("OPAQUE")
# ``pytest.HIDDEN_PARAM``: the parameter set adds nothing to the id.
HIDDEN = _Sentinel("HIDDEN")
# pytest's NOTSET, the value of the one parameter set that an empty argvalues list makes.
NOTSET = _Sentinel("NOTSET")


@dataclass(frozen=True)
class Named:
    """A module-level ``def``/``class`` or a builtin: pytest ids it by ``__name__``."""

    name: str
    builtin_class: bool = False


@dataclass(frozen=True)
class PSet:
    """``pytest.param(*values, id=..., marks=...)``; ``id`` may be OPAQUE or HIDDEN."""

    values: tuple[object, ...]
    id: object = None
    marks: tuple[str, ...] = ()


@dataclass(frozen=True)
class XParam:
    """``parameterized.param(*args, **kwargs)``: only ``args`` reach the generated name."""

    args: tuple[object, ...]


class Unknowable(Exception):
    """The id depends on what only running the module can tell."""


_NON_PRINTABLE = {i: f"\\x{i:02x}" for i in range(128) if i not in range(32, 127)}
_NON_PRINTABLE.update({ord("\t"): "\\t", ord("\r"): "\\r", ord("\n"): "\\n"})


def ascii_escaped(val: str | bytes) -> str:
    """``_pytest.compat.ascii_escaped``: how pytest writes str/bytes into ids."""
    if isinstance(val, bytes):
        ret = val.decode("ascii", "backslashreplace")
    else:
        ret = val.encode("unicode_escape").decode("ascii")
    return ret.translate(_NON_PRINTABLE)


def value_id(val: object) -> str | None:
    """IdMaker._idval_from_value: the id a value gives by itself, or None (use argname+index).

    Raises Unknowable for a value only the running module knows.
    """
    if val is OPAQUE:
        raise Unknowable
    if isinstance(val, str | bytes):
        return ascii_escaped(val)
    if val is None or isinstance(val, float | int | bool | complex):
        return str(val)
    if isinstance(val, Named):
        return val.name
    # NOTSET, containers, Ellipsis, PSet-inside-a-value: nothing pytest can name.
    return None


# pytest >= 9.2 (``IdMaker._apply_long_str_strategy``, the ini option
# ``parametrize_long_str_id_strategy`` at its default "short"): a str or bytes value longer than
# this gives no auto id of its own (argname + index instead). The option is not read: a
# project setting it differently gets the default's ids here.
LONG_STR = 100


def auto_id(values: Sequence[object], argnames: Sequence[str], idx: int) -> str:
    """IdMaker._idval joined with ``-``: per value its own id, else ``argname`` + index."""
    long_str_falls_back = pytest_rules.installed().long_str_falls_back
    parts = []
    for val, argname in zip(values, argnames, strict=True):
        if long_str_falls_back and isinstance(val, str | bytes) and len(val) > LONG_STR:
            parts.append(f"{argname}{idx}")
            continue
        vid = value_id(val)
        parts.append(vid if vid is not None else f"{argname}{idx}")
    return "-".join(parts)


def explicit_id(val: object) -> str:
    """IdMaker._idval_from_value_required: an entry of ``ids=[...]``."""
    vid = value_id(val)
    if vid is None:
        # pytest fails the collection: such an item never exists.
        raise Unknowable
    return vid


def py_str(val: object) -> str:
    """``str(value)`` for a statically known value (the ``name=value`` helper's rendering)."""
    if val is OPAQUE or isinstance(val, Named | PSet | XParam) or val is NOTSET or val is HIDDEN:
        if isinstance(val, Named) and val.builtin_class:
            return f"<class '{val.name}'>"
        raise Unknowable
    if isinstance(val, list | tuple | set | frozenset | dict):
        _check_plain(val)
    return str(val)


def _check_plain(val: object) -> None:
    if isinstance(val, dict):
        for k, v in val.items():
            _check_plain(k)
            _check_plain(v)
    elif isinstance(val, list | tuple | set | frozenset):
        for v in val:
            _check_plain(v)
    elif not (val is None or val is Ellipsis
              or isinstance(val, str | bytes | int | float | complex)):
        raise Unknowable


def make_unique(ids: list[object]) -> list[object]:
    """IdMaker.make_unique_parameterset_ids: duplicates get suffixes 0, 1... (_0 after a digit)."""
    if len(ids) == len(set(ids)):
        return ids
    counts = Counter(ids)
    if any(i is HIDDEN and n > 1 for i, n in counts.items()):
        raise Unknowable  # pytest fails: several hidden sets in one parametrize
    out = list(ids)
    suffixes: dict[object, int] = defaultdict(int)
    taken = set(ids)
    for index, id_ in enumerate(out):
        if counts[id_] > 1:
            assert isinstance(id_, str)
            sep = "_" if id_ and id_[-1].isdigit() else ""
            new = f"{id_}{sep}{suffixes[id_]}"
            # pytest checks against the ids as they were before renaming (set(resolved_ids)
            # is rebuilt from the list being rewritten): mirror by updating ``taken``.
            while new in taken:
                suffixes[id_] += 1
                new = f"{id_}{sep}{suffixes[id_]}"
            out[index] = new
            taken = set(out)
            suffixes[id_] += 1
    return out


_UNSAFE = re.compile(r"[^a-zA-Z0-9_]+")


def safe_name(val: object) -> str:
    """``parameterized.to_safe_name``."""
    text = val if isinstance(val, str) else py_str(val)
    return _UNSAFE.sub("_", text)
