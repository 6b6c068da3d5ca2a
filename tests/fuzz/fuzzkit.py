"""Shared fuzzing kit: seeds from the real data, mutators, targets, outcome classes.

Used by the hypothesis tests in ``tests/fuzz`` (a few hundred cases in CI) and by the runner
``benchmarks/fuzz.py`` (tens of thousands of cases). A *case* is a format, a real seed file, a
chain of mutations and a way to run it (a parser function directly, or the CLI in-process on a
small checkout). Every case must end in one of the accepted outcomes:

- ``ok``       the input was accepted (CLI exit 0; a parser returned without error diagnostics)
- ``error``    a clean error: exit 2 / ``TestDbError`` / error diagnostics, naming ``path:line``
- ``findings`` CLI exit 1 (the gate failed or lint found problems)

and never in ``crash`` (exit 3, an uncaught exception, a traceback, a malformed diagnostic) or
``hang`` (over the per-case time bound).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data", "trtllm")
EXAMPLE = os.path.join(REPO, "examples", "flashinfer-reuse")
GROOVY_FIXTURE = os.path.join(REPO, "tests", "testdb", "fixtures", "groovy", "L0_Test.groovy")
AUDIT_FIXTURE = os.path.join(REPO, "tests", "reports", "fixtures", "flashinfer-audit.json")
# Launch results written by real runs on H200s (docs/gpu-verification.md).
RESULTS_FIXTURES = tuple(os.path.join(REPO, "docs", "gpu-run", f"results-{n}.json")
                         for n in ("every-test", "all-gpus", "one-gpu"))

TESTDB_DIR = "tests/integration/test_lists/test-db"
QA_DIR = "tests/integration/test_lists/qa"
WAIVES = "tests/integration/test_lists/waives.txt"
DURATIONS = "tests/integration/defs/.test_durations"

OUTCOMES = ("ok", "error", "findings", "crash", "hang")
InputErrorType = __import__("testdb.errors", fromlist=["InputError"]).InputError
MB = 1024 * 1024


# ---- seeds -------------------------------------------------------------------------------------

def _rel(*parts: str) -> str:
    return os.path.join(DATA, *parts)


def _files(d: str, ext: str) -> list[str]:
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(ext))


@dataclass(frozen=True)
class Format:
    """One input format: its real seed files, where a mutated file goes in a checkout, the CLI
    commands that read it, and whether it is text (YAML/JSON/lines) or binary."""

    name: str
    seeds: tuple[str, ...]
    place: str  # path inside the checkout the mutated file replaces (or is added as)
    commands: tuple[tuple[str, ...], ...]
    yaml: bool = False
    json: bool = False
    binary: bool = False


DATA_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("stats",), ("lint",), ("where", "test_chunked_prefill"),
    ("audit", "--diff", "{diff}", "--format", "json"), ("stats", "--format", "json"),
)


def formats() -> dict[str, Format]:
    """Every input format, seeded from the real files in data/trtllm and the example."""
    tdb = _files(_rel(TESTDB_DIR), ".yml")
    qa_yaml = _files(_rel(QA_DIR), ".yml") + _files(_rel(QA_DIR, "test-db"), ".yml")
    qa_txt = _files(_rel(QA_DIR), ".txt")
    ex = os.path.join(EXAMPLE, TESTDB_DIR)
    return {f.name: f for f in (
        Format("testdb_yaml", tuple(tdb + _files(ex, ".yml")), f"{TESTDB_DIR}/l0_h100.yml",
               DATA_COMMANDS, yaml=True),
        Format("qa_yaml", tuple(qa_yaml), f"{QA_DIR}/fuzz.yml", DATA_COMMANDS, yaml=True),
        Format("qa_list", tuple([*qa_txt, os.path.join(EXAMPLE, QA_DIR, "llm_function_core.txt")]),
               f"{QA_DIR}/llm_function_core.txt", DATA_COMMANDS),
        Format("waives", (_rel(WAIVES), os.path.join(EXAMPLE, WAIVES)), WAIVES, DATA_COMMANDS),
        Format("stages_yaml", (_rel("ci", "stages.yml"), os.path.join(EXAMPLE, "ci", "stages.yml")),
               "ci/stages.yml", DATA_COMMANDS, yaml=True),
        Format("groovy", (GROOVY_FIXTURE,), "jenkins/L0_Test.groovy", DATA_COMMANDS),
        Format("triggers", (_rel("ci", "pr-triggers.yml"),
                            os.path.join(EXAMPLE, "ci", "pr-triggers.yml")),
               "ci/pr-triggers.yml", DATA_COMMANDS, yaml=True),
        Format("durations", (_rel(DURATIONS), os.path.join(EXAMPLE, DURATIONS)), DURATIONS,
               DATA_COMMANDS, json=True),
        Format("diff", (os.path.join(EXAMPLE, "pr.diff"),
                        os.path.join(EXAMPLE, "pr-no-thin-guard.diff")), "fuzz.diff",
               (("audit", "--diff", "{file}"), ("audit", "--diff", "{file}", "--format", "json"),
                ("comment", "--diff", "{file}"))),
        Format("coverage", ("<generated>",), "fuzz.coverage",
               (("audit", "--diff", "{diff}", "--coverage", "{file}", "--format", "json"),),
               binary=True),
        Format("cache", ("<generated>",), "<cache>",
               (("stats",), ("where", "test_chunked_prefill"), ("lint",)), binary=True),
        Format("audit_json", ("<generated>", AUDIT_FIXTURE), "fuzz-audit.json",
               (("comment", "--audit", "{file}"), ("comment", "--audit", "{file}", "--format",
                                                   "json"),
                ("launch", "--from", "{file}", "--dry-run"),
                ("launch", "--from", "{file}", "--dry-run", "--format", "json"),
                ("report", "--html", "{out}", "--audit", "{file}")), json=True),
        Format("results_json", RESULTS_FIXTURES, "fuzz-results.json",
               (("comment", "--audit", AUDIT_FIXTURE, "--results", "{file}"),
                ("comment", "--audit", AUDIT_FIXTURE, "--results", "{file}", "--format", "json"),
                ("report", "--html", "{out}", "--audit", AUDIT_FIXTURE, "--results", "{file}")),
               json=True),
    )}


_SEED_CACHE: dict[str, bytes] = {}


def seed_bytes(path: str, fmt: Format, root: str | None = None) -> bytes:
    """The bytes of a seed file; generated seeds (coverage data, audit JSON) are made once."""
    if path != "<generated>":
        if path not in _SEED_CACHE:
            with open(path, "rb") as fh:
                _SEED_CACHE[path] = fh.read()
        return _SEED_CACHE[path]
    key = f"<generated:{fmt.name}:{root}>"
    if key not in _SEED_CACHE:
        make = {"coverage": make_coverage, "cache": make_cache}.get(fmt.name, make_audit_json)
        _SEED_CACHE[key] = make(root or EXAMPLE)
    return _SEED_CACHE[key]


def make_coverage(root: str) -> bytes:
    """A real coverage.py data file (SQLite) with per-test contexts over the example's code."""
    from coverage import CoverageData

    d = tempfile.mkdtemp(prefix="fuzz-cov-")
    try:
        data = CoverageData(basename=os.path.join(d, ".coverage"))
        src = os.path.join(os.path.realpath(root),
                           "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py")
        for ctx, lines in (
            ("tests/unittest/_torch/executor/test_executor_config.py::test_default|run",
             range(20, 32)),
            ("tests/integration/defs/accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::"
             "test_chunked_prefill[attn_backend=FLASHINFER]|run", range(1, 40)),
            ("", range(1, 5)),
        ):
            data.set_context(ctx)
            data.add_lines({src: list(lines)})
        data.write()
        with open(os.path.join(d, ".coverage"), "rb") as fh:
            return fh.read()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def cache_file(root: str) -> str:
    """The index cache file of ``root`` (made by loading it with the cache on)."""
    import glob

    from testdb.index import cache_dir, load

    shutil.rmtree(cache_dir(), ignore_errors=True)  # so the one file left is this root's
    load(root, use_cache=True)
    found = sorted(glob.glob(os.path.join(cache_dir(), "index-*.pickle")), key=os.path.getmtime)
    if not found:
        raise RuntimeError(f"no index cache written under {cache_dir()}")
    return found[-1]


