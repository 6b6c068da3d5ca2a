"""What a name in a test resolves to: the scan's facts per unit, and the resolver over them.

The symbol tier links a test to a changed unit only when a name the test uses *resolves* to
that unit (issue 22): through the test module's imports and the re-exports of packages'
``__init__.py`` files, through a method's receiver (an instance built from a resolved class,
an annotated parameter, a fixture that returns one, ``Class.method``, a base class whose
method the subclass inherits), and through a static call graph of the checkout's own code
(``self.m()``, module functions, resolved imports; constructing a class runs its
``__init__``, not every method). A spelling match is no link.

Hand-written over the ``ast`` scan the import graph already caches, not jedi, libcst or
astroid: measured in ``docs/audit.md`` ("How a name is resolved"), jedi's inference answers
the same call sites as well, one name at a time and some 190 times slower, and offers no call
graph of the project; libcst's qualified names stop at the test module's own imports (no
re-export chain, no receiver type) and answer none of them. The questions here are few and
fixed (a dotted name, a receiver's class, a method through the bases), so a small resolver
over facts kept with the graph is enough.

The scan (``scan_code``) keeps, per module, its import bindings and, per function, method
and class, the dotted *chains* its body uses (``mgr.get_attention_window()``,
``LLM().generate()``; a segment ending in ``()`` is called), what its locals are bound to,
what it returns and its parameters. The ``Resolver`` turns those into reached units, lazily
and memoized for one audit.
"""

from __future__ import annotations

import ast
import builtins
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from auditor.behaviour import module_name
from auditor.modinfo import ModuleInfo, UnitCode

OPAQUE = "#"  # a local bound to a literal, a comprehension, ...: a value of no project class
MAX_DEPTH = 5  # call edges followed from a test function (test -> helper -> U -> ... )
_MAX_HOPS = 12  # re-export and alias hops followed for one dotted name
_BUILTINS = frozenset(dir(builtins))


# ---- the scan -------------------------------------------------------------------------------

