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
MAX_DEPTH = 500  # nesting levels; real test-db files nest fewer than 10


def compose(text: str, path: str, *, scan_depth: bool = False) -> yaml.Node | None:
    """Compose ``text`` into a node tree; YAML errors become ``InputError`` with path:line.
    ``scan_depth``: always check the nesting depth (for small files whose values are turned
    into Python objects, where deep nesting would exhaust the recursion limit later)."""
    try:
        _check_depth(text, path, always=scan_depth)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        what = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"malformed YAML: {what}", SourceLoc(path, line),
                         "fix the YAML syntax (indentation, quoting, ':' in plain scalars)"
                         ) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", SourceLoc(path, 1)) from None
    if "&" in text:  # without anchors there are no aliases, so no expansion to guard against
        _check_size(node, path)
    return node


def _check_depth(text: str, path: str, always: bool = False) -> None:
    """Refuse documents nesting deeper than MAX_DEPTH before composing them: libyaml's composer
    recurses in C (tens of thousands of levels crash the process) and its parser slows down
    quadratically with flow depth. The event scan costs half a compose, so it runs only when
    cheap bounds allow deep nesting (flow depth <= the count of '[' and '{'; block depth <=
    about twice the longest line); real files stay far below both."""
    if not always and (text.count("[") + text.count("{") <= 2 * MAX_DEPTH
            and max(map(len, text.split("\n")), default=0) <= 2 * MAX_DEPTH):
        return
    parser = _Loader(text)
    depth = 0
    try:
        while True:
            event = parser.get_event()
            if event is None:
                return
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"YAML nests deeper than {MAX_DEPTH} levels",
                                     SourceLoc(path, (event.start_mark.line + 1)
                                               if event.start_mark else 1),
                                     "flatten it; real test lists nest a few levels")
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    finally:
        parser.dispose()


def _check_size(node: yaml.Node | None, path: str) -> None:
    """Count nodes as aliases expand them; refuse a document that explodes. Iterative: a
    document may nest deeper than Python's recursion limit."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)] if node is not None else []
    count = 0
    while stack:
        n, done = stack.pop()
        kids = (n.value if isinstance(n, yaml.SequenceNode)
                else [c for kv in n.value for c in kv] if isinstance(n, yaml.MappingNode)
                else [])
        if done:
            count = sizes[id(n)] = 1 + sum(sizes[id(c)] for c in kids)
            if count > MAX_NODES:
                break
        elif id(n) not in sizes:
            sizes[id(n)] = 1  # in progress: a cycle counts once
            stack.append((n, True))
            stack.extend((c, False) for c in kids if id(c) not in sizes)
    if count > MAX_NODES:
        raise InputError(f"YAML document expands to more than {MAX_NODES} nodes; "
                         "anchors/aliases expand too much", SourceLoc(path, 1))


def line_of(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def scalar(node: yaml.Node) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None
