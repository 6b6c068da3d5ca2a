"""What a decorator (or ``pytestmark`` entry) does to a test: mark it, parametrize it, expand it."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from testdb.inventory import pytest_rules
from testdb.inventory.config import StaticConfig
from testdb.inventory.idfn import IdFn
from testdb.inventory.idfn import resolve as resolve_idfn
from testdb.inventory.ids import (
    HIDDEN,
    NOTSET,
    OPAQUE,
    Named,
    PSet,
    Unknowable,
    XParam,
    ascii_escaped,
    auto_id,
    explicit_id,
    make_unique,
    py_str,
    safe_name,
)
from testdb.inventory.values import Scope, dotted, evaluate

T = TypeVar("T")
_MAX_DEPTH = 20
_EXPAND = frozenset({"parameterized.parameterized.expand", "parameterized.expand"})
_FIXTURE = frozenset({"pytest.fixture", "pytest.yield_fixture"})


@dataclass(frozen=True)
class Layer:
    """One parametrize call: per parameter set its id (a str, or HIDDEN) and its marks."""

    ids: tuple[object, ...]
    marks: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Effect:
    """What one decorator does.

    kind: "mark" (``name``), "parametrize" (``layer``; None when unknowable, and also a mark
    named ``parametrize``), "expand" (``names`` of the generated functions; None when
    unknowable), "fixture" (not a test), "other" (a decorator we do not model).
    """

    kind: str
    name: str = ""
    layer: Layer | None = None
    names: tuple[str, ...] | None = None


OTHER = Effect("other")


def classify(node: ast.expr, scope: Scope, line: int, config: StaticConfig,
             func_name: str = "", depth: int = 0) -> Effect:
    """Classify a decorator expression (or an entry of a ``pytestmark`` list)."""
    call = node if isinstance(node, ast.Call) else None
    target = call.func if call is not None else node
    name = dotted(target, scope)
    if isinstance(target, ast.Name) and depth < _MAX_DEPTH:
        found = scope.lookup(target.id, line)
        if isinstance(found, tuple):
            cnode, cscope = found
            if call is None:
                # ``skip_x = pytest.mark.skipif(...)`` used as ``@skip_x``
                return classify(cnode, cscope, line, config, func_name, depth + 1)
            # ``parametrize = pytest.mark.parametrize`` used as ``@parametrize(...)``
            name = dotted(cnode, cscope) or name
    if not name:
        return OTHER
    if name.startswith("pytest.mark.") and name.count(".") == 2:
        mark = name.rsplit(".", 1)[1]
        if mark == "parametrize" and call is not None:
            return Effect("parametrize", "parametrize", _safe(lambda: parametrize_layer(
                call, scope, line)))
        return Effect("mark", mark)
    if name in _FIXTURE:
        return Effect("fixture")
    last = name.rsplit(".", 1)[-1]
    if call is not None and last in config.helpers and not name.startswith("pytest."):
        style = config.helpers[last]
        return Effect("parametrize", "parametrize", _safe(lambda: helper_layer(
            call, scope, line, style)))
    if call is not None and name in _EXPAND:
        return Effect("expand", names=_safe(lambda: expand_names(
            call, func_name, scope, line, config)))
    return OTHER


def _safe(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Unknowable:
        return None


def _call_args(call: ast.Call, names: tuple[str, ...]) -> dict[str, ast.expr]:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        raise Unknowable
    out = dict(zip(names, call.args, strict=False))
    out.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    return out


def _argnames(value: object) -> tuple[list[str], bool]:
    if isinstance(value, str):
        names = [x.strip() for x in value.split(",") if x.strip()]
        return names, len(names) == 1
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value], False
    raise Unknowable


def parametrize_layer(call: ast.Call, scope: Scope, line: int,
                      ids_override: list[object] | None = None) -> Layer:
    """``pytest.mark.parametrize(argnames, argvalues, indirect, ids, ...)`` as pytest ids it."""
    if len(call.args) > 2 and pytest_rules.installed().parametrize_keyword_only:
        raise Unknowable  # pytest >= 9.2: indirect/ids by keyword only, else collection fails
    args = _call_args(call, ("argnames", "argvalues", "indirect", "ids"))
    if "argnames" not in args or "argvalues" not in args:
        raise Unknowable
    argnames, force_tuple = _argnames(evaluate(args["argnames"], scope, line))
    argvalues = evaluate(args["argvalues"], scope, line)
    if not isinstance(argvalues, list | tuple):
        raise Unknowable
    psets = _parameter_sets(argvalues, argnames, force_tuple)
    ids_list: list[object] | None = ids_override
    if ids_override is None and "ids" in args:
        idfn = resolve_idfn(args["ids"], scope, line)
        if idfn is not None:
            # a callable of the value: pytest's own IdMaker calls our evaluation of it
            resolved_by_pytest = pytest_ids(psets, argnames, idfn)
            return Layer(tuple(resolved_by_pytest), tuple(ps.marks for ps in psets))
        ids_val = evaluate(args["ids"], scope, line)
        if isinstance(ids_val, list | tuple):
            ids_list = list(ids_val)
        elif ids_val is not None:
            raise Unknowable  # another callable, a generator: only running it tells
    if ids_list is not None and len(ids_list) not in (0, len(psets)):
        raise Unknowable  # pytest fails the collection
    resolved: list[object] = []
    for idx, ps in enumerate(psets):
        if ps.id is not None:
            if ps.id is OPAQUE:
                raise Unknowable
            resolved.append(ps.id if ps.id is HIDDEN else ascii_escaped(str(ps.id)))
        elif ids_list and idx < len(ids_list) and ids_list[idx] is not None:
            entry = ids_list[idx]
            resolved.append(HIDDEN if entry is HIDDEN else explicit_id(entry))
        else:
            resolved.append(auto_id(ps.values, argnames, idx))
    return Layer(tuple(make_unique(resolved)), tuple(ps.marks for ps in psets))


class _Static:
    """A value pytest's IdMaker may look at that the scanner knows only as a sentinel: a def
    or class (its ``__name__``), or a value known only at run time (any look raises)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __getattr__(self, name: str) -> object:
        if name == "__name__" and isinstance(self.value, Named):
            return self.value.name
        raise Unknowable


