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

Its decision is computed only on request (``run_base_cbts``, ``audit --cbts run``): running
it executes the repository's code, so it is the base commit's CBTS, read from git objects, never
the PR head's; its Tier 2 needs a touch database no checkout has. Otherwise, where it would
act, every answer carries ``CBTS_MAY_NARROW`` instead of silently assuming the full stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from testdb.botcmd import BotCommand

if TYPE_CHECKING:  # not imported at run time: the warm paths import this module
    from testdb.grammar import Entry
    from testdb.model import Condition

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


# ---- `--cbts run`: the base commit's CBTS, offline --------------------------------------------

MAIN = "jenkins/scripts/cbts/main.py"
RUN_TIMEOUT_S = 300


@dataclass(frozen=True)
class CbtsDecision:
    """The decision JSON of one CBTS run (``main.py INPUT_JSON``'s stdout), and whose code made
    it: ``base`` is the commit whose ``jenkins/scripts/cbts/`` ran (never the PR head's)."""

    base: str
    scope: str | None
    affected_stages: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    test_db_dir_override: str | None = None
    raw: str = ""
    # The YAML files CBTS wrote under ``test_db_dir_override`` (path under it, text), read
    # before its scratch directory goes; () when it wrote none.
    narrowed_files: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"base": self.base, "scope": self.scope,
                "affected_stages": list(self.affected_stages), "reasons": list(self.reasons),
                "test_db_dir_override": self.test_db_dir_override,
                "narrowed_files": [name for name, _ in self.narrowed_files]}


def parse_decision(text: str, base: str) -> CbtsDecision:
    """``_cbtsParseSelectionResult``: ``scope`` null is no decision (the full run)."""
    import json

    from testdb.errors import InputError, SourceLoc

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"CBTS printed no decision JSON ({exc.msg}): {text[:200]!r}",
                         SourceLoc(MAIN), "run it by hand to see why, or drop --cbts run"
                         ) from None
    if not isinstance(data, dict):
        raise InputError("CBTS's decision is not a JSON object", SourceLoc(MAIN))
    stages = data.get("affected_stages") or []
    reasons = data.get("reasons") or []
    override = data.get("test_db_dir_override")
    scope = data.get("scope")
    return CbtsDecision(base, str(scope) if scope is not None else None,
                        tuple(str(s) for s in stages), tuple(str(r) for r in reasons),
                        str(override) if override else None, text)


def glob_regex(glob: str) -> str:
    """``_cbtsGlobToRegex`` (L0_MergeRequest.groovy at 11ea7cc3): an Ant-style glob as a
    regex (``**/`` any directories, ``**`` anything, ``*`` and ``?`` within a segment)."""
    import re

    escaped = "".join(c if c in "*?" else re.escape(c) for c in glob)
    return "^" + (escaped.replace("**/", "\0").replace("**", "\1").replace("*", "[^/]*")
                  .replace("?", "[^/]").replace("\0", "(?:.*/)?").replace("\1", ".*")) + "$"


