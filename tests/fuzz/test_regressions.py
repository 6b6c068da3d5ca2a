"""Every failure the fuzzing found, as a test (each names the fix it guards)."""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from testdb.errors import InputError, SourceLoc
from testdb.testdb_yaml import load_testdb_text
from tests.fuzz import fuzzkit
from tests.hangguard import HANG_S, no_hang

L0 = "tests/integration/test_lists/test-db/l0_fuzz.yml"


def _in_child(code: str, timeout: float = 60) -> str:
    """Run ``code`` in a child: the bugs below killed the interpreter (SIGSEGV) or hung it."""
    env = dict(os.environ, PYTHONPATH=fuzzkit.REPO)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    return proc.stdout


# ---- YAML (testdb/yamlnodes.py, testdb/testdb_yaml.py) -----------------------------------------

@pytest.mark.parametrize("expr", ["'[' * 100_000", "'{a: ' * 100_000", "'- ' * 50_000 + 'x'",
                                  "'a: ' + '[ ' * 500_000"])
def test_deep_yaml_is_refused_not_a_segfault(expr):
    """libyaml's composer recursed in C until the process died (SIGSEGV past ~30,000 levels)
    and was quadratic before that. Fix: yamlnodes._check_depth refuses > MAX_DEPTH levels,
    with an event scan that runs only when cheap bounds allow deep nesting."""
    out = _in_child(f"from testdb.testdb_yaml import load_testdb_text\n"
                    f"import time; t = time.perf_counter()\n"
                    f"r = load_testdb_text({expr}, 'deep.yml')\n"
                    f"print(r.diagnostics[0]); print(time.perf_counter() - t)\n")
    diag, secs = out.splitlines()
    assert float(secs) < HANG_S, f"{secs} s: past the hang guard (the quadratic composer)"
    # Our depth check, or (PyYAML >= 6.0.4) libyaml's own nesting limit: both a clean error.
    assert diag.startswith(("deep.yml:1: error: YAML nests deeper than",
                            "deep.yml:1: error: malformed YAML: exceeded maximum nesting")), diag


def test_anchored_document_nested_a_thousand_deep_does_not_overflow_the_stack():
    """The alias-bomb guard (_check_size) walked the node tree recursively: a document with an
    anchor nested ~1,000 levels over short lines (no depth scan) raised RecursionError. Fix: an
    iterative walk."""
    text = "a: &x v\nb:\n" + "[\n" * 990 + "]\n" * 990
    res = load_testdb_text(text, L0)
    assert all(d.loc.path == L0 for d in res.diagnostics)


def test_many_mako_lines_are_linear():
    """Each blanked `%` line counted newlines from the file start: 100,000 lines took ~11 s.
    Fix: count from the previous match. 300,000 lines: the quadratic would take ~100 s, past
    the hang guard; linear is well under it (benchmarks/bench_pathological.py)."""
    text = "%if x:\n" * 300_000
    with no_hang("300,000 mako lines"):
        res = load_testdb_text(text, L0)
    assert [d.loc.line for d in res.diagnostics[:3]] == [1, 2, 3]
    assert res.diagnostics[299_999].loc.line == 300_000


# ---- the line grammar (testdb/grammar.py) ------------------------------------------------------

@pytest.mark.parametrize("line", ["a.py::b " * 100_000, "a/b.py " + "[ " * 50_000,
                                  "t.py::f" + " [ SKIP" * 50_000], ids=["ids", "brackets",
                                                                        "markers"])
def test_long_lines_are_linear(line):
    """_split_several and _first_marker re-counted brackets from the line start at every space
    or marker: 800 kB of `a.py::b ` hung for hours. Fix: running bracket balances."""
    from testdb.lists import load_list_text

    with no_hang("an 800 kB list line"):
        load_list_text(line, "qa.txt")


