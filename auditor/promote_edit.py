"""Line-level edits of a test-db YAML text: move entry lines between blocks, copy a block."""

from __future__ import annotations

import difflib
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from testdb.errors import InputError, SourceLoc
from testdb.files import decode, sha256_text
from testdb.index import Index
from testdb.model import Block
from testdb.yamlnodes import compose, scalar

BOM = b"\xef\xbb\xbf"
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_ENDS = ("\n", "\r")


@dataclass(frozen=True)
class FileEdit:
    """One file's text before and after; ``bom`` says the bytes start with a UTF-8 BOM."""

    path: str  # as the index shows it (relative to the checkout root)
    full: str
    old: str
    new: str
    bom: bool = False

    @property
    def diff(self) -> str:
        def lines(text: str) -> list[str]:
            return [ln if ln.endswith(_ENDS) else ln + "\n" for ln in split_lines(text)]

        return "".join(difflib.unified_diff(lines(self.old), lines(self.new),
                                            f"a/{self.path}", f"b/{self.path}"))


@dataclass(frozen=True)
class LineMove:
    """Move the entry line ``line`` (1-based) of ``source`` to the end of ``target``'s list, or
    (``target`` None) into a copy of ``source`` with the stage term changed, placed after it.

    ``after``/``before``: the entry lines (text without indentation) that surrounded the line
    when an earlier move took it out of ``target``; when one is still in ``target`` the line
    goes back next to it, so promote then demote gives the file back byte for byte."""

    line: int
    source: Block
    target: Block | None
    after: str | None = None
    before: str | None = None


def split_lines(text: str) -> list[str]:
    """Lines with their line breaks kept (``\\r\\n``, ``\\r`` or ``\\n``, as YAML counts them)."""
    return _LINE.findall(text)


def read(index: Index, rel: str) -> tuple[str, bool, str]:
    """The file's text (BOM dropped, line breaks kept), whether it had a BOM, its full path."""
    full = rel if os.path.isabs(rel) else os.path.join(index.root, rel)
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", SourceLoc(rel)) from None
    return decode(data, rel), data.startswith(BOM), full


def edit_file(index: Index, path: str, moves: Sequence[LineMove], src: str, dst: str
              ) -> tuple[FileEdit, list[str], list[tuple[str | None, str | None]]]:
    """The edited text, each moved line's text (without indentation and line break), and the
    entry lines that surrounded it in its source block (see ``neighbours``).

    Only the moved lines change: a line keeps its exact text (marker, comment, quoting) and takes
    the target list's indentation; a created block copies the source block's lines up to
    ``tests:`` with only the stage value rewritten."""
    text, bom, full = read(index, path)
    if index.files.get(path) not in (None, sha256_text(text)):
        raise InputError("the file changed since the index was loaded", SourceLoc(path),
                         "rerun the command")
    if any(c in text for c in "\x85\u2028\u2029"):
        raise InputError("the file uses unusual line breaks; cannot edit it line by line",
                         SourceLoc(path))
    lines = split_lines(text)
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    root = compose(text, path)
    removed: set[int] = set()
    inserts: dict[int, list[str]] = defaultdict(list)
    new_blocks: dict[int, tuple[int, list[str]]] = {}  # source block index -> (anchor, lines)
    texts: list[str] = []
    around: list[tuple[str | None, str | None]] = []
    for m in moves:
        row = m.line - 1
        kv = _child(_block_node(root, m.source), "tests")
        seq = kv[1] if kv else None
        items = ([n for n in seq.value if n.start_mark.line == row]
                 if isinstance(seq, yaml.SequenceNode) and not seq.flow_style else [])
        if (len(items) != 1 or _end_line(items[0]) != row
                or not lines[row].lstrip(" ").startswith("-")):
            raise InputError("this entry is not alone on a `- ...` line of a block list",
                             SourceLoc(path, m.line), "move it by hand")
        line = lines[row] if lines[row].endswith(_ENDS) else lines[row] + nl
        removed.add(row)
        body = line[len(_indent(line)):]
        texts.append(body.rstrip("\r\n"))
        around.append(neighbours(lines, _block_node(root, m.source), row))
        if m.target is not None:
            node = _block_node(root, m.target)
            anchor, indent = _anchor(lines, node, m.target.loc)
            anchor = _old_place(lines, node, m) or anchor
            inserts[anchor].append(indent + body)
        else:
            if m.source.index not in new_blocks:
                new_blocks[m.source.index] = _new_block(lines, _block_node(root, m.source),
                                                        m.source, src, dst, nl)
            new_blocks[m.source.index][1].append(line)
    for anchor, block_lines in new_blocks.values():
        inserts[anchor].extend(block_lines)
    out: list[str] = []
    for i, line in enumerate(lines):
        if i not in removed:
            out.append(line if i not in inserts or line.endswith(_ENDS) else line + nl)
        out.extend(inserts.get(i, ()))
    return FileEdit(path, full, text, "".join(out), bom), texts, around


