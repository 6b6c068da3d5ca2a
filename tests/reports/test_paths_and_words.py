"""Issue 16.17 and 16.19: every ``path:line`` an output prints opens from the root (one
spelling: relative to --root), and the text says its words once, in a legend, not as codes.

The path tables run the real CLI on the bundled examples and ``data/trtllm`` and check that
each ``something.yml:N`` / ``.txt:N`` / ``.py:N`` reference names an existing file under the
root with at least N lines (so an editor or terminal opens it); the HTML report is built and
its pages and data files are checked the same way, and in Chromium the matrix cells too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reports.comment import render_comment
from reports.render_audit import audit_text
from reports.render_where import where_text
from reports.words import TERMS, VERDICT_TEXT, legend, level_lead, used_terms
from tests.conftest import CORPUS, EXAMPLE, CliResult

if TYPE_CHECKING:
    from tests.reports.conftest import Page

RunCli = Callable[..., CliResult]
SMOKE = str(Path(EXAMPLE).parent / "gpu-smoke")
PR = os.path.join(EXAMPLE, "pr.diff")
THIN = os.path.join(EXAMPLE, "pr-no-thin-guard.diff")
FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer-audit.json"
CHUNKED = "TestLlama3_1_8BInstruct::test_chunked_prefill"

# A path:line reference: the whole token (no shorter tail of a longer path), a file name with
# one of the plan's or the sources' extensions, then :N.
REF = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.(?:ya?ml|txt|py|groovy)):(\d+)\b")
# The same inside a GitHub blob link: .../blob/<sha>/PATH#LN
LINK = re.compile(r"/blob/[^/\s)]+/([^\s)#]+)#L(\d+)")


def refs(text: str) -> list[tuple[str, int]]:
    return [(m[1], int(m[2])) for m in (*REF.finditer(text), *LINK.finditer(text))]


def unopenable(root: str, found: list[tuple[str, int]]) -> list[str]:
    """The references that do not open from ``root``: no such file, or too few lines."""
    bad = []
    lines: dict[str, int] = {}
    for path, line in found:
        full = os.path.join(root, path)
        if path not in lines:
            lines[path] = (len(Path(full).read_text(encoding="utf-8", errors="replace")
                               .splitlines()) if os.path.isfile(full) else -1)
        if lines[path] < 0:
            bad.append(f"{path}:{line} (no such file under {root})")
        elif not 1 <= line <= lines[path]:
            bad.append(f"{path}:{line} (the file has {lines[path]} lines)")
    return sorted(set(bad))


# (case, root, command line after --root ROOT, least number of references it must print)
CLI_CASES = [
    ("where corpus", CORPUS, ["where", CHUNKED], 20),
    ("where corpus markdown", CORPUS, ["where", CHUNKED, "--format", "markdown"], 20),
    ("where corpus waived", CORPUS, ["where", "test_chunked_prefill[use_temperature=False-"
                                              "attn_backend=TRTLLM]"], 5),
    ("where example", EXAMPLE, ["where", "test_chunked_prefill"], 2),
    ("where example unit test", EXAMPLE, ["where", "unittest/_torch/executor"], 1),
    ("where example whole function", EXAMPLE, ["where", "test_bfloat16"], 5),
    ("where smoke", SMOKE, ["where", "test_peer_copy"], 1),
    ("audit example", EXAMPLE, ["audit", "--diff", PR], 2),
    ("audit example unguarded", EXAMPLE, ["audit", "--diff", THIN], 2),
    ("audit example markdown", EXAMPLE, ["audit", "--diff", PR, "--format", "markdown"], 4),
    ("audit smoke", SMOKE, ["audit", "--diff", os.path.join(SMOKE, "pr.diff")], 1),
    ("lint corpus", CORPUS, ["lint", "--fail-on", "never"], 300),
    ("lint example", EXAMPLE, ["lint", "--fail-on", "never"], 0),
    ("launch dry run", EXAMPLE, ["launch", "test_chunked_prefill[attn_backend=FLASHINFER]",
                                 "--dry-run"], 1),
    ("promote dry run", EXAMPLE, ["promote", "accuracy/test_llm_api_pytorch.py::"
                                  "TestLlama3_1_8BInstruct::test_chunked_prefill"
                                  "[attn_backend=FLASHINFER]", "--dry-run", "--create-block"], 2),
    ("comment example", EXAMPLE, ["comment", "--diff", PR], 4),
    ("comment example with links", EXAMPLE, ["comment", "--diff", PR, "--repo", "o/n",
                                             "--head-sha", "a" * 40], 8),
    ("comment of an audit file", EXAMPLE, ["comment", "--audit", str(FIXTURE), "--repo", "o/n",
                                           "--head-sha", "b" * 40], 8),
]


@pytest.mark.parametrize(("root", "args", "least"), [c[1:] for c in CLI_CASES],
                         ids=[c[0] for c in CLI_CASES])
def test_every_printed_path_line_opens_from_the_root(run_cli: RunCli, root: str,
                                                     args: list[str], least: int) -> None:
    res = run_cli("--root", root, *args)
    assert res.code in (0, 1), res.err
    found = refs(res.out + res.err)
    assert len(found) >= least, f"expected at least {least} path:line references:\n{res.out}"
    assert unopenable(root, found) == []


@pytest.fixture
def stale(tmp_path: Path) -> str:
    """The example with a test no list names and a list line naming no test: the outputs
    then print `defined at path:line`, the stale line and lint's findings."""
    import shutil

    root = tmp_path / "ex"
    shutil.copytree(EXAMPLE, root)
    src = root / "tests/integration/defs/accuracy/test_llm_api_pytorch.py"
    src.write_text(src.read_text(encoding="utf-8") + "\n\ndef test_unlisted_helper():\n"
                   "    pass\n", encoding="utf-8")
    lst = root / "tests/integration/test_lists/test-db/l0_h100.yml"
    lines = lst.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "test_bfloat16[" in ln)
    lines.insert(at + 1, lines[at].replace("torch_compile=False", "torch_compile=Maybe"))
    lst.write_text("".join(lines), encoding="utf-8")
    return str(root)


