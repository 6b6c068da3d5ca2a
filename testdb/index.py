"""Load a checkout (TensorRT-LLM layout) or explicit files into one ``Index``, with a cache."""

from __future__ import annotations

import gc
import glob
import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass, field
from typing import Any

import yaml

import testdb
from testdb.errors import Diagnostic, InputError, Severity, SourceLoc
from testdb.files import read_text, sha256_text
from testdb.grammar import Entry
from testdb.lists import load_durations_text, load_list_text
from testdb.model import Context, QaList, SkippedFile
from testdb.stages import Stage, load_stage_table_text
from testdb.testdb_yaml import load_testdb_text

TESTDB_DIR = "tests/integration/test_lists/test-db"
QA_DIR = "tests/integration/test_lists/qa"
WAIVES = "tests/integration/test_lists/waives.txt"
DURATIONS = "tests/integration/defs/.test_durations"
GROOVY = "jenkins/L0_Test.groovy"
STAGES_YAML = "ci/stages.yml"
TRIGGERS = "ci/pr-triggers.yml"
PLATFORM_FACTS = "ci/platform-facts.yml"
DEFS_DIR = "tests/integration/defs"


@dataclass(frozen=True)
class Triggers:
    """PR gate data: the multi-GPU path list (substring test) and auto-trigger path rules."""

    multi_gpu_paths: tuple[str, ...] = ()
    auto_trigger: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (path prefix, stage-name tags)

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for _, tags in self.auto_trigger for t in tags))


@dataclass(frozen=True)
class Sources:
    """Which files make up the test plan; paths are relative to ``root`` or absolute."""

    root: str
    testdb: tuple[str, ...] = ()
    qa_yaml: tuple[str, ...] = ()
    qa_txt: tuple[str, ...] = ()
    waives: str | None = None
    durations: str | None = None
    stages: str | None = None
    triggers: str | None = None
    platform_facts: str | None = None

    @classmethod
    def discover(cls, root: str, *, stages: str | None = None, triggers: str | None = None,
                 platform_facts: str | None = None) -> Sources:
        if not os.path.isdir(root):
            raise InputError("checkout root is not a directory", SourceLoc(root),
                             "pass --root PATH of a TensorRT-LLM checkout")

        def rel(pattern: str) -> tuple[str, ...]:
            found = glob.glob(os.path.join(root, pattern), recursive=True)
            return tuple(sorted(os.path.relpath(p, root) for p in found if os.path.isfile(p)))

        def opt(path: str) -> str | None:
            return path if os.path.isfile(os.path.join(root, path)) else None

        return cls(
            root=root,
            testdb=rel(f"{TESTDB_DIR}/*.yml"),
            qa_yaml=rel(f"{QA_DIR}/**/*.yml"),
            qa_txt=rel(f"{QA_DIR}/**/*.txt"),
            waives=opt(WAIVES),
            durations=opt(DURATIONS),
            stages=stages or opt(GROOVY) or opt(STAGES_YAML),
            triggers=triggers or opt(TRIGGERS),
            platform_facts=platform_facts or opt(PLATFORM_FACTS),
        )

    def all_files(self) -> list[str]:
        singles = [self.waives, self.durations, self.stages, self.triggers, self.platform_facts]
        return [*self.testdb, *self.qa_yaml, *self.qa_txt, *(s for s in singles if s)]