@pytest.mark.parametrize("arg", ["9" * 5000, "\u00b2", "\u0663", "1" * 10],
                         ids=["5000-digits", "superscript", "arabic-indic", "10-digits"])
def test_timeout_needs_a_plain_number(arg):
    """`TIMEOUT (<5,000 digits>)` raised ValueError from int() (the digit limit) and
    `TIMEOUT (²)` passed isdigit() but not int(). Fix: ASCII digits, at most nine."""
    from testdb.lists import load_list_text

    res = load_list_text(f"t.py::f TIMEOUT ({arg})", "qa.txt")
    assert [d.rule for d in res.diagnostics] == ["bad-timeout"]
    assert str(res.diagnostics[0]).startswith("qa.txt:1: error: TIMEOUT needs")


# ---- durations, stage tables, triggers (testdb/lists.py, stages.py, index.py) -----------------

@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000, '{"a": ' + "9" * 5000 + "}"],
                         ids=["deep-list", "deep-object", "5000-digits"])
def test_unreadable_durations_json_is_a_diagnostic(text):
    """json.loads raised RecursionError (deep nesting) and ValueError (a 5,000-digit number),
    neither a JSONDecodeError. Fix: both become an error diagnostic at path:1."""
    from testdb.lists import load_durations_text

    out, diags = load_durations_text(text, "defs/.test_durations")
    assert out == {}
    assert str(diags[0]).startswith("defs/.test_durations:1: error: unreadable JSON")


def test_blank_arch_in_a_stage_row():
    """`arch: ' '` made str.split() empty and [0] raised IndexError. Fix: default x86_64."""
    from testdb.stages import load_stage_table_text

    stages, diags = load_stage_table_text("stages:\n- {name: A-1, context: l0_a, arch: ' '}\n",
                                          "ci/stages.yml")
    assert [s.arch for s in stages] == ["x86_64"] and not diags


@pytest.mark.parametrize("text, message", [
    ("a: !!python/object/apply:os.system ['echo pwned']\n", "unsupported YAML"),
    ("a: " + "9" * 5000 + "\n", "a number is too long"),
    ("multi_gpu_file_changed: {related_paths: " + "[" * 600 + "]" * 600 + "}\n", "nests deeper"),
    ("auto_trigger_tags: {map: 3}\n", "auto_trigger_tags.map must be a list"),
], ids=["python-tag", "5000-digits", "600-deep", "map-not-a-list"])
def test_bad_trigger_files_are_clean_errors(text, message):
    """The PR-trigger loader let ConstructorError (a python/object tag), ValueError (digits),
    a RecursionError later (str() of a 600-deep list) and TypeError (`map: 3`) escape.
    Fix: _safe_yaml turns them into InputError, always checks depth; `map` must be a list."""
    from testdb.index import _load_triggers

    with pytest.raises(InputError) as exc:
        _load_triggers(text, "ci/pr-triggers.yml")
    assert str(exc.value).startswith("ci/pr-triggers.yml:") and message in str(exc.value)


def test_empty_trigger_tags_are_no_tags():
    """`tags:` with nothing after it is None: iterating it raised TypeError."""
    from testdb.index import _load_triggers

    t = _load_triggers("auto_trigger_tags: {map: [{path_prefix: a/, tags: }]}\n", "t.yml")
    assert t.auto_trigger == (("a/", ()),)


# ---- Groovy (testdb/groovy.py) -----------------------------------------------------------------

def _groovy(body: str) -> tuple[list, list]:
    from testdb.groovy import load_groovy_stages_text

    return load_groovy_stages_text("def launchTestJobs(p, f)\n{\n" + body + "\n}\n",
                                   "jenkins/L0_Test.groovy")


def test_groovy_nested_line_comments_do_not_recurse():
    """Each `//` inside a comment was read as another comment, recursively (and re-tokenized):
    a line of slashes raised RecursionError. Fix: at most _MAX_COMMENT_DEPTH levels."""
    stages, _diags = _groovy('x86TestConfigs = [\n"A-1": ["a", "l0_a", 1, 1],\n'
                            + "// " * 5000 + '"B-1": ["b", "l0_b", 1, 1],\n]')
    assert [s.name for s in stages] == ["A-1"]