def pytest_ids(psets: list[PSet], argnames: list[str], idfn: IdFn) -> list[object]:
    """The ids pytest's own IdMaker gives these parameter sets with ``ids=idfn`` (HIDDEN for
    a hidden set); Unknowable where pytest would need what the scanner does not know.

    Only layers with an ``ids`` callable come here: importing pytest's collection modules
    costs about 0.1 s a process, which the scan of a tree without them does not pay (its ids
    are pytest's rules as restated in ``testdb.inventory.ids``, checked against IdMaker).
    """
    import pytest
    from _pytest.mark.structures import ParameterSet

    hidden = getattr(pytest, "HIDDEN_PARAM", HIDDEN)

    def real(v: object) -> object:
        plain = v is None or isinstance(v, bool | int | float | complex | str | bytes | list
                                        | tuple | dict)
        return v if plain else _Static(v)

    def call_idfn(v: object) -> object:
        return idfn(v.value if isinstance(v, _Static) else v)

    sets = []
    for ps in psets:
        if ps.id is OPAQUE:
            raise Unknowable
        pid = hidden if ps.id is HIDDEN else ps.id
        values = tuple(real(v) for v in ps.values)
        sets.append(ParameterSet(values, (), pid))  # type: ignore[arg-type]
    maker = idmaker(argnames, sets, call_idfn, None, idfn.name)
    try:
        ids = maker.make_unique_parameterset_ids()
    except ValueError as e:  # the callable raised (pytest: a collection error)
        raise Unknowable from e
    except pytest.fail.Exception as e:  # pytest fails the collection
        raise Unknowable from e
    return [HIDDEN if i is hidden else i for i in ids]


def idmaker(argnames: Sequence[str], sets: Sequence[Any], idfn: Callable[[Any], object] | None,
            ids: Sequence[object] | None, func_name: str | None = None) -> Any:
    """pytest's IdMaker without a config or node (no ini options, no hook), built by field
    name: its fields differ between versions (9.2 dropped ``func_name``)."""
    from _pytest.python import IdMaker

    given: dict[str, Any] = {
        "argnames": argnames, "parametersets": sets, "idfn": idfn, "ids": ids, "config": None,
        "nodeid": None, "func_name": func_name,
    }
    return IdMaker(**{f.name: given[f.name] for f in dataclasses.fields(IdMaker)})


def _parameter_sets(argvalues: list[object] | tuple[object, ...], argnames: list[str],
                    force_tuple: bool) -> list[PSet]:
    # ParameterSet.extract_from + the length check of _for_parametrize
    psets: list[PSet] = []
    for x in argvalues:
        if isinstance(x, PSet):
            ps = x
        elif force_tuple:
            ps = PSet((x,))
        elif isinstance(x, list | tuple | str):
            ps = PSet(tuple(x))
        elif x is OPAQUE:
            ps = PSet((OPAQUE,) * len(argnames))
        else:
            raise Unknowable  # pytest fails the collection (len() of a non-sequence)
        if len(ps.values) != len(argnames):
            raise Unknowable
        psets.append(ps)
    if not psets:
        # An empty argvalues list gives one skipped set with the id "NOTSET" (pytest 8.3: the
        # default id, argname + index).
        empty_id = "NOTSET" if pytest_rules.installed().empty_set_id_notset else None
        psets.append(PSet((NOTSET,) * len(argnames), empty_id, ("skip",)))
    return psets


