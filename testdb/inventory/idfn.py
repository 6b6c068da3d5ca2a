"""``parametrize(ids=<callable>)``: the callable's result for a value, computed from its AST.

pytest calls the ``ids`` callable once per value (each argname's value of each parameter set)
and turns the result into an id with its own rules (``IdMaker._idval_from_function``: None
falls back to the default id, anything else goes through ``_idval_from_value``). Those rules
stay pytest's (``decorators.pytest_ids`` hands pytest's IdMaker a function built here); this
module only computes what the callable returns, for callables that are pure expressions of
the value: a ``lambda``, a module-level ``def`` whose body is ``return``s under ``if``s (and
plain local assignments), a name bound once to either, or the builtins ``str``/``repr``.

Written by hand because nothing else fits: the repository's code is never run (``eval`` of it
would run a pull request's code), and no library evaluates an untrusted expression safely.
The evaluator is a whitelist over plain values (None, bool, int, float, complex, str, bytes,
and lists, tuples and dicts of them): conditional expressions, comparisons, boolean logic,
``+ - * % //`` within size limits, f-strings, subscripts, a few pure builtins (``str``,
``repr``, ``len``, ``int``, ``float``, ``bool``, ``abs``, ``min``, ``max``, ``sorted``, ``map``
of one of these or a lambda) and pure ``str`` methods (``join``, ``format``, ``replace``...).
Anything else (an attribute of the value, a call of anything else, a set's order, a value the
scanner does not know) raises Unknowable: the function stays indeterminate, never guessed.
"""

from __future__ import annotations

import ast
import operator
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from testdb.inventory.ids import Named, Unknowable, py_str
from testdb.inventory.values import Scope, evaluate

_MAX_STR = 10_000  # a longer intermediate string is not an id anyone wrote
_MAX_INT = 10**18
_MAX_DEPTH = 60
_MAX_STEPS = 20_000  # nodes evaluated per call: bounds comprehensions over long values

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv,
}
_STR_METHODS = frozenset({
    "join", "format", "replace", "lower", "upper", "strip", "lstrip", "rstrip", "title",
    "capitalize", "startswith", "endswith", "zfill", "ljust", "rjust", "split", "removeprefix",
    "removesuffix", "casefold", "swapcase", "center", "count", "find", "isdigit", "isalpha",
})
_SINGLETONS = (None, True, False)


@dataclass(frozen=True)
class IdFn:
    """A statically evaluable ``ids`` callable: ``params`` and its body (an expression, or
    the statements of a ``def``), with the scope its free names resolve in."""

    param: str
    body: ast.expr | tuple[ast.stmt, ...]
    scope: Scope
    line: int
    name: str  # "lambda", the def's name, or "str"/"repr"
    others: tuple[str, ...] = ()  # parameters with defaults: never read here
    builtin: bool = False

    def __call__(self, value: object) -> object:
        """What the callable returns for ``value``; Unknowable where that cannot be told."""
        if self.builtin and self.name == "str":
            _no_sets(value)
            return py_str(value)  # ``ids=str``: also a builtin class (``<class 'int'>``)
        _check(value)
        run = _Run(self.scope, self.line)
        env: _Env = {self.param: value, **dict.fromkeys(self.others, _UNREAD)}
        if isinstance(self.body, ast.expr):
            return run.expr(self.body, env, 0)
        return run.block(self.body, env, 0)


def _builtin(name: str) -> IdFn:
    # ``ids=str``: the body ``str(v)`` over the builtin itself
    node = ast.Call(ast.Name(name, ast.Load()), [ast.Name("v", ast.Load())], [])
    return IdFn("v", node, Scope(), 0, name, builtin=True)


def resolve(node: ast.expr, scope: Scope, line: int) -> IdFn | None:
    """The IdFn an ``ids=`` expression names, or None when it is not a callable we evaluate
    (the caller then decides: a list of ids, or indeterminate)."""
    module = scope.module()
    for _ in range(8):  # a name bound to a name bound to a lambda...
        if isinstance(node, ast.Lambda):
            return _from_lambda(node, module)
        if not isinstance(node, ast.Name):
            return None
        found = scope.lookup(node.id, line)
        if isinstance(found, Named):
            if _bound_in(scope, node.id) is module and node.id in module.funcs:
                return _from_def(module.funcs[node.id], module)
            if _bound_in(scope, node.id) is None and found.name in ("str", "repr"):
                return _builtin(found.name)
            return None  # a class, a method, another builtin
        if found is None:
            return None
        node, scope = found
    return None


