"""The Jenkins stage (examples/jenkins/Jenkinsfile), run the way Jenkins runs it: its `withEnv`
values resolved from a merge request's environment (the Groovy text is read, never executed),
its `sh` script run by `/bin/sh -xe` in the workspace with the credential's token, its
`archiveArtifacts` patterns matched afterwards; on a real git repository (a bare origin and a
merge-request branch), against the fake GitHub of fake_github.py. Like test_action.py does for
action.yml."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import git, pr_clone
from tests.reports.fake_github import FakeGitHub

REPO = Path(__file__).resolve().parents[2]
JENKINSFILE = REPO / "examples" / "jenkins" / "Jenkinsfile"
SCRIPT = REPO / "examples" / "jenkins" / "audit-mr.sh"
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
TOKEN = "ghp_jenkins_credential"
BUILD_URL = "https://jenkins.example.com/job/L0_MergeRequest/42/"
GSTRING = re.compile(r"\$\{(.*?)\}")
OPERAND = re.compile(r"'([^']*)'|([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not Path("/bin/sh").exists(),
                                reason="needs git and /bin/sh")


@dataclass(frozen=True)
class Stage:
    """What the Groovy stage does, read from its text."""

    env: list[tuple[str, str]]  # withEnv's "NAME=value" entries, value still a GString
    script: str  # the sh step's script: a single-quoted Groovy string (no interpolation)
    archive: list[str]  # archiveArtifacts' patterns
    credential: str  # the variable withCredentials binds the token to


def stage_text() -> Stage:
    text = JENKINSFILE.read_text(encoding="utf-8")
    block = re.search(r"withEnv\(\[(.*?)\]\)", text, re.S)
    assert block, "the stage passes its values through withEnv"
    entries = re.findall(r'^\s*"([A-Z_]+)=(.*)",?\s*$', block.group(1), re.M)
    scripts = re.findall(r"\bsh\((.*?)\)", text)
    assert len(scripts) == 1, "one sh step, the script's"
    script = re.fullmatch(r"script: '([^']*)', returnStatus: true", scripts[0])
    assert script, f"the sh script is a single-quoted string, its status returned: {scripts[0]}"
    archive = re.search(r"archiveArtifacts artifacts: '([^']*)'", text)
    cred = re.search(r"withCredentials\(\[string\(credentialsId: '[^']+', variable: '(\w+)'\)",
                     text)
    assert archive and cred
    return Stage(entries, script.group(1), [p.strip() for p in archive.group(1).split(",")],
                 cred.group(1))


def resolve(value: str, ctx: dict[str, Any]) -> str:
    """A GString's ``${a ?: b.c ?: 'x'}`` as Groovy evaluates it: the first operand that is
    set and not empty (Groovy truth); any other expression is refused, so the test never
    silently resolves one wrong."""
    def one(m: re.Match[str]) -> str:
        for operand in m.group(1).split("?:"):
            op = OPERAND.fullmatch(operand.strip())
            assert op, f"unsupported expression ${{{m.group(1)}}}"
            if op.group(2) is None:
                if op.group(1):
                    return op.group(1)
                continue
            head, *rest = op.group(2).split(".")
            got: Any = ctx.get(head)
            for key in rest:
                got = got.get(key) if isinstance(got, dict) else None
            if got:
                return str(got)
        return ""
    return GSTRING.sub(one, value)


@dataclass
class Ran:
    rc: int
    log: str
    archived: list[str]  # workspace-relative files archiveArtifacts would keep


def run_stage(ws: Path, tmp: Path, ctx: dict[str, Any], token: str = TOKEN) -> Ran:
    """The stage: withCredentials binds the token, withEnv adds its entries to the agent's
    environment, sh runs the script with `sh -xe` in the workspace; then the archive."""
    stage = stage_text()
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "GIT_", "TESTDB_", "JENKINS_"))}
    env = {**keep, "NO_COLOR": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "PYTHONPATH": str(REPO), "TESTDB_CACHE_DIR": str(tmp / "cache"),
           # the agent's testdb: this environment's
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
           stage.credential: token}
    env.update({name: resolve(value, ctx) for name, value in stage.env})
    step = tmp / "sh-step.sh"
    step.write_text(stage.script + "\n", encoding="utf-8")
    res = subprocess.run(["/bin/sh", "-xe", str(step)], cwd=ws, env=env, text=True,
                         capture_output=True, timeout=300)
    # Ant's trailing ``dir/**`` is every file under dir; pathlib's ``**`` matches directories
    archived = sorted({str(p.relative_to(ws)) for pattern in stage.archive
                       for p in ws.glob(pattern + "/*" if pattern.endswith("/**") else pattern)
                       if p.is_file()})
    return Ran(res.returncode, res.stdout + res.stderr, archived)


def _workspace(tmp: Path, diff: str) -> tuple[Path, Path]:
    """A Jenkins workspace holding the merge request's checkout at ``llm``."""
    ws = tmp / "workspace"
    ws.mkdir()
    return ws, pr_clone(tmp, Path(EXAMPLE), diff, ws / "llm")