@pytest.mark.parametrize("entry", [': ["a", "l0_a", 1, 1]', '"A-1" + : ["a", "l0_a", 1, 1]'])
def test_groovy_map_entry_without_a_key(entry):
    """`: value` (no key) and `"x" + :` indexed an empty token list: IndexError.
    Fix: both are reported as unreadable entries."""
    stages, diags = _groovy('x86TestConfigs = [\n"A-1": ["a", "l0_a", 1, 1],\n' + entry + "\n]")
    assert [s.name for s in stages] == ["A-1"]
    assert any(d.loc.line == 5 and d.severity.value == "error" for d in diags), diags


def test_groovy_deep_maps_are_a_diagnostic():
    """Maps nested thousands deep recursed out of the stack. Fix: RecursionError in the reader
    becomes one error at the function's line."""
    stages, diags = _groovy('x86TestConfigs = [' + '"a": [' * 5000)
    assert not stages and diags


def test_groovy_token_flood_is_bounded():
    """A 1 MB line of single-character tokens took ~5 s a megabyte (a generator over every
    operator per character), 2 MB over 10 s. Fix: operators looked up by first character and
    at most _MAX_TOKENS tokens."""
    with no_hang("a 2 MB token flood"), pytest.raises(
            InputError, match=r"^jenkins/L0_Test.groovy:1: over \d+ tokens"):
        _groovy("x86TestConfigs = [" + "[ " * 1_000_000)


# ---- coverage data (auditor/coverage_link.py) --------------------------------------------------

@pytest.mark.parametrize("sql", ["drop table context", "update line_bits set numbits = NULL",
                                 "update line_bits set numbits = ''", "update file set path = ''",
                                 "update coverage_schema set version = 99"])
def test_damaged_coverage_data_is_a_clean_error(sql, ws, tmp_path):
    """coverage.py raised DataError outside the try (contexts_by_lineno), TypeError and
    ValueError on NULL or empty numbits. Fix: reading is one guarded block -> InputError."""
    import sqlite3

    from auditor.coverage_link import covering_tests

    path = tmp_path / ".coverage"
    path.write_bytes(fuzzkit.make_coverage(ws.root))
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()
    try:
        covering_tests(str(path), ws.root, "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py",
                       set(range(1, 60)), set())
    except InputError as exc:
        assert str(exc).startswith(str(path))


# ---- audit JSON fed back to comment / launch / report (reports/inputs.py, cmd_launch.py) -------

def _audit(ws: fuzzkit.Workspace) -> dict:
    return json.loads(fuzzkit.seed_bytes("<generated>", fuzzkit.formats()["audit_json"],
                                         ws.root))


def _breakers(doc: dict) -> list[tuple[str, dict | str]]:
    def changed(path: str, value: object) -> dict:
        d = json.loads(json.dumps(doc))
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        node[int(last) if isinstance(node, list) else last] = value
        return d

    b0 = "behaviours.0"
    guards = doc["behaviours"][0]["guards"]
    tier = next(iter(guards))
    run = f"{b0}.guards.{tier}.0.runs.0"
    return [
        ("deep", "[" * 100_000),
        ("bigint", '{"schema": ' + "9" * 5000 + "}"),
        ("surrogate", json.dumps(changed("summary.sentence", "\ud800"))),
        ("missing_stages ints", changed("missing_stages", [1, None])),
        ("finding guard object", changed("findings.0.guards", [{"x": 1}]))
        if doc["findings"] else ("no findings", changed("findings", [{"severity": "error",
                                                                      "path": "p", "line": 1,
                                                                      "message": "m",
                                                                      "guards": [{"x": 1}]}])),
        ("run path float", changed(f"{run}.path", 1.5)),
        ("run line str", changed(f"{run}.line", "x")),
        ("guard test_id dict", changed(f"{b0}.guards.{tier}.0.test_id", {"a": 1})),
        ("behaviour verdict int", changed(f"{b0}.verdict", 5)),
        ("behaviour tier dict", changed(f"{b0}.tier", {})),
        ("list_changes line str", changed("list_changes", [{"line": "x"}])),
        ("list_changes int", changed("list_changes", [3])),
        ("gates tags int", changed("gates", {"auto_trigger_tags": 3})),
        ("finding rule list", changed("findings", [{"severity": "error", "path": "p", "line": 1,
                                                     "message": "m", "rule": []}])),
    ]


