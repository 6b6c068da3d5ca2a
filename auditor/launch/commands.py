"""The one seam between the launch backends and external commands (nvidia-smi, Slurm)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

NOT_FOUND = 127
TIMED_OUT = 124


@dataclass(frozen=True)
class Completed:
    """What a finished command left behind."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return f"`{' '.join(self.argv)}` exited {self.returncode}" + (
            f": {text[-1]}" if text else "")


class CommandRunner(Protocol):
    """Runs a short command to completion; a missing program is returncode 127, not a raise."""

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Completed: ...


class SubprocessRunner:
    """The real runner: :func:`subprocess.run` with captured text output."""

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Completed:
        args = tuple(argv)
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except FileNotFoundError:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: command not found")
        except PermissionError as exc:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: {exc.strerror}")
        except subprocess.TimeoutExpired:
            return Completed(args, TIMED_OUT, "", f"{args[0]}: no answer within {timeout} s")
        return Completed(args, proc.returncode, proc.stdout, proc.stderr)
