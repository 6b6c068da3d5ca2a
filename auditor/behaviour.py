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

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def module_name(path: str) -> str:
    mod = path[:-3] if path.endswith(".py") else path
    mod = mod.replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def code_units(tree: ast.Module) -> list[CodeUnit]:
    out: list[CodeUnit] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                out.append(CodeUnit(q, kind, start, child.end_lineno or child.lineno))
                visit(child, q + ".")

    visit(tree, "")
    return out


def unit_at(units: list[CodeUnit], line: int) -> CodeUnit | None:
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


def _find(tree: ast.Module, qualname: str) -> ast.AST | None:
    node: ast.AST = tree
    for part in qualname.split("."):
        nxt = next((c for c in ast.iter_child_nodes(node)
                    if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and c.name == part), None)
        if nxt is None:
            return None
        node = nxt
    return node


def _module_level(tree: ast.Module) -> str:
    body = [s for s in tree.body
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return ast.dump(_strip_docstrings(ast.Module(body=body, type_ignores=[])))


def _same(old: ast.Module | None, new: ast.Module | None, qualname: str) -> bool:
    """Whether a unit's code is equal ignoring whitespace, comments and docstrings."""
    if old is None or new is None:
        return False
    if qualname == "<module>":
        return _module_level(old) == _module_level(new)
    a, b = _find(old, qualname), _find(new, qualname)
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
    try:
        ast.parse(text)
    except SyntaxError as e:
        return e.lineno or 1, e.msg
    except ValueError as e:  # source code string cannot contain null bytes
        return 1, str(e)
    return None


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
    if fc.new_text is not None and (err := parse_error(fc.new_text)) is not None:
        return [unparsable(fc, *err)], notes
    old_tree, new_tree = _parse(fc.old_text), _parse(fc.new_text)
    old_units = code_units(old_tree) if old_tree else []
    new_units = code_units(new_tree) if new_tree else []
    groups: dict[str, dict[str, set[int]]] = {}
    kinds: dict[str, tuple[str, int]] = {}
    for side, lines, units in (("new", fc.added, new_units), ("old", fc.removed, old_units)):
        for ln in lines:
            u = unit_at(units, ln)
            q = u.qualname if u else "<module>"
            groups.setdefault(q, {"new": set(), "old": set()})[side].add(ln)
            if u and (q not in kinds or side == "new"):
                kinds[q] = (u.kind, u.line)
    old_lines = (fc.old_text or "").splitlines()
    new_lines = (fc.new_text or "").splitlines()
    out: list[Behaviour] = []
    mod = module_name(fc.path)
    for q, sides in groups.items():
        if _same(old_tree, new_tree, q):
            notes.append(f"{fc.path}: {q} changed only in whitespace, comments or docstrings")
            continue
        on_old = q == "<module>" or (old_tree is not None and _find(old_tree, q) is not None)
        on_new = q == "<module>" or (new_tree is not None and _find(new_tree, q) is not None)
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
