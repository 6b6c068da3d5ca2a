"""`.ci/run` runs the README's two commands as the README writes them, inside a fresh venv.

CI once installed into the system Python while the README told users to install into their own
environment; four tests passed only in CI's way (issue 25). The check here is textual: the
README's first bash block, line for line, must be lines of `.ci/run` that come after the venv is
made and activated, so changing one without the other fails the suite.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STOP = "|| exit $?"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def readme_commands(text: str) -> list[str]:
    """The command lines (no comments, no blanks) of the README's first ```bash block."""
    block = FENCE.search(text)
    assert block, "README.md has no ```bash block"
    return [ln.strip() for ln in block.group(1).splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def ci_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines()]


def check(readme: str, ci: str) -> list[str]:
    """What is wrong with ``ci`` as a runner of ``readme``'s commands (empty: nothing)."""
    lines = ci_lines(ci)
    wrong = []
    venv = next((i for i, ln in enumerate(lines) if ln.startswith("python3 -m venv ")), None)
    activate = next((i for i, ln in enumerate(lines)
                     if re.fullmatch(r'(source|\.) "?\$venv/bin/activate"?', ln)), None)
    if venv is None or activate is None or activate < venv:
        wrong.append("no `python3 -m venv` followed by activating it")
    last = activate if activate is not None else len(lines)
    for cmd in readme_commands(readme):
        checked = f"{cmd} {STOP}"
        if checked in lines:
            at = lines.index(checked)
        elif cmd in lines:
            wrong.append(f"README command's failure would not stop the run (add {STOP!r}; "
                         f"set -e ignores all but the last command of an && list): {cmd}")
            at = lines.index(cmd)
        else:
            wrong.append(f"README command not run literally: {cmd}")
            continue
        if at < last:
            wrong.append(f"README command runs before the venv is active: {cmd}")
        last = at
    if any(re.match(r"python3? -m pip install", ln) for ln in lines):
        wrong.append("installs with the system python3's pip, not the README's command")
    return wrong


def test_ci_run_runs_the_readme_commands_in_a_fresh_venv() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert check(readme, ci) == []
    assert len(readme_commands(readme)) == 2
    for kept in ("bash .ci/install-browser.sh", "bash .ci/start-slurm.sh start",
                 "export TESTDB_REQUIRE_BROWSER=1 TESTDB_REQUIRE_SLURM=1"):
        assert kept in ci_lines(ci)


README = "x\n```bash\n# 1. a\npip install -e . && testdb x\n\n# 2. b\npip install -e '.[test]' " \
         "&& python -m pytest\n```\n"
GOOD = 'python3 -m venv "$venv"\nsource "$venv/bin/activate"\n' \
       "pip install -e . && testdb x || exit $?\n" \
       "pip install -e '.[test]' && python -m pytest || exit $?\n"


@pytest.mark.parametrize(("ci", "problem"), [
    (GOOD, None),
    # the old .ci/run: the system Python, no venv (the trap: it passes where users fail)
    ("python3 -m pip install --quiet -e '.[test]'\npython3 -m pytest\n", "no `python3 -m venv`"),
    # a reworded command is not the README's
    (GOOD.replace("python -m pytest", "python -m pytest -q"), "not run literally"),
    # a failed `pip install` in an && list does not stop a set -e script: the trap
    (GOOD.replace(" || exit $?", ""), "would not stop the run"),
    # the commands before the venv is active
    ("pip install -e . && testdb x || exit $?\n"
     "pip install -e '.[test]' && python -m pytest || exit $?\n"
     'python3 -m venv "$venv"\nsource "$venv/bin/activate"\n', "before the venv is active"),
    (GOOD + "python3 -m pip install -e .\n", "system python3's pip"),
])
def test_check_table(ci: str, problem: str | None) -> None:
    wrong = check(README, ci)
    if problem is None:
        assert wrong == []
    else:
        assert any(problem in w for w in wrong), wrong


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ci_run_is_valid_bash() -> None:
    res = subprocess.run(["bash", "-n", str(REPO / ".ci" / "run")], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("line", "stops"), [
    ("false && true", False),            # set -e lets a failure before the last && pass
    (f"false && true {STOP}", True),
    (f"true && false {STOP}", True),
    (f"true && true {STOP}", None),      # nothing failed: it goes on
])
def test_why_the_readme_lines_end_in_exit(line: str, stops: bool | None) -> None:
    res = subprocess.run(["bash", "-c", f"set -euo pipefail\n{line}\necho went-on"],
                         capture_output=True, text=True, timeout=30)
    went_on = "went-on" in res.stdout
    assert went_on is (not stops), (line, res.returncode, res.stdout)
    assert (res.returncode != 0) is bool(stops)