def _chain(node: ast.AST) -> str | None:
    """``a.b().c`` for a Name/Attribute/Call chain; ``?`` stands for a head that is no name
    (a subscript, a call's result of no chain); None for a literal's methods (``"".join``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Constant):
            return None
        head = _chain(node.value)
        return f"{head if head is not None else '?'}.{node.attr}"
    if isinstance(node, ast.Call):
        head = _chain(node.func)
        if head is None:
            return None
        if head == "super":
            return "super()"
        return head + "()"
    return None


def _annotation(node: ast.expr | None) -> str | None:
    """The class an annotation names (``T``, ``m.T``, ``Optional[T]``, ``T | None``,
    ``"T"``), as an instance chain ``T()``; None when it names none or several."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Subscript) and _chain(node.value) in ("Optional", "typing.Optional"):
        return _annotation(node.slice)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return _annotation(sides[0]) if len(sides) == 1 else None
    c = _chain(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    return c + "()" if c else None


def _bind_import(node: ast.Import | ast.ImportFrom, base: str | None,
                 out: dict[str, str], stars: list[str]) -> None:
    """The names an import statement binds: ``import a.b`` binds ``a``; ``import a.b as m``
    binds ``m`` to ``a.b``; ``from a import b as c`` binds ``c`` to ``a.b``."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                out[a.asname] = a.name
            else:
                head = a.name.split(".", 1)[0]
                out[head] = head
        return
    for a in node.names:
        if a.name == "*":
            if base:
                stars.append(base)
        elif base:
            out[a.asname or a.name] = f"{base}.{a.name}"


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs,
            *([a.kwarg] if a.kwarg else [])]


def _is_fixture(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A decorator (or a decorator's call) whose chain's last name is ``fixture`` or
    ``yield_fixture``: that name is the attribute's or the name's own, read without building
    the chain (``_chain``: an attribute of a literal has none)."""
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if isinstance(f, ast.Name):
            last = f.id
        elif isinstance(f, ast.Attribute) and not isinstance(f.value, ast.Constant):
            last = f.attr
        else:
            continue
        if last in ("fixture", "yield_fixture"):
            return True
    return False


def _body_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """Every node the function runs when called: its body, defaults and annotations, with
    nested functions and lambdas (not its decorators, which run where it is defined); each
    part's nodes in ``ast.walk``'s order (breadth first), part after part."""
    nodes: list[ast.AST] = []
    for part in (*fn.body, *fn.args.defaults, *(d for d in fn.args.kw_defaults if d)):
        _walk_into(part, nodes)
    return nodes


def _walk_into(node: ast.AST, out: list[ast.AST]) -> None:
    """Append ``ast.walk(node)``'s nodes to ``out``, in its order: ``out`` is the queue.
    (``ast.walk`` runs three generators per node and an import per call: this took half the
    time of a cold scan's ``_unit_code``, docs/benchmarks.md.)"""
    at = len(out)
    out.append(node)
    while at < len(out):
        node = out[at]
        at += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                out.append(value)
            elif isinstance(value, list):
                out += [x for x in value if isinstance(x, ast.AST)]


def _unit_code(fn: ast.FunctionDef | ast.AsyncFunctionDef,
               rel: Callable[[ast.ImportFrom], str | None]
               ) -> tuple[UnitCode, dict[str, str], list[tuple[str, str]]]:
    """A function's facts; its local imports (bindings); the ``self.x = ...`` it makes."""
    chains: set[str] = set()
    local: list[tuple[str, str]] = []
    returns: list[str] = []
    imports: dict[str, str] = {}
    stars: list[str] = []
    attrs: list[tuple[str, str]] = []
    params = _params(fn)
    for p in params:
        ann = _annotation(p.annotation) if p.annotation is not None else None
        if ann:
            local.append((p.arg, ann))
    ret_ann = _annotation(fn.returns) if fn.returns is not None else None
    if ret_ann:
        returns.append(ret_ann)
    for node in _body_nodes(fn):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            c = _chain(node)
            if c is not None:
                chains.add(c)
            continue  # none of the statements below
        if not isinstance(node, _BINDS):
            continue  # (most nodes: one test, not five)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            base = (rel(node) if node.level else node.module) if isinstance(
                node, ast.ImportFrom) else None
            _bind_import(node, base, imports, stars)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            c = _chain(value) if value is not None else None
            if isinstance(node, ast.AnnAssign):
                c = _annotation(node.annotation) or c
            for t in targets:
                tc = _chain(t) if isinstance(t, (ast.Name, ast.Attribute)) else None
                if tc is None or "(" in tc:
                    continue
                bound = c or OPAQUE
                if tc.startswith("self.") and tc.count(".") == 1:
                    attrs.append((tc, bound))
                elif "." not in tc:
                    local.append((tc, bound))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    c = _chain(item.context_expr)
                    local.append((item.optional_vars.id, c or OPAQUE))
        elif isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            c = _chain(node.value)
            if c is not None:
                returns.append(c)
    local += [(name, f"@{target}") for name, target in imports.items()]
    # A chain that is the head of a longer one says nothing more (``mgr`` of ``mgr.f()``).
    kept = sorted(chains)
    dropped = {a for a, b in itertools.pairwise(kept)
               if b.startswith(a) and b[len(a)] in ".("}
    code: UnitCode = (tuple([c for c in kept if c not in dropped]), tuple(local),
                      tuple(returns), tuple([p.arg for p in params]))
    return code, imports, attrs


# The statements ``_unit_code`` reads bindings, imports and returns from.
_BINDS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.With, ast.AsyncWith,
          ast.Return, ast.Yield, ast.YieldFrom)


@dataclass
class CodeFacts:
    """What ``scan_code`` finds in one module (fields of ModuleInfo)."""

    bindings: dict[str, str] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    code: dict[str, UnitCode] = field(default_factory=dict)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fixtures: set[str] = field(default_factory=set)


