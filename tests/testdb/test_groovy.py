"""Tests for testdb/groovy.py: stage rows read from L0_Test.groovy text."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from testdb.errors import Severity
from testdb.groovy import find_def, load_groovy_stages_text
from testdb.groovy_lex import find_code, tokenize
from testdb.stages import Stage, load_stage_table_text

FIXTURES = Path(__file__).parent / "fixtures" / "groovy"
PATH = "jenkins/L0_Test.groovy"


def wrap(body: str) -> str:
    """A launchTestJobs around ``body``; the body's first line is line 3 of the file."""
    return "def launchTestJobs(pipeline, testFilter)\n{\n" + body.strip("\n") + "\n}\n"


def key(s: Stage) -> tuple[object, ...]:
    return (s.name, s.platform, s.context, s.split_id, s.splits, s.gpu_count, s.node_count,
            s.run_with_sbatch, s.use_cluster_durations, s.map, s.arch, s.disabled)


def row(name: str, platform: str, context: str, split_id: int, splits: int, gpus: int = 1,
        nodes: int = 1, sbatch: bool = False, cluster: bool = False,
        map: str = "x86TestConfigs", arch: str = "x86_64", disabled: bool = False
        ) -> tuple[object, ...]:
    return (name, platform, context, split_id, splits, gpus, nodes, sbatch, cluster, map, arch,
            disabled)


def errors(diags: list) -> list:
    return [d for d in diags if d.severity is Severity.ERROR]


SB, MN, SS = "SBSATestConfigs", "multiNodesSBSAConfigs", "SBSASlurmTestConfigs"
GEN = ("GB200-8_GPUs-2_Nodes-PyTorch-PerfSanity-Node2-GPU8-Post-Merge", "auto:gb200-flex",
       "l0_gb200_multi_nodes_perf_sanity_node2_gpu8")
GEN_ARGS = '"{}", "{}", "{}"'.format(*GEN)