def make_cache(root: str) -> bytes:
    """The pickled index cache of ``root`` (TESTDB_CACHE_DIR must point at a private dir)."""
    with open(cache_file(root), "rb") as fh:
        return fh.read()


def make_audit_json(root: str) -> bytes:
    """The audit JSON `testdb audit --diff pr.diff --format json` writes for the example."""
    code, out, err = run_cli(["--root", root, "--no-cache", "audit", "--diff",
                              os.path.join(root, "pr.diff"), "--format", "json"])
    if code not in (0, 1):
        raise RuntimeError(f"audit of the example failed ({code}): {err}")
    return out.encode("utf-8")


# ---- mutators ----------------------------------------------------------------------------------

Mutator = Callable[[bytes, random.Random, Format], bytes]
NASTY_IDS = (
    "accuracy/test_x.py::TestA::test_b[a::b-c d]",
    "accuracy/test_x.py::TestA::test_b[[nested]]",
    "accuracy/test_x.py::TestA::test_b[SKIP (x)]",
    "accuracy/test_x.py::TestA::test_b[ TIMEOUT (5) ]",
    "full:GPU-A/accuracy/test_x.py::test_b",
    "full:/accuracy/test_x.py::test_b",
    "unittest/_torch -k \"a and not (b or c)\" --ignore=x",
    "unittest/_torch -k 'unterminated",
    "examples/test_ü.py::test_ünïcödé[模型-𝔘]",
    "t.py::test_rtl[\u202eevil\u202c]",
    "t.py::test_zw[a\u200bb\ufeffc]",
    "t.py::test_sep[a\u2028b\u2029c\x85d]",
    "t.py::test_ctl[\x0b\x0c\x1c\x1d\x1e]",
    "t.py::" + "C::" * 300 + "f",
    "t.py::f[" + "x" * 20000 + "]",
    "t.py::f[" + "[" * 5000 + "]",
    "t.py::f # comment with SKIP (not a marker) TIMEOUT (x)",
    "t.py::f TIMEOUT (" + "9" * 5000 + ")",
    "t.py::f TIMEOUT (\u00b2)",
    "t.py::f TIMEOUT (\u0663)",
    "t.py::f TIMEOUT (-1)",
    "t.py::f SKIP (" + "(" * 3000,
    "t.py::f" + " SKIP" * 2000,
    "t.py::f ISOLATION TIMEOUT (30) XFAIL (a) SKIP (b)",
    "::",
    "a.py::",
    "[",
    "]",
    "a.py::f[]",
    "a.py::f]",
    "%if x:",
    "${mako}",
    "\\",
    "'quoted'",
    '"dq::x"',
)
YAML_SNIPPETS = (
    "!!python/object/apply:os.system ['echo pwned']",
    "!!python/name:os.system",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!custom tag",
    "&x [*x]",
    "*undefined",
    "{? [a, b] : c}",
    "<<: *x",
    "---",
    "...",
    "%YAML 1.1",
    "%TAG ! tag:x,2000:",
    "? complex",
    ": value",
    "|\n  literal",
    ">-\n  folded",
    "'unterminated",
    "\"esc \\x00 \\uD800\"",
    "\"a.py::f[\\x00\\x1b[31m]\"",
    "\"accuracy/test_x.py::T::f[\\0]\"",
    ".nan",
    "1e999",
    "0x" + "f" * 500,
    "9" * 5000,
    "~",
    "null",
    "[]",
    "{}",
)


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    i = data.find(b"\n")
    while i >= 0 and len(starts) < 200_000:
        starts.append(i + 1)
        i = data.find(b"\n", i + 1)
    return starts


