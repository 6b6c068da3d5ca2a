"""Unreadable input through the real entry point: the errors come first (stderr before the
result), the text result starts with a note naming what was left out, and the exit is 2; a
`.test_durations` value that is not seconds is a warning naming its line and key (exit 0); a
garbage stage table says what to do; the audit header says which multi-GPU stages start."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE

L0_H100 = "tests/integration/test_lists/test-db/l0_h100.yml"
DURATIONS = "tests/integration/defs/.test_durations"
CHUNKED = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
FOUR_GPUS = "DGX_H100-4_GPUs-PyTorch-Others-1"
BROKEN = {  # l0_h100.yml made unreadable two ways: the line the error names, and its words
    "malformed-yaml": ("    terms: {stage: pre_merge\n", "malformed YAML"),
    "tests-scalar": (None, "must be a list of test lines, found a scalar"),
}


def _cli(root: Path, *args: str) -> tuple[int, list[str]]:
    """``testdb --root ROOT ARGS`` in its own process, stderr and stdout in one stream in the
    order written (what a terminal shows)."""
    proc = subprocess.run([sys.executable, "-m", "reports", "--root", str(root), *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout.splitlines()


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("README.md"))
    return root


def _break(root: Path, how: str) -> None:
    p = root / L0_H100
    text = p.read_text()
    if how == "malformed-yaml":
        # the post_merge block's terms as an unclosed flow mapping
        old = "    terms:\n      stage: post_merge\n"
        assert old in text
        text = text.replace(old, BROKEN[how][0], 1)
    else:
        old = ("  tests:\n  # ------------- PyTorch tests ---------------\n"
               "  - accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16"
               "[attn_backend=FLASHINFER-torch_compile=False]\n"
               f"  - {CHUNKED}[attn_backend=FLASHINFER] TIMEOUT (90)\n")
        assert old in text
        text = text.replace(old, "  tests: accuracy/x.py::t\n", 1)
    p.write_text(text)


def _first_error(lines: list[str], words: str) -> int:
    at = next((i for i, line in enumerate(lines) if f"{L0_H100}:" in line and ": error: " in line
               and words in line), None)
    assert at is not None, "\n".join(lines[:20])
    assert re.match(rf"{re.escape(L0_H100)}:\d+: error: .+; .+", lines[at])  # what; what to do
    return at


@pytest.mark.parametrize("how", sorted(BROKEN))
@pytest.mark.parametrize(("command", "what", "result"), [
    (["where", f"{CHUNKED}[attn_backend=TRTLLM]"], "these verdicts", "1 parametrization"),
    (["audit", "--diff", f"{EXAMPLE}/pr.diff"], "this audit", "diff "),
    (["stats"], "these counts", "root "),
])
def test_errors_come_first_and_the_result_says_what_it_left_out(tmp_path: Path, how: str,
                                                                command: list[str], what: str,
                                                                result: str) -> None:
    root = _checkout(tmp_path)
    _break(root, how)
    code, lines = _cli(root, *command)
    assert code == 2
    err = _first_error(lines, BROKEN[how][1])
    note = next(i for i, line in enumerate(lines) if line.startswith("note: what could not"))
    assert lines[note] == (f"note: what could not be read in {L0_H100} is left out of {what} "
                           "(errors on stderr)")
    body = next(i for i, line in enumerate(lines) if result in line)
    assert err < note < body  # the error, then the note heading the result
    assert all(": error: " not in line for line in lines[note:])  # no error after the result


def test_report_says_it_left_out_what_it_could_not_read(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    _break(root, "malformed-yaml")
    code, lines = _cli(root, "report", "--html", str(tmp_path / "html"))
    assert code == 2
    err = _first_error(lines, "malformed YAML")
    assert lines[err + 1].startswith("note: what could not be read in ")
    assert lines[err + 2].startswith("wrote ")


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_lint_on_unreadable_input_exits_2_with_the_error_first(tmp_path: Path, how: str) -> None:
    root = _checkout(tmp_path)
    _break(root, how)
    code, lines = _cli(root, "lint")
    assert code == 2  # unreadable input, not a finding (exit 1)
    assert _first_error(lines, BROKEN[how][1]) == 0
    # the rest of the plan is still linted: the same problem as an [input] finding, and more
    assert any(line.endswith("[input]") for line in lines[1:])
    code, lines = _cli(root, "lint", "--fail-on", "never")
    assert code == 2 and _first_error(lines, BROKEN[how][1]) == 0


def test_lint_on_readable_input_keeps_its_exit_codes(tmp_path: Path) -> None:
    code, lines = _cli(_checkout(tmp_path), "lint", "--fail-on", "never")
    assert code == 0 and not any(": error: " in line and "[" not in line for line in lines)


def test_a_duration_that_is_not_seconds_is_a_warning_and_the_audit_answers(tmp_path: Path
                                                                           ) -> None:
    root = _checkout(tmp_path)
    p = root / DURATIONS
    key = f"{CHUNKED}[attn_backend=TRTLLM]"
    text = p.read_text()
    assert f'"{key}": 655.0' in text
    p.write_text(text.replace(f'"{key}": 655.0', f'"{key}": "slow"'))
    line = next(n for n, t in enumerate(p.read_text().splitlines(), 1) if key in t)
    for args in (["audit", "--diff", f"{EXAMPLE}/pr.diff"], ["where", key]):
        code, lines = _cli(root, *args)
        assert code == 0, "\n".join(lines)  # a warning with a result
        warn = [t for t in lines if t.startswith(f"{DURATIONS}:{line}: warning: ")]
        assert len(warn) == 1 and f"the duration of {key!r} is \"slow\"" in warn[0]
        assert not any(t.startswith("note: what could not") for t in lines)  # none left out


def test_a_garbage_stage_table_says_what_to_do(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    for text in ('{"stages": [1,2,\n', "stages: [unclosed\n", "- just\n- a list\n"):
        garbage = tmp_path / "stages.json"
        garbage.write_text(text)
        code, lines = _cli(root, "--stages", str(garbage), "stats")
        [err] = [t for t in lines if t.startswith(f"{garbage}:")]
        assert code == 2 and ": error: " in err
        assert err.endswith("give jenkins/L0_Test.groovy or a YAML table like ci/stages.yml")


def test_audit_header_names_the_multi_gpu_stage_a_bot_command_starts(tmp_path: Path) -> None:
    bot = f'/bot run --extra-stage "{FOUR_GPUS}"'
    code, lines = _cli(EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr.diff", "--bot-command", bot)
    header = " ".join(t.strip() for t in lines[2:5])
    assert code == 0, "\n".join(lines)
    assert f"1 multi-GPU stage starts: {FOUR_GPUS} (--extra-stage {FOUR_GPUS})" in header
    assert "multi-GPU stages do not" not in header
    code, lines = _cli(EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr.diff")
    assert "multi-GPU stages do not (no changed file is on their path list)" in lines[2]