def scan_code(tree: ast.Module, module: str, relative: Mapping[int, str]) -> CodeFacts:
    """The resolver's facts of a parsed module. ``relative``: the absolute module a relative
    import of each level names (``from . import x`` at level 1)."""
    facts = CodeFacts()

    def rel(node: ast.ImportFrom) -> str | None:
        base = relative.get(node.level)
        if base is None:
            return None
        return f"{base}.{node.module}" if node.module else base

    def module_level(body: list[ast.stmt]) -> None:
        for st in body:
            if isinstance(st, ast.Import):
                _bind_import(st, None, facts.bindings, facts.stars)
            elif isinstance(st, ast.ImportFrom):
                _bind_import(st, rel(st) if st.level else st.module, facts.bindings,
                             facts.stars)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(
                    st.targets[0], ast.Name):
                # An alias (``LLM = _TorchLLM``), an instance, or a value of no class.
                c = _chain(st.value)
                facts.bindings[st.targets[0].id] = f"={c if c and '?' not in c else OPAQUE}"
            elif isinstance(st, (ast.If, ast.Try)):
                module_level(st.body)
                module_level(st.orelse)
                for h in getattr(st, "handlers", []):
                    module_level(h.body)

    module_level(tree.body)

    def visit(node: ast.Module | ast.ClassDef, prefix: str, cls: str | None) -> None:
        # A class or function directly in a module or class is a statement of its body (no
        # other field holds one): ``ast.iter_child_nodes`` found the same, visiting every
        # base, keyword and decorator too.
        for child in node.body:
            if isinstance(child, ast.ClassDef):
                q = f"{prefix}{child.name}"
                facts.bases[q] = tuple(c for b in child.bases if (c := _chain(b)) is not None)
                facts.code[q] = ((), (), (), ())
                visit(child, q + ".", q)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = f"{prefix}{child.name}"
                code, _, attrs = _unit_code(child, rel)
                facts.code[q] = code
                if _is_fixture(child):
                    facts.fixtures.add(q)
                if cls is not None and attrs:
                    # ``self.mgr = KVCacheManager(...)`` in a method types ``self.mgr`` in all.
                    chains, local, returns, params = facts.code[cls]
                    facts.code[cls] = (chains, (*local, *attrs), returns, params)
                # Functions nested in a function are part of it (their chains are its own).

    visit(tree, "", None)
    top = {q for q in facts.code if "." not in q} | set(facts.bindings)
    for q, (chains, local, returns, params) in facts.code.items():
        if chains:
            facts.code[q] = (_useful(chains, top, {v for v, _ in local} | set(params)), local,
                             returns, params)
    return facts


def _useful(chains: tuple[str, ...], top: set[str], local: set[str]) -> tuple[str, ...]:
    """The chains that can reach something: not a builtin's (``len()``, ``print()``) where
    the module does not rebind it, not a bare local (``x``, which calls nothing)."""
    out = []
    for c in chains:
        head, _, rest = c.partition(".")
        name = head.removesuffix("()")
        if name in _BUILTINS and name not in top and name not in local:
            continue
        if not rest and head == name and name in local:
            continue
        out.append(c)
    return tuple(out)


# ---- the resolver ---------------------------------------------------------------------------

class Ref(NamedTuple):
    """What a name stands for: a module, a unit (function, method, class) of a module, an
    instance of a class unit, a value of no project class (``external``), or ``unknown``."""

    kind: str  # "module" | "unit" | "instance" | "external" | "unknown"
    module: str = ""
    qualname: str = ""

    @property
    def unit(self) -> str:
        return f"{self.module}:{self.qualname}"


EXTERNAL = Ref("external")
UNKNOWN = Ref("unknown")


class Node(NamedTuple):
    """A unit of the call graph, with the class ``self`` is an instance of (a method reached
    through a subclass's instance dispatches ``self.m()`` to the subclass's ``m``)."""

    module: str
    qualname: str
    self_class: str = ""  # "module:Class"

    @property
    def unit(self) -> str:
        return f"{self.module}:{self.qualname}"


@dataclass(frozen=True)
class Reached:
    """What one unit's body reaches: call-graph nodes, the classes it names, the calls whose
    receiver resolved to nothing (by method name)."""

    nodes: frozenset[Node]
    classes: frozenset[str]  # class units named ("module:Class")
    unresolved: frozenset[str]


