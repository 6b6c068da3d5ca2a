"""Tests of the local backend with real child processes and pretend GPUs."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from auditor.launch.commands import Completed
from auditor.launch.gpus import NVIDIA_SMI, detect_gpus, fake_gpus
from auditor.launch.local import LocalBackend, LocalConfig
from auditor.launch.model import Progress, RunItem, RunResults, read_results
from tests.hangguard import no_hang

PY = sys.executable

# A child that reports what it was given, as one JSON line, between two timestamps.
REPORT = textwrap.dedent("""
    import json, os, sys, time
    start = time.time()
    time.sleep(float(sys.argv[1]))
    print(json.dumps({"cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start,
                      "end": time.time(), "extra": os.environ.get("EXTRA")}))
""")

PYTEST_FILE = textwrap.dedent("""
    import os, pytest

    def test_reports_gpus(record_property):
        record_property("cuda_visible_devices", os.environ["CUDA_VISIBLE_DEVICES"])

    def test_fails_on_request():
        assert os.environ.get("MAKE_IT_FAIL") != "1", "asked to fail"

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture broke")

    def test_setup_error(broken):
        pass

    def test_skipped():
        pytest.skip("needs 8 GPUs")
""")


def item(key: str, gpus: int, argv: Sequence[str], *, cwd: Path, duration: float | None = 1.0,
         timeout: int = 1, env: tuple[tuple[str, str], ...] = ()) -> RunItem:
    return RunItem(key, f"tests/t.py::{key}", gpus, "H100", timeout, False, str(cwd),
                   tuple(argv), duration, (), env)


def reporter(key: str, gpus: int, sleep: float, tmp: Path, **kw: object) -> RunItem:
    return item(key, gpus, [PY, "-c", REPORT, str(sleep)], cwd=tmp, **kw)  # type: ignore[arg-type]


def pytest_item(key: str, gpus: int, select: str, tmp: Path, **kw: object) -> RunItem:
    (tmp / "test_tiny.py").write_text(PYTEST_FILE)
    argv = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
            f"test_tiny.py::{select}",
            "--junit-xml={junit}"]
    return item(key, gpus, argv, cwd=tmp, **kw)  # type: ignore[arg-type]


def report_of(run_dir: Path, key: str) -> dict[str, object]:
    lines = (run_dir / "logs" / f"{key}.log").read_text().splitlines()
    data: dict[str, object] = json.loads(next(x for x in lines if x.startswith("{")))
    return data


def by_key(results: RunResults) -> dict[str, object]:
    return {r.key: r for r in results.results}


def backend(gpus: int, **config: object) -> LocalBackend:
    cfg = LocalConfig(poll_interval_s=0.02, kill_grace_s=1.0, **config)  # type: ignore[arg-type]
    return LocalBackend(cfg, detect=fake_gpus(gpus))


def test_gpus_are_assigned_without_overlap_and_never_oversubscribed(tmp_path: Path) -> None:
    plan = [reporter(f"one{i}", 1, 0.3, tmp_path, duration=1.0) for i in range(5)]
    plan += [reporter(f"two{i}", 2, 0.3, tmp_path, duration=2.0) for i in range(3)]
    plan.append(reporter("cpu", 0, 0.1, tmp_path))
    run_dir = tmp_path / "run"
    results = backend(4).run(plan, run_dir)
    assert [r.outcome for r in results.results] == ["passed"] * len(plan)
    spans = []
    for it in plan:
        rep = report_of(run_dir, it.key)
        cvd = str(rep["cvd"])
        gpus = set(cvd.split(",")) if cvd else set()
        assert len(gpus) == it.gpus, (it.key, cvd)
        assert gpus <= {"0", "1", "2", "3"}
        spans.append((it.key, gpus, float(rep["start"]), float(rep["end"])))  # type: ignore[arg-type]
    overlaps = 0
    for key_a, gpus_a, start_a, end_a in spans:
        for key_b, gpus_b, start_b, end_b in spans:
            if key_a < key_b and start_a < end_b and start_b < end_a:
                overlaps += 1
                assert not gpus_a & gpus_b, f"{key_a} and {key_b} shared GPUs {gpus_a & gpus_b}"
    assert overlaps > 0  # it really ran things concurrently
    for when in sorted(s for _, _, s, _ in spans):
        in_use = sum(len(g) for _, g, s, e in spans if s <= when < e)
        assert in_use <= 4


def test_a_4_gpu_test_waits_for_4_free_gpus(tmp_path: Path) -> None:
    plan = [reporter("long1", 1, 0.6, tmp_path, duration=10.0),
            reporter("four", 4, 0.0, tmp_path, duration=5.0)]
    run_dir = tmp_path / "run"
    results = backend(4).run(plan, run_dir)
    assert [r.outcome for r in results.results] == ["passed", "passed"]
    long1, four = report_of(run_dir, "long1"), report_of(run_dir, "four")
    assert four["cvd"] == "0,1,2,3"
    assert float(four["start"]) >= float(long1["end"])  # type: ignore[arg-type]


def test_items_needing_more_gpus_than_the_machine_has_are_not_runnable(tmp_path: Path) -> None:
    plan = [reporter("eight", 8, 0.0, tmp_path), reporter("one", 1, 0.0, tmp_path)]
    results = backend(2).run(plan, tmp_path / "run")
    eight, one = results.results
    assert eight.outcome == "not-runnable" and "needs 8 GPU(s)" in eight.detail
    assert "has 2 usable" in eight.detail
    assert eight.log_path is None and not (tmp_path / "run/logs/eight.log").exists()
    assert one.outcome == "passed"
    none = backend(0).run([reporter("one", 1, 0.0, tmp_path)], tmp_path / "run0")
    assert none.results[0].outcome == "not-runnable"


def test_nothing_schedulable_ends_instead_of_waiting_forever(tmp_path: Path) -> None:
    with no_hang("a plan nothing can schedule"):
        results = backend(1, cpu_slots=0).run([reporter("cpu", 0, 0.0, tmp_path),
                                               reporter("gpu", 1, 0.0, tmp_path)],
                                              tmp_path / "run")
    assert [r.outcome for r in results.results] == ["not-runnable", "passed"]
    assert "could not be scheduled" in results.results[0].detail


def test_outcomes_come_from_junit_and_cuda_visible_devices_reaches_the_test(
        tmp_path: Path) -> None:
    plan = [pytest_item("gpus", 2, "test_reports_gpus", tmp_path),
            pytest_item("fails", 1, "test_fails_on_request", tmp_path,
                        env=(("MAKE_IT_FAIL", "1"),)),
            pytest_item("setup_error", 1, "test_setup_error", tmp_path),
            pytest_item("skipped", 1, "test_skipped", tmp_path),
            pytest_item("missing", 1, "test_does_not_exist", tmp_path)]
    run_dir = tmp_path / "run"
    results = by_key(backend(4).run(plan, run_dir))
    gpus = results["gpus"]
    assert gpus.outcome == "passed" and gpus.returncode == 0  # type: ignore[attr-defined]
    tree = ET.parse(gpus.junit_path)  # type: ignore[attr-defined]
    prop = tree.find(".//property[@name='cuda_visible_devices']")
    assert prop is not None
    assert len(prop.get("value", "").split(",")) == 2
    assert prop.get("value", "").replace(",", "") in gpus.where.replace(",", "")  # type: ignore[attr-defined]
    fails = results["fails"]
    assert fails.outcome == "failed" and "test_fails_on_request" in fails.detail  # type: ignore[attr-defined]
    assert results["setup_error"].outcome == "error"  # type: ignore[attr-defined]
    skipped = results["skipped"]
    assert skipped.outcome == "not-runnable" and "needs 8 GPUs" in skipped.detail  # type: ignore[attr-defined]
    assert results["missing"].outcome == "error"  # type: ignore[attr-defined]


def test_plain_commands_are_judged_by_their_exit_code(tmp_path: Path) -> None:
    plan = [item("ok", 0, [PY, "-c", "pass"], cwd=tmp_path),
            item("bad", 0, [PY, "-c", "raise SystemExit(3)"], cwd=tmp_path),
            item("crash", 0, [PY, "-c", "import os, signal; os.kill(os.getpid(), 9)"],
                 cwd=tmp_path)]
    ok, bad, crash = backend(0, cpu_slots=3).run(plan, tmp_path / "run").results
    assert (ok.outcome, ok.returncode) == ("passed", 0)
    assert (bad.outcome, bad.returncode) == ("failed", 3)
    assert (crash.outcome, crash.returncode) == ("failed", -9)
    assert "signal 9" in crash.detail


def test_cpu_only_items_see_no_gpus_and_get_their_env(tmp_path: Path, monkeypatch:
                                                      pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    run_dir = tmp_path / "run"
    backend(2).run([reporter("cpu", 0, 0.0, tmp_path, env=(("EXTRA", "x y"),))], run_dir)
    rep = report_of(run_dir, "cpu")
    assert rep["cvd"] == "" and rep["extra"] == "x y"


def test_stale_junit_from_an_earlier_run_is_not_reused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "junit").mkdir(parents=True)
    (run_dir / "junit" / "k.xml").write_text('<testsuite><testcase name="old"/></testsuite>')
    plan = [item("k", 0, [PY, "-c", "import sys", "{junit}"], cwd=tmp_path)]
    result = backend(1).run(plan, run_dir).results[0]
    assert result.outcome == "error" and "no JUnit" in result.detail


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    termfile = tmp_path / "grandchild.term"
    grandchild = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (open("
                  f"{str(termfile)!r}, 'w').write('TERM'), sys.exit(0))); open("
                  f"{str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    code = textwrap.dedent(f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a test that ignores SIGTERM
        child = subprocess.Popen([sys.executable, "-c", {grandchild!r}])
        time.sleep(300)
    """)
    with no_hang("a timed-out test that ignores SIGTERM"):  # unkilled, it sleeps 300 s
        result = backend(1, timeout_cap_s=1.0).run(
            [item("slow", 1, [PY, "-c", code], cwd=tmp_path)], tmp_path / "run").results[0]
    assert result.outcome == "timeout" and "time limit" in result.detail
    assert result.returncode == -signal.SIGKILL  # SIGTERM was ignored, SIGKILL ended it
    assert termfile.read_text() == "TERM"  # SIGTERM went to the whole group first
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(
        f"/proc/{pid}/stat").read_text().split()[2]


