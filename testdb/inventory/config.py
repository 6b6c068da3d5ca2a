"""What the static scanner treats as tests and which id helpers it knows."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

# Id styles of parametrize helpers:
#   "name=value": ``name=str(value)`` per argname joined by ``-`` (TensorRT-LLM's
#                 ``parametrize_with_ids`` in tests/integration/defs/conftest.py);
#   "value":      ``str(value)`` per argname joined by ``-``;
#   "pytest":     a plain alias of ``pytest.mark.parametrize`` (pytest makes the ids).
ID_STYLES = ("name=value", "value", "pytest")

# Bumped when the scanner's output for the same source changes (2: ``ids=`` callables
# evaluated, pytest's per-version rules): part of every inventory cache key.
SCAN_RULES = 2

# ``parameterized.expand(name_func=...)`` styles:
#   "join_all":  ``func_`` + safe(``_``.join(str(arg)), nested lists flattened) (TensorRT-LLM's
#                ``unittest_name_func`` in tests/unittest/utils/util.py);
#   "first_arg": ``func_`` + safe(str(args[0])).
NAME_FUNC_STYLES = ("join_all", "first_arg")


@dataclass(frozen=True)
class StaticConfig:
    """Collection rules (pytest's defaults) and the helpers to expand without importing."""

    python_files: tuple[str, ...] = ("test_*.py", "*_test.py")
    python_classes: tuple[str, ...] = ("Test",)
    python_functions: tuple[str, ...] = ("test",)
    # (helper name, id style) and (name_func name, style) pairs: tuples keep the config
    # hashable and picklable (it travels to worker processes).
    helper_styles: tuple[tuple[str, str], ...] = (("parametrize_with_ids", "name=value"),)
    name_func_styles: tuple[tuple[str, str], ...] = (("unittest_name_func", "join_all"),)
    # Base classes from other modules known to define no tests, marks or __init__ (TensorRT-
    # LLM's accuracy harnesses); any other imported base adds a "may hold more" placeholder.
    plain_bases: tuple[str, ...] = ("LlmapiAccuracyTestHarness", "CliFlowAccuracyTestHarness")
    # Module-level names bound once to a literal are read through (``MODELS = [...]``).
    resolve_constants: bool = True
    norecursedirs: tuple[str, ...] = (
        "*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}",
        "__pycache__",
    )

    @cached_property
    def helpers(self) -> Mapping[str, str]:
        return dict(self.helper_styles)

    @cached_property
    def name_funcs(self) -> Mapping[str, str]:
        return dict(self.name_func_styles)

    def __post_init__(self) -> None:
        for name, style in self.helpers.items():
            if style not in ID_STYLES:
                raise ValueError(f"helper {name!r}: id style {style!r} not in {ID_STYLES}")
        for name, style in self.name_funcs.items():
            if style not in NAME_FUNC_STYLES:
                raise ValueError(f"name_func {name!r}: style {style!r} not in {NAME_FUNC_STYLES}")

    def fingerprint(self) -> str:
        """A short digest of every setting that changes the scan result (part of cache keys):
        also the scanner's rules version and the installed pytest's rules (``pytest_rules``),
        so an inventory cached under other rules is rebuilt, never reused."""
        from testdb.inventory import pytest_rules

        text = repr((self.python_files, self.python_classes, self.python_functions,
                     sorted(self.helper_styles), sorted(self.name_func_styles),
                     self.plain_bases, self.resolve_constants, SCAN_RULES,
                     pytest_rules.installed().fingerprint()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def is_test_function(self, name: str) -> bool:
        return _matches(name, self.python_functions)

    def is_test_class(self, name: str) -> bool:
        return _matches(name, self.python_classes)


def _matches(name: str, options: tuple[str, ...]) -> bool:
    # pytest's _matches_prefix_or_glob_option: a prefix, or a glob when it has glob characters.
    return any(
        name.startswith(opt)
        or (any(c in opt for c in "*?[") and fnmatch.fnmatch(name, opt))
        for opt in options
    )


DEFAULT_CONFIG = StaticConfig()
