"""Load a checkout (TensorRT-LLM layout) or explicit files into one ``Index``, with a cache."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import testdb
from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.files import read_cache, read_text, sha256_text, write_cache
from testdb.gcpause import gc_paused
from testdb.sources import CBTS_MAIN as CBTS_MAIN
from testdb.sources import DEFS_DIR as DEFS_DIR  # the layout, re-exported from here
from testdb.sources import DURATIONS as DURATIONS
from testdb.sources import GROOVY as GROOVY
from testdb.sources import MERGE_REQUEST as MERGE_REQUEST
from testdb.sources import PLATFORM_FACTS as PLATFORM_FACTS
from testdb.sources import QA_DIR as QA_DIR
from testdb.sources import STAGES_YAML as STAGES_YAML
from testdb.sources import TESTDB_DIR as TESTDB_DIR
from testdb.sources import TRIGGERS as TRIGGERS
from testdb.sources import WAIVES as WAIVES
from testdb.sources import Sources as Sources
from testdb.stamp import PLAN_SCHEMA, Stamp, plan_stamp, testdb_code_stamp
from testdb.stamp import cache_dir as cache_dir  # where every cache file lives (re-exported)
from testdb.triggers import Triggers as Triggers  # the gate record (re-exported)

if TYPE_CHECKING:
    from testdb.grammar import Entry
    from testdb.model import Context, QaList
    from testdb.stages import Stage

# The records and parsers (and PyYAML) are imported only when a cache misses or a pickle is
# loaded: a warm `testdb where` starts faster without them.

_T = TypeVar("_T")



@dataclass
class Index:
    """Everything parsed from a checkout's test plan, plus what was wrong with it."""

    root: str
    contexts: dict[str, Context] = field(default_factory=dict)
    qa_lists: tuple[QaList, ...] = ()
    waives: tuple[Entry, ...] = ()
    durations: dict[str, float] = field(default_factory=dict)
    stages: tuple[Stage, ...] = ()
    triggers: Triggers = field(default_factory=Triggers)
    platform_facts: dict[str, dict[str, object]] = field(default_factory=dict)
    diagnostics: tuple[Diagnostic, ...] = ()
    skipped: tuple[Any, ...] = ()  # testdb.model.SkippedFile
    files: dict[str, str] = field(default_factory=dict)  # shown path -> sha256
    sources: Sources | None = None
    schedule: Any = None  # testdb.schedule.Schedule, built at load time and cached with the index
    key: str = ""  # the plan's content key: what else is cached of this plan is cached under it

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    def l0_contexts(self) -> list[Context]:
        return [c for c in self.contexts.values() if c.kind == "l0"]


def load(root: str = ".", *, stages: str | None = None, triggers: str | None = None,
         platform_facts: str | None = None, use_cache: bool = True) -> Index:
    """Discover and load the test plan under ``root`` (the cache makes repeat loads fast)."""
    plan = locate(root, stages=stages, triggers=triggers, platform_facts=platform_facts,
                  use_cache=use_cache)
    return load_sources(plan.src, use_cache=use_cache, read=plan.read, key=plan.key)


Read = tuple[dict[str, str], dict[str, str], list[Diagnostic], str]


class Plan(NamedTuple):
    """Which files make up the plan, its content key, and their texts when they were read."""

    src: Sources
    key: str
    read: Read | None


def locate(root: str, *, stages: str | None = None, triggers: str | None = None,
           platform_facts: str | None = None, use_cache: bool = True) -> Plan:
    """The plan's sources and content key. When the stamp shows nothing changed since the last
    run, no file is listed or read; otherwise discover, read and hash, and renew the stamp."""
    if not use_cache:
        src = Sources.discover(root, stages=stages, triggers=triggers,
                               platform_facts=platform_facts)
        read = read_all(src)
        return Plan(src, read[3], read)
    base = os.path.abspath(root)
    stamp = plan_stamp(root, stages, triggers, platform_facts)
    hit = stamp.check()
    if hit is not None:
        recorded, key = hit
        with contextlib.suppress(TypeError):
            return Plan(Sources(root=root, **recorded), key, None)  # type: ignore[arg-type]
    dirs = Stamp.stat_dirs(_discovery_dirs(base))
    src = Sources.discover(root, stages=stages, triggers=triggers, platform_facts=platform_facts)
    full = {rel: rel if os.path.isabs(rel) else os.path.join(base, rel) for rel in src.all_files()}
    files = Stamp.stat_files(full.values())
    read = read_all(src)
    if not read[2] and not src.escaped:  # a plan with unreadable inputs is read afresh each time
        recorded = {f.name: getattr(src, f.name) for f in fields(src) if f.name != "root"}
        stamp.write(dirs, files, {full[rel]: h for rel, h in read[1].items()}, recorded, read[3])
    return Plan(src, read[3], read)