def test_leftover_children_of_a_finished_test_are_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
            f"'import time; time.sleep(60)']); open({str(pidfile)!r}, 'w').write(str(p.pid))")
    result = backend(1).run([item("leaky", 1, [PY, "-c", code], cwd=tmp_path)],
                            tmp_path / "run").results[0]
    assert result.outcome == "passed"
    orphan = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{orphan}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{orphan}/stat").read_text().split()
        if stat[2] == "Z":
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{orphan}").exists() or Path(
        f"/proc/{orphan}/stat").read_text().split()[2] == "Z"


def test_a_command_that_cannot_start_is_an_error_not_a_crash(tmp_path: Path) -> None:
    plan = [item("nope", 1, ["/nonexistent/binary"], cwd=tmp_path),
            item("nocwd", 1, [PY, "-c", "pass"], cwd=tmp_path / "missing"),
            item("fine", 1, [PY, "-c", "pass"], cwd=tmp_path)]
    nope, nocwd, fine = backend(1).run(plan, tmp_path / "run").results
    assert nope.outcome == "error" and "could not start" in nope.detail
    assert nocwd.outcome == "error"
    assert fine.outcome == "passed"


def test_progress_events_and_results_file(tmp_path: Path) -> None:
    events: list[Progress] = []
    plan = [reporter(f"r{i}", 1, 0.05, tmp_path) for i in range(3)]
    plan.append(reporter("big", 3, 0.0, tmp_path))
    run_dir = tmp_path / "run"
    results = backend(2).run(plan, run_dir, progress=events.append)
    started = [e.key for e in events if e.event == "started"]
    finished = [e.key for e in events if e.event == "finished"]
    assert sorted(started) == ["r0", "r1", "r2"]
    assert sorted(finished) == ["big", "r0", "r1", "r2"]
    dones = [e.done for e in events]
    assert dones == sorted(dones) and events[-1].done == events[-1].total == 4
    assert dict(events[-1].counts) == {"passed": 3, "not-runnable": 1}
    assert all(e.running <= 2 for e in events)
    assert read_results(run_dir) == results
    assert [r.key for r in results.results] == ["r0", "r1", "r2", "big"]  # plan order