SHAPES = [
    ("four fields: defaults", """
    x86TestConfigs = [
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 3],
    ]""", [row("A10-PyTorch-1", "a10", "l0_a10", 1, 3)]),
    ("five fields: gpu count", """
    x86TestConfigs = [
        "DGX_H100-4_GPUs-CPP-1": ["dgx-h100-x4", "l0_dgx_h100", 1, 1, 4],
    ]""", [row("DGX_H100-4_GPUs-CPP-1", "dgx-h100-x4", "l0_dgx_h100", 1, 1, 4)]),
    ("seven fields: sbatch", """
    x86SlurmTestConfigs = [
        "DGX_B200-PyTorch-1": ["auto:dgx-b200-flex", "l0_b200", 1, 9, 1, 1, true],
    ]""", [row("DGX_B200-PyTorch-1", "auto:dgx-b200-flex", "l0_b200", 1, 9, sbatch=True,
               map="x86SlurmTestConfigs")]),
    ("eight fields: cluster durations, aarch64", """
    SBSASlurmTestConfigs = [
        "GB200-4_GPUs-PyTorch-1": ["auto:gb200-x4", "l0_gb200_multi_gpus", 1, 5, 4, 1, false, true],
    ]""", [row("GB200-4_GPUs-PyTorch-1", "auto:gb200-x4", "l0_gb200_multi_gpus", 1, 5, 4,
               cluster=True, map=SS, arch="aarch64")]),
    ("multi-node map: node count defaults to 2", """
    multiNodesSBSAConfigs = [
        "GB200-8_GPUs-2_Nodes-PyTorch-1": ["auto:gb200-flex", "l0_gb200_multi_nodes", 1, 2, 8],
        "GB200-8_GPUs-2_Nodes-PyTorch-2": ["auto:gb200-flex", "l0_gb200_multi_nodes", 2, 2, 8, 2],
    ]""", [row("GB200-8_GPUs-2_Nodes-PyTorch-1", "auto:gb200-flex", "l0_gb200_multi_nodes", 1, 2,
               8, 2, map=MN, arch="aarch64"),
           row("GB200-8_GPUs-2_Nodes-PyTorch-2", "auto:gb200-flex", "l0_gb200_multi_nodes", 2, 2,
               8, 2, map=MN, arch="aarch64")]),
    ("def, trailing comma, multi-line row, trailing comments", """
    def SBSATestConfigs = [
        "GB10-PyTorch-1": [  // DGX Spark
            "gb10x",
            "l0_gb10",
            1,
            1,
        ],  // it's "GB10" in the machine pool
    ]""", [row("GB10-PyTorch-1", "gb10x", "l0_gb10", 1, 1, map=SB, arch="aarch64")]),
    ("// rows are disabled stages; prose is not", """
    x86TestConfigs = [
        // Disable RTXPro6000 stages due to nodes will be offline temporarily.
        // "RTXPro6000-PyTorch-Post-Merge-1": ["rtx-pro-6000", "l0_rtx_pro_6000", 1, 1],
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 3], // "A10-PyTorch-9": ["a10", "l0_a10", 9, 9],
        // Currently post-merge test stages only run tests with "stage: post_merge" mako
    ]""", [row("RTXPro6000-PyTorch-Post-Merge-1", "rtx-pro-6000", "l0_rtx_pro_6000", 1, 1,
               disabled=True),
           row("A10-PyTorch-1", "a10", "l0_a10", 1, 3),
           row("A10-PyTorch-9", "a10", "l0_a10", 9, 9, disabled=True)]),
    ("a row commented out over several lines", """
    x86TestConfigs = [
        // "A30-Triton-Post-Merge-1": [
        //     "a30", "l0_a30", 1, 2,
        // ],
    ]""", [row("A30-Triton-Post-Merge-1", "a30", "l0_a30", 1, 2, disabled=True)]),
    ("/* */ block comments", """
    SBSASlurmTestConfigs = [
        /* Disable GB300 stages while the nodes are offline.
         * "GB300-PyTorch-1": ["gb300-single", "l0_gb300", 1, 1],
         */
        /* "GB300-PyTorch-2": ["gb300-single", "l0_gb300", 2, 2], */
    ]""", [row("GB300-PyTorch-1", "gb300-single", "l0_gb300", 1, 1, map=SS, arch="aarch64",
               disabled=True),
           row("GB300-PyTorch-2", "gb300-single", "l0_gb300", 2, 2, map=SS, arch="aarch64",
               disabled=True)]),
    ("string interpolation and variables", """
    def gb10 = "GB10"
    String context = 'l0_' + gb10.toLowerCase()
    def ctx = "l0_gb10"
    def splits = 2
    SBSATestConfigs = [
        "${gb10}-PyTorch-1": ["gb10x", ctx, 1, splits],
        "$gb10-PyTorch-2".toString(): ["gb10x", "${ctx}", 2, splits],
        ("GB10-" + "PyTorch-Post-Merge-1"): ["gb10x", 'l0_$x', 1, 1],
    ]""", [row("GB10-PyTorch-1", "gb10x", "l0_gb10", 1, 2, map=SB, arch="aarch64"),
           row("GB10-PyTorch-2", "gb10x", "l0_gb10", 2, 2, map=SB, arch="aarch64"),
           row("GB10-PyTorch-Post-Merge-1", "gb10x", "l0_$x", 1, 1, map=SB, arch="aarch64")]),
    ("generator merged with +=", f"""
    multiNodesSBSAConfigs = [:]
    multiNodesSBSAConfigs += buildStageConfigs(
        {GEN_ARGS},
        2,
        8,
        2
    )""", [row(f"{GEN[0]}-{k}", GEN[1], GEN[2], k, 2, 8, 2, map=MN, arch="aarch64")
           for k in (1, 2)]),
    ("generator merged with putAll, sbatch and cluster flags", f"""
    x86SlurmTestConfigs.putAll(buildStageConfigs({GEN_ARGS}, 1, 8, 2, true, true))
    """, [row(f"{GEN[0]}-1", GEN[1], GEN[2], 1, 1, 8, 2, True, True, map="x86SlurmTestConfigs")]),
    ("map literal + generator, variables as arguments", f"""
    def count = 2
    def platform = "{GEN[1]}"
    multiNodesSBSAConfigs = [
        "GB200-8_GPUs-2_Nodes-PyTorch-1": ["auto:gb200-flex", "l0_gb200_multi_nodes", 1, 2, 8, 2],
    ] + buildStageConfigs("{GEN[0]}", platform, "{GEN[2]}", count, 8, 2)
    """, [row("GB200-8_GPUs-2_Nodes-PyTorch-1", "auto:gb200-flex", "l0_gb200_multi_nodes", 1, 2,
              8, 2, map=MN, arch="aarch64")]
         + [row(f"{GEN[0]}-{k}", GEN[1], GEN[2], k, 2, 8, 2, map=MN, arch="aarch64")
            for k in (1, 2)]),
    ("a commented-out generator call gives disabled stages", f"""
    multiNodesSBSAConfigs = [:]
    // // 2 Nodes
    // multiNodesSBSAConfigs += buildStageConfigs(
    //     {GEN_ARGS},
    //     2, 8, 2
    // )""", [row(f"{GEN[0]}-{k}", GEN[1], GEN[2], k, 2, 8, 2, map=MN, arch="aarch64",
                   disabled=True) for k in (1, 2)]),
    ("another map of stage tuples: arch by name, merged maps reported once", """
    def extraSBSASlurmConfigs = [
        "GB300-4_GPUs-PyTorch-1": ["auto:gb300-x4", "l0_gb300", 1, 1, 4, 1, true],
    ]
    def b300Configs = ["B300-PyTorch-1": ["auto:dgx-b300-flex", "l0_b300", 1, 2, 1, 1, true]]
    def extraConfigs = [:]
    extraConfigs += ["A10-CPP-1": ["a10", "l0_a10", 1, 1]]
    x86TestConfigs = extraConfigs
    """, [row("GB300-4_GPUs-PyTorch-1", "auto:gb300-x4", "l0_gb300", 1, 1, 4, 1, True,
              map="extraSBSASlurmConfigs", arch="aarch64"),
          row("B300-PyTorch-1", "auto:dgx-b300-flex", "l0_b300", 1, 2, sbatch=True,
              map="b300Configs"),
          row("A10-CPP-1", "a10", "l0_a10", 1, 1)]),
    ("nested maps and index assignment", """
    def stageConfigs = [
        "x86": ["A10-PyTorch-1": ["a10", "l0_a10", 1, 3]],
    ]
    x86TestConfigs["A10-PyTorch-2"] = ["a10", "l0_a10", 2, 3]
    """, [row("A10-PyTorch-1", "a10", "l0_a10", 1, 3, map="stageConfigs"),
          row("A10-PyTorch-2", "a10", "l0_a10", 2, 3)]),
    ("collectEntries over a range: the loop variable in the name and the fields", """
    multiNodesSBSAConfigs = [:]
    def numTests = 3
    multiNodesSBSAConfigs += (1..numTests).collectEntries { i ->
        ["GB200-8_GPUs-2_Nodes-PyTorch-Post-Merge-${i}".toString(),
         ["gb200-trtllm", "l0_gb200_multi_nodes", i, numTests, 8, 2]]
    }""", [row(f"GB200-8_GPUs-2_Nodes-PyTorch-Post-Merge-{k}", "gb200-trtllm",
               "l0_gb200_multi_nodes", k, 3, 8, 2, map=MN, arch="aarch64") for k in (1, 2, 3)]),
    ("collectEntries: exclusive range, implicit `it`, a map literal returned", """
    x86TestConfigs = (1..<3).collectEntries {
        [("A10-PyTorch-${it}".toString()): ["a10", "l0_a10", it, 2]]
    }
    """, [row(f"A10-PyTorch-{k}", "a10", "l0_a10", k, 2) for k in (1, 2)]),
    ("a whole map commented out, prose and a two-line row between its rows", """
    // multiNodesSBSAConfigs = [
        // Each stage runs 1 test case on 8 GPUs and 2 nodes.
        // Off until the hangs are understood (https://nvbugs/1000001, https://nvbugs/1000002)
        // "GB200-8_GPUs-2_Nodes-PyTorch-1": ["gb200-trtllm", "l0_gb200_multi_nodes", 1, 2, 8, 2],
        // "GB200-8_GPUs-2_Nodes-PyTorch-2": [
        //     "gb200-trtllm", "l0_gb200_multi_nodes", 2, 2, 8, 2],
    // ]
    multiNodesSBSAConfigs = [:]""", [
        row(f"GB200-8_GPUs-2_Nodes-PyTorch-{k}", "gb200-trtllm", "l0_gb200_multi_nodes", k, 2, 8, 2,
            map=MN, arch="aarch64", disabled=True) for k in (1, 2)]),
    ("a whole map commented out in a block comment, prose inside", """
    /* SBSATestConfigs = [
     *   Moved to the Slurm map (see https://nvbugs/42): keep for reference.
     *   "GH200-PyTorch-1": ["gh200", "l0_gh200", 1, 1],
     * ]
     */""", [row("GH200-PyTorch-1", "gh200", "l0_gh200", 1, 1, map=SB, arch="aarch64",
                 disabled=True)]),
    ("maps that hold no stage rows are not stages", """
    x86TestConfigs = ["A10-PyTorch-1": ["a10", "l0_a10", 1, 3]]
    docBuildConfigs = [
        "A10-Build_Docs": [docBuildSpec, {
            sh "rm -rf **/*.xml *.tar.gz"
        }],
    ]
    x86SanityCheckConfigs = [
        "PY312-DLFW": [LLM_DOCKER_IMAGE, "B200_PCIe", X86_64_TRIPLE, false, "dlfw/", DLFW_IMAGE],
    ]
    def changeMap = ["pytorch": "-PyTorch-", "cpp": "-CPP-"]
    multiGpuJobs = parallelJobs.findAll{(it.key =~ /\\d+_GPUs/) && !it.key.contains("]")}
    fullSet += x86TestConfigs.keySet()
    sh 'echo "[" // not a comment'
    """, [row("A10-PyTorch-1", "a10", "l0_a10", 1, 3)]),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in SHAPES], ids=[c[0] for c in SHAPES])
