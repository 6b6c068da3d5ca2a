"""The composite GitHub Action (action.yml), run step by step the way the runner runs it: each
`run:` script through `bash --noprofile --norc -eo pipefail`, its `env:` with the `${{ }}`
expressions resolved from the inputs, the github context and earlier steps' outputs, the
runner's files (GITHUB_OUTPUT, GITHUB_PATH, GITHUB_STEP_SUMMARY), against a real git repo
(a bare origin and a pull-request branch) and the fake GitHub of fake_github.py.

The install step pip-installs a copy of this checkout (the action's own path) into a virtualenv
that sees this environment's packages, without an index (PIP_NO_INDEX): offline, as in CI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gitrepo import git, pr_clone
from tests.reports.fake_github import FakeGitHub
from tests.reports.thisenv import see_this_env

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
TOKEN = "ghs_action_token"
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
INSTALL_STEP = "Install testdb-audit"
AUDIT_STEP = "Audit the pull request's range"
COMMENT_STEP = "Post or update the sticky PR comment"
DOTTED = re.compile(r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*")

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def load_action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    return data


def resolve(text: str, contexts: dict[str, Any]) -> str:
    """`${{ a.b.c }}` property look-ups, as the runner evaluates them (a missing property is
    ''); any other expression is refused, so the test never silently skips one."""
    def one(m: re.Match[str]) -> str:
        expr = m.group(1)
        assert DOTTED.fullmatch(expr), f"unsupported expression ${{{{ {expr} }}}}"
        head, *rest = expr.split(".")
        assert head in contexts, f"unknown context {head!r}"
        value: Any = contexts[head]
        for key in rest:
            value = value.get(key, "") if isinstance(value, dict) else ""
        return "" if value is None else str(value)
    return EXPR.sub(one, text)


def read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT: `name=value` lines and `name<<DELIM` ... `DELIM` blocks."""
    out: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            for more in lines:
                if more == delim:
                    break
                body.append(more)
            out[name] = "\n".join(body)
        elif line:
            name, _, value = line.partition("=")
            out[name] = value
    return out


@dataclass
class Run:
    rc: int  # the action's result: 0, or the failing step's exit code
    failed_step: str | None
    outputs: dict[str, str]
    log: str
    summary: str
    steps: list[str] = field(default_factory=list)


def run_action(workspace: Path, tmp: Path, *, inputs: dict[str, str], github: dict[str, Any],
               env: dict[str, str], only: set[str] | None = None,
               outputs: dict[str, dict[str, str]] | None = None) -> Run:
    """Every step of action.yml in order; a failing step stops the rest (no step has `if:`).
    ``only``: run just the steps of those names, with skipped steps' ``outputs`` given."""
    action = load_action()
    assert action["runs"]["using"] == "composite"
    given = dict(inputs)
    unknown = set(given) - set(action["inputs"])
    assert not unknown, f"inputs the action does not declare: {unknown}"
    ctx: dict[str, Any] = {"github": github, "steps": {
        k: {"outputs": v} for k, v in (outputs or {}).items()}}
    ctx["inputs"] = {k: given.get(k, resolve(str(spec.get("default", "")), ctx))
                     for k, spec in action["inputs"].items()}
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    summary, path_file = tmp / "summary.md", tmp / "path.txt"
    summary.write_text("", encoding="utf-8")
    path_file.write_text("", encoding="utf-8")
    log: list[str] = []
    names = []
    for i, step in enumerate(action["runs"]["steps"]):
        assert set(step) <= {"name", "id", "shell", "env", "run"}, step.get("name")
        if only is not None and step["name"] not in only:
            continue
        assert step["shell"] == "bash"
        assert not EXPR.search(step["run"]), f"{step['name']}: ${{{{ }}}} inside a script"
        out_file = tmp / f"output-{i}.txt"
        out_file.write_text("", encoding="utf-8")
        extra_path = [p for p in path_file.read_text(encoding="utf-8").splitlines() if p]
        step_env = {
            **env, "GITHUB_OUTPUT": str(out_file), "GITHUB_PATH": str(path_file),
            "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(runner_temp),
            "GITHUB_WORKSPACE": str(workspace), "GITHUB_ACTION_PATH": github["action_path"],
            "PATH": os.pathsep.join([*reversed(extra_path), env["PATH"]]),
            **{k: resolve(str(v), ctx) for k, v in (step.get("env") or {}).items()},
        }
        script = tmp / f"step-{i}.sh"
        script.write_text(step["run"], encoding="utf-8")
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                             cwd=workspace, env=step_env, text=True, capture_output=True,
                             timeout=300)
        log.append(f"## {step['name']} (exit {res.returncode})\n{res.stdout}{res.stderr}")
        names.append(step["name"])
        if "id" in step:
            ctx["steps"][step["id"]] = {"outputs": read_outputs(out_file)}
        if res.returncode:
            outs = {k: resolve(str(v["value"]), ctx) for k, v in action["outputs"].items()}
            return Run(res.returncode, step["name"], outs, "\n".join(log),
                       summary.read_text(encoding="utf-8"), names)
    outs = {k: resolve(str(v["value"]), ctx) for k, v in action["outputs"].items()}
    return Run(0, None, outs, "\n".join(log), summary.read_text(encoding="utf-8"), names)