def _discovery_dirs(base: str) -> list[str]:
    """The directories whose listings discovery depends on, and the ones between them and
    the root (not the root's own listing: nothing is discovered at the top level)."""
    fixed = [TESTDB_DIR, QA_DIR, *(os.path.dirname(p) for p in (
        WAIVES, DURATIONS, GROOVY, STAGES_YAML, TRIGGERS, PLATFORM_FACTS, MERGE_REQUEST,
        CBTS_MAIN))]
    out: set[str] = set()
    for rel in fixed:
        parts = rel.split("/")
        out.update(os.path.join(base, *parts[:i]) for i in range(1, len(parts) + 1))
    for d, dirs, _ in os.walk(os.path.join(base, QA_DIR)):
        dirs[:] = [n for n in dirs if not n.startswith(".")]
        out.add(d)
    return sorted(out)


def load_sources(src: Sources, *, use_cache: bool = True, read: Read | None = None,
                 key: str | None = None) -> Index:
    """``read``: what ``read_all(src)`` returned, when the caller already read the files;
    ``key``: the plan's content key, when a stamp proved it without reading them."""
    if key is None:
        read = read or read_all(src)
        key = read[3]
    if use_cache:
        with gc_paused():
            cached = _cache_get(key)
        if cached is not None:
            cached.key = key
            return _rerooted(cached, src)
    texts, hashes, read_errors, key = read or read_all(src)
    from testdb.schedule import build_schedule  # here: a cached index needs no schedule code

    with gc_paused():
        index = _parse(src, texts, read_errors)
        index.files = hashes
        index.schedule = build_schedule(index)
        index.key = key
    if use_cache:
        _cache_put(key, index)
    return index


def read_all(src: Sources) -> Read:
    """Every input's text and sha256, the read errors, and the content key of the plan."""
    texts: dict[str, str] = {}
    read_errors = [Diagnostic(SourceLoc(rel), Severity.ERROR, "a symlink to a file outside the "
                              "checkout root is not read; copy the file into the checkout",
                              "outside-root") for rel in src.escaped]
    for rel in src.all_files():
        full = rel if os.path.isabs(rel) else os.path.join(src.root, rel)
        try:
            texts[rel] = read_text(full, rel)
        except InputError as exc:
            read_errors.append(Diagnostic(exc.loc or SourceLoc(rel), Severity.ERROR,
                                          exc.bare + (f"; {exc.hint}" if exc.hint else ""),
                                          "unreadable"))
    hashes = {rel: sha256_text(t) for rel, t in texts.items()}
    return texts, hashes, read_errors, _cache_key(src, hashes, read_errors)