def _bound_in(scope: Scope, name: str) -> Scope | None:
    """The scope (this one or an enclosing one) that binds ``name``, or None (a builtin)."""
    s: Scope | None = scope
    while s is not None:
        if name in s.consts or name in s.defs or name in s.aliases:
            return s
        s = s.parent
    return None


# pytest calls the callable at collection time, when the module has run to its end: free names
# resolve in the module (a lambda in a class body does not see the class's names), as bound
# last (``Scope`` keeps only names bound once).
_RUN_LINE = 10**9


def _from_lambda(node: ast.Lambda, module: Scope) -> IdFn | None:
    name = _single_param(node.args)
    if name is None:
        return None
    return IdFn(name, node.body, module, _RUN_LINE, "lambda", _other_params(node.args))


def _from_def(fdef: ast.FunctionDef | ast.AsyncFunctionDef, module: Scope) -> IdFn | None:
    if isinstance(fdef, ast.AsyncFunctionDef) or fdef.decorator_list:
        return None
    name = _single_param(fdef.args)
    if name is None:
        return None
    return IdFn(name, tuple(fdef.body), module, _RUN_LINE, fdef.name, _other_params(fdef.args))


def _other_params(args: ast.arguments) -> tuple[str, ...]:
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return tuple(names[1:])


def _single_param(args: ast.arguments) -> str | None:
    """The one parameter pytest passes the value to; other parameters must have defaults
    (their values are not read: a body naming them is refused)."""
    positional = [*args.posonlyargs, *args.args]
    if not positional or args.vararg or args.kwarg:
        return None
    if len(positional) - len(args.defaults) > 1:
        return None
    if any(d is None for d in args.kw_defaults):
        return None
    return positional[0].arg


