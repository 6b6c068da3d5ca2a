"""A Python file's functions for the map: qualified names, AST fingerprints, body lines.

The fingerprint is a digest of the unit's AST without positions (``ast.dump`` leaves out line
and column attributes by default), without its docstring, and comments never reach the AST:
moving a function, re-wrapping it or editing its docstring keeps its links; any change to what
it does gives it a new fingerprint. A class's and a module's fingerprint leave out the bodies
of the functions and classes they define (those are units of their own), so a changed method
does not turn its class's links stale."""

from __future__ import annotations

import ast
import copy
import hashlib
from array import array
from dataclasses import dataclass

MODULE = "<module>"
KINDS = ("function", "class", "module")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True, slots=True)
class Unit:
    """One function, class or module body of a file."""

    qualname: str  # ``Class.method``, ``outer.inner`` (as auditor.behaviour names units)
    kind: str  # one of KINDS
    fp: bytes  # 8-byte digest of the AST, positions and docstring left out
    body: tuple[int, int]  # first and last line of the body that runs when it is entered


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return body[1:]
    return body


def _shallow(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a class or module with nested definitions reduced to their names."""
    out: list[ast.stmt] = []
    for st in _strip_docstring(body):
        if isinstance(st, _DEFS):
            out.append(ast.Expr(ast.Constant(f"def {st.name}")))
        else:
            out.append(st)
    return out


def canonical(node: ast.AST) -> str:
    """The node's fields without positions (``_attributes`` are never read), empty ones left
    out, so the text is the same on Python versions that add defaulted fields (3.12's
    ``type_params``) or print them differently (``ast.dump``'s ``show_empty`` of 3.13);
    about twice as fast as ``ast.dump``, which dominated ingest."""
    out: list[str] = []
    ap = out.append

    def walk(n: ast.AST) -> None:
        ap(type(n).__name__)
        for name in n._fields:
            v = getattr(n, name, None)
            if v is None or (isinstance(v, list) and not v):
                continue
            ap(name)
            if isinstance(v, ast.AST):
                walk(v)
            elif isinstance(v, list):
                ap("[")
                for x in v:
                    if isinstance(x, ast.AST):
                        walk(x)
                    else:
                        ap(repr(x))
                ap("]")
            else:
                ap(repr(v))
        ap(")")

    walk(node)
    return "\0".join(out)


def digest(node: ast.AST) -> bytes:
    return hashlib.blake2b(canonical(node).encode(), digest_size=8).digest()


def _fn_fp(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bytes:
    shell = copy.copy(node)  # a shallow copy: only its body list is replaced
    shell.body = (_shallow(node.body) if isinstance(node, ast.ClassDef)
                  else _strip_docstring(node.body))
    return digest(shell)


def units(source: str) -> list[Unit]:
    """Every unit of a module (the module body first); raises SyntaxError."""
    tree = ast.parse(source)
    lines = source.count("\n") + 1
    out = [Unit(MODULE, "module", digest(ast.Module(_shallow(tree.body), [])), (1, lines))]

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _DEFS):
                q = f"{prefix}{child.name}"
                body = _strip_docstring(child.body) or child.body
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                out.append(Unit(q, kind, _fn_fp(child),
                                (body[0].lineno, child.end_lineno or child.lineno)))
                visit(child, q + ".")
            elif not isinstance(child, ast.expr):
                visit(child, prefix)  # if/try/with blocks: definitions inside them

    visit(tree, "")
    return out


def line_owners(us: list[Unit], n_lines: int) -> array[int]:
    """For each line (index = line number) the index in ``us`` of the innermost unit whose
    body holds it; 0 (the module) elsewhere. A ``def`` line and its decorators run when the
    enclosing scope runs (at import, for a module-level function), so they belong to it."""
    owner = array("i", [0]) * (n_lines + 2)
    # Outer units come before inner ones in ``us`` (a pre-order walk): inner spans overwrite.
    for i, u in enumerate(us[1:], 1):
        a, b = u.body
        for ln in range(a, min(b, n_lines + 1) + 1):
            owner[ln] = i
    return owner
