"""The map file's rules: a test's newest measurement wins, measurements of one commit join,
fingerprints keep or age links, a damaged file is an error (exit 2), never an empty map."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from auditor.covmap.fingerprint import units
from auditor.covmap.store import FuncRef, MapError, MapStore, merge_files, pack, unpack

V1 = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
V2 = "def f():\n    return 1\n\n\ndef g():\n    return 3\n"  # g changed, f not


def refs(src: str, path: str = "pkg/m.py") -> dict[str, FuncRef]:
    return {u.qualname: FuncRef(path, u.qualname, u.kind, u.fp) for u in units(src)}


def add(store: MapStore, commit: str, when: int, tests: dict[str, list[str]], src: str = V1
        ) -> str:
    r = refs(src)
    res = store.add(commit, when, {t: {r[q] for q in qs} for t, qs in tests.items()},
                    r.values())
    return next(k for k in ("added", "joined", "replaced", "older") if getattr(res, k))


def executing(store: MapStore, q: str) -> dict[str, tuple[bytes, str]]:
    return {ln.test_id: (ln.fp, ln.commit) for ln in store.tests_executing("pkg/m.py", q)}


def test_pack_roundtrip() -> None:
    ids = [5, 1, 70000, 3, 3]
    assert unpack(pack(ids)) == [1, 3, 5, 70000]
    assert unpack(pack([])) == []


@pytest.mark.parametrize(("first", "second", "what", "f_tests", "g_tests"), [
    # same commit (another stage, another node): the links join
    (("c1", 100, ["f"]), ("c1", 90, ["g"]), "joined", {"t"}, {"t"}),
    # a newer commit's measurement replaces the older one's links
    (("c1", 100, ["f", "g"]), ("c2", 200, ["g"]), "replaced", set(), {"t"}),
    # TRAP: an older measurement arriving late must not replace the newer one
    (("c2", 200, ["f"]), ("c1", 100, ["g"]), "older", {"t"}, set()),
])
def test_newest_measurement_wins(tmp_path: Path, first: tuple[str, int, list[str]],
                                 second: tuple[str, int, list[str]], what: str,
                                 f_tests: set[str], g_tests: set[str]) -> None:
    with MapStore.create(str(tmp_path / "m.sqlite")) as s:
        assert add(s, first[0], first[1], {"t": first[2]}) == "added"
        assert add(s, second[0], second[1], {"t": second[2]}) == what
        assert set(executing(s, "f")) == f_tests
        assert set(executing(s, "g")) == g_tests


def test_fingerprints_keep_or_age_links(tmp_path: Path) -> None:
    """Measured at c1 (V1); the checkout moves to V2: f's link is current, g's is of an older
    version (its fingerprint is V1's), a function the checkout no longer has is never asked."""
    with MapStore.create(str(tmp_path / "m.sqlite")) as s:
        add(s, "c1", 100, {"t": ["f", "g"]})
        now = refs(V2)
        assert executing(s, "f")["t"][0] == now["f"].fp
        assert executing(s, "g")["t"][0] != now["g"].fp
        assert executing(s, "g")["t"][0] == refs(V1)["g"].fp
        assert executing(s, "gone") == {}


def test_silence_is_evidence_only_where_the_function_existed(tmp_path: Path) -> None:
    with MapStore.create(str(tmp_path / "m.sqlite")) as s:
        add(s, "c1", 100, {"a": ["f"], "b": ["g"]})
        assert s.tests_not_executing("pkg/m.py", "f") == {"b"}
        # TRAP: a function the map never saw (new since): no test's silence says anything
        assert s.tests_not_executing("pkg/m.py", "h") == set()
        # a test measured at a commit whose scan lacked h says nothing about h either
        src3 = V1 + "\n\ndef h():\n    return 4\n"
        r3 = refs(src3)
        s.add("c3", 300, {"c": {r3["h"]}}, r3.values())
        assert s.tests_not_executing("pkg/m.py", "h") == set()
        s.add("c3", 300, {"d": {r3["f"]}}, r3.values())
        assert s.tests_not_executing("pkg/m.py", "h") == {"d"}


def test_functions_of_and_stats(tmp_path: Path) -> None:
    with MapStore.create(str(tmp_path / "m.sqlite")) as s:
        add(s, "c1", 100, {"t": ["f", "g"], "u": ["g"]})
        assert s.functions_of("t") == [("pkg/m.py", "f", "function"),
                                       ("pkg/m.py", "g", "function")]
        assert s.functions_of("nobody") == []
        st = s.stats()
        assert (st.tests, st.functions, st.links) == (2, 2, 3)
        assert st.commits[0][:2] == ("c1", 2)
        assert s.measurement("u") == ("c1", 100)


def test_merge_joins_nodes_and_keeps_the_newest(tmp_path: Path) -> None:
    a, b, out = (str(tmp_path / n) for n in ("a.sqlite", "b.sqlite", "out.sqlite"))
    with MapStore.create(a) as s:
        add(s, "c1", 100, {"t": ["f"], "u": ["f"]})
    with MapStore.create(b) as s:
        add(s, "c1", 110, {"t": ["g"]})  # another node, same commit
        add(s, "c2", 200, {"u": ["g"]}, V2)  # a newer commit
    merge_files([a, b], out)
    with MapStore.open(out) as s:
        assert set(executing(s, "f")) == {"t"}
        assert set(executing(s, "g")) == {"t", "u"}
        assert s.measurement("u") == ("c2", 200)
    merge_files([out, a], out)  # an input may be the output; an older measurement changes nothing
    with MapStore.open(out) as s:
        assert s.measurement("u") == ("c2", 200)


def _other_sqlite(p: Path) -> None:
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE t(x)")
    db.commit()
    db.close()


def _wrong_version(p: Path) -> None:
    MapStore.create(str(p)).close()
    db = sqlite3.connect(p)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    db.commit()
    db.close()


def _truncated(p: Path) -> None:
    with MapStore.create(str(p)) as s:
        add(s, "c1", 100, {f"t{i}": ["f", "g"] for i in range(2000)})
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _scribbled(p: Path) -> None:
    with MapStore.create(str(p)) as s:
        add(s, "c1", 100, {f"t{i}": ["f", "g"] for i in range(2000)})
    data = bytearray(p.read_bytes())
    for i in range(4096, len(data), 4096):  # every page but the first: the schema reads
        data[i + 8: i + 200] = os.urandom(192)
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [
    lambda p: p.write_bytes(b""), lambda p: p.write_text("not a map\n"), _other_sqlite,
    _wrong_version, _truncated, _scribbled,
], ids=["empty", "text", "other-sqlite", "wrong-version", "truncated", "scribbled"])
def test_damaged_map_is_an_error_never_empty(tmp_path: Path, damage: Any, run_cli: Any,
                                             ) -> None:
    p = tmp_path / "m.sqlite"
    damage(p)
    with pytest.raises(MapError), MapStore.open(str(p)) as s:
        s.stats()
        for t in s.test_names():
            s.functions_of(t)
    r = run_cli("--root", str(tmp_path), "map", "stats", "--map", str(p))
    assert r.code == 2, r.out
    assert "m.sqlite" in r.err and "error:" in r.err


def test_missing_map_given_is_an_error(tmp_path: Path, run_cli: Any) -> None:
    r = run_cli("--root", str(tmp_path), "map", "stats", "--map", str(tmp_path / "nope.sqlite"))
    assert r.code == 2 and "no map file here" in r.err


def test_create_is_atomic(tmp_path: Path) -> None:
    """A new map appears complete or not at all: no temporary file is left beside it."""
    p = tmp_path / "m.sqlite"
    with MapStore.create(str(p)) as s:
        add(s, "c1", 100, {"t": ["f"]})
    assert sorted(os.listdir(tmp_path)) == ["m.sqlite"]


def test_failed_add_leaves_the_map_as_it_was(tmp_path: Path) -> None:
    p = str(tmp_path / "m.sqlite")
    with MapStore.create(p) as s:
        add(s, "c1", 100, {"t": ["f"]})
    with MapStore.open(p, write=True) as s, pytest.raises(KeyError), s.transaction():
        s.put_test("u", s.commit_id("c2"), 200, [1])
        raise KeyError("interrupted")
    with MapStore.open(p) as s:
        assert s.test_names() == {"t"} and s.measurement("t") == ("c1", 100)