class Resolver:
    """Resolves the scan's chains over the graph's modules; every answer memoized (one per
    audit: the modules do not change under it)."""

    def __init__(self, modules: Mapping[str, ModuleInfo],
                 definers: Mapping[str, str | int]) -> None:
        self.modules = modules
        self.definers = definers  # method/function name -> its one defining unit, or a count
        self._suffix: dict[str, str] | None = None
        self._dotted: dict[str, Ref] = {}
        self._mro: dict[str, tuple[str, ...]] = {}
        self._reached: dict[Node, Reached] = {}
        self._returns: dict[Node, tuple[Ref, ...]] = {}
        self._busy: set[Node] = set()
        self._aliases: dict[tuple[str, str], Ref | None] = {}
        self._fixtures: dict[tuple[str, str], Node | None] = {}
        self._attrs_busy: set[tuple[str, str]] = set()
        self._methods: dict[tuple[str, str], str | None] = {}
        self._locals: dict[tuple[str, str], dict[str, list[str]]] = {}
        self._dirs: dict[str, dict[str, Node]] = {}

    # ---- modules and dotted names ---------------------------------------------------------
    def _module(self, name: str) -> str | None:
        if name in self.modules:
            return name
        if self._suffix is None:
            # Tests import the project by names relative to the test root too (``defs.x``,
            # ``conftest``), as the import graph resolves them (``_networkx_graph``).
            self._suffix = {}
            for full in self.modules:
                parts = full.split(".")
                for k in range(1, len(parts)):
                    self._suffix.setdefault(".".join(parts[k:]), full)
        return self._suffix.get(name)

    def dotted(self, name: str, hops: int = 0) -> Ref:
        """``a.b.C.m`` through packages, their re-exports and aliases, classes' bases."""
        got = self._dotted.get(name)
        if got is None:
            if hops > _MAX_HOPS:
                return UNKNOWN
            got = self._dotted[name] = self._find_dotted(name, hops)
        return got

    def _find_dotted(self, name: str, hops: int) -> Ref:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            mod = self._module(".".join(parts[:i]))
            if mod is not None:
                ref = Ref("module", mod)
                for part in parts[i:]:
                    ref = self.member(ref, part, hops + 1)
                return ref
        return EXTERNAL  # no module of the checkout: the standard library, torch, ...

    def member(self, ref: Ref, name: str, hops: int = 0) -> Ref:
        """``ref.name``: a module's definition, binding or submodule; a class's method or
        nested class (through its bases); a method of an instance's class."""
        if ref.kind == "module":
            info = self.modules[ref.module]
            if name in info.code:
                return Ref("unit", ref.module, name)
            target = info.bindings.get(name)
            if target is not None:
                if target.startswith("="):
                    return self._alias(ref.module, name, target[1:])
                return self.dotted(target, hops + 1)
            sub = self._module(f"{ref.module}.{name}")
            if sub is not None and sub.startswith(ref.module + "."):
                return Ref("module", sub)
            for star in info.stars:
                got = self.dotted(f"{star}.{name}", hops + 1)
                if got.kind not in ("external", "unknown"):
                    return got
            return UNKNOWN
        if ref.kind == "super":
            for c in ref.module.split(","):
                mod, q = c.split(":", 1)
                if f"{q}.{name}" in self.modules[mod].code:
                    return Ref("unit", mod, f"{q}.{name}")
            return UNKNOWN
        if ref.kind in ("unit", "instance") and ref.qualname in self.modules[ref.module].bases:
            found = self.method(ref.unit, name)
            if found is not None:
                return Ref("unit", *found.split(":", 1))
            return UNKNOWN if ref.kind == "unit" else self._attr_type(ref, name)
        return EXTERNAL if ref.kind == "external" else UNKNOWN

    def _alias(self, module: str, name: str, chain: str) -> Ref:
        """A module-level ``name = chain``: what the chain is there (a cycle is unknown)."""
        if chain == OPAQUE:
            return EXTERNAL
        key = (module, name)
        if key in self._aliases:
            return self._aliases[key] or UNKNOWN
        self._aliases[key] = None
        got = self._aliases[key] = self.chain_in(Node(module, "<module>"), chain, 3)[0]
        return got

    def local_chain(self, module: str, chain: str, hops: int = 0) -> Ref:
        """A chain as written at a module's top level (an alias ``LLM = _TorchLLM``)."""
        head, _, rest = chain.partition(".")
        ref = self.member(Ref("module", module), head, hops)
        if ref.kind == "unknown" and head in _BUILTINS:
            ref = EXTERNAL
        for part in rest.split(".") if rest else ():
            ref = self.member(ref, part, hops)
        return ref

    def mro(self, cls: str) -> tuple[str, ...]:
        """The class and its bases, depth first (``module:Class`` each), as resolved."""
        if cls not in self._mro:
            self._mro[cls] = (cls,)  # a cycle stops here
            mod, q = cls.split(":", 1)
            out = [cls]
            for b in self.modules[mod].bases.get(q, ()):
                ref = self.local_chain(mod, b)
                if ref.kind == "unit" and ref.qualname in self.modules[ref.module].bases:
                    out += [c for c in self.mro(ref.unit) if c not in out]
            self._mro[cls] = tuple(out)
        return self._mro[cls]

    def method(self, cls: str, name: str) -> str | None:
        """The unit ``Class.name`` is, through the bases: the first class defining it."""
        key = (cls, name)
        if key not in self._methods:
            self._methods[key] = next(
                (f"{c.split(':', 1)[0]}:{c.split(':', 1)[1]}.{name}" for c in self.mro(cls)
                 if f"{c.split(':', 1)[1]}.{name}" in self.modules[c.split(":", 1)[0]].code),
                None)
        return self._methods[key]

    def _attr_type(self, inst: Ref, name: str) -> Ref:
        """``obj.name`` where ``self.name = Chain(...)`` in a method of obj's class."""
        key = (inst.unit, name)
        if key in self._attrs_busy:
            return UNKNOWN  # ``self.x = self.x.copy()``
        self._attrs_busy.add(key)
        try:
            return self._find_attr_type(inst, name)
        finally:
            self._attrs_busy.discard(key)

    def _find_attr_type(self, inst: Ref, name: str) -> Ref:
        for c in self.mro(inst.unit):
            mod, q = c.split(":", 1)
            for var, chain in self.modules[mod].code[q][1]:
                if var == f"self.{name}":
                    got = self.chain_in(Node(mod, q, c), chain)[0]
                    if got.kind != "unknown":
                        return got
        return UNKNOWN

    # ---- chains inside a unit ---------------------------------------------------------------
    def chain_in(self, node: Node, chain: str, depth: int = 0
                 ) -> tuple[Ref, list[Node], list[str], list[str]]:
        """Resolve a chain in a unit's scope: (what it is, the nodes it calls, the classes it
        names, the names it calls on receivers that resolved to nothing)."""
        segs = chain.split(".")
        calls: list[Node] = []
        named: list[str] = []
        several = self._several(node, segs[0])
        if several and depth <= 3:
            # A local bound to several values (``task = MMLU(...)``, later ``task =
            # GSM8K(...)``): the chain from each, what they reach together.
            refs: set[Ref] = set()
            unresolved: list[str] = []
            for c in several:
                r, cs, ns, un = self.chain_in(node, ".".join([c, *segs[1:]]), depth + 1)
                refs.add(r)
                calls += cs
                named += ns
                unresolved += un
            return (refs.pop() if len(refs) == 1 else UNKNOWN), calls, named, unresolved
        ref = self._head(node, segs[0].removesuffix("()"), depth)
        unresolved = []
        if segs[0] == "super()":
            pass  # the instance, seen from the next class: not a call of anything
        elif segs[0].endswith("()"):
            ref = self._call(ref, calls, named, depth)
        elif ref.kind == "unit":
            self._name(ref, calls, named)
        for seg in segs[1:]:
            called = seg.endswith("()")
            attr = seg.removesuffix("()")
            base = ref
            ref = self.member(ref, attr) if attr != "?" else UNKNOWN
            if base.kind == "unknown" and called:
                unresolved.append(attr)
            if ref.kind == "unit" and base.kind in ("instance", "super"):
                # A bound method: ``self`` inside it is the instance's class.
                sc = base.qualname if base.kind == "super" else base.unit
                self._name(ref, calls, named, sc)
                if called:
                    ref = self._returned(Node(ref.module, ref.qualname, sc), depth)
                continue
            if called:
                ref = self._call(ref, calls, named, depth)
            elif ref.kind == "unit":
                self._name(ref, calls, named)
        return ref, calls, named, unresolved

    def _several(self, node: Node, head: str) -> list[str]:
        """The chains a local is bound to, when it is bound to more than one."""
        if head.endswith("()"):
            return []
        bound = sorted(set(self.locals_of(node.module, node.qualname).get(head, ())))
        if len(bound) < 2 or any(c == OPAQUE or c.startswith("@") for c in bound):
            return []
        return bound

    def _name(self, ref: Ref, calls: list[Node], named: list[str], self_class: str = "") -> None:
        """A unit named (not called): a class is named; a method or function is reached
        (passed as a callback, a property read)."""
        if ref.qualname in self.modules[ref.module].bases:
            named.append(ref.unit)
            calls.append(Node(ref.module, ref.qualname))
        else:
            calls.append(Node(ref.module, ref.qualname, self_class or self._own_class(ref)))

    def _own_class(self, ref: Ref) -> str:
        cls = ref.qualname.rpartition(".")[0]
        return f"{ref.module}:{cls}" if cls in self.modules[ref.module].bases else ""

    def _call(self, ref: Ref, calls: list[Node], named: list[str], depth: int) -> Ref:
        if ref.kind == "instance":
            # Calling an instance: its __call__ (a torch module's forward, through it).
            m = self.method(ref.unit, "__call__") or self.method(ref.unit, "forward")
            if m is None:
                return UNKNOWN
            n = _node(m, ref.unit)
            calls.append(n)
            return self._returned(n, depth)
        if ref.kind != "unit":
            return EXTERNAL if ref.kind == "external" else UNKNOWN
        if ref.qualname in self.modules[ref.module].bases:
            # Constructing a class runs its __init__ (and what that calls), not its methods.
            named.append(ref.unit)
            calls.append(Node(ref.module, ref.qualname))
            for special in ("__new__", "__init__", "__post_init__"):
                m = self.method(ref.unit, special)
                if m is not None:
                    calls.append(_node(m, ref.unit))
            return Ref("instance", ref.module, ref.qualname)
        n = Node(ref.module, ref.qualname, self._own_class(ref))
        calls.append(n)
        return self._returned(n, depth)

    def _returned(self, node: Node, depth: int) -> Ref:
        """What calling a unit gives: the one project class its returns agree on."""
        if depth > 2:
            return UNKNOWN
        if node not in self._returns:
            if node in self._busy:
                return UNKNOWN
            self._busy.add(node)
            try:
                code = self.code(node)
                refs = {self.chain_in(node, c, depth + 1)[0] for c in (code[2] if code else ())}
            finally:
                self._busy.discard(node)
            self._returns[node] = tuple(refs)
        refs = set(self._returns[node])
        return refs.pop() if len(refs) == 1 else UNKNOWN

    def _head(self, node: Node, name: str, depth: int) -> Ref:
        if name == "?":
            return UNKNOWN
        if name == "super":
            return self._super(node)
        code = self.code(node)
        info = self.modules[node.module]
        if code is not None:
            params = code[3]
            if name in ("self", "cls") and params and params[0] == name and node.self_class:
                mod, q = node.self_class.split(":", 1)
                return Ref("instance" if name == "self" else "unit", mod, q)
            bound = self.locals_of(node.module, node.qualname).get(name)
            if bound:
                return self._bound(node, bound, depth)
            if name in params:
                return self.fixture_value(node, name, depth)
        ref = self.member(Ref("module", node.module), name)
        if ref.kind == "unknown" and name in _BUILTINS and name not in info.code:
            return EXTERNAL
        return ref

    def _bound(self, node: Node, chains: list[str], depth: int) -> Ref:
        """A local's value: what every assignment of it agrees on."""
        refs: set[Ref] = set()
        for c in chains:
            if c == OPAQUE:
                refs.add(EXTERNAL)
            elif c.startswith("@"):
                refs.add(self.dotted(c[1:]))
            elif depth > 3:
                refs.add(UNKNOWN)
            else:
                refs.add(self.chain_in(node, c, depth + 1)[0])
        return refs.pop() if len(refs) == 1 else UNKNOWN

    def _super(self, node: Node) -> Ref:
        """``super()`` in a method: the instance seen from the next class of its MRO."""
        own = self._own_class(Ref("unit", node.module, node.qualname))
        if not own:
            return UNKNOWN
        start = node.self_class or own
        chain = self.mro(start)
        after = chain[chain.index(own) + 1:] if own in chain else ()
        return Ref("super", ",".join(after), start) if after else EXTERNAL

    def fixture_value(self, node: Node, name: str, depth: int) -> Ref:
        """A parameter with no annotation: what a fixture of that name returns (from the
        module or a conftest.py above it), else unknown."""
        fx = self.fixture(node.module, name)
        if fx is None or depth > 3:
            return UNKNOWN
        return self._returned(fx, depth)

    def fixture(self, module: str, name: str) -> Node | None:
        """The fixture ``name`` a test of ``module`` takes: its module's own, else the
        nearest ``conftest.py`` above it that defines one."""
        key = (module, name)
        if key not in self._fixtures:
            self._fixtures[key] = self._find_fixture(module, name)
        return self._fixtures[key]

    def _find_fixture(self, module: str, name: str) -> Node | None:
        info = self.modules.get(module)
        if info is None:
            return None
        if name in info.fixtures:
            return Node(module, name)
        return self._conftest_fixtures(info.path.rpartition("/")[0]).get(name)

    def _conftest_fixtures(self, directory: str) -> dict[str, Node]:
        """The fixtures the ``conftest.py`` files of a directory and those above it define,
        the nearest winning (pytest's order)."""
        got = self._dirs.get(directory)
        if got is None:
            parent = directory.rpartition("/")[0] if directory else None
            got = dict(self._conftest_fixtures(parent)) if parent is not None else {}
            path = f"{directory}/conftest.py" if directory else "conftest.py"
            mod = module_name(path)
            info = self.modules.get(mod)
            if info is not None and info.path == path:
                got.update((f, Node(mod, f)) for f in info.fixtures)
            self._dirs[directory] = got
        return got

    def locals_of(self, module: str, qualname: str) -> dict[str, list[str]]:
        """A unit's locals: each name and the chains it is bound to."""
        key = (module, qualname)
        got = self._locals.get(key)
        if got is None:
            got = self._locals[key] = {}
            info = self.modules.get(module)
            code = info.code.get(qualname) if info is not None else None
            for var, chain in code[1] if code else ():
                got.setdefault(var, []).append(chain)
        return got

    def code(self, node: Node) -> UnitCode | None:
        info = self.modules.get(node.module)
        return info.code.get(node.qualname) if info is not None else None

    # ---- what a unit reaches --------------------------------------------------------------
    def reached(self, node: Node) -> Reached:
        """The nodes one unit's body calls or names, the classes it names, and the method
        names it calls on receivers that resolved to nothing. A call on such a receiver
        reaches the one unit defining that name when exactly one class or module does."""
        got = self._reached.get(node)
        if got is None:
            code = self.code(node)
            nodes: list[Node] = []
            named: list[str] = []
            unresolved: set[str] = set()
            for c in code[0] if code else ():
                try:
                    _, calls, names, unres = self.chain_in(node, c)
                except RecursionError:
                    continue  # a pathological chain of aliases: it reaches nothing known
                nodes += calls
                named += names
                unresolved.update(unres)
            for name in (code[3] if code else ()):
                fx = self.fixture(node.module, name)
                if fx is not None and fx != node:
                    nodes.append(fx)  # a fixture it takes runs before it
            for name in unresolved:
                one = self.definers.get(name)
                if isinstance(one, str):
                    mod, q = one.split(":", 1)
                    nodes.append(Node(mod, q, self._own_class(Ref("unit", mod, q))))
            got = self._reached[node] = Reached(frozenset(nodes), frozenset(named),
                                                frozenset(unresolved))
        return got

    def closure(self, start: Node, depth: int = MAX_DEPTH) -> dict[Node, Node | None]:
        """Every node reachable from ``start`` within ``depth`` call edges, each with the node
        it was reached from (breadth first: the shortest path)."""
        parent: dict[Node, Node | None] = {start: None}
        frontier = [start]
        for _ in range(depth):
            nxt = []
            for n in frontier:
                for m in self.reached(n).nodes:
                    if m not in parent:
                        parent[m] = n
                        nxt.append(m)
            frontier = nxt
            if not frontier:
                break
        return parent


