"""The ``/bot run`` grammar (testdb/botcmd.py): one row per rule, errors with their column."""

from __future__ import annotations

from typing import Any

import pytest

from testdb.botcmd import BotCommand, BotCommandError, parse, render, scan, split_list


@pytest.mark.parametrize("text, fields", [
    ("/bot run", {}),
    ("  /bot   run  ", {}),
    ('/bot run --stage-list "A10-PyTorch-1, A30-CPP-1"',
     {"stage_list": ("A10-PyTorch-1", "A30-CPP-1")}),
    ("/bot run --stage-list 'DGX_H100-*'", {"stage_list": ("DGX_H100-*",)}),
    ("/bot run --stage-list=A10-PyTorch-1,A10-PyTorch-2",
     {"stage_list": ("A10-PyTorch-1", "A10-PyTorch-2")}),
    ('/bot run --extra-stage "H100_PCIe-TensorRT-Post-Merge-1, xxx"',
     {"extra_stage": ("H100_PCIe-TensorRT-Post-Merge-1", "xxx")}),
    ('/bot run --extra-stage "A,, B ,"', {"extra_stage": ("A", "B")}),  # empty items dropped
    ("/bot run --extra-stage A --extra-stage B", {"extra_stage": ("B",)}),  # last one wins
    ('/bot run --gpu-type "A30, H100_PCIe"', {"gpu_type": ("A30", "H100_PCIe")}),
    ('/bot run --test-backend "pytorch, cpp"', {"test_backend": ("pytorch", "cpp")}),
    ("/bot run --add-multi-gpu-test", {"add_multi_gpu": True}),
    ("/bot run --disable-multi-gpu-test", {"disable_multi_gpu": True}),
    ("/bot run --only-multi-gpu-test", {"only_multi_gpu": True}),
    # L0_MergeRequest (11ea7cc3): only_multi_gpu_test || multi_gpu_test (ENABLE_MULTI_GPU_TEST)
    ("/bot run --multi-gpu-test", {"only_multi_gpu": True}),
    # the real flags missing before (issue 23): one with an effect, two that change no stage
    ("/bot run --disable-cbts", {"disable_cbts": True}),
    ("/bot run --disable-reuse-test --high-priority",
     {"noted": ("--disable-reuse-test", "--high-priority")}),
    ("/bot run --post-merge", {"post_merge": True}),
    ("/bot run --skip-test", {"skip_test": True}),
    ("/bot run --disable-fail-fast --detailed-log --debug",
     {"noted": ("--disable-fail-fast", "--detailed-log", "--debug")}),
    ("/bot run --reuse-test", {"noted": ("--reuse-test",)}),
    ("/bot run --reuse-test 12345 --post-merge", {"noted": ("--reuse-test",),
                                                   "post_merge": True}),
    ('/bot run --extra-stage A\\ B', {"extra_stage": ("A B",)}),  # backslash escape
    ('/bot run --extra-stage "A\\"B"', {"extra_stage": ('A"B',)}),
    ('/bot run --extra-stage x"y, z"', {"extra_stage": ("xy", "z")}),  # quotes concatenate
    ("/bot\nrun\t--post-merge", {"post_merge": True}),  # any blank separates words
])
def test_grammar_accepts(text: str, fields: dict[str, Any]) -> None:
    cmd = parse(text)
    expected = BotCommand(text=" ".join(text.split()), **fields)
    assert cmd == expected


@pytest.mark.parametrize("text, column, words", [
    ("/bot run --foo", 10, "unknown flag --foo"),
    ("/bot run --extra-stage A --add-multi-gpu", 26, "unknown flag --add-multi-gpu"),
    ('/bot run --extra-stage "A, B', 24, 'unbalanced "'),
    ("/bot run --stage-list 'A", 23, "unbalanced '"),
    ("/bot run --stage-list", 22, "--stage-list needs a list"),
    ("/bot run --stage-list --post-merge", 22, "--stage-list needs a list"),
    ('/bot run --gpu-type ""', 21, "--gpu-type got an empty list"),
    ("/bot run --stage-list=", 23, "--stage-list got an empty list"),
    ("/bot run --post-merge=yes", 22, "--post-merge takes no value"),
    ("/bot run --disable-cbts=1", 24, "--disable-cbts takes no value"),
    ("/bot run A10-PyTorch-1", 10, "unexpected word 'A10-PyTorch-1'"),
    ("/bot kill", 1, "expected `/bot run`"),
    ("/bot", 1, "expected `/bot run`"),
    ("", 1, "expected `/bot run`"),
    ("run --post-merge", 1, "expected `/bot run`"),
])
def test_grammar_rejects_with_the_column(text: str, column: int, words: str) -> None:
    with pytest.raises(BotCommandError) as exc:
        parse(text)
    assert exc.value.column == column
    assert words in str(exc.value)
    assert str(exc.value).startswith(f"--bot-command: column {column}: ")


def test_scan_reports_where_each_word_begins() -> None:
    words = scan('/bot run  --extra-stage "A, B"')
    assert [(w.text, w.column) for w in words] == [
        ("/bot", 1), ("run", 6), ("--extra-stage", 11), ("A, B", 25)]


@pytest.mark.parametrize("value, items", [
    ("A10-PyTorch-1, xxx", ("A10-PyTorch-1", "xxx")),
    ("  A  ", ("A",)),
    (",", ()),
])
def test_split_list(value: str, items: tuple[str, ...]) -> None:
    assert split_list(value) == items


@pytest.mark.parametrize("text", [
    "/bot run",
    '/bot run --stage-list "A, B*" --gpu-type A30 --add-multi-gpu-test --post-merge',
    '/bot run --extra-stage "X-1" --test-backend "pytorch" --disable-multi-gpu-test --debug',
    "/bot run --disable-cbts --high-priority --post-merge",
])
def test_render_round_trips(text: str) -> None:
    cmd = parse(text)
    again = parse(render(cmd))
    assert {k: v for k, v in vars(again).items() if k != "text"} == \
        {k: v for k, v in vars(cmd).items() if k != "text"}


def test_render_leaves_out_reuse_test_whose_id_it_does_not_keep() -> None:
    assert render(parse("/bot run --reuse-test 77 --post-merge")) == "/bot run --post-merge"
