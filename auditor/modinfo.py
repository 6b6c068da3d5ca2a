"""One module's scan (``auditor.graph.scan_module``): its imports, its units' lines and the
resolver's facts. Its own module so that the graph, which builds it, and the resolver, which
reads it, both import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass, field

# One unit's facts, as kept in ModuleInfo.code (plain tuples: marshalled with the graph):
# (chains used, local bindings (name, chain), returned chains, parameter names).
UnitCode = tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...],
                 tuple[str, ...]]


@dataclass
class ModuleInfo:
    path: str
    module: str
    imports: set[str] = field(default_factory=set)
    # function or class qualname -> (first line, last line); what each uses is in ``code``
    functions: dict[str, tuple[int, int]] = field(default_factory=dict)
    imported_names: set[str] = field(default_factory=set)
    # The resolver's facts (auditor.resolve.scan_code): top-level import bindings and
    # aliases, star imports, each unit's chains/locals/returns/parameters, classes' bases
    # as written, fixtures.
    bindings: dict[str, str] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    code: dict[str, UnitCode] = field(default_factory=dict)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fixtures: set[str] = field(default_factory=set)
