"""``audit --cbts run``: the BASE commit's CBTS runs offline and the audit judges under its
decision (testdb/cbts.py::run_base_cbts; issue 23, item 5). A real git repository, a CBTS of
our own at the base commit and a different one at the head: the head's must never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tdb_helpers import small_checkout

from reports.cli import cli
from testdb.cbts import CBTS_MAY_NARROW, glob_regex, parse_decision
from testdb.errors import InputError
from tests.gitrepo import git

MAIN = "jenkins/scripts/cbts/main.py"
TRIGGERS = "multi_gpu_file_changed:\n  related_paths: [cpp/]\n"

# A CBTS of the base commit: asks for the diffs of .py files, proves it got them and the copied
# test-db, writes into its working directory (which must not be the checkout), decides.
BASE_CBTS = '''\
import json, os, sys
if sys.argv[1:] == ["--list-needed-diffs"]:
    print("**/*.py")
    sys.exit(0)
data = json.load(open(sys.argv[1]))
os.makedirs("cbts_test_db", exist_ok=True)
open("cbts_test_db/written.txt", "w").write("x")
seen = sorted(os.listdir("tests/integration/test_lists/test-db"))
print(json.dumps({"scope": "base-rules", "affected_stages": ["A10-PyTorch-1"],
                  "reasons": ["diffs:" + ",".join(sorted(data["diffs"])),
                              "changed:" + ",".join(data["changed_files"]),
                              "saw +value" if "+value = 2" in data["diffs"].get("pkg/mod.py", "")
                              else "no diff text", "test-db:" + ",".join(seen)]}))
'''
HEAD_CBTS = '''\
import json, sys
print(json.dumps({"scope": "HEAD-CODE-RAN", "affected_stages": []}))
'''


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    root = small_checkout(tmp_path / "r", {"ci/pr-triggers.yml": TRIGGERS, MAIN: BASE_CBTS,
                                           "pkg/mod.py": "value = 1\n", "notes.txt": "n\n"})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "pkg/mod.py").write_text("value = 2\n")
    (root / "notes.txt").write_text("m\n")
    (root / MAIN).write_text(HEAD_CBTS)  # the PR changes CBTS itself: it must not run
    git(root, "commit", "-qam", "head")
    return root, base, git(root, "rev-parse", "HEAD").strip()


def audit(root: Path, *args: str) -> dict:  # type: ignore[type-arg]
    r = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "audit", *args, "--format",
                                 "json", "--fail-on", "never"], standalone_mode=False,
                           catch_exceptions=False)
    return json.loads(r.output)


@pytest.mark.parametrize("head", [True, False], ids=["base..head", "base..work tree"])
def test_cbts_run_judges_under_the_base_commits_decision(repo: tuple[Path, str, str],
                                                         head: bool) -> None:
    root, base, head_sha = repo
    rng = ["--base", base, *(["--head", head_sha] if head else [])]
    plain = audit(root, *rng)
    # TRAP: not run, CBTS is owned up to, and every started stage counts
    assert CBTS_MAY_NARROW.format(where=MAIN) in plain["pipeline"]["caveats"]
    assert plain["summary"]["sentence"].endswith("(CBTS may narrow this PR's stages)")
    assert set(plain["pipeline"]["started"]) == {"A10-PyTorch-1", "A10-PyTorch-2"}
    ran = audit(root, *rng, "--cbts", "run")
    cbts = ran["pipeline"]["cbts"]
    assert cbts["run"] is True and cbts["decision"]["base"] == base
    assert cbts["decision"]["scope"] == "base-rules"  # never HEAD-CODE-RAN
    assert ran["provenance"]["cbts"] == cbts["decision"]
    reasons = cbts["decision"]["reasons"]
    # only the files its patterns ask for (not notes.txt)
    assert reasons[0] == f"diffs:{MAIN},pkg/mod.py"
    assert reasons[1].startswith("changed:") and "notes.txt" in reasons[1]
    assert reasons[2] == "saw +value"  # the file's diff, as getOneFileChanges gives it
    assert reasons[3] == "test-db:l0_a10.yml,l0_dgx_h100.yml"  # the plan's lists, copied
    # GUARDED: under the decision the stage CBTS does not list does not run, and no caveat
    # is left about CBTS
    assert set(ran["pipeline"]["started"]) == {"A10-PyTorch-1"}
    assert not any("CBTS" in c for c in ran["pipeline"]["caveats"])
    assert any("scope base-rules" in n for n in ran["pipeline"]["notes"])
    assert not (root / "cbts_test_db").exists()  # what CBTS writes stays in its scratch dir


def test_cbts_run_defers_like_ci_for_a_stage_selection_flag(repo: tuple[Path, str, str]
                                                            ) -> None:
    root, base, _ = repo
    data = audit(root, "--base", base, "--cbts", "run", "--bot-command",
                 "/bot run --extra-stage A10-PyTorch-Post-Merge-1")
    assert data["pipeline"]["cbts"]["run"] is False
    assert "provenance" in data and "cbts" not in data["provenance"]
    assert any("CBTS defers to the bot command (--extra-stage)" in n
               for n in data["pipeline"]["notes"])


def test_cbts_run_without_cbts_at_the_base_is_exit_2(tmp_path: Path) -> None:
    root = small_checkout(tmp_path / "r", {"ci/pr-triggers.yml": TRIGGERS, "a.txt": "1\n"})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / MAIN).parent.mkdir(parents=True)
    (root / MAIN).write_text(HEAD_CBTS)  # CBTS only in the work tree: never run
    (root / "a.txt").write_text("2\n")
    with pytest.raises(InputError, match="has no jenkins/scripts/cbts/"):
        CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "audit", "--base", base,
                                 "--cbts", "run"], standalone_mode=False,
                           catch_exceptions=False)


@pytest.mark.parametrize(("glob", "path", "hit"), [
    ("**/*.py", "a/b/c.py", True), ("**/*.py", "c.py", True), ("*.py", "a/c.py", False),
    ("tests/**", "tests/x/y.yml", True), ("a?c.txt", "abc.txt", True), ("a?c.txt", "a/c.txt",
                                                                       False),
])
def test_glob_regex_as_getCbtsResult_reads_it(glob: str, path: str, hit: bool) -> None:
    import re

    assert bool(re.match(glob_regex(glob), path)) is hit


def test_a_decision_that_is_no_json_is_an_error() -> None:
    with pytest.raises(InputError, match="no decision JSON"):
        parse_decision("Traceback ...", "b" * 40)
    assert parse_decision('{"scope": null, "reasons": ["Unhandled files"]}', "b").scope is None