def test_shapes(body: str, expected: list[tuple[object, ...]]) -> None:
    stages, diags = load_groovy_stages_text(wrap(body), PATH)
    assert [key(s) for s in stages] == expected
    assert diags == []


MALFORMED = [
    ("too few fields", '"A10-PyTorch-1": ["a10", "l0_a10", 1],', "3 fields"),
    ("split id is a string", '"A10-PyTorch-1": ["a10", "l0_a10", "1", 3],', "split id should"),
    ("gpu count is a boolean", '"A10-PyTorch-1": ["a10", "l0_a10", 1, 3, true],', "gpu count"),
    ("unknown variable", '"A10-PyTorch-1": ["a10", L0_A10, 1, 3],', "`L0_A10`"),
    ("unresolved interpolation", '"${gpu}-PyTorch-1": ["a10", "l0_a10", 1, 3],', "${gpu}"),
    ("value is not a list", '"A10-PyTorch-1": a10Row(),', "not a [platform"),
    ("not a map entry", '["a10", "l0_a10", 1, 3],', "not a map entry"),
]


@pytest.mark.parametrize(("bad", "message"), [c[1:] for c in MALFORMED],
                         ids=[c[0] for c in MALFORMED])
def test_malformed_row_is_an_error_at_its_line(bad: str, message: str) -> None:
    body = f"""
    x86TestConfigs = [
        "A10-PyTorch-2": ["a10", "l0_a10", 2, 3],
        {bad}
        "A10-PyTorch-3": ["a10", "l0_a10", 3, 3],
    ]"""
    stages, diags = load_groovy_stages_text(wrap(body), PATH)
    assert [s.name for s in stages] == ["A10-PyTorch-2", "A10-PyTorch-3"]  # neighbours survive
    assert len(diags) == 1
    (d,) = diags
    assert d.severity is Severity.ERROR and d.loc.path == PATH and d.loc.line == 5
    assert message in d.message


