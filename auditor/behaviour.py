"""Changed Python code -> behaviour changes (enclosing function or class) and their tokens."""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from dataclasses import dataclass

from auditor.diff import FileChange

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"""(?:[rRbBuUfF]{0,2})(['"])((?:\\.|(?!\1).)*)\1""")
_STOP = set(keyword.kwlist) | set(dir(builtins)) | {
    "self", "cls", "args", "kwargs", "logger", "log", "warning", "info", "debug", "error",
    "return", "value", "name", "key", "item", "result", "config", "kwarg", "arg", "data",
}


@dataclass(frozen=True)
class CodeUnit:
    """A named span of a module: a function, method or class (innermost wins)."""

    qualname: str
    kind: str  # "function" | "class" | "module"
    line: int
    end_line: int


@dataclass(frozen=True)
class Behaviour:
    """A change to one function/class (or module level) of a non-test Python file."""

    path: str
    module: str
    qualname: str
    kind: str
    status: str  # "modified" | "added" | "deleted"
    line: int  # definition line on the head side (base side when deleted)
    added: tuple[int, ...]  # head-side lines changed
    removed: tuple[int, ...]  # base-side lines changed
    tokens: tuple[str, ...]
    parse_error: str = ""  # the head file does not parse: "line N: msg"; nothing is judged
    # A module that goes away (auditor.removed): "deleted" or "renamed to PATH"; ``module`` is
    # then the old module path, which its importers still import.
    gone: str = ""

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def module_name(path: str) -> str:
    mod = path[:-3] if path.endswith(".py") else path
    mod = mod.replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def code_units(tree: ast.Module) -> list[CodeUnit]:
    """Every function, method and class, outer before inner (pre-order, in source order)."""
    return [u for u, _ in _units_and_nodes(tree)]


