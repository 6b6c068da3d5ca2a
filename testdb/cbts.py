"""Whether TensorRT-LLM's change-based test selection (CBTS) acts on a PR's pipeline.

CBTS (``jenkins/scripts/cbts/``, called by ``getCbtsResult`` in ``L0_MergeRequest.groovy``;
read at 11ea7cc3 and aebac710 with the search tool) runs ``main.py`` on the PR's changed
files and diffs and returns a decision JSON (``scope``, ``affected_stages``,
``test_db_dir_override``, per-stage test and split counts, ``sanity_required``,
``perfsanity_required``). ``filterCbtsStageJobs`` in ``L0_Test.groovy`` then **replaces** the
stage set with the affected stages (keeping the stages it must, such as the package sanity
checks and non-Post-Merge PerfSanity stages when required) and may point a stage at a
narrowed test-db: it does not only subtract, and a guard in a stage the pipeline would start
may not run on this PR.

When it acts (``getCbtsResult``): never with ``--disable-cbts`` (the kill switch: "forces a
full run"); never when any stage-selection flag is given (``_cbtsTriggeredUserFlags``:
``--skip-test``, ``--stage-list``, ``--extra-stage``, ``--gpu-type``, ``--test-backend``,
``--add-multi-gpu-test``, ``--only-multi-gpu-test``, ``--disable-multi-gpu-test``); never in the
official post-merge job or without changed files. So a bare ``/bot run`` and ``/bot run
--post-merge`` (with orthogonal flags such as ``--reuse-test``, ``--debug``) get CBTS.

Its decision is not computed here: running it executes the repository's code, and its Tier 2
needs a touch database no checkout has. Where it would act, every answer carries
``CBTS_MAY_NARROW`` instead of silently assuming the full stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from testdb.botcmd import BotCommand

# _cbtsTriggeredUserFlags (L0_MergeRequest.groovy at 11ea7cc3): a set one defers CBTS.
DEFER_FLAGS = (("skip_test", "--skip-test"), ("stage_list", "--stage-list"),
               ("extra_stage", "--extra-stage"), ("gpu_type", "--gpu-type"),
               ("test_backend", "--test-backend"), ("add_multi_gpu", "--add-multi-gpu-test"),
               ("only_multi_gpu", "--only-multi-gpu-test"),
               ("disable_multi_gpu", "--disable-multi-gpu-test"))

CBTS_MAY_NARROW = ("CBTS may narrow this PR's stages: the checkout has change-based test "
                   "selection ({where}), which a plain `/bot run` lets replace the stage set "
                   "with the stages it finds affected and narrow their test lists; it was not "
                   "run here, so a stage or guard counted as pre-merge may not run on this PR "
                   "(`/bot run --disable-cbts` runs every stage shown)")


@dataclass(frozen=True)
class CbtsState:
    """``acts``: CBTS would decide this PR's stages; ``why``: in words, for the notes."""

    present: bool
    acts: bool
    why: str


NO_CBTS = CbtsState(False, False, "")


def cbts_state(where: str, bot: BotCommand | None, changed: tuple[str, ...]) -> CbtsState:
    """``where``: the CBTS entry point found in the checkout ("" when none)."""
    if not where:
        return NO_CBTS
    b = bot or BotCommand()
    if b.disable_cbts:
        return CbtsState(True, False, "CBTS off: --disable-cbts forces a full run")
    flags = [flag for attr, flag in DEFER_FLAGS if getattr(b, attr)]
    if flags:
        return CbtsState(True, False, f"CBTS defers to the bot command ({', '.join(flags)})")
    if not changed:
        return CbtsState(True, False, "CBTS defers: no changed files")
    return CbtsState(True, True, CBTS_MAY_NARROW.format(where=where))
