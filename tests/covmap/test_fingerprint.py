"""The fingerprint rule: positions, comments and docstrings do not change a function's
fingerprint; any change to what it does does. Line owners: a ``def`` line runs with its
enclosing scope, the body with the function."""

from __future__ import annotations

from typing import Any

import pytest

from auditor.covmap.fingerprint import line_owners, units

BASE = '''\
import os


class Config:
    """Settings."""
    size = 4

    def scaled(self, k):
        """Scaled size."""
        return self.size * k


def build(n):
    # make a config
    cfg = Config()
    return cfg.scaled(n)
'''


def fps(src: str) -> dict[str, bytes]:
    return {u.qualname: u.fp for u in units(src)}


@pytest.mark.parametrize(("why", "edit", "same"), [
    ("moved down two lines", lambda s: "\n\n" + s, {"<module>", "Config", "Config.scaled",
                                                      "build"}),
    ("a comment edited", lambda s: s.replace("# make a config", "# build it"),
     {"<module>", "Config", "Config.scaled", "build"}),
    ("a docstring edited", lambda s: s.replace('"""Scaled size."""', '"""k times size."""'),
     {"<module>", "Config", "Config.scaled", "build"}),
    ("re-wrapped", lambda s: s.replace("return cfg.scaled(n)", "return cfg.scaled(\n        n)"),
     {"<module>", "Config", "Config.scaled", "build"}),
    # TRAP: a change to what the code does must give a new fingerprint, or a stale link
    # would read as current.
    ("a body changed", lambda s: s.replace("self.size * k", "self.size * k + 1"),
     {"<module>", "Config", "build"}),
    ("a default changed", lambda s: s.replace("def build(n):", "def build(n=2):"),
     {"<module>", "Config", "Config.scaled"}),
    ("a class attribute changed", lambda s: s.replace("size = 4", "size = 8"),
     {"<module>", "Config.scaled", "build"}),
    ("an import added", lambda s: "import sys\n" + s,
     {"Config", "Config.scaled", "build"}),
])
def test_fingerprint_rule(why: str, edit: Any, same: set[str]) -> None:
    before, after = fps(BASE), fps(edit(BASE))
    assert {q for q in before if before[q] == after.get(q)} == same, why


def test_line_owners_def_line_is_the_enclosing_scope() -> None:
    us = units(BASE)
    names = [u.qualname for u in us]
    owner = line_owners(us, BASE.count("\n") + 1)
    lines = BASE.splitlines()

    def at(text: str) -> str:
        return names[owner[next(i for i, ln in enumerate(lines, 1) if text in ln)]]

    assert at("def build(n):") == "<module>"  # runs at import, not when build is called
    assert at("cfg = Config()") == "build"
    assert at("def scaled") == "Config"  # runs when the class body runs
    assert at("return self.size") == "Config.scaled"
    assert at("size = 4") == "Config"
    assert at("import os") == "<module>"


def test_nested_units_and_blocks() -> None:
    src = "if True:\n    def f():\n        def g():\n            return 1\n        return g\n"
    assert [u.qualname for u in units(src)] == ["<module>", "f", "f.g"]