def _node(unit: str, self_class: str) -> Node:
    mod, q = unit.split(":", 1)
    return Node(mod, q, self_class)


def definers(infos: Iterable[ModuleInfo]) -> dict[str, str | int]:
    """Each function or method name: the one unit that defines it (``module:qualname``)
    when exactly one class or module of the checkout does, else how many do."""
    seen: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for info in infos:
        for q in info.code:
            if q in info.bases:
                continue
            owner, _, leaf = q.rpartition(".")
            if owner and owner not in info.bases:
                continue  # nested in a function: not a name anyone calls from outside
            where = f"{info.module}:{owner}" if owner else info.module
            seen.setdefault(leaf, set()).add(where)
            first.setdefault(leaf, f"{info.module}:{q}")
    return {name: first[name] if len(owners) == 1 else len(owners)
            for name, owners in seen.items()}


@dataclass(frozen=True)
class ReachOfTest:
    """What one test function reaches: every unit within the call graph's depth (with the
    node it was reached from, for the reason), and, from its test-side code (the test, its
    module's helpers, fixtures, helper modules under the test roots), the classes it names
    and the names it calls on receivers that resolve to nothing."""

    parent: dict[Node, Node | None]
    units: dict[str, Node]  # "module:qualname" -> the first node of that unit reached
    classes: frozenset[str]
    unresolved: frozenset[str]

    def path(self, unit: str) -> list[Node]:
        """The calls from the test to ``unit``, the test left out."""
        out: list[Node] = []
        n: Node | None = self.units[unit]
        while n is not None and self.parent.get(n) is not None:
            out.append(n)
            n = self.parent[n]
        return out[::-1]