@pytest.mark.parametrize("command", [["comment", "--audit", "{f}"],
                                     ["launch", "--from", "{f}", "--dry-run"],
                                     ["report", "--html", "{out}", "--audit", "{f}"]])
def test_malformed_audit_json_is_exit_2_for_every_reader(command, ws, tmp_path):
    """Each of these crashed at least one of comment / launch / report with exit 3 (TypeError,
    AttributeError, ValueError, RecursionError, UnicodeEncodeError, unhashable dict). Fix:
    reports/inputs.py checks the types the renderers use and reads JSON defensively; launch
    --from reads through the same check (read_audit) instead of its own json.loads."""
    for what, doc in _breakers(_audit(ws)):
        f = tmp_path / "audit.json"
        f.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
        argv = ["--root", ws.root, "--no-cache",
                *[a.format(f=f, out=tmp_path / "rep") for a in command]]
        code, _out, err = fuzzkit.run_cli(argv)
        assert code == 2, f"{what}: exit {code}: {err[-400:]}"
        assert err.startswith(f"error: {f}"), f"{what}: {err}"


def test_launch_from_audit_without_rule(ws, tmp_path):
    """ids_from_audit read f['rule'], which the audit check does not require: KeyError."""
    doc = _audit(ws)
    for f in doc["findings"]:
        f.pop("rule", None)
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(doc))
    code, _, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "launch", "--from",
                                    str(path), "--dry-run"])
    assert code in (0, 1), err


# ---- CLI (reports/cmd_stats.py, reports/cli.py, testdb/files.py, reports/html.py) -----------

def test_stats_json_with_errors_says_why_on_stderr(ws):
    """`stats --format json` exited 2 with nothing on stderr. Fix: the error diagnostics are
    printed there too (the JSON still holds them all)."""
    bad = b"ctx:\n- tests: [a.py::b]\n  condition: 3\n"
    with ws.placed("tests/integration/test_lists/test-db/l0_bad.yml", bad):
        code, out, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "stats", "--format",
                                          "json"])
    assert code == 2
    assert json.loads(out)["errors"] >= 1
    assert "tests/integration/test_lists/test-db/l0_bad.yml:3: error: " in err


def test_unwritable_output_is_exit_2(ws):
    """`report --html /proc/x/r` or `audit -o /proc/x/a.json` raised FileNotFoundError: exit 3
    'this is a bug'. Fix: cli.main reports OSError as `error: PATH: reason` with exit 2."""
    for cmd in (["report", "--html", "/proc/nope/report"],
                ["audit", "--diff", os.path.join(ws.root, "pr.diff"), "-o", "/proc/nope/a.json"]):
        code, _out, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", *cmd])
        assert code == 2 and err.startswith("error: /proc/nope"), err


# ---- the index cache and discovery (testdb/index.py) -------------------------------------------

