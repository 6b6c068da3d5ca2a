"""``audit --cbts run`` applies CBTS's narrowed test-db (``test_db_dir_override``): a stage CBTS
keeps runs only the lines its narrowed YAML kept, so a guard it dropped is not pre-merge
(testdb/cbts.py ``Narrowed``, testdb/pipeline.py ``PrPipeline.keeps``).

Facts relied on (CBTS's README and SELECTION.md, read with the search tool): ``main.py`` writes
``cbts_test_db/`` with the affected YAMLs and only their affected blocks, entries kept verbatim,
through a PyYAML round-trip (which sorts a condition's keys); a stage whose context has no YAML
there reads the source test-db in full. The CBTS below is our own, committed at the base commit
of a real git repository; its narrowed YAML is written in its scratch directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tdb_helpers import small_checkout

from reports.cli import cli
from testdb.errors import InputError
from tests.gitrepo import git

MAIN = "jenkins/scripts/cbts/main.py"
TRIGGERS = "multi_gpu_file_changed:\n  related_paths: [cpp/]\n"
GUARD = "a.py::test_a[x=1]"

CBTS = '''\
import json, os, sys
if sys.argv[1:] == ["--list-needed-diffs"]:
    print("**/*.py")
    sys.exit(0)
NARROWED = {narrowed!r}
if NARROWED is not None:
    os.makedirs("cbts_test_db", exist_ok=True)
    open("cbts_test_db/l0_a10.yml", "w").write(NARROWED)
print(json.dumps({{"scope": "testsonly", "affected_stages": ["A10-PyTorch-1", "A10-PyTorch-2"],
                  "test_db_dir_override": "cbts_test_db"}}))
'''

# The source block's keys in another order, as PyYAML's dump sorts them.
BLOCK = """\
l0_a10:
- condition:
    ranges:
      system_gpu_count:
        gte: 1
        lte: 1
    terms:
      backend: pytorch
      stage: {stage}
    wildcards:
      gpu:
      - '*a10*'
  tests:
{tests}"""

TEST_FILE = """\
import pytest
from pkg.mod import scale


@pytest.mark.parametrize("x", [1, 2])
def test_a(x):
    assert scale(x) == 2 * x


def test_post():
    pass
"""


def narrowed(*tests: str, stage: str = "pre_merge") -> str:
    return BLOCK.format(stage=stage, tests="".join(f"  - {t}\n" for t in tests))


def pr_repo(tmp_path: Path, narrowed_yaml: str | None) -> tuple[Path, str]:
    """A checkout whose base commit holds our CBTS; the head commit changes ``scale``."""
    root = small_checkout(tmp_path / "r", {
        "ci/pr-triggers.yml": TRIGGERS, MAIN: CBTS.format(narrowed=narrowed_yaml),
        "pkg/__init__.py": "", "pkg/mod.py": "def scale(x):\n    return 2 * x\n",
        "tests/integration/defs/a.py": TEST_FILE})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "pkg/mod.py").write_text("def scale(x):\n    return x + x\n")
    git(root, "commit", "-qam", "head")
    return root, base


def run_audit(root: Path, base: str, *args: str) -> str:
    r = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "audit", "--base", base,
                                 "--head", "HEAD", "--cbts", "run", *args],
                           standalone_mode=False, catch_exceptions=False)
    return r.output


def audit(tmp_path: Path, narrowed_yaml: str | None) -> dict:  # type: ignore[type-arg]
    out = run_audit(*pr_repo(tmp_path, narrowed_yaml), "--format", "json", "--fail-on", "never")
    return json.loads(out)  # type: ignore[no-any-return]


def _verdict(data: dict) -> str:  # type: ignore[type-arg]
    [change] = data["behaviours"]
    return str(change["verdict"])


def test_kept_guard_is_pre_merge_without_the_caveat(tmp_path: Path) -> None:
    """GUARDED: the narrowed list keeps the guard's line (keys reordered): green, and no
    CBTS caveat is left, since the narrowing was applied."""
    data = audit(tmp_path, narrowed(GUARD))
    assert _verdict(data) == "pre-merge", data["behaviours"][0]
    assert not any("CBTS" in c for c in data["pipeline"]["caveats"])
    assert any("narrowed the test lists of l0_a10" in n for n in data["pipeline"]["notes"])
    assert data["pipeline"]["cbts"]["decision"]["narrowed_files"] == ["l0_a10.yml"]


@pytest.mark.parametrize("kept", [
    pytest.param(narrowed("a.py::test_post"), id="another line kept"),
    pytest.param(narrowed("a.py::test_a[x=3]"), id="a stale name of the guard kept"),
    pytest.param(narrowed(GUARD, stage="post_merge"), id="the line kept under another block"),
])
def test_a_guard_the_narrowed_list_drops_is_not_pre_merge(tmp_path: Path, kept: str) -> None:
    """TRAP: the source test-db lists the guard in a stage CBTS keeps, but its narrowed
    list does not keep that line of that block: the stage does not run it on this PR."""
    data = audit(tmp_path, kept)
    assert _verdict(data) != "pre-merge", data["behaviours"][0]
    assert data["summary"]["sentence"].startswith("1 of 1 behaviour change has no pre-merge")
    runs = [r for g in data["behaviours"][0]["guards"].values() for t in g for r in t["runs"]
            if r["stage"].startswith("A10-PyTorch-") and "Post" not in r["stage"]]
    assert runs and all(not r["started"] and "narrowed test list" in r["why"] for r in runs)


def test_no_narrowed_yaml_written_keeps_the_caveat(tmp_path: Path) -> None:
    """CBTS named an override but wrote nothing: not applied, owned up to."""
    data = audit(tmp_path, None)
    assert any("test_db_dir_override" in c for c in data["pipeline"]["caveats"])
    assert "CBTS narrowed" in data["summary"]["sentence"]


def test_a_narrowed_yaml_that_does_not_parse_is_exit_2(tmp_path: Path) -> None:
    bad = "l0_a10:\n- condition: [oops\n"
    with pytest.raises(InputError) as err:  # the entry point makes it exit 2
        run_audit(*pr_repo(tmp_path, bad))
    assert str(err.value).startswith("cbts_test_db/l0_a10.yml:3: CBTS's narrowed test-db")
    assert str(err.value).endswith("drop --cbts run")
