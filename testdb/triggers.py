"""The PR gate rules (multi-GPU path list, auto-trigger tags, one-group rule) as one record.

A module of its own, importing nothing of the project: the index loads it, the pipeline reads
it, and neither has to import the other (no import cycle index -> schedule -> pipeline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from testdb.caveats import GATES_UNKNOWN as GATES_UNKNOWN  # re-exported
from testdb.caveats import gate_caveats as gate_caveats

if TYPE_CHECKING:
    from testdb.cbts import CbtsDecision


@dataclass(frozen=True)
class Triggers:
    """PR gate data: the multi-GPU path list (substring test) and auto-trigger path rules.

    ``source`` is the file the rules were read from (``jenkins/L0_MergeRequest.groovy``, a
    ``ci/pr-triggers.yml`` or a ``--triggers`` file); ``""`` means none was found, and then
    the empty rules are a guess that every answer must own up to (``known``). ``cbts`` rides
    along because it is a gate of the same pipeline (getCbtsResult in L0_MergeRequest)."""

    multi_gpu_paths: tuple[str, ...] = ()
    auto_trigger: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (path prefix, stage-name tags)
    # only_one_group_changed: (group, path prefixes), in the order L0_MergeRequest tries them
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    source: str = ""
    cbts: str = ""  # the checkout's CBTS entry point (testdb.cbts); "" when it has none
    cbts_decision: CbtsDecision | None = None  # `--cbts run`: the base commit's CBTS decided

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for _, tags in self.auto_trigger for t in tags))

    @property
    def known(self) -> bool:
        return bool(self.source)

