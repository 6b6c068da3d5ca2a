"""Python sources to check a scanner's shortcuts against the walk they replace: this
project's own modules and the standard library's top-level ones, each parsed."""

from __future__ import annotations

import ast
import os
import warnings
from collections.abc import Iterator

from tests.conftest import REPO


def python_corpus() -> Iterator[ast.Module]:
    """Every module of this project and of the stdlib's top level that parses, in name
    order within each directory."""
    stdlib = os.path.dirname(os.__file__)
    for top in (REPO, stdlib):
        for d, dirs, files in os.walk(top):
            if d == stdlib:
                dirs[:] = []
            dirs[:] = [x for x in dirs if x not in (".git", "site-packages", "node_modules")]
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                try:
                    with open(os.path.join(d, f), "rb") as fh, warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        yield ast.parse(fh.read())
                except (SyntaxError, ValueError):
                    continue