@pytest.mark.parametrize(("statement", "line", "message"), [
    ("multiNodesSBSAConfigs += (1..3).collectEntries { i -> makeRow(i) }",
     5, "the closure is not one `[name, [fields]]` list"),
    ("multiNodesSBSAConfigs += (1..n).collectEntries { i -> [\"GB-${i}\", [\"p\", \"c\", i, 3]] }",
     5, "`n` is not a literal"),
    (f"multiNodesSBSAConfigs += buildStageConfigs({GEN_ARGS}, 2, 8)", 5, "6 to 8 arguments"),
    (f"multiNodesSBSAConfigs += buildStageConfigs({GEN_ARGS}, \"2\", 8, 2)", 5,
     "testCount should"),
    (f"multiNodesSBSAConfigs += buildStageConfigs({GEN_ARGS}, 0, 8, 2)", 5, "makes no stages"),
    ("for (int k = 1; k <= 2; k++) {\n"
     "        x86TestConfigs[\"A10-PyTorch-${k}\"] = [\"a10\", \"l0_a10\", k, 2]\n    }",
     6, "${k}"),
], ids=["collectEntries closure", "collectEntries range", "arity", "argument type",
        "zero count", "for loop"])
def test_unreadable_statement_is_an_error(statement: str, line: int, message: str) -> None:
    body = f"""
    x86TestConfigs = ["A10-PyTorch-1": ["a10", "l0_a10", 1, 1]]
    multiNodesSBSAConfigs = [:]
    {statement}"""
    stages, diags = load_groovy_stages_text(wrap(body), PATH)
    assert [s.name for s in stages] == ["A10-PyTorch-1"]
    assert [(d.severity, d.loc.line) for d in diags] == [(Severity.ERROR, line)]
    assert message in diags[0].message


