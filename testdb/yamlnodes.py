"""Safe YAML loading into nodes with line numbers (libyaml's C composer when available)."""

from __future__ import annotations

import sys

import yaml

from testdb.errors import InputError, SourceLoc

try:
    _Loader: type = yaml.CSafeLoader
    HAVE_LIBYAML = True
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader
    HAVE_LIBYAML = False
    print("testdb: libyaml not available, using the slower pure-Python YAML loader",
          file=sys.stderr)

MAX_NODES = 200_000  # guards against alias bombs: anchors are expanded by reference count


def compose(text: str, path: str) -> yaml.Node | None:
    """Compose ``text`` into a node tree; YAML errors become ``InputError`` with path:line."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        what = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"malformed YAML: {what}", SourceLoc(path, line),
                         "fix the YAML syntax (indentation, quoting, ':' in plain scalars)") from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", SourceLoc(path, 1)) from None
    _check_size(node, path)
    return node


def _check_size(node: yaml.Node | None, path: str) -> None:
    """Count nodes as aliases expand them; refuse a document that explodes."""
    count = 0
    memo: dict[int, int] = {}

    def walk(n: yaml.Node) -> int:
        nonlocal count
        key = id(n)
        if key in memo:
            return memo[key]
        memo[key] = 1  # break cycles
        size = 1
        if isinstance(n, yaml.SequenceNode):
            size += sum(walk(c) for c in n.value)
        elif isinstance(n, yaml.MappingNode):
            size += sum(walk(k) + walk(v) for k, v in n.value)
        memo[key] = size
        return size

    if node is not None:
        count = walk(node)
    if count > MAX_NODES:
        raise InputError(f"YAML document expands to {count} nodes (limit {MAX_NODES}); "
                         "anchors/aliases expand too much", SourceLoc(path, 1))


def line_of(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def scalar(node: yaml.Node) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None