def _parse(src: Sources, texts: dict[str, str], diags: list[Diagnostic]) -> Index:
    from testdb.lists import load_durations_text, load_list_text
    from testdb.testdb_yaml import load_testdb_text

    index = Index(root=src.root, sources=src)
    diags = list(diags)
    from testdb.model import QaList, SkippedFile

    skipped: list[SkippedFile] = []
    contexts: dict[str, Context] = {}
    for rel, kind in [*((p, "l0") for p in src.testdb), *((p, "qa") for p in src.qa_yaml)]:
        if rel not in texts:
            continue
        res = load_testdb_text(texts[rel], rel, kind)
        diags.extend(res.diagnostics)
        if res.skipped:
            skipped.append(SkippedFile(rel, res.skipped))
        for ctx in res.contexts:
            if ctx.name in contexts:
                first = contexts[ctx.name]
                diags.append(Diagnostic(ctx.loc, Severity.ERROR if kind == first.kind == "l0"
                                        else Severity.WARNING,
                                        f"context {ctx.name!r} is also defined at {first.loc}; "
                                        "the first one is used", "duplicate-context"))
                continue
            contexts[ctx.name] = ctx
    index.contexts = contexts
    qa_lists = []
    for rel in src.qa_txt:
        if rel in texts:
            lres = load_list_text(texts[rel], rel)
            diags.extend(lres.diagnostics)
            name = os.path.splitext(os.path.basename(rel))[0]
            qa_lists.append(QaList(name, SourceLoc(rel, 1), tuple(lres.entries)))
    index.qa_lists = tuple(qa_lists)
    if src.waives and src.waives in texts:
        wres = load_list_text(texts[src.waives], src.waives, waive=True)
        diags.extend(wres.diagnostics)
        index.waives = tuple(wres.entries)
    if src.durations and src.durations in texts:
        index.durations, ddiags = load_durations_text(texts[src.durations], src.durations)
        diags.extend(ddiags)
    if src.stages and src.stages in texts:
        index.stages, sdiags = _load_stages(texts[src.stages], src.stages, diags)
        diags.extend(sdiags)
    if src.triggers and src.triggers in texts:
        # Not a diagnostic: gates read from a broken file would be closed without a word.
        if src.triggers.endswith(".groovy"):
            from testdb.mergerequest import load_merge_request_text

            index.triggers, tdiags = load_merge_request_text(texts[src.triggers], src.triggers)
            diags.extend(tdiags)
        else:
            index.triggers = _load_triggers(texts[src.triggers], src.triggers)
    if src.cbts:
        index.triggers = replace(index.triggers, cbts=src.cbts)
    if src.platform_facts and src.platform_facts in texts:
        index.platform_facts = _guard(lambda: _load_facts(texts[src.platform_facts or ""],
                                                          src.platform_facts or ""), diags, {})
    index.diagnostics = tuple(diags)
    index.skipped = tuple(skipped)
    return index


def _guard(fn: Callable[[], _T], diags: list[Diagnostic], default: _T) -> _T:
    try:
        return fn()
    except InputError as exc:
        diags.append(Diagnostic(exc.loc or SourceLoc(""), Severity.ERROR, exc.bare, "bad-input"))
        return default


def _load_stages(text: str, path: str, diags: list[Diagnostic]
                 ) -> tuple[tuple[Stage, ...], list[Diagnostic]]:
    try:
        if path.endswith(".groovy"):
            from testdb.groovy import load_groovy_stages_text

            stages, sd = load_groovy_stages_text(text, path)
        else:
            from testdb.stages import load_stage_table_text

            stages, sd = load_stage_table_text(text, path)
    except InputError as exc:
        # What to do: the loader's own hint, and which files a stage table can be.
        todo = "give jenkins/L0_Test.groovy or a YAML table like ci/stages.yml"
        todo = f"{exc.hint}, or {todo}" if exc.hint else todo
        return (), [Diagnostic(exc.loc or SourceLoc(path), Severity.ERROR, f"{exc.bare}; {todo}",
                               "bad-stages")]
    seen: dict[str, Stage] = {}
    for s in stages:
        if s.name in seen and not s.disabled and not seen[s.name].disabled:
            sd.append(Diagnostic(s.loc, Severity.WARNING, f"stage {s.name!r} is defined twice "
                                 f"(also at {seen[s.name].loc})", "duplicate-stage"))
        seen[s.name] = s
    return tuple(stages), sd


def _safe_yaml(text: str, path: str) -> object:
    import yaml

    from testdb.yamlnodes import compose

    compose(text, path, scan_depth=True)  # line-accurate errors, alias-bomb and depth guards
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:  # a tag the safe loader refuses (!!python/object, ...)
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"unsupported YAML: {getattr(exc, 'problem', None) or exc}",
                         SourceLoc(path, mark.line + 1 if mark else 1),
                         "use plain mappings, lists and scalars") from None
    except ValueError:  # an integer with thousands of digits
        raise InputError("a number is too long to read", SourceLoc(path, 1)) from None


# The sections a trigger file may hold: the three the tool reads, and the documentation
# sections of ci/pr-triggers.yml (the facts they record, read by people, not by the tool).
TRIGGER_SECTIONS = ("multi_gpu_file_changed", "auto_trigger_tags", "only_one_group_changed")
TRIGGER_NOTES = ("sources", "stage_classification", "pre_merge_selection_order",
                 "multi_gpu_approval_gate", "mako_args_from_stage_name", "platform_facts",
                 "bot_flags_to_testFilter")


