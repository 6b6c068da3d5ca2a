"""Path rules: link changed files that the AST cannot read (C++, CUDA, CMake, YAML) to tests."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase

from testdb.errors import InputError, SourceLoc
from testdb.files import read_text

RULES_FILE = "ci/audit-rules.yml"


@dataclass(frozen=True)
class PathRule:
    """``paths`` are globs over changed files; ``tests`` are `where`-style test patterns."""

    paths: tuple[str, ...]
    tests: tuple[str, ...]
    loc: SourceLoc

    def matches(self, path: str) -> bool:
        return any(fnmatchcase(path, p) for p in self.paths)


def load_rules(path: str) -> list[PathRule]:
    """``path_rules: [{paths: [glob, ...], tests: [pattern, ...]}, ...]``."""
    import yaml  # only when a checkout has rules: PyYAML is slow to import

    from testdb.yamlnodes import compose, line_of, scalar

    root = compose(read_text(path), path)
    if root is None:
        return []
    top = {scalar(k): v for k, v in root.value} if isinstance(root, yaml.MappingNode) else None
    node = top.get("path_rules") if top else None
    if not isinstance(node, yaml.SequenceNode):
        raise InputError("a rules file holds `path_rules:`, a list of {paths, tests}",
                         SourceLoc(path, line_of(root)))
    rules = []
    for item in node.value:
        loc = SourceLoc(path, line_of(item))
        fields = ({scalar(k): v for k, v in item.value}
                  if isinstance(item, yaml.MappingNode) else {})
        lists = {}
        for key in ("paths", "tests"):
            value = fields.get(key)
            if not isinstance(value, yaml.SequenceNode) or not value.value or not all(
                    scalar(v) for v in value.value):
                raise InputError(f"path rule needs `{key}:`, a non-empty list of strings", loc)
            lists[key] = tuple(str(scalar(v)) for v in value.value)
        rules.append(PathRule(lists["paths"], lists["tests"], loc))
    return rules


def find_rules(root: str, explicit: str | None) -> list[PathRule]:
    """Rules from ``--rules FILE``, else ``ci/audit-rules.yml`` under the checkout, else none."""
    if explicit:
        return load_rules(explicit)
    default = os.path.join(root, RULES_FILE)
    return load_rules(default) if os.path.isfile(default) else []
