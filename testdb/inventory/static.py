"""Expand one test module into inventory items from its AST, the way pytest would collect it."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from testdb.inventory import pytest_rules
from testdb.inventory.config import DEFAULT_CONFIG, StaticConfig
from testdb.inventory.decorators import Effect, Layer
from testdb.inventory.groups import Group, Variant, expand
from testdb.inventory.ids import HIDDEN
from testdb.inventory.memo import DecoratorMemo
from testdb.inventory.model import WILDCARD, InventoryItem
from testdb.inventory.values import Scope, class_scope, dotted, evaluate, module_scope

FuncNode = ast.FunctionDef | ast.AsyncFunctionDef
_TESTCASE = frozenset({
    "unittest.TestCase", "unittest.IsolatedAsyncioTestCase", "unittest.case.TestCase",
})
# Bases that add no tests, marks or __init__ of interest.
_PLAIN_BASES = frozenset({
    "object", "abc.ABC", "ABC", "typing.Generic", "Generic", "typing.Protocol", "Protocol",
})


@dataclass
class Effects:
    """Marks and parametrize layers of one decorated object, nearest decorator first."""

    marks: list[str] = field(default_factory=list)
    layers: list[Layer | None] = field(default_factory=list)
    has_marks: bool = False  # the object carries ``pytestmark`` (a keyword pytest -k matches)


@dataclass
class ClassInfo:
    node: ast.ClassDef
    scope: Scope
    bases: list[str]  # in-module class names, or "" for a base we cannot see
    unittest: bool = False
    external: bool = False  # a base outside the module: it may hold more tests
    own: Effects = field(default_factory=Effects)


def scan_source(source: str | bytes, file_id: str, *, path: str = "",
                dirs: tuple[str, ...] = (),
                config: StaticConfig = DEFAULT_CONFIG) -> list[InventoryItem]:
    """All items of one module. ``file_id`` is the id's file part, ``dirs`` the directory
    names pytest's ``-k`` sees (those below the pytest root)."""
    return expand(scan_groups(source, file_id, dirs=dirs, config=config), file_id, path)


def scan_groups(source: str | bytes, file_id: str, *, dirs: tuple[str, ...] = (),
                config: StaticConfig = DEFAULT_CONFIG) -> list[Group]:
    """The module's test functions in compact form (see ``groups.expand``)."""
    parsed: ast.Module | SyntaxError | ValueError
    try:
        parsed = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        parsed = e
    raw = source.encode() if isinstance(source, str) else source
    return parsed_groups(parsed, raw, file_id, dirs=dirs, config=config)


def parsed_groups(parsed: ast.Module | SyntaxError | ValueError, raw: bytes, file_id: str, *,
                  dirs: tuple[str, ...] = (), config: StaticConfig = DEFAULT_CONFIG
                  ) -> list[Group]:
    """``scan_groups`` of a module already parsed: ``parsed`` is ``ast.parse(raw)``, or what
    it raised. A cold audit parses each test file once, for this and for the import graph
    (``auditor.graph``). The tree is only read here, never changed."""
    if not isinstance(parsed, ast.Module):
        # pytest cannot import the module: a collection error, and CI runs none of its tests.
        # One placeholder keeps where and why (errors only the compiler finds, such as a
        # `return` outside a function, are not looked for: compiling costs half a parse more).
        line, why = parse_error(parsed)
        return [_placeholder(file_id, (), dirs, line, error=why)]
    return list(_ModuleScan(parsed, raw, file_id, dirs, config).groups())


def parse_error(e: SyntaxError | ValueError) -> tuple[int, str]:
    """(line, what is wrong) of a module ``ast.parse`` refused (a ValueError: null bytes)."""
    if isinstance(e, SyntaxError):
        return max(e.lineno or 1, 1), f"syntax error: {e.msg}"
    return 1, f"cannot parse: {e}"


def _placeholder(file_id: str, classes: tuple[str, ...], dirs: tuple[str, ...], line: int,
                 function: str = WILDCARD, error: str = "") -> Group:
    keywords = tuple(dict.fromkeys((*dirs, file_id.rsplit("/", 1)[-1], *classes)))
    return Group(classes, function, line, True, (), (), keywords, ((None, ()),), error)