def neighbours(lines: list[str], block: yaml.MappingNode, row: int
               ) -> tuple[str | None, str | None]:
    """The texts of the entry lines before and after the item on 0-based ``row`` of a block's
    ``tests:`` list (``None`` at an end): what a later move back looks for."""
    kv = _child(block, "tests")
    items = (list(kv[1].value) if kv and isinstance(kv[1], yaml.SequenceNode)
             and not kv[1].flow_style else [])
    rows = [int(n.start_mark.line) for n in items]
    if row not in rows:
        return None, None
    i = rows.index(row)

    return (body_of(lines[rows[i - 1]]) if i > 0 else None,
            body_of(lines[rows[i + 1]]) if i + 1 < len(rows) else None)


def body_of(line: str) -> str:
    """A list line's text without its indentation and line break."""
    return line.lstrip(" ").rstrip("\r\n")


def _old_place(lines: list[str], block: yaml.MappingNode, m: LineMove) -> int | None:
    """The row to insert after so the line sits between its old neighbours again, when either
    is still a one-line entry of the block (``after`` first); None when neither is."""
    kv = _child(block, "tests")
    if kv is None or not isinstance(kv[1], yaml.SequenceNode) or kv[1].flow_style:
        return None
    items = [n for n in kv[1].value if _end_line(n) == int(n.start_mark.line)]
    by_text = {body_of(lines[int(n.start_mark.line)]): int(n.start_mark.line) for n in items}
    if m.after is not None and m.after in by_text:
        return by_text[m.after]
    if m.before is not None and m.before in by_text:
        return by_text[m.before] - 1
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" "))]


def _end_line(node: yaml.Node) -> int:
    """The 0-based last line a node's text occupies (plain, quoted or block scalar)."""
    if isinstance(node, yaml.SequenceNode) and node.value:
        return _end_line(node.value[-1])
    if isinstance(node, yaml.MappingNode) and node.value:
        return _end_line(node.value[-1][1])
    end, start = int(node.end_mark.line), int(node.start_mark.line)
    return end - 1 if node.end_mark.column == 0 and end > start else end


def _child(node: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next(((k, v) for k, v in node.value if scalar(k) == key), None)


def _block_node(root: yaml.Node | None, block: Block) -> yaml.MappingNode:
    kv = _child(root, block.context)
    if kv is not None and isinstance(kv[1], yaml.SequenceNode) and block.index < len(kv[1].value):
        item = kv[1].value[block.index]
        if isinstance(item, yaml.MappingNode) and item.start_mark.line + 1 == block.loc.line:
            return item
    raise InputError("this block is not where the index says", block.loc, "rerun with --no-cache")


def _anchor(lines: list[str], node: yaml.MappingNode, loc: SourceLoc) -> tuple[int, str]:
    """Where a line joins a block's ``tests:`` list (after its last item) and its indentation."""
    kv = _child(node, "tests")
    if kv is None:
        raise InputError("this block has no `tests:` list", loc, "add one by hand")
    key, seq = kv
    if isinstance(seq, yaml.SequenceNode) and seq.value and not seq.flow_style:
        return _end_line(seq.value[-1]), _indent(lines[seq.value[-1].start_mark.line])
    if isinstance(seq, yaml.ScalarNode) and seq.tag.endswith("null") and seq.value == "":
        return int(key.start_mark.line), _indent(lines[key.start_mark.line])
    raise InputError("this `tests:` list is not a block list of `- ...` lines",
                     SourceLoc(loc.path, int(seq.start_mark.line) + 1), "rewrite it as one")


def _new_block(lines: list[str], node: yaml.MappingNode, block: Block, src: str, dst: str,
               nl: str) -> tuple[int, list[str]]:
    """A copy of ``block`` up to its ``tests:`` key with the stage term changed, and the line
    it goes after: the block's last line, including comment lines indented into it."""
    cond, tests = _child(node, "condition"), _child(node, "tests")
    terms = _child(cond[1], "terms") if cond else None
    stage = _child(terms[1], "stage") if terms else None
    first = int(node.start_mark.line)
    if (cond is None or tests is None or stage is None or node.value[-1][0] is not tests[0]
            or tests[0].start_mark.line <= _end_line(cond[1])
            or (isinstance(tests[1], yaml.SequenceNode) and tests[1].value
                and tests[1].value[0].start_mark.line == tests[0].start_mark.line)):
        raise InputError("cannot copy this block's condition (expected `condition:` first, "
                         "then a `tests:` block list)", block.loc, "add the new block by hand")
    copy = lines[first : int(tests[0].start_mark.line) + 1]
    row = int(stage[1].start_mark.line) - first
    changed = re.sub(rf"(?<![\w-]){src}(?![\w-])", dst, copy[row], count=1)
    if changed == copy[row]:
        raise InputError(f"cannot rewrite the stage term to {dst}", block.loc,
                         "add the new block by hand")
    copy[row] = changed
    copy[-1] = copy[-1] if copy[-1].endswith(_ENDS) else copy[-1] + nl
    end, col = _end_line(node), len(_indent(lines[first]))
    while (end + 1 < len(lines) and lines[end + 1].lstrip().startswith("#")
           and len(_indent(lines[end + 1])) > col):
        end += 1
    return end, copy
