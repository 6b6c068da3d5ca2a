"""The stages a PR's pipeline starts: ``launchTestJobs``'s set logic as one pure function."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from testdb.botcmd import BotCommand
from testdb.cbts import NO_CBTS, CbtsDecision, CbtsState, Narrowed, cbts_state, narrowed_lists
from testdb.errors import InputError, SourceLoc
from testdb.stages import Stage
from testdb.triggers import GATES_UNKNOWN, gate_caveats

if TYPE_CHECKING:
    from testdb.grammar import Entry
    from testdb.model import Block
    from testdb.triggers import Triggers

# --test-backend names -> the stage-name tag they keep (L0_Test.groovy at 11ea7cc, changeMap).
BACKEND_TAGS = {"pytorch": "-PyTorch-", "cpp": "-CPP-", "triton": "-Triton-", "fmha": "-FMHA-"}
# only_one_group_changed: the stage-name tags a one-group PR drops (L0_Test excludedBackends).
GROUP_EXCLUDES = {"PyTorch": ("-CPP-", "-FMHA-"), "Triton": ("-PyTorch-", "-CPP-", "-FMHA-"),
                  "FMHA": ("-PyTorch-", "-CPP-", "-Triton-")}
DOCS_GROUP = "Docs"
PLACEMENTS = ("pre-merge", "gated", "post-merge-only")
ON_DEMAND = "on demand: only `/bot run --stage-list`/`--extra-stage` starts it"


@dataclass(frozen=True)
class Gates:
    """What a PR's changed files open (L0_MergeRequest.groovy; trtllm-ci.md section 5)."""

    multi_gpu_hits: tuple[str, ...] = ()  # entries of the multi-GPU list found in the files
    tags: tuple[tuple[str, str], ...] = ()  # (auto-trigger tag, the changed path that opened it)
    group: str = ""  # the one group every changed file belongs to ("" when none)

    @property
    def multi_gpu(self) -> bool:
        return bool(self.multi_gpu_hits)

    def to_json(self) -> dict[str, Any]:
        return {"multi_gpu": self.multi_gpu, "multi_gpu_paths_hit": list(self.multi_gpu_hits),
                "auto_trigger_tags": [t for t, _ in self.tags],
                "auto_trigger_paths": {t: p for t, p in self.tags},
                "only_one_group_changed": self.group or None}


def open_gates(paths: Iterable[str], triggers: Triggers) -> Gates:
    """getMultiGpuFileChanged, getAutoTriggerTagList and getOnlyOneGroupChanged; an empty
    change opens nothing and belongs to no group."""
    paths = list(paths)
    if not paths:
        return Gates()
    joined = ", ".join(paths)  # the real check: String.contains on the joined list
    hits = tuple(p for p in triggers.multi_gpu_paths if p in joined)
    tags: dict[str, str] = {}
    for prefix, ts in triggers.auto_trigger:
        for path in paths:
            if path.startswith(prefix):
                for t in ts:
                    tags.setdefault(t, path)
    return Gates(hits, tuple(tags.items()), one_group(paths, triggers))


def one_group(paths: list[str], triggers: Triggers) -> str:
    """The first group (in file order: Docs, PyTorch, Triton) that holds every changed path;
    Docs also holds any ``.md`` file."""
    for group, prefixes in triggers.groups:
        if all(p.startswith(prefixes) or (group == DOCS_GROUP and p.endswith(".md"))
               for p in paths):
            return group
    return ""


def stage_matches(name: str, pattern: str) -> bool:
    """A --stage-list/--extra-stage item: an exact name, or ``*`` wildcards over the whole
    name (every other character literal)."""
    if "*" not in pattern:
        return name == pattern
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), name) is not None


def first_token(name: str) -> str:
    """Groovy's ``key.tokenize('-')[0]``: what --gpu-type compares."""
    return next((t for t in name.split("-") if t), "")


