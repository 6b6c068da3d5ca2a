"""`testdb replay` with a measured map (docs/replay.md, docs/map.md): every commit's audit reads
it, its identity is in the record cache's key, and the summary says what it decided.

On the bundled example history (examples/replay-history/build.py), commit c04 changes
``tinyllm/cache.py::evict``, statically guarded only post-merge (test_cache_eviction). A map
hand-made through the store API says which tests executed ``evict`` at c03 (c04's base)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.covmap.fingerprint import MODULE, units
from auditor.covmap.locate import default_path
from auditor.covmap.store import FuncRef, MapError, MapStore
from auditor.replay.model import CommitRecord, record_json
from auditor.replay.options import ReplayOptions
from auditor.replay.runner import ReplayRun, replay
from auditor.replay.totals import measured_counts
from tests.conftest import REPO
from tests.gitrepo import git

BUILD = Path(REPO) / "examples" / "replay-history" / "build.py"
CACHE = "test_cache.py::test_cache_eviction"  # post-merge only in the plan
TOP_K = "test_sampling.py::test_top_k"  # pre-merge
SRC = "tinyllm/cache.py"


def _build(out: Path) -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("replay_history_build_map", BUILD)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names: dict[str, str] = mod.build(out)
    return names


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("history-map")
    names = _build(out)
    return {"repo": str(out / "repo"), "names": names,
            "range": f"{names['c03']}..{names['c04']}"}  # c04 alone


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "cache"
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(d))
    yield d


def add_to_map(path: Path, h: dict[str, Any], tests: dict[str, list[str]],
               at: str = "c03") -> None:
    """``tests``: test id -> the functions of tinyllm/cache.py it executed, measured at
    ``at`` (fingerprints from that commit's source, as `testdb map add` takes them)."""
    sha = h["names"][at]
    text = git(Path(h["repo"]), "show", f"{sha}:{SRC}")
    refs = {u.qualname: FuncRef(SRC, u.qualname, u.kind, u.fp) for u in units(text)}
    with MapStore.open_or_create(str(path)) as store:
        store.add(sha, 1_700_000_000, {t: {refs[q] for q in qs} for t, qs in tests.items()},
                  refs.values())


def evict_of(run: ReplayRun) -> tuple[CommitRecord, Any]:
    (rec,) = run.records
    (b,) = [b for b in rec.behaviours if b.function == "evict"]
    return rec, b


def run_with(h: dict[str, Any], measured_map: Path | None = None,
             use_cache: bool = True) -> ReplayRun:
    opts = ReplayOptions.given(h["repo"], measured_map=str(measured_map)
                               if measured_map else None)
    return replay(h["repo"], h["range"], opts, use_cache=use_cache)


def test_without_a_map_records_and_keys_are_as_before(history: dict[str, Any],
                                                      cache_dir: Path) -> None:
    """GUARDED twin: no map, no change. The options key is the formula of before (so caches
    written by earlier versions stay valid) and the record is the static one, byte for byte
    the same as one audited afresh."""
    before = hashlib.sha256(b"stages=None|triggers=None|platform_facts=None|rules=None|")
    assert ReplayOptions.given(history["repo"]).key() == before.hexdigest()
    assert ReplayOptions().key() == before.hexdigest()
    first = run_with(history)
    rec, b = evict_of(first)
    assert (b.verdict, b.tier) == ("post-merge-only", "symbol")
    assert [g.test_id for g in b.deciding] == [CACHE]
    again = run_with(history)
    assert again.cached == 1
    fresh = run_with(history, use_cache=False)
    dump = [json.dumps(record_json(r), sort_keys=True) for r in (rec, *again.records,
                                                                 *fresh.records)]
    assert dump[0] == dump[1] == dump[2].replace(
        f'"seconds": {round(fresh.records[0].seconds, 3)}',
        f'"seconds": {round(rec.seconds, 3)}')
    assert measured_counts(first.records) == (0, 1)


def test_a_map_that_gains_a_pre_merge_guard_gives_a_new_record(history: dict[str, Any],
                                                                cache_dir: Path,
                                                                tmp_path: Path) -> None:
    """TRAP (no false green from the cache, and none from a post-merge measurement): a map
    saying only the post-merge test executed evict keeps c04 red, now decided by the measured
    tier; the same map edited to add a measured pre-merge guard must change the answer, not
    hand back the kept record; without the map the static record comes back."""
    m = tmp_path / "map.sqlite"
    add_to_map(m, history, {CACHE: ["evict"]})
    run = run_with(history, m)
    assert run.cached == 0
    _, b = evict_of(run)
    assert (b.verdict, b.tier) == ("post-merge-only", "coverage")
    assert measured_counts(run.records) == (1, 0)

    add_to_map(m, history, {TOP_K: ["evict"]})  # the same commit, one test more
    run = run_with(history, m)
    assert run.cached == 0  # the map changed: the kept record is not this answer
    _, b = evict_of(run)
    assert (b.verdict, b.tier) == ("pre-merge", "coverage")
    assert TOP_K in [g.test_id for g in b.deciding if g.effective == "pre-merge"]

    kept = run_with(history, m)  # an unchanged map: the record is kept
    assert kept.cached == 1 and evict_of(kept)[1].verdict == "pre-merge"

    static = run_with(history)  # no map: the static answer, not the map's kept one
    _, b = evict_of(static)
    assert (b.verdict, b.tier) == ("post-merge-only", "symbol")


def test_a_test_the_map_knows_that_never_ran_evict_is_no_guard(history: dict[str, Any],
                                                               cache_dir: Path,
                                                               tmp_path: Path) -> None:
    """TRAP: the static guard test_cache_eviction, in the map without having executed evict
    (it imported the module: its body ran, evict did not), loses its symbol link (what is
    left is the module-import context, which never guards), and the pre-merge test of the map
    that never ran evict is no guard either."""
    m = tmp_path / "map.sqlite"
    add_to_map(m, history, {CACHE: [MODULE], TOP_K: [MODULE]})
    _, b = evict_of(run_with(history, m))
    assert b.verdict != "pre-merge" and b.tier == "module"
    assert "symbol" not in b.guards and "coverage" not in b.guards
    assert TOP_K not in [g.test_id for gs in b.guards.values() for g in gs]


def test_cli_reads_the_default_map_and_says_what_it_decided(history: dict[str, Any],
                                                            cache_dir: Path,
                                                            run_cli: Any) -> None:
    """The checkout's own map is read without --map, as `audit` finds it; JSON and text say
    how many changes measured links decided; without a map neither has a map part."""
    r = run_cli("--root", history["repo"], "replay", history["range"], "--format", "json")
    assert r.code == 0, r.err
    assert "map" not in json.loads(r.out)

    own = Path(default_path(history["repo"]))
    add_to_map(own, history, {TOP_K: ["evict"]})
    r = run_cli("--root", history["repo"], "replay", history["range"], "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["cached"] == 0
    assert "1 by measured links" in r.err  # the per-commit progress line
    assert doc["map"]["path"] == str(own)
    assert (doc["map"]["measured"], doc["map"]["static_only"]) == (1, 0)
    (b,) = [b for b in doc["commits"][0]["behaviours"] if b["function"] == "evict"]
    assert (b["verdict"], b["tier"]) == ("pre-merge", "coverage")
    r = run_cli("--root", history["repo"], "replay", history["range"])
    assert r.code == 0, r.err
    assert f"Measured map {own}: 1 decided by measured links" in r.out


@pytest.mark.parametrize(("content", "says"), [
    (None, "no map file here"),
    (b"not a database at all, just bytes", "not a testdb map"),
])
def test_cli_a_map_that_cannot_be_read_is_exit_2(history: dict[str, Any], cache_dir: Path,
                                                 tmp_path: Path, run_cli: Any,
                                                 content: bytes | None, says: str) -> None:
    """Never a silent static replay when the map named cannot be read."""
    m = tmp_path / "bad.sqlite"
    if content is not None:
        m.write_bytes(content)
    r = run_cli("--root", history["repo"], "replay", history["range"], "--map", str(m))
    assert r.code == 2
    assert says in r.err and str(m) in r.err


def test_a_damaged_map_is_an_error_in_the_key_too(tmp_path: Path) -> None:
    m = tmp_path / "m.sqlite"
    m.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(MapError):
        ReplayOptions(measured_map=os.fspath(m)).key()