def test_commented_out_row_that_cannot_be_read_is_a_warning() -> None:
    body = """
    x86TestConfigs = [
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 3],
        // "A10-PyTorch-2": ["a10", "l0_a10", 2],
    ]"""
    stages, diags = load_groovy_stages_text(wrap(body), PATH)
    assert [s.name for s in stages] == ["A10-PyTorch-1"]
    assert [(d.severity, d.loc.line) for d in diags] == [(Severity.WARNING, 5)]
    assert "commented-out" in diags[0].message


def test_duplicate_stage_name_keeps_the_later_row_and_warns() -> None:
    body = """
    x86TestConfigs = [
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 3],
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 4],
    ]"""
    stages, diags = load_groovy_stages_text(wrap(body), PATH)
    assert [(s.name, s.splits, s.loc.line) for s in stages] == [("A10-PyTorch-1", 4, 5)]
    assert [(d.severity, d.loc.line) for d in diags] == [(Severity.WARNING, 5)]


def test_unbalanced_bracket_and_missing_function() -> None:
    _, diags = load_groovy_stages_text(wrap('x86TestConfigs = [\n  "A": ["a", "b", 1, 1]]]'), PATH)
    assert any(d.severity is Severity.ERROR and d.loc.line == 4 for d in diags)
    stages, diags = load_groovy_stages_text('x86TestConfigs = ["A-1": ["a", "b", 1, 1]]', PATH)
    assert [s.name for s in stages] == ["A-1"]
    assert [d.severity for d in diags] == [Severity.WARNING]
    stages, diags = load_groovy_stages_text(wrap("echo 'nothing here'"), PATH)
    assert stages == [] and [d.message for d in errors(diags)] == ["no stage maps found"]


def test_only_launch_test_jobs_is_read() -> None:
    text = ('def other() {\n    x86TestConfigs = ["X-1": ["a", "b", 1, 1]]\n}\n'
            + wrap('x86TestConfigs = ["A10-PyTorch-1": ["a10", "l0_a10", 1, 1]]'))
    stages, diags = load_groovy_stages_text(text, PATH)
    assert [(s.name, s.loc.line) for s in stages] == [("A10-PyTorch-1", 6)] and diags == []


def test_a_quoted_definition_is_not_the_definition() -> None:
    """A comment or a string that quotes `def launchTestJobs(` before the real definition."""
    body = wrap('x86TestConfigs = ["A10-PyTorch-1": ["a10", "l0_a10", 1, 1]]')
    text = ("// Scripts look for def launchTestJobs(pipeline, testFilter) below.\n"
            "/* def launchTestJobs(pipeline) {\n"
            "    x86TestConfigs = [\"OLD-1\": [\"a\", \"b\", 1, 1]]\n} */\n"
            "def note = \"def launchTestJobs(pipeline, testFilter) {\"\n" + body)
    stages, diags = load_groovy_stages_text(text, PATH)
    assert [(s.name, s.loc.line) for s in stages] == [("A10-PyTorch-1", 8)] and diags == []