def _check_trigger_shape(text: str, data: object, path: str) -> None:
    """A trigger file that names no section the tool reads, or a key it does not know, is an
    error: gates read from the wrong file are silently closed, and a closed gate can hide a
    stage that runs (or make a verdict rest on a guess)."""
    import yaml

    from testdb.yamlnodes import compose, line_of

    if not isinstance(data, dict):
        raise InputError("PR trigger file must be a mapping", SourceLoc(path, 1),
                         "give a file shaped like ci/pr-triggers.yml")
    root = compose(text, path)
    lines = ({str(k.value): line_of(k) for k, _ in root.value}
             if isinstance(root, yaml.MappingNode) else {})
    known = (*TRIGGER_SECTIONS, *TRIGGER_NOTES)
    for key in data:
        if str(key) not in known:
            raise InputError(f"unknown key {str(key)!r} in the PR trigger file",
                             SourceLoc(path, lines.get(str(key), 1)),
                             f"use {', '.join(TRIGGER_SECTIONS)} (see ci/pr-triggers.yml)")
    if not any(k in data for k in TRIGGER_SECTIONS):
        raise InputError("the PR trigger file has none of "
                         f"{', '.join(TRIGGER_SECTIONS)}", SourceLoc(path, 1),
                         "give a file shaped like ci/pr-triggers.yml")
    for key in TRIGGER_SECTIONS:
        if key in data and data[key] is not None and not isinstance(data[key], dict):
            raise InputError(f"{key} must be a mapping", SourceLoc(path, lines.get(key, 1)))
    mg = data.get("multi_gpu_file_changed") or {}
    paths = mg.get("related_paths", []) if isinstance(mg, dict) else []
    if isinstance(paths, list) and not all(isinstance(p, str) for p in paths):
        raise InputError("multi_gpu_file_changed.related_paths must be a list of path strings",
                         SourceLoc(path, lines.get("multi_gpu_file_changed", 1)))
    at = data.get("auto_trigger_tags") or {}
    table = (at.get("map") or []) if isinstance(at, dict) else []
    for row in table if isinstance(table, list) else ():
        if not (isinstance(row, dict) and isinstance(row.get("path_prefix"), str)):
            raise InputError("each auto_trigger_tags.map row needs a path_prefix string and "
                             f"tags, got {row!r}"[:200],
                             SourceLoc(path, lines.get("auto_trigger_tags", 1)))


def _load_triggers(text: str, path: str) -> Triggers:
    data = _safe_yaml(text, path)
    _check_trigger_shape(text, data, path)
    assert isinstance(data, dict)
    mg = data.get("multi_gpu_file_changed") or {}
    paths = mg.get("related_paths", []) if isinstance(mg, dict) else []
    at = data.get("auto_trigger_tags") or {}
    rules = []
    table = (at.get("map") or []) if isinstance(at, dict) else []
    if not isinstance(table, list):
        raise InputError("auto_trigger_tags.map must be a list of {path_prefix, tags} rows",
                         SourceLoc(path, 1))
    for row in table:
        if isinstance(row, dict) and "path_prefix" in row:
            tags = row.get("tags") or []
            rules.append((str(row["path_prefix"]),
                          tuple(str(t) for t in (tags if isinstance(tags, list) else [tags]))))
    if not isinstance(paths, list):
        raise InputError("multi_gpu_file_changed.related_paths must be a list", SourceLoc(path, 1))
    og = data.get("only_one_group_changed") or {}
    groups = (og.get("groups") or {}) if isinstance(og, dict) else {}
    if not isinstance(groups, dict) or not all(isinstance(v, list) for v in groups.values()):
        raise InputError("only_one_group_changed.groups must map a group to a list of path "
                         "prefixes", SourceLoc(path, 1))
    return Triggers(tuple(str(p) for p in paths), tuple(rules),
                    tuple((str(g), tuple(str(p) for p in ps)) for g, ps in groups.items()),
                    source=path)


def _load_facts(text: str, path: str) -> dict[str, dict[str, object]]:
    data = _safe_yaml(text, path)
    platforms = data.get("platforms") if isinstance(data, dict) else None
    if not isinstance(platforms, dict) or not all(isinstance(v, dict) for v in platforms.values()):
        raise InputError("platform facts file needs `platforms: {platform: {fact: value}}`",
                         SourceLoc(path, 1))
    return {str(k): dict(v) for k, v in platforms.items()}