@dataclass(frozen=True)
class Decision:
    """Whether the pipeline starts a stage, and why: every rule that put it in, or the rule
    that kept it out (``rules`` are short keys: ``base``, ``multi-gpu-path``,
    ``auto-trigger:-FMHA-``, ``extra-stage``, ``gpu-type``, ...)."""

    stage: str
    started: bool
    why: str
    rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrPipeline:
    """The stage set of one PR's pipeline, every stage with its reason."""

    decisions: Mapping[str, Decision]
    gates: Gates = Gates()
    bot: BotCommand | None = None
    notes: tuple[str, ...] = ()
    started: frozenset[str] = field(default=frozenset())
    changed: tuple[str, ...] = ()  # the changed paths it was computed from
    # What qualifies every answer built on this pipeline (gate rules unknown, CBTS may narrow
    # it): shown in the headline and the JSON, never left to a note alone.
    caveats: tuple[str, ...] = ()
    cbts: CbtsState = NO_CBTS
    cbts_decision: CbtsDecision | None = None  # the decision judged under (`--cbts run`)
    narrowed: Narrowed | None = None  # its narrowed test-db, applied

    def starts(self, stage: str) -> bool:
        return stage in self.started

    def keeps(self, context: str, block: Block | None, entry: Entry) -> bool:
        """Whether a started stage of ``context`` still runs this line of ``block``: False
        only where CBTS's narrowed test-db has the context and dropped the line."""
        return (self.narrowed is None or block is None
                or self.narrowed.keeps(context, block.condition, entry))

    def dropped_why(self) -> str:
        where = self.narrowed.where if self.narrowed else "its narrowed test-db"
        return f"CBTS's narrowed test list ({where}) drops this line on this PR"

    def why(self, stage: str) -> str:
        d = self.decisions.get(stage)
        return d.why if d else "not in the stage table"

    def to_json(self) -> dict[str, Any]:
        return {"bot_command": self.bot.text if self.bot else None,
                "bot": self.bot.to_json() if self.bot else None, "notes": list(self.notes),
                "caveats": list(self.caveats), "headline_caveats": headline_caveats(self.caveats),
                "cbts": {"present": self.cbts.present, "acts": self.cbts.acts,
                         "run": self.cbts_decision is not None, "why": self.cbts.why,
                         "decision": (self.cbts_decision.to_json() if self.cbts_decision
                                      else None)},
                "started": {n: d.why for n, d in self.decisions.items() if d.started},
                "not_started": sum(1 for d in self.decisions.values() if not d.started)}


def headline_caveats(caveats: Iterable[str]) -> list[str]:
    """The caveats as a headline carries them: the gate-rules one whole (every answer that
    depends on the gates says it), the others up to their first colon."""
    return [c if c == GATES_UNKNOWN else c.split(": ", 1)[0] for c in caveats]


class _Set:
    """The ordered stage set being built: the reasons each stage is in, or why it is out."""

    def __init__(self) -> None:
        self.inn: dict[str, list[tuple[str, str]]] = {}
        self.out: dict[str, tuple[str, str]] = {}

    def add(self, names: Iterable[str], rule: str, why: str) -> None:
        for n in names:
            reasons = self.inn.setdefault(n, [])
            if (rule, why) not in reasons:
                reasons.append((rule, why))
            self.out.pop(n, None)

    def keep(self, keep: Iterable[str], rule: str, why_not: str) -> None:
        kept = set(keep)
        for n in [n for n in self.inn if n not in kept]:
            self.out[n] = (rule, why_not)
            del self.inn[n]

    def replace(self, names: Iterable[str], rule: str, why: str, why_not: str) -> None:
        new = list(names)
        self.keep((), rule, why_not)
        self.add(new, rule, why)

    def decision(self, n: str) -> Decision:
        if n in self.inn:
            return Decision(n, True, "; ".join(w for _, w in self.inn[n]),
                            tuple(r for r, _ in self.inn[n]))
        rule, why = self.out.get(n, ("", ""))
        return Decision(n, False, why, (rule,))