@pytest.mark.parametrize(("args", "least"), [
    (["where", "test_unlisted_helper"], 1), (["where", "test_bfloat16"], 6),
    (["where", "test_bfloat16", "--format", "markdown"], 6), (["lint", "--fail-on", "never"], 1),
    (["audit", "--diff", PR], 2)], ids=["where unlisted", "where invalid", "where markdown",
                                        "lint", "audit"])
def test_stale_lines_and_unlisted_tests_open_too(run_cli: RunCli, stale: str, args: list[str],
                                                 least: int) -> None:
    res = run_cli("--root", stale, *args)
    assert res.code in (0, 1), res.err
    found = refs(res.out + res.err)
    assert len(found) >= least, res.out
    assert unopenable(stale, found) == []


def test_no_shortened_list_paths_in_the_comment() -> None:
    """The spellings the comment used to print (`test-db/l0_h100.yml:19`, `qa/...`) are gone:
    the label is the path a reader can open, the same as in the link."""
    text = render_comment(json.loads(FIXTURE.read_text(encoding="utf-8")))
    assert not re.search(r"`(?:test-db|qa)/", text)
    assert "`tests/integration/test_lists/test-db/l0_dgx_h100.yml:19`" in text
    assert "`tests/integration/test_lists/qa/llm_function_core.txt` " in text  # plan files


@pytest.mark.parametrize("root, audit", [(CORPUS, None), (EXAMPLE, FIXTURE)],
                         ids=["corpus", "example with audit"])
def test_the_html_report_spells_paths_from_the_root(run_cli: RunCli, tmp_path: Path, root: str,
                                                    audit: Path | None) -> None:
    out = tmp_path / "site"
    extra = ["--audit", str(audit)] if audit else []
    res = run_cli("--root", root, "report", "--html", str(out), *extra)
    assert res.code == 0, res.err
    index = (out / "index.html").read_text(encoding="utf-8")
    found = refs(re.sub(r"<[^>]+>", " ", index.replace("<wbr>", "")))
    details = list((out / "detail").glob("f*.js"))
    assert details
    for f in details:  # the matrices' paths, drawn in the browser as path:line
        d = json.loads(f.read_text(encoding="utf-8")[len("TESTDB_DETAIL("):-3])
        for fn in d["functions"]:
            for p in fn["params"]:
                found += [(d["paths"][c[0]], c[1]) for cs in p["cells"].values() for c in cs]
                found += [(d["paths"][q[0]], q[1]) for q in p["qa"]]
                found += [(d["paths"][ln[0]], ln[1]) for ln in p["lines"]]
    assert len(found) > 10
    assert unopenable(root, found) == []
    if audit:  # the behaviours table names the deciding evidence in words, not a tier code
        assert " tier</td>" not in index
        assert "a parameter value" in index or "parametrization names" in index