def _check(value: object, depth: int = 0) -> None:
    """Only plain values go in: a sentinel (a value known only at run time, a def) does not."""
    if depth > _MAX_DEPTH:
        raise Unknowable
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        return
    if isinstance(value, list | tuple):
        for v in value:
            _check(v, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _check(k, depth + 1)
            _check(v, depth + 1)
        return
    # sets (their order is a process's hash order), OPAQUE, Named, PSet, XParam, NOTSET...
    raise Unknowable


_Env = dict[str, object]
_UNREAD = object()  # a parameter's default: not read (its expression ran at def time)


def _no_sets(value: object, depth: int = 0) -> None:
    """``str`` of a set shows a process's hash order."""
    if depth > _MAX_DEPTH or isinstance(value, set | frozenset):
        raise Unknowable
    if isinstance(value, list | tuple):
        for v in value:
            _no_sets(v, depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_sets(k, depth + 1)
            _no_sets(v, depth + 1)


class _Return(Exception):
    def __init__(self, value: object) -> None:
        self.value = value


class _Run:
    """One evaluation: the step budget and the scope of free names."""

    def __init__(self, scope: Scope, line: int) -> None:
        self.scope = scope
        self.line = line
        self.steps = 0

    # -- statements (a module-level def's body) ------------------------------------------
    def block(self, body: tuple[ast.stmt, ...] | list[ast.stmt], env: _Env, depth: int) -> object:
        try:
            self._stmts(body, env, depth)
        except _Return as r:
            return r.value
        return None  # falling off the end returns None: pytest's default id

    def _stmts(self, body: tuple[ast.stmt, ...] | list[ast.stmt], env: _Env, depth: int) -> None:
        for stmt in body:
            self._tick(depth)
            if isinstance(stmt, ast.Return):
                raise _Return(None if stmt.value is None else self.expr(stmt.value, env, depth))
            if isinstance(stmt, ast.If):
                branch = stmt.body if self._truth(self.expr(stmt.test, env, depth)) else stmt.orelse
                self._stmts(branch, env, depth + 1)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name):
                env[stmt.targets[0].id] = self.expr(stmt.value, env, depth)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring
            elif isinstance(stmt, ast.Pass):
                continue
            else:
                raise Unknowable

    # -- expressions ---------------------------------------------------------------------------
    def _tick(self, depth: int) -> None:
        self.steps += 1
        if self.steps > _MAX_STEPS or depth > _MAX_DEPTH:
            raise Unknowable

    def expr(self, node: ast.expr, env: _Env, depth: int) -> object:
        self._tick(depth)
        d = depth + 1
        try:
            out = self._expr(node, env, d)
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError,
                AttributeError, OverflowError, RecursionError) as e:
            # pytest would fail the collection ("error raised while trying to determine id")
            raise Unknowable from e
        if isinstance(out, str | bytes) and len(out) > _MAX_STR:
            raise Unknowable
        if isinstance(out, int) and not isinstance(out, bool) and abs(out) > _MAX_INT:
            raise Unknowable
        return out

    def _expr(self, node: ast.expr, env: _Env, d: int) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, env)
        if isinstance(node, ast.IfExp):
            test = self._truth(self.expr(node.test, env, d))
            return self.expr(node.body if test else node.orelse, env, d)
        if isinstance(node, ast.BoolOp):
            val: object = None
            for v in node.values:
                val = self.expr(v, env, d)
                truth = self._truth(val)
                if isinstance(node.op, ast.And) and not truth:
                    return val
                if isinstance(node.op, ast.Or) and truth:
                    return val
            return val
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand, env, d)
            if isinstance(node.op, ast.Not):
                return not self._truth(operand)
            if isinstance(node.op, ast.USub) and _number(operand):
                return -operand  # type: ignore[operator]
            if isinstance(node.op, ast.UAdd) and _number(operand):
                return +operand  # type: ignore[operator]
            raise Unknowable
        if isinstance(node, ast.Compare):
            return self._compare(node, env, d)
        if isinstance(node, ast.BinOp):
            return self._binop(node, env, d)
        if isinstance(node, ast.JoinedStr):
            return "".join(self._fstring_part(v, env, d) for v in node.values)
        if isinstance(node, ast.FormattedValue):
            return self._fstring_part(node, env, d)
        if isinstance(node, ast.Tuple | ast.List):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                raise Unknowable
            elts = [self.expr(e, env, d) for e in node.elts]
            return tuple(elts) if isinstance(node, ast.Tuple) else elts
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise Unknowable
            return {self.expr(k, env, d): self.expr(v, env, d)  # type: ignore[arg-type]
                    for k, v in zip(node.keys, node.values, strict=True)}
        if isinstance(node, ast.Subscript):
            return self._subscript(node, env, d)
        if isinstance(node, ast.ListComp | ast.GeneratorExp):
            return self._comprehension(node, env, d)
        if isinstance(node, ast.Call):
            return self._call(node, env, d)
        raise Unknowable  # attributes, lambdas inside, walrus, sets, await...

    def _name(self, name: str, env: _Env) -> object:
        if name in env:
            if env[name] is _UNREAD:
                raise Unknowable
            return env[name]
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        # a module constant bound once to a literal (read as values.evaluate reads it)
        val = evaluate(ast.Name(name, ast.Load()), self.scope, self.line)
        _check(val)
        return val

    @staticmethod
    def _truth(val: object) -> bool:
        _check(val)
        return bool(val)

    def _compare(self, node: ast.Compare, env: _Env, d: int) -> bool:
        left = self.expr(node.left, env, d)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.expr(comp, env, d)
            if isinstance(op, ast.Is | ast.IsNot):
                # identity is defined here only against None, True and False
                if not any(x is s for x in (left, right) for s in _SINGLETONS):
                    raise Unknowable
                ok = (left is right) == isinstance(op, ast.Is)
            else:
                fn = _COMPARE.get(type(op))
                if fn is None:
                    raise Unknowable
                ok = bool(fn(left, right))
            if not ok:
                return False
            left = right
        return True

    def _binop(self, node: ast.BinOp, env: _Env, d: int) -> object:
        left = self.expr(node.left, env, d)
        right = self.expr(node.right, env, d)
        fn = _BINOPS.get(type(node.op))
        if fn is None:
            raise Unknowable  # ** (unbounded), bit operations, @
        if isinstance(node.op, ast.Mult):
            n = right if isinstance(left, str | bytes | list | tuple) else left
            seq = left if n is right else right
            if isinstance(seq, str | bytes | list | tuple) and (
                    not isinstance(n, int) or n * len(seq) > _MAX_STR):
                raise Unknowable
        if isinstance(node.op, ast.Mod) and isinstance(left, str | bytes):
            _check(right)  # "%s-%d" % (a, b): plain formatting
        return fn(left, right)

    def _fstring_part(self, node: ast.expr, env: _Env, d: int) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if not isinstance(node, ast.FormattedValue):
            raise Unknowable
        val = self.expr(node.value, env, d)
        _check(val)
        if node.conversion == ord("r"):
            val = repr(val)
        elif node.conversion == ord("s"):
            val = str(val)
        elif node.conversion == ord("a"):
            val = ascii(val)
        spec = ""
        if node.format_spec is not None:
            spec = str(self.expr(node.format_spec, env, d))
        return format(val, spec)

    def _subscript(self, node: ast.Subscript, env: _Env, d: int) -> object:
        target = self.expr(node.value, env, d)
        if not isinstance(target, str | bytes | list | tuple | dict):
            raise Unknowable
        sl = node.slice
        if isinstance(sl, ast.Slice):
            parts = [None if p is None else self.expr(p, env, d)
                     for p in (sl.lower, sl.upper, sl.step)]
            if not all(p is None or isinstance(p, int) for p in parts) or isinstance(
                    target, dict):
                raise Unknowable
            seq: Any = target
            return seq[slice(*parts)]
        indexable: Any = target
        return indexable[self.expr(sl, env, d)]

    def _comprehension(self, node: ast.ListComp | ast.GeneratorExp, env: _Env, d: int) -> list[
            object]:
        if len(node.generators) != 1:
            raise Unknowable
        gen = node.generators[0]
        if gen.is_async or not isinstance(gen.target, ast.Name):
            raise Unknowable
        seq = self.expr(gen.iter, env, d)
        if not isinstance(seq, list | tuple | str | dict):
            raise Unknowable
        out = []
        for item in seq:
            inner = {**env, gen.target.id: item}
            if all(self._truth(self.expr(c, inner, d)) for c in gen.ifs):
                out.append(self.expr(node.elt, inner, d))
        return out

    def _call(self, node: ast.Call, env: _Env, d: int) -> object:
        if any(isinstance(a, ast.Starred) for a in node.args) or (node.keywords and any(
                k.arg is None for k in node.keywords)):
            raise Unknowable
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = self.expr(func.value, env, d)
            args = [self.expr(a, env, d) for a in node.args]
            kwargs = {k.arg: self.expr(k.value, env, d) for k in node.keywords
                      if k.arg is not None}
            for a in (*args, *kwargs.values()):
                _check(a)
            if isinstance(owner, str) and func.attr in _STR_METHODS:
                if func.attr == "format":
                    _plain_format(owner)
                if func.attr == "join":
                    (parts,) = args
                    if not isinstance(parts, list | tuple) or not all(
                            isinstance(p, str) for p in parts):
                        raise Unknowable
                return getattr(owner, func.attr)(*args, **kwargs)
            if isinstance(owner, dict) and func.attr == "get" and not kwargs:
                return owner.get(*args)
            raise Unknowable
        if not isinstance(func, ast.Name) or func.id in env or self._shadowed(func.id):
            raise Unknowable
        if func.id == "map":
            return self._map(node, env, d)
        fn = _PURE_BUILTINS.get(func.id)
        if fn is None or (node.keywords and func.id != "sorted"):
            raise Unknowable
        args = [self.expr(a, env, d) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, env, d) for k in node.keywords if k.arg is not None}
        for a in (*args, *kwargs.values()):
            _check(a)
        return fn(*args, **kwargs)

    def _shadowed(self, name: str) -> bool:
        """A builtin's name the module rebinds (``str = ...``) is not the builtin."""
        return name in self.scope.module().bound_names or name in self.scope.module().aliases

    def _map(self, node: ast.Call, env: _Env, d: int) -> list[object]:
        if len(node.args) != 2 or node.keywords:
            raise Unknowable
        fnode, seq_node = node.args
        seq = self.expr(seq_node, env, d)
        if not isinstance(seq, list | tuple | str):
            raise Unknowable
        if isinstance(fnode, ast.Lambda):
            name = _single_param(fnode.args)
            if name is None:
                raise Unknowable
            return [self.expr(fnode.body, {**env, name: x}, d) for x in seq]
        if isinstance(fnode, ast.Name) and fnode.id in _PURE_BUILTINS and not self._shadowed(
                fnode.id):
            fn = _PURE_BUILTINS[fnode.id]
            return [fn(x) for x in seq]
        raise Unknowable


def _plain_format(template: str) -> None:
    """A ``str.format`` template that only places arguments: ``{0.attr}`` and ``{0[k]}`` read
    attributes and items of them, and a nested field in a spec is not read here."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as e:
        raise Unknowable from e
    for _text, name, spec, _conv in fields:
        if name is not None and ("." in name or "[" in name or "{" in (spec or "")):
            raise Unknowable


def _number(val: object) -> bool:
    return isinstance(val, int | float | complex) and not isinstance(val, bool)


def _sorted(seq: object, **kwargs: object) -> list[Any]:
    if set(kwargs) - {"reverse"} or not isinstance(seq, list | tuple | str):
        raise Unknowable
    return sorted(seq, reverse=bool(kwargs.get("reverse", False)))


_PURE_BUILTINS: Mapping[str, Callable[..., Any]] = {
    "str": str, "repr": repr, "ascii": ascii, "len": len, "int": int, "float": float,
    "bool": bool, "abs": abs, "min": min, "max": max, "sorted": _sorted, "round": round,
    "tuple": tuple, "list": list,
}
