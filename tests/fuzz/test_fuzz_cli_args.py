"""Command-line arguments: odd patterns, roots and output paths end in a result or exit 2."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import fuzzkit
from tests.fuzz.conftest import fuzz_settings

_PATTERN = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(["test_", "chunked", "[", "]", "::", "*", "?", "(", ")", "\\",
                              ".py", "/", "-", "=", "FLASHINFER", "模", " ", "\u2028"]),
             max_size=12).map("".join),
)


@fuzz_settings(40)
@given(pattern=_PATTERN, command=st.sampled_from(["where", "launch"]))
def test_any_pattern(pattern, command, ws):
    argv = ["--root", ws.root, command, "--", pattern]
    if command == "launch":
        argv = ["--root", ws.root, "launch", "--dry-run", "--", pattern]
    with fuzzkit.time_bound(20):
        code, out, err = fuzzkit.run_cli(argv)
    outcome, detail = fuzzkit.check_cli(code, out, err)
    assert outcome in ("ok", "error", "findings"), detail


@pytest.mark.parametrize("root", ["/nonexistent/checkout", "/dev/null", "/proc/self",
                                  "{empty}", "{file}", "", "{ws}/../../../../"])
@pytest.mark.parametrize("command", [["stats"], ["lint"], ["where", "x"],
                                     ["report", "--html", "{tmp}/r"]])
def test_odd_roots(root, command, ws, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    root = root.format(empty=tmp_path / "empty", file=tmp_path / "file", ws=ws.root)
    argv = ["--root", root, "--no-cache", *[c.format(tmp=tmp_path) for c in command]]
    with fuzzkit.time_bound(60):
        code, out, err = fuzzkit.run_cli(argv)
    outcome, detail = fuzzkit.check_cli(code, out, err)
    assert outcome in ("ok", "error", "findings"), detail


@pytest.mark.parametrize("out", ["/proc/nope/audit.json", "{tmp}", "{tmp}/missing/dir/a.json"])
def test_unwritable_outputs_are_clean_errors(out, ws, tmp_path):
    argv = ["--root", ws.root, "--no-cache", "audit", "--diff",
            os.path.join(ws.root, "pr.diff"), "-o", out.format(tmp=tmp_path)]
    code, _, err = fuzzkit.run_cli(argv)
    if out.startswith("{tmp}/missing"):  # the directories are made
        assert code in (0, 1), err
    else:
        assert code == 2, err
        assert err.startswith("error: ") or "\nError: " in err, err
        assert "Traceback" not in err


def test_output_through_a_symlink_or_a_fifo_is_written_through(ws, tmp_path):
    """`-o` used to rename its temp file over the path: a symlink became a plain file, and a
    FIFO or device node (as root: /dev/stdout, /dev/full) was replaced by a regular file."""
    import threading

    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    for out in (link, fifo):
        code, _, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "audit", "--diff",
                                        os.path.join(ws.root, "pr.diff"), "-o", str(out)])
        assert code in (0, 1), err
    reader.join(10)
    assert link.is_symlink() and real.read_text().startswith("{")
    assert fifo.is_fifo() and got and got[0].startswith(b"{")