@pytest.fixture(scope="module")
def action_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the runner checks the action out: a copy of this checkout as it stands."""
    dest = tmp_path_factory.mktemp("action")
    files = git(REPO, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, files):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def runner_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runner's Python: a virtualenv seeing this environment's packages (the tool's
    dependencies, so pip needs no index; thisenv.py says why not --system-site-packages); the
    action installs the tool into it. Made by virtualenv (pre-commit's dependency), which seeds
    a setuptools that builds wheels itself from the wheels it bundles: no download."""
    venv = tmp_path_factory.mktemp("runner") / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True,
                   timeout=300)
    see_this_env(venv / "bin" / "python")
    return venv / "bin" / "python"


def _repo(tmp: Path, diff: str) -> Path:
    """The PR branch's clone (``tests.gitrepo.pr_clone``)."""
    return pr_clone(tmp, Path(EXAMPLE), diff, tmp / "workspace")


def _env(runner_python: Path, api: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "GIT_", "RUNNER_", "INPUT_"))}
    return {**keep, "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "octo/hello",
            "GITHUB_BASE_REF": "main", "GITHUB_HEAD_REF": "feature", "GITHUB_API_URL": api,
            "GITHUB_EVENT_NAME": "pull_request", "NO_COLOR": "1",
            "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
            "PATH": os.environ.get("PATH", "")}


def _github(action_path: Path, head_repo: str = "octo/hello", token: str = TOKEN
            ) -> dict[str, Any]:
    return {"action_path": str(action_path), "token": token, "repository": "octo/hello",
            "base_ref": "main", "event": {"pull_request": {
                "number": 7, "head": {"sha": "0" * 40, "repo": {"full_name": head_repo}}}}}


def test_action_declares_inputs_and_keeps_expressions_out_of_scripts() -> None:
    action = load_action()
    assert {"root", "base", "fail-on", "token"} <= set(action["inputs"])
    assert action["inputs"]["token"]["default"] == "${{ github.token }}"
    assert set(action["outputs"]) == {"exit-code", "audit-json"}
    for step in action["runs"]["steps"]:
        assert step["shell"] == "bash" and not EXPR.search(step["run"]), step["name"]


def test_findings_post_the_comment_then_fail_the_check(tmp_path: Path, action_path: Path,
                                                       runner_python: Path) -> None:
    ws = _repo(tmp_path, "pr-no-thin-guard.diff")
    git(ws, "update-ref", "-d", "refs/remotes/origin/main")  # a shallow checkout: fetched
    with FakeGitHub(token=TOKEN, prs={"octo/hello": (7,)}) as gh:
        run = run_action(ws, tmp_path, inputs={"python": str(runner_python)},
                         github=_github(action_path), env=_env(runner_python, gh.url))
        assert run.failed_step == "Fail the check on findings" and run.rc == 1, run.log
        assert run.steps == [s["name"] for s in load_action()["runs"]["steps"]]
        assert run.outputs["exit-code"] == "1"
        assert "fetching it" in run.log
        comments = gh.comments()
        assert len(comments) == 1 and "<!-- testdb-audit -->" in comments[0]["body"]
        assert "1 of 1 behaviour change has no pre-merge guard" in comments[0]["body"]
        assert "blob/" + "0" * 40 in comments[0]["body"], "evidence links at the PR head"
        assert comments[0]["body"] in run.summary
        assert gh.methods().count("POST") == 1
        assert all(c.auth_scheme for c in gh.calls)
        assert TOKEN not in run.log, "the token is never printed"
        assert Path(run.outputs["audit-json"]).is_file()
        venv_testdb = runner_python.parent / "testdb"
        assert venv_testdb.is_file(), "the install step put the tool into the runner's venv"

        # The next push fixes the guard: the same comment is updated in place, the check passes.
        git(ws, "checkout", "-q", "main", "--", ".")
        git(ws, "apply", str(EXAMPLE / "pr.diff"))
        git(ws, "add", "-A")
        git(ws, "commit", "-qm", "keep the thin guard")
        again = run_action(ws, tmp_path, inputs={"python": str(runner_python)},
                           github=_github(action_path), env=_env(runner_python, gh.url))
        assert again.rc == 0, again.log
        assert again.outputs["exit-code"] == "0"
        after = gh.comments()
        assert [c["id"] for c in after] == [comments[0]["id"]], "one sticky comment"
        assert after[0]["body"] != comments[0]["body"] and "PATCH" in gh.methods()