def pr_stages(stages: Iterable[Stage], triggers: Triggers, changed_paths: Iterable[str],
              bot: BotCommand | None = None) -> PrPipeline:
    """The stages this PR's pipeline starts, in ``launchTestJobs``'s order of rules
    (jenkins/L0_Test.groovy at 11ea7cc, the on-demand rule at aebac710; trtllm-ci.md sections
    5, 7 and 11), with the caveats every answer built on it must carry."""
    active = [s for s in stages if not s.disabled]
    names = [s.name for s in active]
    on_demand = {s.name for s in active if s.is_on_demand}
    multi = [s.name for s in active if s.is_multi_gpu and not s.is_post_merge
             and s.name not in on_demand]
    multi_pm = [s.name for s in active if s.is_multi_gpu and s.is_post_merge]
    post = [s.name for s in active if s.is_post_merge]
    changed = tuple(changed_paths)
    gates = open_gates(changed, triggers)
    b = bot or BotCommand()
    st = _Set()
    # parallelJobs - multiGpuJobs - postMergeJobs - onDemandJobs (the last since aebac710)
    st.add((n for n in names if n not in set(multi) | set(post) | on_demand), "base",
           "base set: no Post-Merge and no N_GPUs in the name")
    st.out.update({n: ("multi-gpu-closed", "multi-GPU stage; no changed file is on the "
                       "multi-GPU path list") for n in multi})
    st.out.update({n: ("post-merge", "Post-Merge stage: runs after merge, or on request")
                   for n in post})
    if gates.multi_gpu:
        st.add(multi, "multi-gpu-path", f"multi-GPU path list: {gates.multi_gpu_hits[0]!r} "
                                        "is in the changed files")
    for tag, path in gates.tags:  # (parallelJobs - onDemandJobs).findAll { contains(tag) }
        st.add((n for n in names if tag in n and n not in on_demand), f"auto-trigger:{tag}",
               f"auto-trigger tag {tag} opened by {path}")
    if b.post_merge:
        st.add([*multi, *post], "post-merge-flag", "--post-merge")
    if b.skip_test:
        st.keep((), "skip-test", "--skip-test: only doc build and package sanity checks run")
    if b.add_multi_gpu:
        st.add(multi, "add-multi-gpu", "--add-multi-gpu-test")
    if b.only_multi_gpu:
        st.replace(multi_pm if b.post_merge else multi, "only-multi-gpu",
                   "--only-multi-gpu-test", "--only-multi-gpu-test runs only multi-GPU stages")
    if b.disable_multi_gpu:
        st.keep((n for n in list(st.inn) if n not in set(multi)), "disable-multi-gpu",
                "--disable-multi-gpu-test")
    if b.gpu_type is not None:
        st.keep((n for n in list(st.inn) if first_token(n) in b.gpu_type), "gpu-type",
                f"--gpu-type {', '.join(b.gpu_type)}: another GPU type")
    if b.test_backend is not None:
        st.keep(_backend_keep(list(st.inn), b.test_backend), "test-backend",
                f"--test-backend {', '.join(b.test_backend)}: another backend")
    notes: list[str] = []
    if gates.group == DOCS_GROUP:
        st.keep((), "group", "only docs changed: the doc build alone runs")
    elif gates.group and b.test_backend is not None:
        notes.append(f"only {gates.group} files changed, but --test-backend overrides the "
                     "one-group rule")
    elif gates.group in GROUP_EXCLUDES:
        drop = GROUP_EXCLUDES[gates.group]
        st.keep((n for n in list(st.inn) if not any(t in n for t in drop)), "group",
                f"only {gates.group} files changed: stages with {' or '.join(drop)} are "
                "dropped")
    # parallelJobsFiltered -= onDemandJobs: out of every automatic path, bot flags included
    st.keep((n for n in list(st.inn) if n not in on_demand), "on-demand", ON_DEMAND)
    st.out.update({n: ("on-demand", ON_DEMAND) for n in on_demand})
    if b.stage_list is not None:
        _check_patterns(b.stage_list, names, "--stage-list")
        st.replace((n for n in names if any(stage_matches(n, p) for p in b.stage_list)),
                   "stage-list", "--stage-list", "not in --stage-list")
    if b.extra_stage is not None:
        _check_patterns(b.extra_stage, names, "--extra-stage")
        for p in b.extra_stage:
            st.add((n for n in names if stage_matches(n, p)), "extra-stage", f"--extra-stage {p}")
    notes += [f"{f} noted: it changes no stage" for f in b.noted]
    caveats = list(gate_caveats(triggers.source))
    cbts = cbts_state(triggers.cbts, bot, changed)
    decision = triggers.cbts_decision
    narrowed = None
    if cbts.acts and decision is not None:
        narrowed = narrowed_lists(decision) if decision.scope is not None else None
        caveats += _apply_cbts(st, decision, notes, narrowed)
    elif cbts.acts:
        caveats.append(cbts.why)
    elif cbts.present:
        notes.append(cbts.why)
    decisions = {n: st.decision(n) for n in names}
    return PrPipeline(decisions, gates, bot, tuple(notes), frozenset(st.inn), changed,
                      tuple(caveats), cbts, decision if cbts.acts else None, narrowed)