class _ModuleScan:
    def __init__(self, tree: ast.Module, raw: bytes, file_id: str, dirs: tuple[str, ...],
                 config: StaticConfig) -> None:
        self.tree = tree
        self.memo = DecoratorMemo(raw, config)
        self.file_id = file_id
        self.config = config
        self.scope = module_scope(tree, config.resolve_constants,
                                  raw.decode("utf-8", "replace"))
        self.base_keywords = (*dirs, file_id.rsplit("/", 1)[-1])
        self.dirs = dirs
        self.classes: dict[str, ClassInfo] = {}
        self.module_effects = Effects()
        self.all_indeterminate = "pytest_generate_tests" in self.scope.defs

    # -- module ---------------------------------------------------------------------------
    def groups(self) -> Iterator[Group]:
        if evaluate_name(self.scope, "__test__") is False:
            return
        self.module_effects = self._pytestmark(self.scope, 10**9)
        top: dict[str, FuncNode | ast.ClassDef] = {}
        conditional_tests = False
        body_ids = {id(s) for s in self.tree.body}
        for stmt in _walk_blocks(self.tree.body):
            if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if id(stmt) not in body_ids:
                conditional_tests = conditional_tests or self._looks_collectable(stmt)
                continue
            top[stmt.name] = stmt  # a later def replaces an earlier one, in its first place
        for stmt in top.values():
            if isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = self._class_info(stmt, self.scope)
        for name, stmt in top.items():
            if isinstance(stmt, ast.ClassDef):
                info = self.classes[name]
                if self._collectable_class(info):
                    yield from self._class_items(info, (name,), [])
            elif self.config.is_test_function(name):
                yield from self._function_items(stmt, (), [], unittest=False)
        if conditional_tests:
            # Defined under if/try: whether they exist is known only at import time.
            yield _placeholder(self.file_id, (), self.dirs, 1)

    def _classify(self, node: ast.expr, scope: Scope, line: int, func_name: str = "") -> Effect:
        return self.memo.classify(node, scope, line, func_name)

    def _looks_collectable(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.ClassDef):
            bases = [dotted(b, self.scope) or "" for b in stmt.bases]
            return self.config.is_test_class(stmt.name) or any(
                b.endswith("TestCase") for b in bases)
        return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and \
            self.config.is_test_function(stmt.name)

    def _pytestmark(self, scope: Scope, line: int) -> Effects:
        """``pytestmark = mark`` or ``= [marks]`` in a module or class body."""
        eff = Effects()
        if "pytestmark" not in scope.consts:
            return eff
        mline, node = scope.consts["pytestmark"]
        nodes = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
        for n in nodes:
            self._apply(eff, self._classify(n, scope, mline + 1))
        return eff

    def _apply(self, eff: Effects, effect: Effect) -> None:
        if effect.kind in ("mark", "parametrize"):
            eff.marks.append(effect.name)
            eff.has_marks = True
        if effect.kind == "parametrize":
            eff.layers.append(effect.layer)

    # -- classes ------------------------------------------------------------------------------
    def _class_info(self, node: ast.ClassDef, outer: Scope) -> ClassInfo:
        scope = class_scope(node, outer)
        info = ClassInfo(node, scope, [])
        for base in node.bases:
            name = dotted(base.value if isinstance(base, ast.Subscript) else base, self.scope)
            if name in _TESTCASE:
                info.unittest = True
            elif name and "." not in name and name in self.classes and name != node.name:
                info.bases.append(name)
            elif name in _PLAIN_BASES or (name or "").rsplit(".", 1)[-1] in self.config.plain_bases:
                continue
            else:
                info.external = True
                # A base from elsewhere named like unittest's is most likely one.
                info.unittest = info.unittest or bool(name and name.endswith("TestCase"))
        own = self._pytestmark(scope, node.lineno)
        for dec in reversed(node.decorator_list):
            self._apply(own, self._classify(dec, outer, dec.lineno))
        info.own = own
        return info

    def _mro(self, name: str, seen: tuple[str, ...] = ()) -> list[str]:
        """C3 linearisation over the classes of this module."""
        info = self.classes.get(name)
        if info is None or name in seen:
            return [name]
        seqs = [self._mro(b, (*seen, name)) for b in info.bases] + [list(info.bases)]
        out = [name]
        while any(seqs):
            for seq in seqs:
                if not seq:
                    continue
                head = seq[0]
                if not any(head in s[1:] for s in seqs):
                    break
            else:
                return out + [b for s in seqs for b in s if b not in out]  # inconsistent MRO
            out.append(head)
            seqs = [s[1:] if s and s[0] == head else s for s in seqs]
        return out

    def _lineage(self, info: ClassInfo) -> list[ClassInfo]:
        name = info.node.name
        if self.classes.get(name) is not info:
            return [info]  # a nested class: its bases are not module-level names
        return [self.classes[c] for c in self._mro(name) if c in self.classes]

    def _class_attr(self, lineage: list[ClassInfo], attr: str) -> object:
        for info in lineage:
            if attr in info.scope.consts:
                return evaluate(info.scope.consts[attr][1], info.scope, 10**9)
            if any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == attr
                   for s in info.node.body):
                return True
        return None

    def _collectable_class(self, info: ClassInfo) -> bool:
        lineage = self._lineage(info)
        test_attr = self._class_attr(lineage, "__test__")
        is_unittest = any(c.unittest for c in lineage)
        if test_attr is False:
            return False
        if is_unittest:
            return True
        if not (self.config.is_test_class(info.node.name) or test_attr is True):
            return False
        # pytest skips (with a warning) classes with a constructor, and abstract classes
        if self._class_attr(lineage, "__init__") or self._class_attr(lineage, "__new__"):
            return False
        return not self._is_abstract(lineage)

    def _is_abstract(self, lineage: list[ClassInfo]) -> bool:
        for info in lineage:
            for stmt in info.node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                        (dotted(d, self.scope) or "").endswith("abstractmethod")
                        for d in stmt.decorator_list):
                    return True
        return False

    def _class_items(self, info: ClassInfo, classes: tuple[str, ...],
                     outer: list[Effects]) -> Iterator[Group]:
        lineage = self._lineage(info)
        unittest = any(c.unittest for c in lineage)
        # Class marks in MRO order, base classes first (get_unpacked_marks(consider_mro)).
        cls_eff = Effects()
        for c in reversed(lineage):
            cls_eff.marks += c.own.marks
            cls_eff.layers += c.own.layers
        chain = [cls_eff, *outer]
        members: dict[str, tuple[ast.stmt, ClassInfo]] = {}
        for c in lineage:
            for stmt in c.node.body:
                name = getattr(stmt, "name", None)
                if isinstance(name, str) and name not in members:
                    members[name] = (stmt, c)
                elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id not in members:
                            members[t.id] = (stmt, c)
        names = sorted(members) if unittest else list(members)
        for name in names:
            stmt, owner = members[name]
            if isinstance(stmt, ast.ClassDef):
                if unittest:
                    continue
                nested = self._class_info(stmt, owner.scope)
                if self._collectable_class(nested) and not nested.bases:
                    yield from self._class_items(nested, (*classes, name), chain)
                continue
            if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            is_test = name.startswith("test") if unittest else self.config.is_test_function(name)
            if is_test or self._expands(stmt, owner.scope):
                yield from self._function_items(stmt, classes, chain, unittest, owner.scope)
        if any(c.external for c in lineage):
            # A base class from another module may define more tests than we can see.
            yield _placeholder(self.file_id, classes, self.dirs, info.node.lineno)

    def _uses_wraps(self, dec: ast.expr) -> bool:
        """A decorator defined in this module that wraps with ``functools.wraps``."""
        target = dec.func if isinstance(dec, ast.Call) else dec
        fdef = self.scope.funcs.get(target.id) if isinstance(target, ast.Name) else None
        if fdef is None:
            return False
        return any((isinstance(n, ast.Name) and n.id == "wraps")
                   or (isinstance(n, ast.Attribute) and n.attr == "wraps")
                   for n in ast.walk(fdef))

    def _expands(self, node: FuncNode, scope: Scope) -> bool:
        return any(self._classify(d, scope, d.lineno, node.name).kind == "expand"
                   for d in node.decorator_list)

    # -- functions ------------------------------------------------------------------------------
    def _function_items(self, node: FuncNode, classes: tuple[str, ...], chain: list[Effects],
                        unittest: bool, scope: Scope | None = None) -> Iterator[Group]:
        scope = scope or self.scope
        line = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        own = Effects()
        expanded: tuple[str, ...] | None = None
        expand_seen = wrapped = False
        # Decorators apply bottom-up; those above parameterized.expand decorate its None.
        for dec in reversed(node.decorator_list):
            effect = self._classify(dec, scope, dec.lineno, node.name)
            if effect.kind == "fixture":
                return
            if effect.kind == "expand":
                expand_seen, expanded = True, effect.names
                break
            if effect.kind == "other" and self._uses_wraps(dec):
                wrapped = True
            self._apply(own, effect)
        names: list[str] = [node.name]
        extra: tuple[str, ...] = ()
        if expand_seen:
            if expanded is None:
                yield _placeholder(self.file_id, classes, self.dirs, line,
                                   node.name + "_" + WILDCARD)
                return
            names = list(expanded)
            extra = ("place_as",)  # parameterized sets it on each generated function
        layers = [] if unittest else [*own.layers, *(x for e in chain for x in e.layers)]
        outer_marks = [m for e in chain for m in e.marks] + self.module_effects.marks
        if not unittest:
            layers += self.module_effects.layers
        if not pytest_rules.installed().keywords_skip_private_attrs:  # -k ignores them >= 9.2
            if own.has_marks:
                extra += ("pytestmark",)
            if wrapped:
                extra += ("__wrapped__",)  # functools.wraps leaves it in the function's __dict__
        for fname in names:
            if expand_seen and not (fname.startswith("test") if unittest
                                    else self.config.is_test_function(fname)):
                continue
            yield from self._param_items(fname, classes, line, layers, own.marks, outer_marks,
                                         extra)

    def _param_items(self, fname: str, classes: tuple[str, ...], line: int,
                     layers: list[Layer | None], own_marks: list[str], outer_marks: list[str],
                     extra: tuple[str, ...]) -> Iterator[Group]:
        keywords = tuple(dict.fromkeys(
            (*self.base_keywords, *classes, *extra, *own_marks, *outer_marks)))
        indeterminate = self.all_indeterminate or any(lay is None for lay in layers)
        variants: tuple[Variant, ...]
        if indeterminate or not layers:
            variants = ((None, ()),)
        else:
            variants = _variants_of(tuple(lay for lay in layers if lay is not None))
        yield Group(classes, fname, line, indeterminate, tuple(own_marks), tuple(outer_marks),
                    keywords, variants)


