"""test-db YAML files -> contexts of blocks, each block and entry with its file:line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.grammar import parse_line
from testdb.model import Block, Condition, Context, Range
from testdb.yamlnodes import compose, line_of, scalar

CONDITION_KINDS = ("terms", "ranges", "wildcards")
RANGE_BOUNDS = ("gte", "lte", "gt", "lt")
_MAKO_CONTROL = re.compile(r"^[ \t]*%(?!YAML\b|TAG\b).*$", re.MULTILINE)


class NotTestDb(Exception):
    """The file is valid YAML but not test-db shaped (only tolerated for QA-side files)."""


@dataclass
class FileResult:
    contexts: list[Context] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: str | None = None  # reason, when the file is not test-db shaped


def load_testdb_text(text: str, path: str, kind: str = "l0") -> FileResult:
    """Parse one test-db YAML text. ``kind="qa"`` tolerates files that are not test-db shaped."""
    res = FileResult()
    text = _blank_mako_lines(text, path, res.diagnostics)
    try:
        root = compose(text, path)
        res.contexts = _contexts(root, path, kind, res.diagnostics)
    except NotTestDb as why:
        if kind != "qa":
            res.diagnostics.append(Diagnostic(SourceLoc(path, 1), Severity.ERROR,
                                              f"not a test-db file: {why}", "not-test-db"))
        else:
            res.skipped = str(why)
    except InputError as exc:
        res.diagnostics.append(Diagnostic(exc.loc or SourceLoc(path, 1), Severity.ERROR,
                                          exc.bare + (f"; {exc.hint}" if exc.hint else ""),
                                          "yaml"))
    return res


def _blank_mako_lines(text: str, path: str, diags: list[Diagnostic]) -> str:
    """Mako control lines (``% if ...:``) are not YAML: report each one and blank it, so the
    rest of the file still parses (with both branches of the template kept)."""
    if "%" not in text:
        return text

    seen = [0, 1]  # (offset, line) of the last match: count newlines once, not per match

    def blank(m: re.Match[str]) -> str:
        seen[1] += text.count("\n", seen[0], m.start())
        seen[0] = m.start()
        line = seen[1]
        diags.append(Diagnostic(SourceLoc(path, line), Severity.ERROR,
                                "Mako template line (`%`) is not supported; render the template "
                                "first or remove the line", "mako-line"))
        return ""

    return _MAKO_CONTROL.sub(blank, text)


def _contexts(root: yaml.Node | None, path: str, kind: str,
              diags: list[Diagnostic]) -> list[Context]:
    if root is None:
        raise NotTestDb("the file is empty")
    if not isinstance(root, yaml.MappingNode):
        raise NotTestDb(f"top level is a {_shape(root)}, not a mapping of contexts")
    out: list[Context] = []
    seen: dict[str, int] = {}
    for knode, vnode in root.value:
        name = scalar(knode)
        if name is None:
            raise InputError("context names must be plain strings", SourceLoc(path, line_of(knode)))
        if name == "version":
            continue
        if name in seen:
            diags.append(Diagnostic(SourceLoc(path, line_of(knode)), Severity.ERROR,
                                    f"context {name!r} is defined twice (first at line "
                                    f"{seen[name]}); YAML keeps only the last one",
                                    "duplicate-context"))
        seen[name] = line_of(knode)
        if not isinstance(vnode, yaml.SequenceNode):
            if kind == "qa" and not out:
                raise NotTestDb(f"{name!r} holds a {_shape(vnode)}, not a list of blocks")
            diags.append(Diagnostic(SourceLoc(path, line_of(vnode)), Severity.ERROR,
                                    f"context {name!r} must be a list of `- condition:`/`tests:` "
                                    f"blocks, found a {_shape(vnode)}", "bad-shape"))
            continue
        blocks: list[Block] = []
        for i, item in enumerate(vnode.value):
            block = _block(item, name, i, path, kind, diags, qa_first=not out and not blocks)
            if block is not None:
                blocks.append(block)
        out.append(Context(name, SourceLoc(path, line_of(knode)), kind, tuple(blocks)))
    if not out:
        if kind == "qa":
            raise NotTestDb("it names no context")
        diags.append(Diagnostic(SourceLoc(path, 1), Severity.ERROR,
                                "no context in this file; a test-db file maps a context name to "
                                "a list of blocks", "missing-context"))
    return out


def _shape(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "mapping"
    if isinstance(node, yaml.SequenceNode):
        return "list"
    return f"scalar {node.value!r}" if len(str(node.value)) < 40 else "scalar"


def _block(item: yaml.Node, ctx: str, index: int, path: str, kind: str,
           diags: list[Diagnostic], qa_first: bool) -> Block | None:
    loc = SourceLoc(path, line_of(item))

    def err(line: int, msg: str, rule: str = "bad-shape") -> None:
        diags.append(Diagnostic(SourceLoc(path, line), Severity.ERROR, msg, rule))

    if not isinstance(item, yaml.MappingNode):
        if kind == "qa" and qa_first:
            raise NotTestDb(f"context {ctx!r} items are not `condition`/`tests` mappings")
        err(loc.line, f"block {index + 1} of {ctx!r} must be a mapping with `condition` and "
            f"`tests`, found a {_shape(item)}")
        return None
    keys = {scalar(k): (k, v) for k, v in item.value}
    if "tests" not in keys and kind == "qa" and qa_first:
        raise NotTestDb(f"context {ctx!r} blocks have no `tests` list")
    for k, (knode, _) in keys.items():
        if k not in ("condition", "tests"):
            diags.append(Diagnostic(SourceLoc(path, line_of(knode)), Severity.WARNING,
                                    f"unknown block key {k!r} ignored", "unknown-key"))
    condition = Condition()
    if "condition" in keys:
        condition = _condition(keys["condition"][1], path, diags)
    else:
        diags.append(Diagnostic(loc, Severity.WARNING, f"block {index + 1} of {ctx!r} has no "
                                "condition; it matches every stage of the context",
                                "no-condition"))
    entries = []
    if "tests" not in keys:
        err(loc.line, f"block {index + 1} of {ctx!r} has no `tests` list")
    else:
        tnode = keys["tests"][1]
        if isinstance(tnode, yaml.ScalarNode) and tnode.value in ("", None) and tnode.tag.endswith(
                "null"):
            pass  # `tests:` with nothing under it: an empty block
        elif not isinstance(tnode, yaml.SequenceNode):
            err(line_of(tnode), f"`tests` of block {index + 1} in {ctx!r} must be a list of test "
                f"lines, found a {_shape(tnode)}; write each test on its own `- ` line under "
                "`tests:`")
        else:
            for t in tnode.value:
                text = scalar(t)
                tloc = SourceLoc(path, line_of(t))
                if text is None:
                    err(tloc.line, f"test line must be a string, found a {_shape(t)}")
                    continue
                parsed = parse_line(text, tloc)
                diags.extend(parsed.diagnostics)
                entries.extend(parsed.entries)
    return Block(ctx, index, loc, condition, tuple(entries))


def _condition(node: yaml.Node, path: str, diags: list[Diagnostic]) -> Condition:
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith("null"):
        return Condition()
    if not isinstance(node, yaml.MappingNode):
        raise InputError(f"`condition` must be a mapping of terms/ranges/wildcards, found a "
                         f"{_shape(node)}", SourceLoc(path, line_of(node)))
    terms: list[tuple[str, str]] = []
    ranges: list[Range] = []
    wilds: list[tuple[str, tuple[str, ...]]] = []
    for knode, vnode in node.value:
        kind = scalar(knode)
        loc = SourceLoc(path, line_of(knode))
        if kind not in CONDITION_KINDS:
            diags.append(Diagnostic(loc, Severity.ERROR, f"unknown condition kind {kind!r}; "
                                    "use terms, ranges or wildcards", "unknown-condition"))
            continue
        if not isinstance(vnode, yaml.MappingNode):
            diags.append(Diagnostic(loc, Severity.ERROR, f"`{kind}` must be a mapping of "
                                    f"fact: value, found a {_shape(vnode)}", "bad-shape"))
            continue
        for fk, fv in vnode.value:
            fact = scalar(fk) or ""
            floc = SourceLoc(path, line_of(fk))
            if kind == "terms":
                value = scalar(fv)
                if value is None:
                    diags.append(Diagnostic(floc, Severity.ERROR, f"term {fact!r} needs a "
                                            "single value", "bad-shape"))
                else:
                    terms.append((fact, value))
            elif kind == "wildcards":
                if isinstance(fv, yaml.SequenceNode) and all(scalar(p) is not None
                                                             for p in fv.value):
                    wilds.append((fact, tuple(str(p.value) for p in fv.value)))
                elif scalar(fv) is not None:
                    wilds.append((fact, (str(fv.value),)))
                else:
                    diags.append(Diagnostic(floc, Severity.ERROR, f"wildcard {fact!r} must be a "
                                            "pattern or a list of patterns", "bad-shape"))
            else:
                r = _range(fact, fv, path, diags)
                if r is not None:
                    ranges.append(r)
    return Condition(tuple(terms), tuple(ranges), tuple(wilds))


def _range(fact: str, node: yaml.Node, path: str, diags: list[Diagnostic]) -> Range | None:
    loc = SourceLoc(path, line_of(node))
    if not isinstance(node, yaml.MappingNode):
        diags.append(Diagnostic(loc, Severity.ERROR, f"range {fact!r} must be a mapping of "
                                "gte/lte/gt/lt bounds", "bad-shape"))
        return None
    bounds: dict[str, float] = {}
    for bk, bv in node.value:
        b = scalar(bk)
        bloc = SourceLoc(path, line_of(bk))
        if b not in RANGE_BOUNDS:
            diags.append(Diagnostic(bloc, Severity.ERROR, f"unknown range bound {b!r} for "
                                    f"{fact!r}; use gte, lte, gt or lt", "bad-range"))
            continue
        try:
            raw = scalar(bv)
            if raw is None or not isinstance(bv, yaml.ScalarNode) or bv.style not in (None, ""):
                raise ValueError
            bounds[b] = float(raw)
        except ValueError:
            diags.append(Diagnostic(bloc, Severity.ERROR, f"range bound {fact}.{b} must be a "
                                    f"number, found {_shape(bv)}", "bad-range"))
    if not bounds:
        return None
    return Range(fact, **bounds)