_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _units_and_nodes(tree: ast.Module) -> list[tuple[CodeUnit, _Def]]:
    out: list[tuple[CodeUnit, _Def]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                out.append((CodeUnit(q, kind, start, child.end_lineno or child.lineno), child))
                visit(child, q + ".")

    visit(tree, "")
    return out


class UnitIndex:
    """The innermost unit holding each line, found for all lines at once: asking
    ``unit_at`` of every changed line scanned every unit each time, quadratic in a new file
    of thousands of functions (10k functions took 37 s). The units come outer before inner
    (``code_units``), so an inner unit's lines overwrite its outer one's: each line ends up
    with the unit that starts last among those holding it, as ``unit_at`` chooses. The work
    is the units' lines summed, once per file."""

    def __init__(self, units: list[CodeUnit]) -> None:
        self.units = units
        self.by_name: dict[str, CodeUnit] = {}
        for u in units:
            self.by_name.setdefault(u.qualname, u)  # the first of same-named units
        self._owner: list[CodeUnit | None] = [None] * (max((u.end_line for u in units),
                                                           default=0) + 1)
        for u in units:
            self._owner[u.line:u.end_line + 1] = [u] * (u.end_line - u.line + 1)

    def at(self, line: int) -> CodeUnit | None:
        return self._owner[line] if 0 <= line < len(self._owner) else None


def unit_at(units: list[CodeUnit], line: int) -> CodeUnit | None:
    """The innermost unit holding ``line`` (one question; ``UnitIndex`` answers many)."""
    best = None
    for u in units:
        if u.line <= line <= u.end_line and (best is None or u.line >= best.line):
            best = u
    return best


def _strip_docstrings(node: ast.AST) -> ast.AST:
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            n.body = body[1:] or [ast.Pass()]
    return node


def _units_and_defs(tree: ast.Module | None) -> tuple[list[CodeUnit], dict[str, _Def]]:
    """``code_units``, and each unit's node by qualname, of one tree from one walk of it (a
    look-up by walking the tree's children for each changed unit was quadratic too). The
    first of two same-named definitions wins, as the walk found it."""
    found = _units_and_nodes(tree) if tree is not None else []
    defs: dict[str, _Def] = {}
    for u, node in found:
        defs.setdefault(u.qualname, node)
    return [u for u, _ in found], defs


def _module_level(tree: ast.Module) -> str:
    body = [s for s in tree.body
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return ast.dump(_strip_docstrings(ast.Module(body=body, type_ignores=[])))


def _same(old: ast.Module | None, new: ast.Module | None, old_defs: dict[str, _Def],
          new_defs: dict[str, _Def], qualname: str) -> bool:
    """Whether a unit's code is equal ignoring whitespace, comments and docstrings."""
    if old is None or new is None:
        return False
    if qualname == "<module>":
        return _module_level(old) == _module_level(new)
    a, b = old_defs.get(qualname), new_defs.get(qualname)
    if a is None or b is None:
        return False
    return ast.dump(_strip_docstrings(a)) == ast.dump(_strip_docstrings(b))


def tokens_of(lines: list[str]) -> tuple[str, ...]:
    """Identifiers, attribute names and string constants on the changed lines."""
    seen: dict[str, None] = {}
    for raw in lines:
        text = raw
        for m in _STRING.finditer(raw):
            s = m.group(2)
            if s and " " not in s and len(s) <= 64 and _IDENT.fullmatch(s):
                seen.setdefault(s)
        text = _STRING.sub(" ", raw)
        text = text.split("#", 1)[0]
        for ident in _IDENT.findall(text):
            if len(ident) >= 3 and ident not in _STOP:
                seen.setdefault(ident)
    return tuple(seen)


def _parse(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def parse_error(text: str) -> tuple[int, str] | None:
    """(line, message) of why ``text`` is no Python module; None when it parses."""
    return _parsed(text)[1]


def _parsed(text: str) -> tuple[ast.Module | None, tuple[int, str] | None]:
    """``text``'s tree, or why it is no Python module (``parse_error``): one parse for both."""
    try:
        return ast.parse(text), None
    except SyntaxError as e:
        return None, (e.lineno or 1, e.msg)
    except ValueError as e:  # source code string cannot contain null bytes
        return None, (1, str(e))


def unparsable(fc: FileChange, line: int, msg: str) -> Behaviour:
    """The one behaviour of a file whose head side does not parse: its units, and so its
    guards, cannot be known (a module-level link would be a guess), so nothing links it."""
    return Behaviour(fc.path, module_name(fc.path), "<module>", "module", fc.status
                     if fc.status in ("added", "deleted") else "modified", line,
                     tuple(sorted(fc.added)), tuple(sorted(fc.removed)), (),
                     parse_error=f"line {line}: {msg}")


def behaviours(fc: FileChange) -> tuple[list[Behaviour], list[str]]:
    """Behaviour changes of one Python file, and notes (cosmetic-only units). A head side that
    does not parse is one behaviour that cannot be judged (``unparsable``)."""
    notes: list[str] = []
    new_tree: ast.Module | None = None
    if fc.new_text is not None:
        new_tree, err = _parsed(fc.new_text)  # the head side is parsed once, for both
        if err is not None:
            return [unparsable(fc, *err)], notes
    old_tree = _parse(fc.old_text)
    (old_list, old_defs), (new_list, new_defs) = _units_and_defs(old_tree), _units_and_defs(
        new_tree)
    old_units, new_units = UnitIndex(old_list), UnitIndex(new_list)
    groups: dict[str, dict[str, set[int]]] = {}
    kinds: dict[str, tuple[str, int]] = {}
    for side, lines, units in (("new", fc.added, new_units), ("old", fc.removed, old_units)):
        for ln in lines:
            u = units.at(ln)
            q = u.qualname if u else "<module>"
            groups.setdefault(q, {"new": set(), "old": set()})[side].add(ln)
            if u and (q not in kinds or side == "new"):
                kinds[q] = (u.kind, u.line)
    old_lines = (fc.old_text or "").splitlines()
    new_lines = (fc.new_text or "").splitlines()
    out: list[Behaviour] = []
    mod = module_name(fc.path)
    for q, sides in groups.items():
        if _same(old_tree, new_tree, old_defs, new_defs, q):
            notes.append(f"{fc.path}: {q} changed only in whitespace, comments or docstrings")
            continue
        on_old = q == "<module>" or q in old_defs
        on_new = q == "<module>" or q in new_defs
        status = "modified" if on_old and on_new else ("added" if on_new else "deleted")
        changed = ([new_lines[i - 1] for i in sorted(sides["new"]) if i <= len(new_lines)]
                   + [old_lines[i - 1] for i in sorted(sides["old"]) if i <= len(old_lines)])
        toks = tokens_of(changed)
        if not toks and all(not ln.strip() or ln.strip().startswith("#") for ln in changed):
            continue
        kind, line = kinds.get(q, ("module", 1))
        out.append(Behaviour(fc.path, mod, q, kind, status, line, tuple(sorted(sides["new"])),
                             tuple(sorted(sides["old"])), toks))
    return out, notes