@pytest.mark.browser
def test_the_matrix_cells_spell_paths_from_the_root(site: tuple[Path, str], page: Page) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    pg.fill("#filter", "TestLlama3_1_8BInstruct test_chunked_prefill")
    pg.click("#tests-table tbody tr:first-child td:nth-child(2) a")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    cells = [c for c in pg.eval_on_selector_all("#matrix td.c", "cs => cs.map(c => c.innerText)")
             if not re.fullmatch(r"\d+ lists?", c)]  # the QA column counts lists
    lines = pg.eval_on_selector_all("#fn-lines li", "ls => ls.map(l => l.innerText)")
    found = refs("\n".join(cells))
    assert len(found) >= len(cells) > 0
    assert unopenable(CORPUS, found + refs("\n".join(lines))) == []
    assert not any(re.search(r"block :\d", ln) for ln in lines)


# ---- words (16.19) -------------------------------------------------------------------------

def where_out(run_cli: RunCli, *args: str) -> str:
    res = run_cli("--root", CORPUS, "where", *args)
    assert res.code == 0, res.err
    return res.out


def test_where_says_assumed_once_per_block_not_on_every_stage_line(run_cli: RunCli) -> None:
    text = where_out(run_cli, CHUNKED)
    data = json.loads(where_out(run_cli, CHUNKED, "--format", "json"))
    stage_lines = [ln for ln in text.splitlines() if re.search(r"\bshard \d+/\d+", ln)]
    assert stage_lines and not any("assumed" in ln for ln in stage_lines)
    blocks = [p for t in data["tests"] for p in t["placements"]
              if p["kind"] != "qa" and p["stages"] and p["stages"][0]["assumed"]]
    assumed = [ln for ln in text.splitlines() if ln.strip().startswith("assumed: ")]
    assert len(assumed) == len(blocks) > 0
    assert assumed[0].strip() == "assumed: " + ", ".join(blocks[0]["stages"][0]["assumed"])


def test_where_words_instead_of_codes_and_the_legend_once(run_cli: RunCli) -> None:
    text = where_out(run_cli, CHUNKED)
    assert not re.search(r"block :\d", text)
    assert re.search(r"\.yml:\d+  in the pre_merge block at line \d+$", text, re.M)
    assert text.count("\nLegend:\n") == 1
    tail = text.split("\nLegend:\n")[1]
    words = [ln.split()[0] for ln in tail.splitlines() if ln.startswith("  ") and
             not ln.startswith("    ")]
    assert len(words) == len(set(words)), "each word once"
    for w in ("pre-merge", "gated", "waived", "shard", "assumed", "block", "QA"):
        assert w in words, w
    assert "unscheduled" not in words  # only the words the output uses
    assert max(len(ln) for ln in tail.splitlines()) <= 100


def test_context_is_named_only_when_it_is_not_the_file_stem() -> None:
    from reports.render_where import block_words

    p = {"path": "tests/integration/test_lists/test-db/l0_a10.yml", "block_line": 9,
         "stage_term": None, "context": "l0_nanobind_test"}
    assert block_words(p) == "in the block at line 9 (every stage), context l0_nanobind_test"
    assert block_words({**p, "context": "l0_a10", "stage_term": "post_merge"}) == (
        "in the post_merge block at line 9")


def test_audit_text_names_evidence_in_words_codes_only_in_json(run_cli: RunCli) -> None:
    res = run_cli("--root", EXAMPLE, "audit", "--diff", PR)
    text = res.out
    for code in (r"parameter/\d", r"\btier\b", r"\(context", r"gates:", r"<- decides",
                 r"gated-auto-trigger", r"^ \*"):
        assert not re.search(code, text, re.M), code
    flat = " ".join(text.split())
    assert ("decides the verdict: a parameter value and its name are on the changed lines (5)"
            in flat)
    assert "also linked, not counted: test module imports the changed module" in flat
    assert "this PR's pipeline: 2 stages start; multi-GPU stages do not" in flat
    assert text.count("\nLegend:\n") == 1
    # the codes are in the JSON
    data = json.loads(run_cli("--root", EXAMPLE, "audit", "--diff", PR, "--format", "json").out)
    [b] = data["behaviours"]
    assert (b["decided_by"]["tier"], b["decided_by"]["rank"]) == ("parameter", 1)


def test_audit_legend_says_what_a_guard_verdict_means_for_this_pr() -> None:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    tail = audit_text(data).split("\nLegend:\n")[1]
    assert "pre-merge            runs in a stage this PR's pipeline starts" in tail


def test_comment_names_evidence_in_words(run_cli: RunCli) -> None:
    # The fixture is an older audit whose finding messages still say "parameter-tier" and
    # "gate closed": only what the comment itself writes is checked there.
    old = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for args in (["comment", "--diff", PR], ["comment", "--audit", str(FIXTURE)]):
        text = run_cli("--root", EXAMPLE, *args).out
        if "--audit" in args:
            for f in old["findings"]:
                text = text.replace(" ".join(f["message"].split()), "")
        for code in (r"\btier\b", r"\(context", r"gate closed", r"parameter/\d"):
            assert not re.search(code, text), (args, code)
        assert "decides the verdict — " in text and "multi-GPU stages not started" in text