def reach_of(resolver: Resolver, start: Node, test_side: Callable[[str], bool],
               depth: int = MAX_DEPTH) -> ReachOfTest:
    parent = resolver.closure(start, depth)
    units: dict[str, Node] = {}
    classes: set[str] = set()
    unresolved: set[str] = set()
    for n in parent:  # breadth first: the first node of a unit is on a shortest path
        units.setdefault(n.unit, n)
        if test_side(n.module):
            r = resolver.reached(n)
            classes |= r.classes
            unresolved |= r.unresolved
    return ReachOfTest(parent, units, frozenset(classes), frozenset(unresolved))


class Link(NamedTuple):
    rank: int  # 1: resolved (symbol); 2: only a name (symbol/2, weak)
    reason: str


def link_of(reach: ReachOfTest, target: str, resolver: Resolver) -> Link | None:
    """How a test reaches the changed unit ``target`` (``module:qualname``): a resolved path
    (rank 1), or only a name (rank 2): a call of its name on a receiver that resolves to
    nothing while several units define that name, or its class named with no call of it."""
    mod, q = target.split(":", 1)
    if target in reach.units:
        path = [n.qualname for n in reach.path(target)]
        if len(path) > 4:
            path = [path[0], "...", *path[-2:]]
        return Link(1, "calls " + " -> ".join(path or [q]))
    leaf = q.rsplit(".", 1)[-1]
    owner = q.rpartition(".")[0]
    if leaf in reach.unresolved:
        n = resolver.definers.get(leaf)
        if isinstance(n, int) and n > 1:
            return Link(2, f"an unresolved call of {leaf}, a name {n} units define")
    if owner and owner in resolver.modules[mod].bases:
        for cls in sorted(reach.classes):
            if resolver.method(cls, leaf) == target:
                return Link(2, f"names {cls.split(':', 1)[1]} without a call that reaches "
                               f"{q}")
    return None


def target_unit(modules: Mapping[str, ModuleInfo], module: str, qualname: str) -> str | None:
    """The unit a changed qualname is part of in the call graph (a function nested in a
    function is part of it); None when the head side has no such unit."""
    info = modules.get(module)
    if info is None:
        return None
    parts = qualname.split(".")
    for k in range(len(parts), 0, -1):
        q = ".".join(parts[:k])
        if q in info.code:
            return f"{module}:{q}"
    return None