def _apply_cbts(st: _Set, decision: CbtsDecision, notes: list[str],
                narrowed: Narrowed | None) -> list[str]:
    """The base commit's CBTS decision on the stage set (``filterCbtsStageJobs``), read the
    way that cannot make a guard green: a stage runs when the pipeline starts it **and** CBTS
    lists it. The stages CI keeps besides (PackageSanityCheck, PerfSanity when required, CPU
    stages in newer versions) or adds from its list are not counted; a narrowed test-db
    (``test_db_dir_override``) is applied by ``PrPipeline.keeps`` when CBTS wrote one, and
    owned up to as a caveat when it named one but wrote none. Returns the caveats left."""
    who = f"CBTS (the code of base {decision.base[:12]})"
    if decision.scope is None:  # _cbtsParseSelectionResult: no decision, CI runs in full
        why = "; ".join(decision.reasons) or "no reason given"
        notes.append(f"{who} made no decision ({why}): every stage shown runs")
        return []
    affected = set(decision.affected_stages)
    st.keep((n for n in list(st.inn) if n in affected), "cbts",
            f"{who}, scope {decision.scope}: not among its affected stages")
    notes.append(f"{who}, scope {decision.scope}: {len(affected)} affected stage(s); the "
                 "others this PR would start do not run")
    if narrowed is not None:
        notes.append(f"{who} narrowed the test lists of {', '.join(sorted(narrowed.contexts))} "
                     f"({narrowed.where}): a stage of those runs only the lines it kept, and "
                     "the shards shown are the full lists' (CBTS may run fewer)")
    elif decision.test_db_dir_override:
        return [f"CBTS narrowed the test lists of its affected stages: "
                f"{decision.test_db_dir_override} (test_db_dir_override) is not applied here, "
                "so a guard in those stages may not run on this PR"]
    return []


def _backend_keep(names: list[str], backends: tuple[str, ...]) -> list[str]:
    """Stages with none of the backend tags, plus stages with a selected one."""
    wanted = []
    for b in backends:
        tag = BACKEND_TAGS.get(b.lower())
        if tag is None:  # Groovy: changeMap.get() is null and key.contains(null) throws
            raise InputError(f"--test-backend {b!r} is no backend the pipeline knows",
                             SourceLoc("--bot-command"), "use " + ", ".join(BACKEND_TAGS))
        wanted.append(tag)
    return [n for n in names if not any(t in n for t in BACKEND_TAGS.values())
            or any(t in n for t in wanted)]


def _check_patterns(patterns: tuple[str, ...], names: list[str], flag: str) -> None:
    """checkStageNameSet: a name must exist, a wildcard must match a stage, or the pipeline
    fails before any stage starts."""
    bad = [p for p in patterns if not any(stage_matches(n, p) for n in names)]
    if bad:
        raise InputError(f"{flag} names no stage of the stage table: {', '.join(bad)}",
                         SourceLoc("--bot-command"),
                         "CI rejects the whole command; check the names with `testdb where`")


def effective(placement: str, started: bool) -> str:
    """A run's verdict for this PR: pre-merge when the PR's pipeline starts the stage; else
    what the stage is for a PR that opens nothing (a base-set stage this PR drops is gated:
    another command or change would start it)."""
    if started:
        return "pre-merge"
    return "gated" if placement == "pre-merge" else placement


# A path in no one-file group, so a probe of every gate never counts as a one-group change.
_OUTSIDE_GROUPS = "\0every-gate-probe"


def gate_probe_paths(triggers: Triggers) -> list[str]:
    """Changed paths that open every gate: each multi-GPU list entry and auto-trigger prefix."""
    return [*triggers.multi_gpu_paths, *(p for p, _ in triggers.auto_trigger), _OUTSIDE_GROUPS]


# A gate a PR's author opens without touching a file: the multi-GPU stages, on request.
GATE_FLAGS = BotCommand(text="/bot run --add-multi-gpu-test", add_multi_gpu=True)


@dataclass(frozen=True)
class Placement:
    """What a stage is for a PR that opens nothing: pre-merge, gated or post-merge-only."""

    verdict: str
    why: str


def stage_placements(stages: Iterable[Stage], triggers: Triggers) -> dict[str, Placement]:
    """Per stage, PR-independent, from ``pr_stages`` itself: pre-merge when a PR that changes
    nothing starts it, gated when a PR that opens every gate (every multi-GPU path and tag
    prefix changed, ``--add-multi-gpu-test``) does, else post-merge-only."""
    stages = list(stages)
    none = pr_stages(stages, triggers, [])
    every = pr_stages(stages, triggers, gate_probe_paths(triggers), GATE_FLAGS)
    out = {}
    for n, d in none.decisions.items():
        if d.rules == ("on-demand",):
            out[n] = Placement("gated", ON_DEMAND)
        elif d.started:
            out[n] = Placement("pre-merge", d.why)
        elif every.starts(n):
            out[n] = Placement("gated", "gated: " + ", ".join(
                _GATE_PHRASES.get(r, r) if not r.startswith("auto-trigger:")
                else f"auto-trigger tag {r.split(':', 1)[1]}"
                for r in every.decisions[n].rules))
        else:
            out[n] = Placement("post-merge-only", d.why)
    return out


_GATE_PHRASES = {"multi-gpu-path": "multi-GPU path list", "add-multi-gpu": "--add-multi-gpu-test"}