def test_cache_with_a_flipped_length_byte_is_a_miss(tmp_path, monkeypatch):
    """A damaged cache pickle raised MemoryError (a length byte flipped to gigabytes) or
    exceptions _cache_get did not catch: exit 3. Fix: the file carries a sha256 of its payload,
    checked before unpickling; any unpickling error is a miss."""
    from testdb import index

    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path))
    index.load(fuzzkit.EXAMPLE, use_cache=True)
    (path,) = tmp_path.glob("index-*.pickle")
    data = bytearray(path.read_bytes())
    from testdb.files import _SEAL

    n = len(_SEAL) + 32
    payload = pickle.dumps(["x" * 10])
    # An unchecked unpickler would be asked for a 2 GB string:
    evil = payload.replace(b"\x8c\x0a", b"\x8d\x00\x00\x00\x80\x00\x00\x00\x00", 1)
    for blob in (bytes(data[:n]) + evil, bytes(data[: n + 100]), b"\x80\x04junk"):
        path.write_bytes(blob)
        assert index.load(fuzzkit.EXAMPLE, use_cache=True).contexts
    rng = random.Random(5)
    for _ in range(20):
        bad = bytearray(data)
        bad[rng.randrange(len(bad))] ^= 0x40
        path.write_bytes(bytes(bad))
        assert index.load(fuzzkit.EXAMPLE, use_cache=True).contexts


def test_symlink_loops_and_links_out_of_the_root(tmp_path):
    """Discovery used glob's `**`, which follows directory symlinks: a link to `/` walked the
    disk, a link to a parent looped (300+ duplicate files), and files symlinked from outside
    were read. Fix: os.walk without following links; discovered files that resolve outside
    --root are reported (`outside-root`) and not read."""
    import shutil

    from testdb.index import Sources, load

    root = tmp_path / "c"
    shutil.copytree(fuzzkit.EXAMPLE, root)
    qa = root / "tests/integration/test_lists/qa"
    (qa / "loop").symlink_to(tmp_path, target_is_directory=True)
    (qa / "disk").symlink_to("/", target_is_directory=True)
    (tmp_path / "secret.yml").write_text("ctx:\n- tests: [secret.py::t]\n")
    (root / "tests/integration/test_lists/test-db/l0_x.yml").symlink_to(tmp_path / "secret.yml")
    with no_hang("discovery through symlink loops"):
        src = Sources.discover(str(root))
    assert src.qa_txt == ("tests/integration/test_lists/qa/llm_function_core.txt",)
    assert src.escaped == ("tests/integration/test_lists/test-db/l0_x.yml",)
    idx = load(str(root), use_cache=False)
    assert "ctx" not in idx.contexts
    assert [(str(d.loc), d.rule) for d in idx.errors] == [
        ("tests/integration/test_lists/test-db/l0_x.yml", "outside-root")]


def test_readers_never_see_a_loc_outside_their_file():
    """Guard for the fuzz oracle itself: a diagnostic carries the file it was parsing."""
    res = load_testdb_text("ctx:\r- tests: [a.py::b]\r  condition: 3\r", L0)
    assert all(d.loc.path == L0 for d in res.diagnostics)
    assert SourceLoc(L0, 3) in [d.loc for d in res.diagnostics]


def test_report_failure_keeps_the_previous_report_when_restoring_fails(tmp_path, monkeypatch, ws):
    """write_report moved the old report aside, failed to put the new one in place, failed to
    put the old one back, and then deleted the old one with the temp dirs. Fix: the aside
    copy is only removed once a report is in place (covered in test_concurrency too)."""
    out = tmp_path / "report"
    assert fuzzkit.run_cli(["--root", ws.root, "--no-cache", "report", "--html", str(out)])[0] == 0
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda s, d: (_ for _ in ()).throw(OSError(28, "full", d))
                        if os.path.abspath(str(d)) == str(out) else real(s, d))
    code, _, _err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "report", "--html",
                                    str(out)])
    monkeypatch.setattr(os, "replace", real)
    assert code == 2
    kept = [p for p in Path(tmp_path).iterdir() if p.name.startswith(".report.old-")]
    assert kept and (kept[0] / "report" / "index.html").is_file()