def helper_layer(call: ast.Call, scope: Scope, line: int, style: str) -> Layer:
    """A helper that builds ids itself and hands them to ``pytest.mark.parametrize``.

    Mirrors TensorRT-LLM's ``parametrize_with_ids``: a bare scalar is one value, a
    ``pytest.param`` contributes its values, anything else is a sequence of values.
    """
    if style == "pytest":
        return parametrize_layer(call, scope, line)
    args = _call_args(call, ("argnames", "argvalues"))
    if "argnames" not in args or "argvalues" not in args:
        raise Unknowable
    names_val = evaluate(args["argnames"], scope, line)
    if isinstance(names_val, str):
        names = [n.strip() for n in names_val.split(",")]
    elif isinstance(names_val, list | tuple) and all(isinstance(n, str) for n in names_val):
        names = [str(n) for n in names_val]
    else:
        raise Unknowable
    argvalues = evaluate(args["argvalues"], scope, line)
    if not isinstance(argvalues, list | tuple):
        raise Unknowable
    case_ids: list[object] = []
    for case in argvalues:
        if isinstance(case, PSet):
            values: tuple[object, ...] | None = case.values
        elif case is None or isinstance(case, str | float | int | bool):
            values = (case,)
        elif isinstance(case, list | tuple):
            values = tuple(case)
        elif case is OPAQUE:
            values = None
        else:
            raise Unknowable
        if values is not None and len(values) != len(names):
            raise Unknowable  # the helper's assert fails
        try:
            if values is None:
                raise Unknowable
            parts = [py_str(v) for v in values]
            if style == "name=value":
                parts = [f"{n}={p}" for n, p in zip(names, parts, strict=True)]
            case_ids.append("-".join(parts))
        except Unknowable:
            case_ids.append(OPAQUE)  # only fatal if pytest needs it (no pytest.param id)
    return parametrize_layer(call, scope, line, ids_override=case_ids)


def expand_names(call: ast.Call, func_name: str, scope: Scope, line: int,
                 config: StaticConfig) -> tuple[str, ...]:
    """The functions ``parameterized.expand(input, name_func=...)`` puts in the namespace."""
    args = _call_args(call, ("input", "name_func", "doc_func", "skip_on_empty"))
    if "input" not in args:
        raise Unknowable
    style = "default"
    if "name_func" in args:
        style = _name_func_style(args["name_func"], scope, line, config)
    inputs = evaluate(args["input"], scope, line)
    if not isinstance(inputs, list | tuple):
        raise Unknowable
    params: list[tuple[object, ...]] = []
    for x in inputs:
        # param.from_decorator
        if isinstance(x, XParam):
            params.append(x.args)
        elif x is OPAQUE:
            raise Unknowable
        elif isinstance(x, str | bytes) or not isinstance(x, list | tuple | dict):
            params.append((x,))
        else:
            params.append(tuple(x))
    if not params:
        skip = evaluate(args["skip_on_empty"], scope, line) if "skip_on_empty" in args else False
        if skip is True:
            return (func_name,)
        raise Unknowable  # parameterized raises at import: the module fails to collect
    digits = len(str(len(params) - 1))
    names = []
    for num, p in enumerate(params):
        if style == "default":
            name = f"{func_name}_{num:0>{digits}}"
            if p and p[0] is OPAQUE:
                raise Unknowable
            if p and isinstance(p[0], str):
                name += "_" + safe_name(p[0])
        elif style == "first_arg":
            if not p:
                raise Unknowable
            name = f"{func_name}_{safe_name(p[0])}"
        else:
            name = f"{func_name}_{safe_name(_join_all(p))}"
        names.append(name)
    return tuple(dict.fromkeys(names))


def _join_all(params: tuple[object, ...] | list[object]) -> str:
    return "_".join(_join_all(x) if isinstance(x, list | tuple) else py_str(x) for x in params)


def _name_func_style(node: ast.expr, scope: Scope, line: int, config: StaticConfig) -> str:
    if isinstance(node, ast.Constant) and node.value is None:
        return "default"
    name = dotted(node, scope)
    if name is None:
        raise Unknowable
    if isinstance(node, ast.Name) and node.id in scope.module().funcs:
        # A module-level name_func: recognise the two shapes TensorRT-LLM uses.
        fdef = scope.module().funcs[node.id]
        text = ast.unparse(fdef)
        if "args[0]" in text and "join" not in text:
            return "first_arg"
        if node.id in config.name_funcs:
            return config.name_funcs[node.id]
        raise Unknowable
    last = name.rsplit(".", 1)[-1]
    if last in config.name_funcs:
        return config.name_funcs[last]
    raise Unknowable