def _ctx(ws: Path, llm: Path, api: str, target: str = "main",
         pr_url: str | None = None) -> dict[str, Any]:
    """The merge request's environment as L0_MergeRequest.groovy sees it."""
    head = git(llm, "rev-parse", "HEAD").strip()
    return {"env": {"gitlabMergeRequestLastCommit": head, "gitlabTargetBranch": target,
                    "WORKSPACE": str(ws), "BUILD_URL": BUILD_URL},
            "globalVars": {"github_pr_api_url": pr_url or f"{api}/repos/octo/hello/pulls/7"},
            "llmRoot": "llm", "testdbHome": str(REPO)}


def test_the_stage_passes_values_only_through_the_environment() -> None:
    stage = stage_text()
    assert "${" not in stage.script and stage.script == 'bash "$TESTDB_SCRIPT"'
    assert stage.credential == "GITHUB_TOKEN"
    names = {n for n, _ in stage.env}
    script = SCRIPT.read_text(encoding="utf-8")
    read = set(re.findall(r"\$\{?(TESTDB_[A-Z_]+)", script))
    header = set(re.findall(r"\b(TESTDB_[A-Z_]+|GITHUB_[A-Z_]+)",
                            script.split("\nset -euo pipefail")[0]))
    assert read <= header, f"inputs the header does not document: {read - header}"
    assert names - {"TESTDB_SCRIPT"} <= read, "every value the stage sets is read"
    assert read - names <= {"TESTDB_BASE", "TESTDB_REMOTE", "TESTDB_REPO", "TESTDB_PR",
                            "TESTDB_BOT_COMMAND"}, "what the stage leaves out is optional"
    assert {"testdb-audit/audit.json", "testdb-audit/html/**"} <= set(stage.archive)
    # the token's value is only tested for emptiness (testdb comment reads it from the
    # environment itself): never expanded into a command line or a message
    uses = re.findall(r".*\$\{?GITHUB_TOKEN.*", script)
    assert uses and all('[ -z "${GITHUB_TOKEN:-}" ]' in u for u in uses), uses