# The same stacks of parametrize layers recur across functions and files (the benchmark
# tree's 13,544 functions with known layers have 835 distinct stacks): each stack's product
# is made once per process, where it was made for each function (0.1 s of the tree's scan).
_VARIANTS: dict[tuple[Layer, ...], tuple[Variant, ...]] = {}
_VARIANTS_MAX = 100_000


def _variants_of(layers: tuple[Layer, ...]) -> tuple[Variant, ...]:
    got = _VARIANTS.get(layers)
    if got is None:
        if len(_VARIANTS) >= _VARIANTS_MAX:
            _VARIANTS.clear()
        got = _VARIANTS[layers] = tuple(_variants(layers))
    return got


def _variants(layers: Sequence[Layer]) -> Iterator[Variant]:
    """The cartesian product of the layers, first layer outermost (Metafunc.parametrize)."""
    ids = [lay.ids for lay in layers]
    marks = [lay.marks for lay in layers]
    no_marks = not any(m for ms in marks for m in ms)
    no_hidden = not any(i is HIDDEN for lay in ids for i in lay)
    if no_marks and no_hidden:
        for combo in itertools.product(*ids):
            yield "-".join(combo), ()  # type: ignore[arg-type]
        return
    for combo in itertools.product(*(range(len(lay)) for lay in ids)):
        shown = [str(lay[i]) for lay, i in zip(ids, combo, strict=True) if lay[i] is not HIDDEN]
        pmarks = tuple(m for ms, i in zip(marks, combo, strict=True) for m in ms[i])
        yield ("-".join(shown) if shown else None), pmarks


def evaluate_name(scope: Scope, name: str) -> object:
    if name not in scope.consts:
        return None
    return evaluate(scope.consts[name][1], scope, 10**9)


_BLOCKS: tuple[type[ast.stmt], ...] = tuple(
    t for t in (ast.If, ast.Try, getattr(ast, "TryStar", None), ast.With, ast.AsyncWith)
    if t is not None)


def _walk_blocks(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        yield stmt
        if isinstance(stmt, _BLOCKS):
            for block in ("body", "orelse", "finalbody"):
                yield from _walk_blocks(getattr(stmt, block, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _walk_blocks(handler.body)