def m_flip(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        i = rng.randrange(len(b))
        b[i] = b[i] ^ (1 << rng.randrange(8)) if rng.random() < 0.7 else rng.randrange(256)
    return bytes(b)


def m_truncate(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    if len(data) < 2:
        return b""
    kind = rng.choice(("any", "mid-line", "mid-token", "mid-multibyte", "line-end", "empty"))
    if kind == "empty":
        return b""
    if kind == "mid-multibyte":
        spots = [i for i in range(len(data)) if 0x80 <= data[i] < 0xC0][:5000]
        if spots:
            return data[: rng.choice(spots)]
    if kind == "mid-token":
        ms = [m.start() + 1 for m in re.finditer(rb"[A-Za-z0-9_]{2,}", data[:200_000])]
        if ms:
            return data[: rng.choice(ms)]
    if kind == "mid-line":
        starts = _line_starts(data)
        s = rng.choice(starts)
        end = data.find(b"\n", s)
        end = len(data) if end < 0 else end
        if end - s > 1:
            return data[: rng.randrange(s + 1, end)]
    if kind == "line-end":
        starts = _line_starts(data)
        return data[: max(0, rng.choice(starts) - 1)]
    return data[: rng.randrange(len(data))]


def m_tabs(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    if rng.random() < 0.5:
        return data.replace(b"  ", b"\t")
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 5)):
        i = rng.randrange(len(lines))
        lines[i] = re.sub(rb"^ +", lambda m: b"\t" * max(1, len(m.group()) // 2), lines[i])
    return b"\n".join(lines)


def m_newlines(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    return rng.choice((
        lambda: data.replace(b"\n", b"\r\n"),
        lambda: data.replace(b"\n", b"\r"),
        lambda: data.replace(b"\n", b"\n\n"),
        lambda: data.rstrip(b"\n"),
        lambda: data + b"\n" * 1000,
        lambda: data.replace(b"\n", "\u2028".encode(), rng.randint(1, 3)),
        lambda: data.replace(b"\n", b"\x85\n", rng.randint(1, 3)),
        lambda: data.replace(b"\n", b"\x0c\n", rng.randint(1, 3)),
    ))()


def m_bom(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    return rng.choice((b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff",
                       b"\x00\x00\xfe\xff")) + data


def m_invalid_utf8(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    bad = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80",
                      b"\x80", b"\xe2\x82", b"\x00", b"\xfe\xfe"))
    i = rng.randrange(len(data) + 1)
    return data[:i] + bad + data[i:]


LONG = 1_000_000


def m_long_line(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    unit = rng.choice((b"a", b"a.py::b ", b"[ ", b"( ", b"- ", b"::", b"#", b" ", b"\t", b"%",
                       b"SKIP ", b"x" * 7 + b" TIMEOUT (1) ", "模".encode(), b"\\", b"\"",
                       b"${", b"&a ", b"*a ", b"/*", b"//", b"'", b"[\"a\", ", b"{\"a\": "))
    line = (unit * (LONG // len(unit) + 1))[:LONG]
    starts = _line_starts(data)
    i = rng.choice(starts)
    if fmt.yaml and rng.random() < 0.5:
        line = b"c:\n- tests:\n  - " + line
    return data[:i] + line + b"\n" + data[i:]


def m_deep(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    n = rng.choice((50, 200, 1000, 10_000, 100_000))
    if fmt.json:
        deep = rng.choice((b"[" * n, b'{"a":' * n, b"[" * n + b"]" * n))
    elif fmt.yaml or fmt.name in ("testdb_yaml", "qa_yaml"):
        deep = rng.choice((b"[" * n, b"{a: " * n, b"- " * n + b"x",
                           b"".join(b" " * i + b"- \n" for i in range(min(n, 3000))),
                           b"a:\n" + b"".join(b" " * (i + 1) + b"b:\n"
                                              for i in range(min(n, 3000))),
                           b"[" * n + b"]" * n))
    elif fmt.name == "groovy":
        deep = rng.choice((b"def x86TestConfigs = " + b"[" * n, b"(" * n, b"{" * n,
                           b"/*" * n, b"\"${" * n))
    else:
        deep = rng.choice((b"[" * n, b"(" * n, b"t.py::f[" + b"[" * n + b"]"))
    i = rng.choice(_line_starts(data))
    return data[:i] + deep + b"\n" + data[i:]


def m_dup_lines(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    lines = data.split(b"\n")
    op = rng.choice(("dup", "dup-block", "del", "swap", "indent", "shuffle"))
    i = rng.randrange(len(lines))
    if op == "dup":
        lines.insert(i, lines[i])
    elif op == "dup-block":
        j = min(len(lines), i + rng.randint(1, 30))
        lines[j:j] = lines[i:j]
    elif op == "del":
        del lines[i : i + rng.randint(1, 5)]
    elif op == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "indent":
        lines[i] = b" " * rng.choice((1, 2, 3, 8)) + lines[i] if rng.random() < 0.5 \
            else lines[i].lstrip()
    else:
        seg = lines[i : i + 20]
        rng.shuffle(seg)
        lines[i : i + 20] = seg
    return b"\n".join(lines)


def m_dup_keys(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    """Repeat a mapping key line (YAML) or a JSON member."""
    if fmt.json:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        m = list(re.finditer(r'"([^"\\]{1,80})": ', text))
        if not m:
            return data
        k = rng.choice(m)
        dup = f'"{k.group(1)}": null, '
        return (text[: k.start()] + dup + text[k.start():]).encode("utf-8")
    keys = [m for m in re.finditer(rb"(?m)^( *)([\w.-]+):[^\n]*\n", data[:500_000])]
    if not keys:
        return m_dup_lines(data, rng, fmt)
    k = rng.choice(keys)
    return data[: k.end()] + k.group(0) + data[k.end():]


def m_yaml_bomb(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    levels = rng.choice((5, 9, 12))
    width = rng.choice((5, 9, 10))
    lines = ["lol0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    bomb = "\n".join(lines) + "\n"
    kind = rng.choice(("top", "tests", "condition", "recursive", "merge"))
    if kind == "tests":
        bomb += f"bomb:\n- condition: {{}}\n  tests: *l{levels - 1}\n"
    elif kind == "condition":
        bomb += f"bomb:\n- condition: {{terms: *l{levels - 1}}}\n  tests: [a.py::b]\n"
    elif kind == "recursive":
        bomb = "a: &a [*a]\n"
    elif kind == "merge":
        bomb += f"m: &m {{a: *l{levels - 1}}}\nbomb: {{<<: [*m, *m, *m]}}\n"
    if fmt.name == "stages_yaml":
        bomb += f"stages: *l{levels - 1}\n"
    if rng.random() < 0.5:
        return bomb.encode() + data
    return data + b"\n" + bomb.encode()


def m_node_ids(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    """Replace an id-like token with an unusual but legal (or nearly legal) node id."""
    nasty = rng.choice(NASTY_IDS).encode("utf-8")
    if fmt.json:
        nasty = json.dumps(nasty.decode("utf-8")).encode()[1:-1]
    # Find ".py::" and widen to the id around it (a regex with a leading `[\w./-]+` backtracks
    # quadratically over a 1 MB line of slashes).
    hits: list[int] = []
    k = data.find(b".py::")
    while k >= 0 and len(hits) < 5000:
        hits.append(k)
        k = data.find(b".py::", k + 5)
    if not hits:
        i = rng.choice(_line_starts(data))
        prefix = b"- " if fmt.yaml else b""
        return data[:i] + prefix + nasty + b"\n" + data[i:]
    k = rng.choice(hits)
    start = k
    while start > 0 and k - start < 300 and (chr(data[start - 1]).isalnum()
                                              or data[start - 1] in b"_./-"):
        start -= 1
    end = k + 5
    while end < len(data) and end - k < 3000 and data[end] not in b" \t\r\n\"'#,":
        end += 1
    if fmt.yaml and rng.random() < 0.5:
        nasty = b"'" + nasty.replace(b"'", b"''") + b"'"
    return data[:start] + nasty + data[end:]


def m_snippet(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    snip = rng.choice(YAML_SNIPPETS).encode("utf-8")
    if fmt.json:
        snip = rng.choice((b"NaN", b"Infinity", b"-Infinity", b"-0", b"1e400", b"9" * 5000,
                           b'"\\ud800"', b'"\\u0000"', b"true", b"null", b"[]", b"{}", b"\"x\"",
                           b"-1", b"1.5"))
        value = rb":\s*(\"[^\"\\\n]*\"|-?[\d.eE+-]+|true|false|null)"
        ms = list(re.finditer(value, data[:500_000]))
        if ms:
            m = rng.choice(ms)
            return data[: m.start(1)] + snip + data[m.end(1):]
    ms = list(re.finditer(rb"(?m)(: |- )([^\n]*)$", data[:500_000]))
    if ms and rng.random() < 0.7:
        m = rng.choice(ms)
        return data[: m.start(2)] + snip + data[m.end(2):]
    i = rng.choice(_line_starts(data))
    return data[:i] + snip + b"\n" + data[i:]


def m_splice(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    """Insert lines from a seed of another format (YAML into lists, lists into JSON, ...)."""
    other = rng.choice([f for f in formats().values()
                        if not f.binary and f.seeds[0] != "<generated>"])
    src = seed_bytes(rng.choice(other.seeds), other)
    lines = src.split(b"\n")
    i = rng.randrange(len(lines))
    chunk = b"\n".join(lines[i : i + rng.randint(1, 10)])
    j = rng.choice(_line_starts(data))
    return data[:j] + chunk + b"\n" + data[j:]


def m_struct(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    """Parse, change one value's type or content somewhere in the tree, write back."""
    try:
        text = data.decode("utf-8")
        if fmt.json:
            doc = json.loads(text)
        elif fmt.yaml:
            import yaml

            from testdb.yamlnodes import compose

            compose(text, "m.yml", scan_depth=True)  # libyaml would crash on deep nesting
            doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        else:
            return m_flip(data, rng, fmt)
    except Exception:
        return m_flip(data, rng, fmt)
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any, depth: int) -> None:
        if len(paths) > 20_000 or depth > 30:
            return
        if isinstance(node, dict):
            for k in list(node):
                paths.append((node, k))
                walk(node[k], depth + 1)
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i], depth + 1)

    walk(doc, 0)
    weird: list[Any] = [None, 0, -1, 2**63, 1.5, float("nan") if not fmt.json else -0.0, "",
                        "x" * 10_000, [], {}, True, False, ["a", 1, None], {"a": {"b": []}},
                        "../../etc/passwd", "/etc/passwd", "a\nb", "<script>alert(1)</script>",
                        "|`*_[]()#", "模型", "\u202e", 10**30, "\ud800", "a\x00b"]
    for _ in range(rng.randint(1, 3)):
        if not paths:
            doc = rng.choice(weird)
            break
        parent, key = rng.choice(paths)
        op = rng.random()
        if op < 0.7:
            parent[key] = rng.choice(weird)
        elif op < 0.85 and isinstance(parent, dict):
            del parent[key]
            paths = [(p, k) for p, k in paths if not (p is parent and k == key)]
        elif isinstance(parent[key], str) and len(parent[key]) < 1000:
            parent[key] = parent[key] * rng.choice((0, 2, 1000))
        else:
            parent[key] = rng.choice(weird)
    try:
        if fmt.json:
            return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8")
        import yaml

        return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode("utf-8")
    except Exception:
        return m_flip(data, rng, fmt)


def m_sqlite(data: bytes, rng: random.Random, fmt: Format) -> bytes:
    """Coverage data: change rows of the SQLite database (contexts, paths, line bits, schema)."""
    d = tempfile.mkdtemp(prefix="fuzz-sql-")
    path = os.path.join(d, "c.db")
    try:
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            con = sqlite3.connect(path)
            stmts = (
                "update context set context = ?",
                "update file set path = ?",
                "update line_bits set numbits = ?",
                "update coverage_schema set version = ?",
                "delete from line_bits",
                "drop table context",
                "insert into context (context) values (?)",
                "update meta set value = ? where key = 'has_arcs'",
            )
            stmt = rng.choice(stmts)
            val = rng.choice((None, "", "x" * 5000, b"\xff" * 64, bytes(rng.randrange(256)
                                                                          for _ in range(32)),
                              -1, 99, "../../etc/passwd", "t.py::f[模]|run", "|run", "a|b|c"))
            with contextlib.suppress(sqlite3.Error):
                con.execute(stmt, (val,)) if "?" in stmt else con.execute(stmt)
                con.commit()
            con.close()
        except sqlite3.Error:
            return m_flip(data, rng, fmt)
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        shutil.rmtree(d, ignore_errors=True)


MUTATORS: dict[str, Mutator] = {
    "flip": m_flip, "truncate": m_truncate, "tabs": m_tabs, "newlines": m_newlines,
    "bom": m_bom, "invalid_utf8": m_invalid_utf8, "long_line": m_long_line, "deep": m_deep,
    "dup_lines": m_dup_lines, "dup_keys": m_dup_keys, "yaml_bomb": m_yaml_bomb,
    "node_ids": m_node_ids, "snippet": m_snippet, "splice": m_splice, "struct": m_struct,
}
BINARY_MUTATORS: dict[str, Mutator] = {"flip": m_flip, "truncate": m_truncate,
                                       "sqlite": m_sqlite, "bom": m_bom}


def mutators_for(fmt: Format) -> dict[str, Mutator]:
    if fmt.binary:
        return BINARY_MUTATORS
    if fmt.yaml or fmt.json:
        return MUTATORS
    return {k: v for k, v in MUTATORS.items() if k not in ("struct",)}


def mutate(data: bytes, rng: random.Random, fmt: Format, names: list[str]) -> bytes:
    table = mutators_for(fmt)
    for n in names:
        data = table[n](data, rng, fmt)
    return data


# ---- running -----------------------------------------------------------------------------------

class Hang(BaseException):
    """Raised by the per-case alarm; a BaseException so library ``except Exception`` misses it."""


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Raise ``Hang`` in the main thread after ``seconds`` (Python code only; a stuck C call is
    caught by the runner's watchdog, which kills the worker)."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"over the {seconds:g} s time bound")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def memory_cap(extra_mb: int) -> Iterator[None]:
    """Cap this process's address space at its current size plus ``extra_mb`` (Linux), so a
    runaway allocation is a MemoryError in the case, not a dead machine."""
    try:
        import resource

        with open("/proc/self/statm") as fh:
            size = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        old = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + extra_mb * MB
        if old[1] != resource.RLIM_INFINITY:
            cap = min(cap, old[1])
        resource.setrlimit(resource.RLIMIT_AS, (cap, old[1]))
    except (ImportError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``testdb ARGV`` in-process through the real entry point; returns (exit, stdout, stderr)."""
    from reports.cli import main

    # Strict UTF-8 streams like a real terminal or pipe: a lone surrogate from a JSON escape
    # must not pass here and fail only in production.
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    texts = []
    for stream in (out, err):
        try:
            stream.flush()
        except UnicodeEncodeError:
            code = 99  # unreachable unless a write half-succeeded; reported as a crash
        texts.append(stream.buffer.getvalue().decode("utf-8", "replace"))  # type: ignore[attr-defined]
    return code, texts[0], texts[1]


_DIAG_LINE = re.compile(r"^(?P<path>[^\n]+?):(?P<line>\d+): (error|warning|info): ")
_ERROR_LINE = re.compile(r"^error: \S")


def check_cli(code: int, out: str, err: str, named: tuple[str, ...] = (),
              allow_located: bool = False) -> tuple[str, str]:
    """Classify a CLI run; returns (outcome, detail). ``named``: names one of which an exit-2
    message must mention (the mutated file); ``allow_located``: a ``path:line`` of another file
    will do (a diff that does not apply names the checkout file and line that differ)."""
    if "Traceback (most recent call last)" in out + err:
        return "crash", "traceback in output: " + err[-400:]
    if code == 0:
        return "ok", ""
    if code == 1:
        return "findings", ""
    if code == 2:
        lines = err.splitlines()
        if not any(_ERROR_LINE.match(ln) or _DIAG_LINE.match(ln) or ln.startswith("Error: ")
                   for ln in lines):
            return "crash", f"exit 2 without an `error: path:line: ...` message: {err[-400:]!r}"
        located = re.search(r"(?m)^(error: )?[^\s:][^\n:]*:\d+: ", err)
        if named and not any(n in err for n in named) and not (located and allow_located):
            return "crash", (f"exit 2 but the message does not name the input {named}: "
                             f"{err[-400:]!r}")
        return "error", ""
    return "crash", f"exit {code}: {err[-600:]}"


def check_diagnostics(diags: Any, path: str, text: str) -> str:
    """Every diagnostic names ``path`` and a line inside the file (0 = the whole file)."""
    from testdb.errors import Diagnostic, Severity

    nlines = max(text.count("\n"), len(text.splitlines())) + 1  # YAML also breaks at \r, \x85
    for d in diags:
        if not isinstance(d, Diagnostic) or not isinstance(d.severity, Severity):
            return f"not a Diagnostic: {d!r}"
        if d.loc.path != path:
            return f"diagnostic names {d.loc.path!r}, not {path!r}: {d}"
        if not (0 <= d.loc.line <= nlines + 1):
            return f"diagnostic line {d.loc.line} outside the file ({nlines} lines): {d}"
        if not d.message or not isinstance(d.message, str):
            return f"empty message: {d!r}"
    return ""


def _error_named(exc: Exception, names: tuple[str, ...]) -> str:
    text = str(exc)
    if not any(n in text for n in names):
        return f"error does not name the input {names}: {text[:300]}"
    return ""


@dataclass
class Result:
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    peak_rss_mb: float = 0.0


@dataclass
class Workspace:
    """A private copy of the example checkout (per worker) with the generated seeds."""

    base: str
    root: str = ""
    out: str = ""
    cache: str = ""
    _index: Any = field(default=None, repr=False)

    @classmethod
    def make(cls, base: str | None = None) -> Workspace:
        base = base or tempfile.mkdtemp(prefix="testdb-fuzz-")
        ws = cls(base)
        ws.root = os.path.join(base, "root")
        ws.out = os.path.join(base, "out")
        ws.cache = os.path.join(base, "cache")
        if not os.path.isdir(ws.root):
            shutil.copytree(EXAMPLE, ws.root, symlinks=True)
        os.makedirs(ws.out, exist_ok=True)
        os.makedirs(ws.cache, exist_ok=True)
        return ws

    def index(self) -> Any:
        if self._index is None:
            from testdb.index import load

            self._index = load(self.root, use_cache=False)
        return self._index

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def write_out(self, name: str, data: bytes) -> str:
        """``data`` as the file ``name`` beside the checkout; its path."""
        path = os.path.join(self.out, name)
        with open(path, "wb") as fh:
            fh.write(data)
        return path

    @contextlib.contextmanager
    def placed(self, rel: str, data: bytes) -> Iterator[str]:
        """``data`` at ``root/rel`` for the duration; the original (or nothing) afterwards."""
        path = os.path.join(self.root, rel)
        old = None
        if os.path.exists(path):
            with open(path, "rb") as fh:
                old = fh.read()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            yield path
        finally:
            if old is None:
                os.unlink(path)
            else:
                with open(path, "wb") as fh:
                    fh.write(old)


# -- parser-direct targets: (data, ws, rng) -> (outcome, detail) -------------------------------

def _text(data: bytes, shown: str) -> str:
    from testdb.files import decode

    return decode(data, shown)


def _diag_outcome(diags: Any, path: str, text: str) -> tuple[str, str]:
    from testdb.errors import Severity

    bad = check_diagnostics(diags, path, text)
    if bad:
        return "crash", bad
    return ("error" if any(d.severity is Severity.ERROR for d in diags) else "ok"), ""


def p_testdb(data: bytes, ws: Workspace, rng: random.Random, kind: str = "l0") -> tuple[str, str]:
    from testdb.testdb_yaml import load_testdb_text

    path = "tests/integration/test_lists/test-db/l0_fuzz.yml"
    text = _text(data, path)
    res = load_testdb_text(text, path, kind)
    for ctx in res.contexts:
        for b in ctx.blocks:
            for e in b.entries:
                e.node, e.base, e.ci_node_id, e.unittest_args  # noqa: B018 - properties must not raise
    return _diag_outcome(res.diagnostics, path, text)


def p_list(data: bytes, ws: Workspace, rng: random.Random, waive: bool = False) -> tuple[str, str]:
    from testdb.lists import load_list_text

    path = WAIVES if waive else f"{QA_DIR}/fuzz.txt"
    text = _text(data, path)
    res = load_list_text(text, path, waive=waive)
    for e in res.entries:
        e.node, e.base, e.ci_node_id, e.unittest_args, e.unittest_path  # noqa: B018
    return _diag_outcome(res.diagnostics, path, text)


def p_stages(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from testdb.index import Triggers
    from testdb.pipeline import stage_placements
    from testdb.stages import load_stage_table_text, stage_facts

    path = "ci/stages.yml"
    text = _text(data, path)
    stages, diags = load_stage_table_text(text, path)
    for s in stages:
        stage_facts(s)
    stage_placements(stages, Triggers(("x",), (("y", ("deepseek",)),)))
    return _diag_outcome(diags, path, text)


def p_groovy(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from testdb.groovy import load_groovy_stages_text
    from testdb.stages import stage_facts

    path = "jenkins/L0_Test.groovy"
    text = _text(data, path)
    stages, diags = load_groovy_stages_text(text, path)
    for s in stages:
        stage_facts(s)
    return _diag_outcome(diags, path, text)


def p_durations(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from testdb.lists import load_durations_text

    path = DURATIONS
    text = _text(data, path)
    out, diags = load_durations_text(text, path)
    if not all(isinstance(k, str) and isinstance(v, float) for k, v in out.items()):
        return "crash", "durations hold non-str keys or non-float values"
    return _diag_outcome(diags, path, text)


def p_triggers(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from testdb.index import _load_triggers

    path = "ci/pr-triggers.yml"
    text = _text(data, path)
    _load_triggers(text, path)
    return "ok", ""


def p_diff(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from auditor.audit import run_audit
    from auditor.diff import from_diff_file
    from reports.comment import render_comment
    from reports.render_audit import audit_json, audit_text

    path = ws.write_out("fuzz.diff", data)
    change = from_diff_file(ws.root, path)
    doc = audit_json(run_audit(ws.index(), change))
    json.dumps(doc)
    render_comment(doc)
    audit_text(doc, colour=False)
    return "ok", ""


def p_coverage(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from auditor.coverage_link import covering_tests

    path = ws.write_out("fuzz.coverage", data)
    covering_tests(path, ws.root, "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py",
                   set(range(1, 60)), {"accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct"
                                       "::test_chunked_prefill[attn_backend=FLASHINFER]"})
    return "ok", ""


def p_cache(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    """A damaged cache file is ignored (the checkout is parsed again), never an error."""
    from testdb.index import Index, load

    path = cache_file(ws.root)
    with open(path, "wb") as fh:
        fh.write(data)
    index = load(ws.root, use_cache=True)
    if not isinstance(index, Index) or not index.contexts:
        return "crash", "a damaged cache gave an empty or foreign index"
    return "ok", ""


def p_audit_json(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from auditor.launch.plan import ids_from_audit, plan
    from reports.comment import render_comment
    from reports.inputs import read_audit

    path = ws.write_out("fuzz-audit.json", data)
    doc = read_audit(path)
    render_comment(doc)
    render_comment(doc, repo="octo/hello", report_url="https://example.com/r/", head_sha="abc")
    plan(ws.index(), ids_from_audit(doc), os.path.join(ws.out, "runs"))
    return "ok", ""


def p_results_json(data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    from reports.comment import render_comment
    from reports.inputs import read_audit, read_results

    path = ws.write_out("fuzz-results.json", data)
    rows = read_results(path)
    render_comment(read_audit(AUDIT_FIXTURE), results=rows)
    return "ok", ""


PARSERS: dict[str, Callable[[bytes, Workspace, random.Random], tuple[str, str]]] = {
    "testdb_yaml": p_testdb,
    "qa_yaml": lambda d, ws, r: p_testdb(d, ws, r, kind="qa"),
    "qa_list": p_list,
    "waives": lambda d, ws, r: p_list(d, ws, r, waive=True),
    "stages_yaml": p_stages,
    "groovy": p_groovy,
    "triggers": p_triggers,
    "durations": p_durations,
    "diff": p_diff,
    "coverage": p_coverage,
    "audit_json": p_audit_json,
    "results_json": p_results_json,
    "cache": p_cache,
}


def run_parser(fmt: Format, data: bytes, ws: Workspace, rng: random.Random) -> tuple[str, str]:
    """Run the parser of ``fmt`` on ``data``; TestDbError naming the input is a clean error."""
    from testdb.errors import TestDbError

    names = ("fuzz", "l0_", "stages", "L0_Test", "waives", "durations", "pr-triggers",
             "coverage", "audit", "llm_function", "results")
    try:
        return PARSERS[fmt.name](data, ws, rng)
    except TestDbError as exc:
        located = exc.loc is not None and exc.loc.line > 0
        bad = "" if fmt.name == "diff" and located else _error_named(exc, names)
        return ("crash", bad) if bad else ("error", "")


def run_cli_case(fmt: Format, data: bytes, ws: Workspace, rng: random.Random,
                 command: tuple[str, ...] | None = None, use_cache: bool = False
                 ) -> tuple[str, str]:
    """Put the mutated file into the checkout (or beside it) and run one command on it."""
    command = command or rng.choice(fmt.commands)
    if fmt.name == "cache":
        with open(cache_file(ws.root), "wb") as fh:
            fh.write(data)
        code, out, err = run_cli(["--root", ws.root, *command])
        outcome, detail = check_cli(code, out, err)
        if outcome == "error":
            outcome, detail = "crash", f"a damaged cache made {command} fail: {err[-300:]}"
        return outcome, detail
    out_dir = os.path.join(ws.out, f"report-{rng.randrange(10**9)}")
    diff = os.path.join(ws.root, "pr.diff")
    placed_in_root = not fmt.place.startswith("fuzz")
    rel = fmt.place if placed_in_root else os.path.join("..", "out", fmt.place)
    with ws.placed(rel, data) as path:
        argv = ["--root", ws.root, *([] if use_cache else ["--no-cache"])]
        argv += [a.format(file=path, diff=diff, out=out_dir) for a in command]
        code, out, err = run_cli(argv)
    shutil.rmtree(out_dir, ignore_errors=True)
    names = (os.path.basename(fmt.place), "fuzz")
    outcome, detail = check_cli(code, out, err, names, allow_located=fmt.name == "diff")
    if detail:
        detail = f"{' '.join(command)}: {detail}"
    return outcome, detail


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_case(fmt_name: str, seed: str, mutators: list[str], rng_seed: int, mode: str,
             ws: Workspace, timeout: float = 10.0, command: tuple[str, ...] | None = None,
             use_cache: bool = False) -> Result:
    """One case end to end, classified. ``mode`` is "parser" or "cli"."""
    fmt = formats()[fmt_name]
    rng = random.Random(rng_seed)
    t0 = time.perf_counter()
    try:
        with time_bound(timeout):
            data = mutate(seed_bytes(seed, fmt, ws.root), rng, fmt, mutators)
            t0 = time.perf_counter()
            if mode == "parser":
                outcome, detail = run_parser(fmt, data, ws, rng)
            else:
                outcome, detail = run_cli_case(fmt, data, ws, rng, command, use_cache)
    except Hang as exc:
        return Result("hang", str(exc), time.perf_counter() - t0)
    except MemoryError:
        return Result("crash", "MemoryError (over the memory bound)", time.perf_counter() - t0)
    except RecursionError as exc:
        return Result("crash", f"RecursionError: {exc}", time.perf_counter() - t0)
    except Exception as exc:
        import traceback

        tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4)
        return Result("crash", f"{type(exc).__name__}: {exc}"[:300] + "\n" + "".join(tb)[-1500:],
                      time.perf_counter() - t0)
    return Result(outcome, detail, time.perf_counter() - t0)