def test_findings_archive_the_report_and_post_then_update_the_comment(tmp_path: Path) -> None:
    ws, llm = _workspace(tmp_path, "pr-no-thin-guard.diff")
    git(llm, "update-ref", "-d", "refs/remotes/origin/main")  # a shallow checkout: fetched
    with FakeGitHub(token=TOKEN, prs={"octo/hello": (7,)}) as gh:
        ctx = _ctx(ws, llm, gh.url)
        ran = run_stage(ws, tmp_path, ctx)
        assert ran.rc == 1, ran.log  # findings: the stage marks the build unstable
        assert "fetching it" in ran.log
        assert {"testdb-audit/audit.json", "testdb-audit/audit.txt", "testdb-audit/comment.md",
                "testdb-audit/html/index.html", "testdb-audit/html/function.html",
                "testdb-audit/html/data.js", "testdb-audit/html/static/report.js"} <= set(
            ran.archived), ran.log
        out = ws / "testdb-audit"
        head = ctx["env"]["gitlabMergeRequestLastCommit"]
        assert (out / "audit.txt").read_text().splitlines()[0].startswith(
            "1 of 1 behaviour change has no pre-merge guard")
        audit = json.loads((out / "audit.json").read_text())
        assert audit["provenance"]["head"] == head  # the merge request's range, base...head
        comments = gh.comments()
        assert len(comments) == 1 and "<!-- testdb-audit -->" in comments[0]["body"]
        body = comments[0]["body"]
        assert "1 of 1 behaviour change has no pre-merge guard" in body
        assert f"blob/{head}/" in body, "evidence links at the merge request's commit"
        assert f"({BUILD_URL}artifact/testdb-audit/html/index.html)" in body
        assert body.strip() == (out / "comment.md").read_text().strip()
        assert TOKEN not in ran.log and all(c.auth_scheme for c in gh.calls)
        assert "Post-Merge-1" in (out / "html" / "index.html").read_text()

        # the next push keeps the thin guard: the same comment is updated, the stage passes
        git(llm, "checkout", "-q", "main", "--", ".")
        git(llm, "apply", str(EXAMPLE / "pr.diff"))
        git(llm, "add", "-A")
        git(llm, "commit", "-qm", "keep the thin guard")
        again = run_stage(ws, tmp_path, _ctx(ws, llm, gh.url))
        assert again.rc == 0, again.log
        after = gh.comments()
        assert [c["id"] for c in after] == [comments[0]["id"]], "one sticky comment"
        assert after[0]["body"] != body and "PATCH" in gh.methods()


def test_without_a_token_the_comment_is_only_archived(tmp_path: Path) -> None:
    ws, llm = _workspace(tmp_path, "pr-no-thin-guard.diff")
    with FakeGitHub(token=TOKEN, prs={"octo/hello": (7,)}) as gh:
        ran = run_stage(ws, tmp_path, _ctx(ws, llm, gh.url), token="")
        assert ran.rc == 1, ran.log
        assert gh.calls == [] and "no GITHUB_TOKEN" in ran.log
        assert "testdb-audit/comment.md" in ran.archived
        assert "no pre-merge guard" in (ws / "testdb-audit" / "comment.md").read_text()


@pytest.mark.parametrize(("target", "pr_url", "said"), [
    ("no-such-branch", None, "could not audit origin/no-such-branch..."),
    ("main", "https://api.github.com/repos/octo/hello/issues/7", "is not .../repos/OWNER"),
])
def test_what_cannot_be_audited_exits_2_and_posts_nothing(tmp_path: Path, target: str,
                                                          pr_url: str | None,
                                                          said: str) -> None:
    ws, llm = _workspace(tmp_path, "pr.diff")
    with FakeGitHub(token=TOKEN, prs={"octo/hello": (7,)}) as gh:
        ran = run_stage(ws, tmp_path, _ctx(ws, llm, gh.url, target, pr_url))
        assert ran.rc == 2, ran.log
        assert said in ran.log
        assert gh.calls == []
        assert "testdb-audit/comment.md" not in ran.archived


@pytest.mark.parametrize(("value", "ctx", "want"), [
    ("${env.a ?: env.b ?: ''}", {"env": {"b": "B"}}, "B"),
    ("${env.a ?: 'main'}", {"env": {"a": ""}}, "main"),  # Groovy truth: '' is false
    ("${env.W}/x", {"env": {"W": "/ws"}}, "/ws/x"),
    ("${g.k ?: ''}", {"g": {}}, ""),
])
def test_the_gstring_resolver(value: str, ctx: dict[str, Any], want: str) -> None:
    assert resolve(value, ctx) == want