LEGEND_CASES = [
    ("PRE-MERGE", "pre-merge"), ("  [x]  GATED", "gated"),
    ("a guard post-merge-only", "post-merge-only"), ("  QA-ONLY", "qa-only"),
    ("foo.txt:3 (waived)", "waived"), ("UNSCHEDULED", "unscheduled"),
    ("  INVALID  names no test", "invalid"),
    ("l0.yml:4  in the block at line 3, context l0_x", "context"),
    ("in the pre_merge block at line 3", "block at line N"),
    ("S-1  shard 1/2  pre-merge", "shard i/n"),
    ("      assumed: gpu", "assumed"), ("    QA: a.txt:1", "QA"), ("stages: QA llm_core", "QA"),
    ("  changed tokens: a, b", "changed tokens"),
    ("  WARNING a.yml:3  [post-merge-guard]", "[rule]"),
    ("  decides the verdict: x (1)", "decides the verdict"),
    ("  also linked, not counted: x (2)", "also linked"), ("; runs via `unittest/x`", "runs via"),
    ("  weak links, cannot guard: x (3)", "weak links"),
    ("  weak links that run pre-merge: a, b", "weak links"),
]


@pytest.mark.parametrize("text, word", LEGEND_CASES)
def test_each_word_is_in_the_legend_when_the_output_uses_it(text: str, word: str) -> None:
    assert word in [t.word for t in used_terms(text)]
    [line] = [ln for ln in legend(text) if ln.startswith(f"  {word} ")]
    assert dict((t.word, t.meaning) for t in TERMS)[word].split()[0] in line


@pytest.mark.parametrize("text", ["nothing to explain here", "pre-merged", "sub-gated",
                                  "a context-free line", "blocked at line 3"])
def test_no_legend_for_words_the_output_does_not_use(text: str) -> None:
    assert legend(text) == []


def test_every_term_has_a_case_and_verdict_words_match_the_html_legend() -> None:
    assert {w for _, w in LEGEND_CASES} == {t.word for t in TERMS}
    from reports import html

    assert html.VERDICT_TEXT is VERDICT_TEXT


@pytest.mark.parametrize("decides, can_guard, lead", [
    (True, True, "decides the verdict"), (True, False, "weak links, cannot guard"),
    (False, True, "also linked, not counted"), (False, False, "also linked, not counted")])
def test_a_levels_lead_words_come_from_one_rule(decides: bool, can_guard: bool, lead: str
                                                 ) -> None:
    # The text, the comment and the HTML report all introduce a level's links by it.
    assert level_lead(decides, can_guard) == lead


def test_where_text_without_the_cli_has_the_legend_too() -> None:
    rec = {"id": "a.py::t", "verdict": "unscheduled", "via": None, "check": {},
           "placements": []}
    text = where_text([rec])
    assert text.splitlines()[-1].startswith("  unscheduled")


def test_the_readme_first_screen_is_what_the_command_prints(run_cli: RunCli,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """README.md's first example output, abridged with `...` lines: every other line is a
    line of the real output, in order."""
    from tests.conftest import REPO

    readme = Path(REPO, "README.md").read_text(encoding="utf-8")
    block = readme.split("What the first command prints (abridged):\n\n```\n", 1)[1]
    shown = [ln for ln in block.split("\n```", 1)[0].splitlines() if ln.strip() != "..."]
    monkeypatch.chdir(REPO)  # the README's command, from a clone's top directory
    out = run_cli("--root", "examples/flashinfer-reuse", "audit", "--diff",
                  "examples/flashinfer-reuse/pr.diff").out.splitlines()
    at = 0
    for ln in shown:
        assert ln in out[at:], f"README line not in the output (in order): {ln!r}"
        at = out.index(ln, at) + 1


def test_a_hand_edited_rank_falls_back_to_the_tier_title(run_cli: RunCli, tmp_path: Path) -> None:
    """The levels' words come from tier and rank; a rank that is not a positive int (an older
    or edited audit) names the tier instead of failing (it was exit 3)."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    b = data["behaviours"][0]
    b["decided_by"] = {"tier": "parameter", "rank": "y"}
    for gs in b["guards"].values():
        for g in gs:
            g["rank"] = "x"
    bad = tmp_path / "audit.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    res = run_cli("comment", "--audit", str(bad))
    assert res.code == 0, res.err
    assert "decides the verdict — parametrization names a changed token: " in res.out
    res = run_cli("--root", EXAMPLE, "report", "--html", str(tmp_path / "r"), "--audit", str(bad))
    assert res.code == 0, res.err