def test_a_definition_swallowed_by_an_open_string_is_an_error() -> None:
    """A `def launchTestJobs(` at the start of a line that reads as inside a string: report
    where that string starts instead of guessing."""
    text = 'def script = """\n  echo unterminated\n' + wrap(
        'x86TestConfigs = ["A10-PyTorch-1": ["a10", "l0_a10", 1, 1]]')
    stages, diags = load_groovy_stages_text(text, PATH)
    assert stages == []
    assert [(d.severity, d.loc.line) for d in diags] == [(Severity.ERROR, 3)]
    assert "inside a string that starts at line 1" in diags[0].message


# Pieces that hide or fake a definition; find_code (regex skips) must split text into code,
# comments and strings exactly as the tokenizer does.
PIECES = [
    "// def launchTestJobs(x)\n",
    "/* def launchTestJobs(x) */\n",
    "/*\n * def launchTestJobs(x)\n */\n",
    'def s = "def launchTestJobs(x)"\n',
    "def s = 'def launchTestJobs(x)'\n",
    'def s = """\ndef launchTestJobs(x)\n"""\n',
    "def r = x =~ /def launchTestJobs\\(/\n",
    "def q = a / b / c\n",
    'sh "rm -rf **/*.xml *.tar.gz"\n',
    'def g = "${x.collect { "it" }.join(\'/*\')}"\n',
    "def u = 'unterminated\n",
    'echo "a // not a comment"\n',
    "x = [a: 1] / 2 // def launchTestJobs(\n",
    "}/def launchTestJobs(x)/\n",
    "f(a) /def launchTestJobs(x)/ 2\n",
    "def launchTestJobs(p) {\n}\n",
]


def test_find_code_agrees_with_the_tokenizer() -> None:
    rng = random.Random(14)
    texts = [(FIXTURES / n).read_text() for n in ("L0_Test.groovy", "L0_Test_older.groovy")]
    texts += ["".join(rng.choices(PIECES, k=rng.randint(1, 8))) for _ in range(400)]
    for text in texts:
        toks = tokenize(text)
        d = find_def(toks, "launchTestJobs")
        at = find_code(text, re.compile(r"\bdef\s+launchTestJobs\s*\("))
        assert (at is None) == (d is None), text
        if at is not None and d is not None:
            assert text.count("\n", 0, at) + 1 == toks[d].line, text


# ---- the fixture file: a faithful imitation of L0_Test.groovy ---------------------------------

def fixture_stages() -> tuple[list[Stage], list]:
    text = (FIXTURES / "L0_Test.groovy").read_text()
    return load_groovy_stages_text(text, "tests/testdb/fixtures/groovy/L0_Test.groovy")


def test_fixture_reads_cleanly() -> None:
    stages, diags = fixture_stages()
    assert diags == []
    counts: dict[tuple[str, bool], int] = {}
    for s in stages:
        counts[s.map, s.disabled] = counts.get((s.map, s.disabled), 0) + 1
    assert counts == {
        ("x86TestConfigs", False): 25, ("x86TestConfigs", True): 5,
        ("x86SlurmTestConfigs", False): 34, ("SBSATestConfigs", False): 3,
        ("SBSASlurmTestConfigs", False): 15, ("SBSASlurmTestConfigs", True): 1,
        ("multiNodesSBSAConfigs", False): 15, ("multiNodesSBSAConfigs", True): 2,
    }
    assert len({s.name for s in stages if not s.disabled}) == 92


def test_fixture_lines_point_at_the_rows() -> None:
    lines = (FIXTURES / "L0_Test.groovy").read_text().splitlines()
    stages, _ = fixture_stages()
    for s in stages:
        text = lines[s.loc.line - 1]
        interpolated = s.name.startswith("GB10-") and s.name[4:] in text
        generated = "buildStageConfigs(" in text  # a generated stage points at its call
        assert f'"{s.name}"' in text or interpolated or generated, (s.name, s.loc.line, text)


def test_fixture_agrees_with_its_yaml_stage_table() -> None:
    fields = ("name", "platform", "context", "split_id", "splits", "gpu_count", "node_count",
              "run_with_sbatch", "use_cluster_durations", "map", "arch", "disabled")

    def rows(stages: list[Stage]) -> list[tuple[object, ...]]:
        return sorted(tuple(getattr(s, f) for f in fields) for s in stages)

    groovy, gdiags = fixture_stages()
    yml = (FIXTURES / "stages.yml").read_text()
    table, tdiags = load_stage_table_text(yml, "tests/testdb/fixtures/groovy/stages.yml")
    assert gdiags == [] and tdiags == []
    assert len(table) == 100
    assert rows(groovy) == rows(table)