def test_ctrl_c_kills_children_marks_the_rest_cancelled_and_keeps_results(
        tmp_path: Path) -> None:
    pidfile = tmp_path / "slow.pid"
    slow_code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); " \
                "time.sleep(300)"  # unkilled, past the hang guard
    plan = [item("slow", 1, [PY, "-c", slow_code], cwd=tmp_path, duration=100.0, timeout=5),
            item("quick", 1, [PY, "-c", "pass"], cwd=tmp_path, duration=1.0),
            item("queued", 2, [PY, "-c", "pass"], cwd=tmp_path, duration=0.5)]

    def on_progress(p: Progress) -> None:
        if p.event == "finished" and p.key == "quick":
            # what a terminal's Ctrl-C does: SIGINT to this process, at whatever point it is
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()

    run_dir = tmp_path / "run"
    with no_hang("a launch stopped by Ctrl-C"):
        results = backend(2).run(plan, run_dir, progress=on_progress)
    assert results.interrupted
    got = {r.key: r.outcome for r in results.results}
    assert got == {"slow": "cancelled", "quick": "passed", "queued": "cancelled"}
    slow_pid = int(pidfile.read_text())
    assert not Path(f"/proc/{slow_pid}").exists() or Path(
        f"/proc/{slow_pid}/stat").read_text().split()[2] == "Z"
    saved = read_results(run_dir)
    assert saved.interrupted and saved.results == results.results


