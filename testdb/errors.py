"""Source locations, diagnostics and the one exception root of testdb-audit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True, order=True)
class SourceLoc:
    """A place in a file: a path (relative to the checkout root if possible), a 1-based line."""

    path: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]


@dataclass(frozen=True)
class Diagnostic:
    """Something wrong (or worth knowing) about an input, tied to where it was found."""

    loc: SourceLoc
    severity: Severity
    message: str
    rule: str = ""

    def __str__(self) -> str:
        return f"{self.loc}: {self.severity.value}: {self.message}"


class TestDbError(Exception):
    """Root of every error the library raises on purpose; the CLI turns it into exit 2."""

    __test__ = False  # not a pytest test class

    def __init__(self, message: str, loc: SourceLoc | None = None, hint: str = "") -> None:
        self.loc = loc
        self.hint = hint
        self.bare = message
        text = f"{loc}: {message}" if loc else message
        if hint:
            text = f"{text}; {hint}"
        super().__init__(text)


class InputError(TestDbError):
    """Bad input: a file that cannot be read or parsed, a wrong shape, a bad argument."""


class UsageError(TestDbError):
    """The command line asks for something that cannot be done."""


class ExternalError(TestDbError):
    """A tool or service we depend on (git, pytest, Slurm, GitHub) failed."""


EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def json_error(exc: json.JSONDecodeError) -> str:
    """json's message with the whole position: its ``msg`` alone ends mid-sentence
    ("Unterminated string starting at")."""
    where = f"line {exc.lineno}, column {exc.colno}"
    return f"{exc.msg} {where}" if exc.msg.endswith(" at") else f"{exc.msg} ({where})"