# ---- an older version's shapes (the stored L0_Test.groovy of autumn 2025) ----------------------

def test_older_version_fixture() -> None:
    """Every shape at once: the definition quoted in comments and a string before it, rows
    commented out one by one, a whole map commented out with prose, (1..n).collectEntries."""
    path = "tests/testdb/fixtures/groovy/L0_Test_older.groovy"
    text = (FIXTURES / "L0_Test_older.groovy").read_text()
    stages, diags = load_groovy_stages_text(text, path)
    assert diags == []
    counts: dict[tuple[str, bool], int] = {}
    for s in stages:
        counts[s.map, s.disabled] = counts.get((s.map, s.disabled), 0) + 1
    assert counts == {
        ("x86TestConfigs", False): 13, ("x86TestConfigs", True): 5,
        ("x86SlurmTestConfigs", False): 3,
        ("SBSASlurmTestConfigs", False): 1, ("SBSASlurmTestConfigs", True): 1,
        ("multiNodesSBSAConfigs", False): 4, ("multiNodesSBSAConfigs", True): 3,
    }
    lines = text.splitlines()
    for s in stages:  # every stage points at its row (a generated one: the closure's row)
        here, above = lines[s.loc.line - 1], lines[s.loc.line - 2]
        assert s.name in here or ("collectEntries" in above and "${i}" in here), s.name
    generated = [key(s) for s in stages if "Post-Merge-" in s.name and s.map == MN]
    assert generated == [row(f"GB200-8_GPUs-2_Nodes-PyTorch-Post-Merge-{k}", "gb200-trtllm",
                             "l0_gb200_multi_nodes", k, 4, 8, 2, map=MN, arch="aarch64")
                         for k in (1, 2, 3, 4)]
    disabled_mn = [key(s) for s in stages if s.disabled and s.map == MN]
    assert disabled_mn == [row(f"GB200-8_GPUs-2_Nodes-PyTorch-{k}", "gb200-trtllm",
                               "l0_gb200_multi_nodes", k, 3, 8, 2, map=MN, arch="aarch64",
                               disabled=True) for k in (1, 2, 3)]
    # each commented-out row of the file is listed as a disabled stage, and nothing else is
    commented = {m for ln in lines if ln.lstrip().startswith("//")
                 for m in re.findall(r'"([\w-]+-\d+)": \[', ln)}
    assert {s.name for s in stages if s.disabled} == commented


def test_cbts_resize_of_a_map_is_the_map_with_one_note() -> None:
    # 11ea7cc3 wraps each stage map as `NAME = cbtsResizeSplits(NAME)`: CBTS may keep fewer
    # shards at run time, from data no checkout has. The stages stay; one info note says so.
    text = wrap('''
    x86TestConfigs = [
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 2],
        "A10-PyTorch-2": ["a10", "l0_a10", 2, 2],
    ]
    x86TestConfigs = cbtsResizeSplits(x86TestConfigs)
    SBSATestConfigs = [
        "GH200-PyTorch-1": ["gh200", "l0_gh200", 1, 1],
    ]
    SBSATestConfigs = cbtsResizeSplits(SBSATestConfigs)
    ''')
    stages, diags = load_groovy_stages_text(text, PATH)
    assert [s.name for s in stages] == ["A10-PyTorch-1", "A10-PyTorch-2", "GH200-PyTorch-1"]
    assert [(d.severity, d.loc.line) for d in diags] == [(Severity.INFO, 7)]
    assert "cbtsResizeSplits" in diags[0].message and "not modelled" in diags[0].message
    # CBTS is TensorRT-LLM's change-based test selection (jenkins/scripts/cbts/), not coverage
    assert "change-based test selection (CBTS)" in diags[0].message
    assert "coverage-based" not in diags[0].message


def test_an_unknown_wrapper_is_still_an_error() -> None:
    text = wrap('''
    x86TestConfigs = [
        "A10-PyTorch-1": ["a10", "l0_a10", 1, 1],
    ]
    x86TestConfigs = somethingElse(x86TestConfigs)
    ''')
    _, diags = load_groovy_stages_text(text, PATH)
    assert [d.severity for d in diags] == [Severity.ERROR]