@dataclass
class Index:
    """Everything parsed from a checkout's test plan, plus what was wrong with it."""

    root: str
    contexts: dict[str, Context] = field(default_factory=dict)
    qa_lists: tuple[QaList, ...] = ()
    waives: tuple[Entry, ...] = ()
    durations: dict[str, float] = field(default_factory=dict)
    stages: tuple[Stage, ...] = ()
    triggers: Triggers = Triggers()
    platform_facts: dict[str, dict[str, object]] = field(default_factory=dict)
    diagnostics: tuple[Diagnostic, ...] = ()
    skipped: tuple[SkippedFile, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # shown path -> sha256
    sources: Sources | None = None
    schedule: Any = None  # testdb.schedule.Schedule, built at load time and cached with the index

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    def l0_contexts(self) -> list[Context]:
        return [c for c in self.contexts.values() if c.kind == "l0"]


def load(root: str = ".", *, stages: str | None = None, triggers: str | None = None,
         platform_facts: str | None = None, use_cache: bool = True) -> Index:
    """Discover and load the test plan under ``root`` (the cache makes repeat loads fast)."""
    return load_sources(Sources.discover(root, stages=stages, triggers=triggers,
                                         platform_facts=platform_facts), use_cache=use_cache)


def load_sources(src: Sources, *, use_cache: bool = True) -> Index:
    texts: dict[str, str] = {}
    read_errors: list[Diagnostic] = []
    for rel in src.all_files():
        full = rel if os.path.isabs(rel) else os.path.join(src.root, rel)
        try:
            texts[rel] = read_text(full, rel)
        except InputError as exc:
            read_errors.append(Diagnostic(exc.loc or SourceLoc(rel), Severity.ERROR,
                                          exc.bare + (f"; {exc.hint}" if exc.hint else ""),
                                          "unreadable"))
    hashes = {rel: sha256_text(t) for rel, t in texts.items()}
    key = _cache_key(src, hashes, read_errors)
    if use_cache:
        cached = _cache_get(key)
        if cached is not None:
            cached.root = src.root
            return cached
    from testdb.schedule import build_schedule  # schedule imports this module

    index = _parse(src, texts, read_errors)
    index.files = hashes
    index.schedule = build_schedule(index)
    if use_cache:
        _cache_put(key, index)
    return index


def _parse(src: Sources, texts: dict[str, str], diags: list[Diagnostic]) -> Index:
    index = Index(root=src.root, sources=src)
    diags = list(diags)
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
        index.triggers = _guard(lambda: _load_triggers(texts[src.triggers or ""], src.triggers
                                                       or ""), diags, Triggers())
    if src.platform_facts and src.platform_facts in texts:
        index.platform_facts = _guard(lambda: _load_facts(texts[src.platform_facts or ""],
                                                          src.platform_facts or ""), diags, {})
    index.diagnostics = tuple(diags)
    index.skipped = tuple(skipped)
    return index


def _guard(fn, diags, default):  # type: ignore[no-untyped-def]
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
            stages, sd = load_stage_table_text(text, path)
    except InputError as exc:
        return (), [Diagnostic(exc.loc or SourceLoc(path), Severity.ERROR, exc.bare, "bad-stages")]
    seen: dict[str, Stage] = {}
    for s in stages:
        if s.name in seen and not s.disabled and not seen[s.name].disabled:
            sd.append(Diagnostic(s.loc, Severity.WARNING, f"stage {s.name!r} is defined twice "
                                 f"(also at {seen[s.name].loc})", "duplicate-stage"))
        seen[s.name] = s
    return tuple(stages), sd


def _safe_yaml(text: str, path: str) -> object:
    from testdb.yamlnodes import compose

    compose(text, path)  # line-accurate errors and the alias-bomb guard
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def _load_triggers(text: str, path: str) -> Triggers:
    data = _safe_yaml(text, path)
    if not isinstance(data, dict):
        raise InputError("PR trigger file must be a mapping", SourceLoc(path, 1))
    mg = data.get("multi_gpu_file_changed") or {}
    paths = mg.get("related_paths", []) if isinstance(mg, dict) else []
    at = data.get("auto_trigger_tags") or {}
    rules = []
    for row in (at.get("map", []) if isinstance(at, dict) else []):
        if isinstance(row, dict) and "path_prefix" in row:
            rules.append((str(row["path_prefix"]), tuple(str(t) for t in row.get("tags", []))))
    if not isinstance(paths, list):
        raise InputError("multi_gpu_file_changed.related_paths must be a list", SourceLoc(path, 1))
    return Triggers(tuple(str(p) for p in paths), tuple(rules))


def _load_facts(text: str, path: str) -> dict[str, dict[str, object]]:
    data = _safe_yaml(text, path)
    platforms = data.get("platforms") if isinstance(data, dict) else None
    if not isinstance(platforms, dict) or not all(isinstance(v, dict) for v in platforms.values()):
        raise InputError("platform facts file needs `platforms: {platform: {fact: value}}`",
                         SourceLoc(path, 1))
    return {str(k): dict(v) for k, v in platforms.items()}


# ---- cache -------------------------------------------------------------------------------------

def cache_dir() -> str:
    return os.environ.get("TESTDB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "testdb-audit")


def _cache_key(src: Sources, hashes: dict[str, str], errors: list[Diagnostic]) -> str:
    h = hashlib.sha256(f"{testdb.__version__}|{_SCHEMA}".encode())
    for rel in src.all_files():
        h.update(f"{rel}\0{hashes.get(rel, '-')}\0".encode())
    for d in errors:
        h.update(str(d).encode())
    return h.hexdigest()


_SCHEMA = 1


def _cache_get(key: str) -> Index | None:
    path = os.path.join(cache_dir(), f"index-{key}.pickle")
    # Unpickling tens of thousands of small records is twice as fast without the cyclic GC.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with open(path, "rb") as fh:
            obj = pickle.load(fh)  # noqa: S301 - our own cache file, keyed by content hash
    except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError,
            ValueError):
        return None
    finally:
        if gc_was_enabled:
            gc.enable()
    return obj if isinstance(obj, Index) else None


def _cache_put(key: str, index: Index) -> None:
    """Write atomically: a reader never sees a half-written cache file."""
    d = cache_dir()
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".index-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(index, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, os.path.join(d, f"index-{key}.pickle"))
    except OSError:
        pass  # a cache we cannot write only costs speed