# ---- cache -------------------------------------------------------------------------------------

_code_stamp = testdb_code_stamp


def _cache_key(src: Sources, hashes: dict[str, str], errors: list[Diagnostic]) -> str:
    """The plan's content: each input's role, name (root-relative, or absolute when given
    outside the root) and sha256. Not the root: checkouts with the same plan share it."""
    h = hashlib.sha256(f"{testdb.__version__}|{_SCHEMA}|{_code_stamp()}".encode())
    for f in fields(src):
        if f.name == "root":
            continue
        value = getattr(src, f.name)
        for rel in value if isinstance(value, tuple) else (value,) if value else ():
            h.update(f"{f.name}\0{rel}\0{hashes.get(rel, '-')}\0".encode())
    for d in errors:
        h.update(str(d).encode())
    return h.hexdigest()


_SCHEMA = PLAN_SCHEMA
_NO_ROOT = ""  # the root a cached index holds: the reader's own is put back when it is read


def _rootless(index: Index) -> Index:
    """What the cache keeps: the index without the writer's root. Every other path in it is
    relative to the root (or absolute when the user named a file outside it, which is part
    of the key), so another checkout with the same plan may read it."""
    out = copy.copy(index)
    out.root = _NO_ROOT
    if index.sources is not None:
        out.sources = replace(index.sources, root=_NO_ROOT)
    return out


def _rerooted(cached: Index, src: Sources) -> Index:
    """A cached index as this checkout's: its root and sources are the reader's (the key
    proves the same files under the same names with the same contents)."""
    cached.root = src.root
    if cached.sources is not None:
        cached.sources = src
    return cached


def _cache_get(key: str) -> Index | None:
    payload = read_cache(os.path.join(cache_dir(), f"index-{key}.pickle"))
    if payload is None:
        return None
    import pickle  # here: a warm `where` never unpickles, and it starts faster without

    try:
        obj = pickle.loads(payload)  # our own file: keyed by content hash, digest checked
    except Exception:  # records of another code version: parse afresh
        return None
    return obj if isinstance(obj, Index) else None


def _cache_put(key: str, index: Index) -> None:
    import io
    import pickle

    buf = io.BytesIO()
    try:
        _lean_pickler()(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(_rootless(index))
    except (pickle.PicklingError, RecursionError):
        return
    write_cache(os.path.join(cache_dir(), f"index-{key}.pickle"), buf.getvalue())


def _lean_types() -> dict[type, dict[str, object]]:
    """The plan's most numerous records (~15,000 list entries and their places for
    TensorRT-LLM's plan, nine in ten of the index's objects) and their fields' defaults."""
    import dataclasses

    from testdb.grammar import Entry

    out: dict[type, dict[str, object]] = {}
    for cls in (Entry, SourceLoc):
        if any(n in cls.__dict__ for n in ("__slots__", "__reduce__", "__reduce_ex__",
                                           "__getstate__", "__setstate__")):
            continue  # pickled as it says, in full
        out[cls] = {f.name: f.default for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING
                    and cls.__dict__.get(f.name, dataclasses.MISSING) is f.default}
    return out


def _lean_state(obj: Any, defaults: dict[str, object]) -> dict[str, object]:
    """``obj``'s attributes but the fields that hold their default (the same value, of the
    same type): once unpickled, the class attribute of that default answers for them, and the
    instance is equal to the one pickled (``dataclass`` compares, hashes, orders and prints by
    attribute). Unpickling the index then creates and fills fewer items: ~20 % faster."""
    return {k: v for k, v in obj.__dict__.items()
            if not (k in defaults and type(v) is type(defaults[k]) and v == defaults[k])}


def _lean_pickler() -> Any:
    """A pickler writing ``_lean_types``' records by ``_lean_state`` (made when an index is
    written: reading one needs neither)."""
    import copyreg
    import pickle

    lean = _lean_types()
    newobj = getattr(copyreg, "__newobj__")  # noqa: B009 (untyped): pickle's NEWOBJ opcode

    class LeanPickler(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            defaults = lean.get(type(obj))
            if defaults is None:
                return NotImplemented
            return newobj, (type(obj),), _lean_state(obj, defaults)

    return LeanPickler