class FakeSmi:
    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Completed:
        assert tuple(argv) == NVIDIA_SMI
        return Completed(NVIDIA_SMI, 0, "".join(f"{i}, H100, 80000 MiB\n" for i in range(4)))


def test_outer_cuda_visible_devices_is_honoured_end_to_end(tmp_path: Path) -> None:
    def detect() -> object:
        return detect_gpus(FakeSmi(), environ={"CUDA_VISIBLE_DEVICES": "2,3"})

    run_dir = tmp_path / "run"
    cfg = LocalConfig(poll_interval_s=0.02)
    plan = [reporter("a", 1, 0.3, tmp_path), reporter("b", 1, 0.3, tmp_path),
            reporter("c", 2, 0.0, tmp_path), reporter("d", 3, 0.0, tmp_path)]
    results = LocalBackend(cfg, detect=detect).run(plan, run_dir)  # type: ignore[arg-type]
    assert [r.outcome for r in results.results] == ["passed"] * 3 + ["not-runnable"]
    assert {report_of(run_dir, "a")["cvd"], report_of(run_dir, "b")["cvd"]} == {"2", "3"}
    assert report_of(run_dir, "c")["cvd"] == "2,3"


@pytest.mark.parametrize("bad_key", ["../escape", "a b"])
def test_bad_plans_are_refused_before_anything_runs(tmp_path: Path, bad_key: str) -> None:
    from testdb.errors import InputError

    with pytest.raises(InputError):
        backend(1).run([item(bad_key, 1, [PY, "-c", "pass"], cwd=tmp_path)], tmp_path / "run")
    assert not (tmp_path / "run").exists()