@pytest.mark.parametrize(("inputs", "github", "rc"), [
    ({"fail-on": "never"}, {}, 0),
    ({}, {"head_repo": "fork/hello"}, 1),  # a fork's token is read-only: summary only
])
def test_fail_on_never_and_a_fork(tmp_path: Path, action_path: Path, runner_python: Path,
                                  inputs: dict[str, str], github: dict[str, str],
                                  rc: int) -> None:
    ws = _repo(tmp_path, "pr-no-thin-guard.diff")
    with FakeGitHub(token=TOKEN, prs={"octo/hello": (7,)}) as gh:
        run = run_action(ws, tmp_path, inputs={"python": str(runner_python), **inputs},
                         github=_github(action_path, **github),
                         env=_env(runner_python, gh.url))
        assert run.rc == rc, run.log
        assert run.outputs["exit-code"] == ("0" if inputs.get("fail-on") == "never" else "1")
        assert "1 of 1 behaviour change has no pre-merge guard" in run.summary
        if github.get("head_repo"):
            assert gh.calls == [], "a fork's run never reaches the API"
            assert "::notice::a fork's pull request" in run.log
        else:
            assert len(gh.comments()) == 1


@pytest.mark.parametrize(("inputs", "github", "said"), [
    ({"comment": "never"}, {}, "comment: never"),
    ({}, {"token": ""}, "::warning::no token"),
])
def test_comment_step_without_posting(tmp_path: Path, action_path: Path,
                                      inputs: dict[str, str], github: dict[str, str],
                                      said: str) -> None:
    """The comment step alone (the earlier steps' outputs given, the tool of this
    environment on PATH): these choices write the job summary and call no API."""
    audit = tmp_path / "audit.json"
    res = subprocess.run([sys.executable, "-m", "reports", "--root", str(EXAMPLE), "audit",
                          "--diff", str(EXAMPLE / "pr-no-thin-guard.diff"), "-o", str(audit)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and audit.is_file(), res.stderr
    with FakeGitHub(token=TOKEN) as gh:
        env = _env(Path(sys.executable), gh.url)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
        run = run_action(tmp_path, tmp_path, inputs=inputs, github=_github(action_path, **github),
                         env=env, only={COMMENT_STEP},
                         outputs={"audit": {"file": str(audit), "rc": "1"}})
        assert run.rc == 0, run.log
        assert said in run.log
        assert "1 of 1 behaviour change has no pre-merge guard" in run.summary
        assert gh.calls == []


def test_a_broken_range_fails_in_the_audit_step(tmp_path: Path, action_path: Path) -> None:
    """Every step but the install (the tool of this environment on PATH)."""
    ws = _repo(tmp_path, "pr.diff")
    with FakeGitHub(token=TOKEN) as gh:
        env = _env(Path(sys.executable), gh.url)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
        steps = {s["name"] for s in load_action()["runs"]["steps"]} - {INSTALL_STEP}
        run = run_action(ws, tmp_path, inputs={"base": "no-such-branch"},
                         github=_github(action_path), env=env, only=steps)
        assert run.failed_step == AUDIT_STEP and run.rc == 2, run.log
        assert "could not audit the change (exit 2)" in run.log
        assert gh.calls == []
        ok = run_action(ws, tmp_path, inputs={}, github=_github(action_path), env=env,
                        only=steps)
        assert ok.rc == 0 and ok.outputs["exit-code"] == "0", ok.log
        assert len(gh.comments()) == 1


def test_example_workflow_uses_the_action_with_its_inputs() -> None:
    wf = yaml.safe_load((REPO / "examples" / "github-actions.yml").read_text(encoding="utf-8"))
    action = load_action()
    assert wf["permissions"]["pull-requests"] == "write"
    steps = wf["jobs"]["audit"]["steps"]
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0, "the audit needs the base branch's history"
    ours = [s for s in steps if str(s.get("uses", "")).split("@")[0].endswith("/testdb-audit")]
    assert len(ours) == 1
    assert set(ours[0].get("with") or {}) <= set(action["inputs"])