def run_base_cbts(repo: str, base: str, plan_root: str, changed: list[str],
                  diff_of: Callable[[str], str], post_merge: bool = False) -> CbtsDecision:
    """Run the base commit's CBTS as ``getCbtsResult`` does: ``main.py --list-needed-diffs``,
    the diffs of the changed files it asks for, then ``main.py INPUT_JSON``. Its code comes
    from git objects of ``base`` (``git archive``), never from the work tree or the PR head;
    the data it reads (``L0_Test.groovy``, the test-db YAMLs) are copies of the plan under
    ``plan_root`` in a scratch directory, so nothing it writes lands in the checkout. This
    executes the repository's code: only on request (``--cbts run``)."""
    import io
    import json
    import os
    import re
    import shutil
    import subprocess
    import sys
    import tarfile
    import tempfile

    from testdb.errors import InputError, SourceLoc

    def fail(msg: str) -> InputError:
        return InputError(msg, SourceLoc(MAIN), "drop --cbts run to judge with the CBTS "
                                                "caveat instead")

    prefix = subprocess.run(["git", "-C", repo, "rev-parse", "--show-prefix"],
                            capture_output=True, text=True, check=False).stdout.strip()
    tree = subprocess.run(["git", "-C", repo, "archive", "--format=tar",
                           f"{base}:{prefix}{os.path.dirname(MAIN)}"],
                          capture_output=True, check=False)
    if tree.returncode != 0:
        raise fail(f"the base commit {base[:12]} has no {os.path.dirname(MAIN)}/: "
                   f"{tree.stderr.decode(errors='replace').strip()[:200]}")
    with tempfile.TemporaryDirectory(prefix="testdb-cbts-") as tmp:
        code = os.path.join(tmp, os.path.dirname(MAIN))
        os.makedirs(code)
        with tarfile.open(fileobj=io.BytesIO(tree.stdout)) as tar:
            members = tar.getmembers()
            if any(not (m.isfile() or m.isdir()) or os.path.isabs(m.name)
                   or ".." in m.name.split("/") for m in members):
                raise fail(f"{os.path.dirname(MAIN)}/ of {base[:12]} holds links or paths "
                           "out of it; not extracted")
            tar.extractall(code, members=members)  # plain files and directories only
        for rel in ("jenkins/L0_Test.groovy", "tests/integration/test_lists/test-db"):
            src = os.path.join(plan_root, rel)
            dst = os.path.join(tmp, rel)
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            elif os.path.isfile(src):
                shutil.copyfile(src, dst)

        def main(*args: str) -> str:
            # -I: no PYTHONPATH, no user site, no current directory on sys.path
            try:
                proc = subprocess.run([sys.executable, "-I", os.path.join(tmp, MAIN), *args],
                                      cwd=tmp, capture_output=True, text=True,
                                      timeout=RUN_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise fail(f"CBTS ran past {RUN_TIMEOUT_S} s") from None
            if proc.returncode != 0:
                raise fail(f"CBTS of {base[:12]} exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-300:]}")
            return proc.stdout

        patterns = [p.strip() for p in main("--list-needed-diffs").splitlines() if p.strip()]
        wanted = [re.compile(glob_regex(p)) for p in patterns]
        diffs = {f: diff_of(f) for f in changed if any(w.match(f) for w in wanted)}
        with open(os.path.join(tmp, "cbts_input.json"), "w", encoding="utf-8") as fh:
            json.dump({"changed_files": changed, "diffs": diffs, "post_merge": post_merge}, fh)
        decision = parse_decision(main("cbts_input.json"), base)  # as getCbtsResult calls it
        if decision.test_db_dir_override:
            decision = replace(decision, narrowed_files=_read_narrowed(
                tmp, decision.test_db_dir_override, fail))
        return decision


def _read_narrowed(tmp: str, override: str, fail: Callable[[str], Exception]
                   ) -> tuple[tuple[str, str], ...]:
    """The ``.yml`` files of the narrowed test-db CBTS wrote in its scratch directory. A path
    out of that directory is refused (the base commit's code chose it); a missing directory
    gives () and the pipeline keeps the caveat."""
    import os

    top = os.path.realpath(tmp)
    where = os.path.realpath(os.path.join(tmp, override))
    if os.path.commonpath([top, where]) != top:
        raise fail(f"CBTS's test_db_dir_override {override!r} points out of its directory")
    if not os.path.isdir(where):
        return ()
    out = []
    for dirpath, dirs, names in os.walk(where):
        dirs.sort()
        for name in sorted(names):
            if name.endswith((".yml", ".yaml")):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    out.append((os.path.relpath(path, where), fh.read()))
    return tuple(out)


@dataclass(frozen=True)
class Narrowed:
    """CBTS's narrowed test-db, as the stages read it: a stage whose context has a YAML there
    runs only the entries of the blocks kept in it (``trt-test-db`` is pointed at the
    override directory); a context without one runs its full list (CBTS's SELECTION.md: "when
    that YAML is absent the stage falls back to the source test-db"). CBTS round-trips the
    YAML through PyYAML, which may reorder a condition's keys, so blocks are compared by
    their conditions as sets and entries by what they name."""

    where: str
    contexts: frozenset[str]
    kept: frozenset[tuple[str, object, tuple[str, str, str | None]]]

    def keeps(self, context: str, condition: Condition, entry: Entry) -> bool:
        return (context not in self.contexts
                or (context, condition_key(condition), entry_key(entry)) in self.kept)


def condition_key(c: Condition) -> object:
    return (frozenset(c.terms), frozenset(c.ranges), frozenset(c.wildcards))


def entry_key(e: Entry) -> tuple[str, str, str | None]:
    return (e.kind, e.test, e.gpu_prefix)


def narrowed_lists(decision: CbtsDecision) -> Narrowed | None:
    """The narrowed test-db of a decision, parsed; None when CBTS wrote none. A file that does
    not parse as a test-db is an error (its line named): judging without it could count a
    guard CBTS dropped."""
    if not decision.narrowed_files:
        return None
    from testdb.errors import InputError, Severity, SourceLoc
    from testdb.testdb_yaml import load_testdb_text

    where = decision.test_db_dir_override or "cbts_test_db"
    contexts: set[str] = set()
    kept: set[tuple[str, object, tuple[str, str, str | None]]] = set()
    for name, text in decision.narrowed_files:
        path = f"{where}/{name}"
        res = load_testdb_text(text, path)
        errors = [d for d in res.diagnostics if d.severity is Severity.ERROR]
        if errors or res.skipped:
            loc = errors[0].loc if errors else SourceLoc(path)
            what = errors[0].message if errors else f"not a test-db file ({res.skipped})"
            raise InputError(f"CBTS's narrowed test-db (base {decision.base[:12]}): {what}",
                             loc, "run CBTS by hand to see why, or drop --cbts run")
        for ctx in res.contexts:
            contexts.add(ctx.name)
            for b in ctx.blocks:
                ck = condition_key(b.condition)
                kept.update((ctx.name, ck, entry_key(e)) for e in b.entries)
    return Narrowed(where, frozenset(contexts), frozenset(kept))
