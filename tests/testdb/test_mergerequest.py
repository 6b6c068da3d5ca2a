"""The PR gates read from L0_MergeRequest.groovy (testdb/mergerequest.py; issue 23, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tdb_helpers import small_checkout

from testdb.botcmd import parse
from testdb.errors import InputError, Severity
from testdb.index import CBTS_MAIN, MERGE_REQUEST, load
from testdb.mergerequest import load_merge_request_text
from testdb.pipeline import pr_stages
from testdb.triggers import GATES_UNKNOWN

FIXTURES = Path(__file__).parent / "fixtures" / "groovy"
DATA = Path(__file__).parents[2] / "data" / "trtllm" / "ci" / "pr-triggers.yml"


def test_fixture_gates() -> None:
    t, diags = load_merge_request_text((FIXTURES / "L0_MergeRequest.groovy").read_text(), "mr")
    assert diags == []
    assert t.multi_gpu_paths == ("pkg/distributed/", "pkg/mapping.py", "tests/multi_gpu/")
    assert t.auto_trigger == (("pkg/models/modeling_big.py", ("-Big-",)),
                              ("serving/", ("-Serve-",)), ("kernels/attn/", ("-Attn-", "-Kern-")))
    assert t.groups == (("Docs", ("docs/",)), ("PyTorch", ("pkg/torch/", "tests/torch/")),
                        ("Triton", ("serving/",)))
    assert t.source == "mr" and t.known


def real_shape(data: dict) -> str:  # type: ignore[type-arg]
    """An L0_MergeRequest.groovy in the shape of the stored one at 11ea7cc3, holding the rules
    of data/trtllm/ci/pr-triggers.yml (which was extracted from it)."""
    q = '",\n        "'
    paths = data["multi_gpu_file_changed"]["related_paths"]
    tags = ",\n        ".join(f'"{r["path_prefix"]}": [' + ", ".join(f'"{t}"' for t in r["tags"])
                               + "]" for r in data["auto_trigger_tags"]["map"])
    groups = ",\n        ".join(f'"{g}": [\n            "' + '",\n            "'.join(ps) + '",\n'
                                 "        ]"
                                 for g, ps in data["only_one_group_changed"]["groups"].items())
    return (f"def getAutoTriggerTagList(pipeline, testFilter, globalVars) {{\n"
            f"    def specialFileToTagMap = [\n        {tags},\n    ]\n"
            f"    if (file.startsWith(key)) {{ }}\n}}\n\n"
            f"def getMultiGpuFileChanged(pipeline, testFilter, globalVars)\n{{\n"
            f"    def relatedFileList = [\n        \"{q.join(paths)}\",\n    ]\n"
            f"    if (changedFileListStr.contains(it)) {{ return true }}\n}}\n\n"
            f"def getOnlyOneGroupChanged(pipeline, testFilter, globalVars) {{\n"
            f"    def groupFileMap = [\n        {groups},\n    ]\n"
            f"    return groupPrefixes.any {{ prefix -> file.startsWith(prefix) }}\n}}\n")


def test_the_rules_of_the_bundled_data_read_back_from_their_groovy_shape(tmp_path: Path
                                                                        ) -> None:
    """At 11ea7cc3 the gates must equal data/trtllm/ci/pr-triggers.yml: 123 paths, 5 tag
    rules, 3 groups, in order (checked by hand on the real file, docs/semantics.md); here the
    same rules in the real file's shape read back through a checkout's discovery."""
    data = yaml.safe_load(DATA.read_text())
    yml = load(str(small_checkout(tmp_path / "y", {"ci/pr-triggers.yml": DATA.read_text()})),
               use_cache=False).triggers
    groovy = load(str(small_checkout(tmp_path / "g", {MERGE_REQUEST: real_shape(data)})),
                  use_cache=False).triggers
    assert groovy.source == MERGE_REQUEST and yml.source == "ci/pr-triggers.yml"
    assert (len(groovy.multi_gpu_paths), len(groovy.auto_trigger), len(groovy.groups)) == \
        (123, 5, 3)
    assert (groovy.multi_gpu_paths, groovy.auto_trigger, groovy.groups) == \
        (yml.multi_gpu_paths, yml.auto_trigger, yml.groups)


def test_discovery_prefers_the_groovy_and_triggers_override(tmp_path: Path) -> None:
    mr = (FIXTURES / "L0_MergeRequest.groovy").read_text()
    root = small_checkout(tmp_path / "c", {MERGE_REQUEST: mr, "ci/pr-triggers.yml":
                                           "multi_gpu_file_changed:\n  related_paths: [cpp/]\n"})
    assert load(str(root), use_cache=False).triggers.multi_gpu_paths[0] == "pkg/distributed/"
    override = tmp_path / "t.yml"
    override.write_text("multi_gpu_file_changed:\n  related_paths: [other/]\n")
    idx = load(str(root), triggers=str(override), use_cache=False)
    assert idx.triggers.multi_gpu_paths == ("other/",)


def test_no_gate_rules_is_said_not_assumed(tmp_path: Path) -> None:
    idx = load(str(small_checkout(tmp_path)), use_cache=False)
    assert not idx.triggers.known
    p = pr_stages(idx.stages, idx.triggers, ["pkg/distributed/x.py"])
    assert p.caveats == (GATES_UNKNOWN,)
    assert p.to_json()["caveats"] == [GATES_UNKNOWN]
    assert p.to_json()["headline_caveats"] == [GATES_UNKNOWN]
    # GUARDED: with rules known there is no caveat
    known = load(str(small_checkout(tmp_path / "k", {
        MERGE_REQUEST: (FIXTURES / "L0_MergeRequest.groovy").read_text()})), use_cache=False)
    assert pr_stages(known.stages, known.triggers, ["x.py"], parse("/bot run")).caveats == ()


BAD = [
    ("literal missing", "def getMultiGpuFileChanged(p) {\n    def other = []\n}\n",
     r"^mr:1: getMultiGpuFileChanged has no `relatedFileList = \[...\]`"),
    ("a variable, not a literal", "def getMultiGpuFileChanged(p) {\n"
     "    def relatedFileList = [\n        somePath,\n    ]\n}\n", r"^mr:2: relatedFileList: "),
    ("not a path string", "def getMultiGpuFileChanged(p) {\n"
     "    def relatedFileList = [1]\n    x.contains(it)\n}\n", r"^mr:2: relatedFileList: 1 is not"),
    ("no gate function", "def somethingElse() {}\n", r"no gate rules found"),
    ("unbalanced", "def getMultiGpuFileChanged(p) {\n    def relatedFileList = [\n}\n",
     r"^mr:\d+: "),
]


@pytest.mark.parametrize(("text", "error"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_an_unreadable_gate_is_an_error(text: str, error: str) -> None:
    with pytest.raises(InputError, match=error):
        load_merge_request_text(text, "mr")


def test_a_missing_gate_function_or_changed_match_rule_is_a_warning() -> None:
    text = ('def getMultiGpuFileChanged(p) {\n    def relatedFileList = ["a/"]\n'
            '    x.startsWith(it)\n}\n')
    t, diags = load_merge_request_text(text, "mr")
    assert t.multi_gpu_paths == ("a/",) and t.auto_trigger == () and t.groups == ()
    msgs = [(d.severity, d.message) for d in diags]
    assert all(s is Severity.WARNING for s, _ in msgs)
    assert any("no longer uses `contains`" in m for _, m in msgs)
    assert sum("taken as empty" in m for _, m in msgs) == 2


# The shape of setupPipelineEnvironment at 11ea7cc3 (hand-made): the gate functions' results and
# CBTS's decision are stored in testFilter; getCbtsResult is defined further down the file.
CBTS_SETUP = '''
def setupPipelineEnvironment(pipeline, testFilter, globalVars)
{
    sh "env | sort"
    testFilter[(MULTI_GPU_FILE_CHANGED)] = getMultiGpuFileChanged(pipeline, testFilter, globalVars)
    testFilter[(CBTS_RESULT)] = getCbtsResult(pipeline, testFilter, globalVars)
}

def getCbtsResult(pipeline, testFilter, globalVars) {
    return null
}
'''


@pytest.mark.parametrize("extra, cbts", [
    (CBTS_SETUP, "mr:{line} calls getCbtsResult"),
    # TRAPS: named in a comment, in a string, or only defined: no call, no CBTS in the pipeline
    ("// testFilter[(CBTS_RESULT)] = getCbtsResult(pipeline, testFilter, globalVars)\n", ""),
    ('def s = "getCbtsResult(pipeline)"\n', ""),
    ("def getCbtsResult(pipeline, testFilter, globalVars) {\n    return null\n}\n", ""),
])
def test_a_getcbtsresult_call_means_cbts_may_act(extra: str, cbts: str) -> None:
    text = (FIXTURES / "L0_MergeRequest.groovy").read_text() + extra
    t, _ = load_merge_request_text(text, "mr")
    line = next((n for n, s in enumerate(text.split("\n"), 1) if "= getCbtsResult(" in s), 0)
    assert t.cbts == cbts.format(line=line)


def test_a_checkout_whose_groovy_calls_cbts_without_its_scripts_has_the_caveat(
        tmp_path: Path) -> None:
    """A sparse checkout (no jenkins/scripts/cbts/): the Groovy still runs CBTS in CI, so a
    plain /bot run may be narrowed; never a silent full stage set."""
    mr = (FIXTURES / "L0_MergeRequest.groovy").read_text() + CBTS_SETUP
    idx = load(str(small_checkout(tmp_path / "c", {MERGE_REQUEST: mr})), use_cache=False)
    where = idx.triggers.cbts
    assert where.startswith(f"{MERGE_REQUEST}:") and where.endswith("calls getCbtsResult")
    p = pr_stages(idx.stages, idx.triggers, ["pkg/a.py"], parse("/bot run"))
    assert any(c.startswith("CBTS may narrow this PR's stages") for c in p.caveats)
    # GUARDED: --disable-cbts forces the full run; the caveat goes, a note says why
    off = pr_stages(idx.stages, idx.triggers, ["pkg/a.py"], parse("/bot run --disable-cbts"))
    assert not any("CBTS may narrow" in c for c in off.caveats)
    # the scripts themselves, when there, are the more precise source
    both = small_checkout(tmp_path / "d", {MERGE_REQUEST: mr, CBTS_MAIN: "# not run\n"})
    assert load(str(both), use_cache=False).triggers.cbts == CBTS_MAIN
