"""`launch --slurm-config F`: a file of the wrong shape is exit 2 naming F:line and the shape
expected (issue 25, item 1: `gpu_types: nope` was exit 3 "AttributeError: 'str' object has no
attribute 'items'"), read before any planning."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.launch.slurmconfig import SHAPE, SlurmConfig, load
from testdb.errors import InputError
from tests.auditor.launch.test_launch_cli import tiny  # noqa: F401 (a fixture)


@pytest.mark.parametrize(("text", "line", "says"), [
    ("time_margin_minutes: 5\ngpu_types: nope\n", 2, "gpu_types: expected a mapping, got 'nope'"),
    ("gpu_types:\n  '*': gpuq\n", 2, "gpu type '*': expected a mapping, got 'gpuq'"),
    ("gpu_types:\n  h100: {partition: a}\n  a100: {queue: b}\n", 3, "unknown key(s) queue"),
    ("poll_interval_s: 1\nrequeue: true\n", 2, "unknown slurm option(s) requeue"),
    ("time_margin_minutes: ten\n", 1, "time_margin_minutes: expected an integer, got 'ten'"),
    ("requeue_preempted: 1\n", 1, "requeue_preempted: expected true or false"),
    ("extra_args: --qos=ci\n", 1, "extra_args: expected a list of strings"),
    ("- gpu_types\n", 1, "slurm config must be a mapping"),
    ("gpu_types: {h100: [\n", 2, "malformed YAML"),
])
def test_wrong_shapes_name_the_line(tmp_path: Path, text: str, line: int, says: str) -> None:
    path = tmp_path / "slurm.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load(str(path))
    assert err.value.loc is not None and (err.value.loc.path, err.value.loc.line) == (
        str(path), line), str(err.value)
    assert says in str(err.value)


@pytest.mark.parametrize(("text", "want"), [
    ("", SlurmConfig()),
    ("gpu_types:\n  'h100*': {partition: gpuq, account: ci}\ntime_margin_minutes: 5\n"
     "requeue_preempted: yes\npoll_interval_s: 2\nextra_args: [--qos=ci]\n",
     SlurmConfig.from_mapping({"h100*": {"partition": "gpuq", "account": "ci"}},
                              time_margin_minutes=5, requeue_preempted=True,
                              poll_interval_s=2, extra_args=["--qos=ci"])),
])
def test_good_files_load(tmp_path: Path, text: str, want: SlurmConfig) -> None:
    path = tmp_path / "slurm.yml"
    path.write_text(text, encoding="utf-8")
    assert load(str(path)) == want


def test_cli_exit_2_with_file_line_and_shape(run_cli, tiny: Path,  # type: ignore[no-untyped-def]  # noqa: F811
                                             tmp_path: Path) -> None:
    cfg = tmp_path / "slurm.yml"
    cfg.write_text("gpu_types: nope\n", encoding="utf-8")
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_big[1]", "--dry-run",
                  "--backend", "slurm", "--slurm-config", str(cfg))
    assert res.code == 2, res.err
    assert f"{cfg}:1:" in res.err and SHAPE in res.err
    assert "internal error" not in res.err and "AttributeError" not in res.err
