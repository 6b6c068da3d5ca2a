"""Concurrent runs on one checkout, and writes cut short: the cache and reports stay valid."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testdb import index as tdb_index
from tests.fuzz import fuzzkit


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, TESTDB_CACHE_DIR=str(cache), NO_COLOR="1")
    env.pop("TESTDB_DEBUG", None)
    env["PYTHONPATH"] = fuzzkit.REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _caches(cache: Path) -> list[str]:
    return sorted(glob.glob(str(cache / "index-*.pickle")))


def _temps(cache: Path) -> list[str]:
    return sorted(glob.glob(str(cache / ".index-*")))


def _valid(cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[tdb_index.Index]:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(cache))
    out = []
    for path in _caches(cache):
        key = os.path.basename(path)[len("index-"):-len(".pickle")]
        got = tdb_index._cache_get(key)
        assert isinstance(got, tdb_index.Index), f"{path} is not a readable cache"
        out.append(got)
    return out


@pytest.mark.parametrize("root, argv", [
    (fuzzkit.DATA, ["stats", "--format", "json"]),
    (fuzzkit.EXAMPLE, ["audit", "--diff", os.path.join(fuzzkit.EXAMPLE, "pr.diff"), "--format",
                       "json"]),
], ids=["trtllm-stats", "example-audit"])
def test_processes_racing_on_a_cold_cache_all_succeed(tmp_path, monkeypatch, root, argv):
    checkout = tmp_path / "checkout"
    shutil.copytree(root, checkout, symlinks=True)
    argv = [a.replace(root, str(checkout)) for a in argv]
    cache = tmp_path / "cache"  # cold: does not exist yet, so every process makes it
    procs = [subprocess.Popen([sys.executable, "-m", "reports", "--root", str(checkout), *argv],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(cache)) for _ in range(4)]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert all(code in (0, 1) for code, _, _ in results), results
    assert len({code for code, _, _ in results}) == 1
    docs = [json.loads(out) for _, out, _ in results]
    for d in docs:
        d.pop("seconds", None)
        d.pop("elapsed_s", None)
    assert all(d == docs[0] for d in docs)
    assert len(_caches(cache)) == 1 and not _temps(cache), os.listdir(cache)
    (idx,) = _valid(cache, monkeypatch)
    assert idx.contexts
    # A warm run afterwards reads that cache and says the same.
    warm = subprocess.run([sys.executable, "-m", "reports", "--root", str(checkout), *argv],
                          capture_output=True, text=True, env=_env(cache), timeout=300)
    assert warm.returncode == results[0][0]
    assert len(_caches(cache)) == 1


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_cache_write_leaves_no_file(tmp_path, monkeypatch, error):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(cache))
    real_replace = os.replace

    def boom(src, dst):  # type: ignore[no-untyped-def]
        if os.path.basename(str(dst)).startswith("index-"):
            raise error
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", boom)
    if isinstance(error, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            tdb_index.load(fuzzkit.EXAMPLE, use_cache=True)
    else:
        assert tdb_index.load(fuzzkit.EXAMPLE, use_cache=True).contexts
    assert not _caches(cache) and not _temps(cache), os.listdir(cache)
    monkeypatch.setattr(os, "replace", real_replace)
    assert tdb_index.load(fuzzkit.EXAMPLE, use_cache=True).contexts
    assert len(_valid(cache, monkeypatch)) == 1


def test_a_cache_write_that_fails_to_pickle_leaves_no_file(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(cache))

    real = tdb_index._lean_pickler

    def deep():  # type: ignore[no-untyped-def]
        class Deep(real()):  # type: ignore[misc]
            def dump(self, obj):  # type: ignore[no-untyped-def]
                raise RecursionError("maximum recursion depth exceeded while pickling an object")
        return Deep

    monkeypatch.setattr(tdb_index, "_lean_pickler", deep)  # the index's one pickler
    assert tdb_index.load(fuzzkit.EXAMPLE, use_cache=True).contexts
    assert not _caches(cache) and not _temps(cache)


KILLER = textwrap.dedent("""
    import os, signal, sys
    from testdb import index
    where = sys.argv[2]
    real_replace, real_fdopen = os.replace, os.fdopen
    def replace(src, dst):
        if where == "before-rename" and os.path.basename(dst).startswith("index-"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_replace(src, dst)
    class Half:
        def __init__(self, fh): self.fh = fh
        def __enter__(self): return self
        def __exit__(self, *a): self.fh.close()
        def write(self, data):
            self.fh.write(data[: len(data) // 2]); self.fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    def fdopen(fd, mode="r", *a, **k):
        fh = real_fdopen(fd, mode, *a, **k)
        return Half(fh) if where == "mid-write" and "w" in mode else fh
    os.replace, os.fdopen = replace, fdopen
    index.load(sys.argv[1], use_cache=True)
    print("not killed")
""")


@pytest.mark.parametrize("where", ["mid-write", "before-rename"])
def test_kill_9_during_the_cache_write(tmp_path, monkeypatch, where):
    cache = tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-c", KILLER, fuzzkit.DATA, where],
                          capture_output=True, text=True, env=_env(cache), timeout=300)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    assert not _caches(cache), "a killed writer must not leave a cache file readers would use"
    # The next run parses afresh and leaves one valid cache; the dead writer's temp file is
    # never read (it does not have a cache file's name).
    run = subprocess.run([sys.executable, "-m", "reports", "--root", fuzzkit.DATA, "stats"],
                         capture_output=True, text=True, env=_env(cache), timeout=300)
    assert run.returncode == 0, run.stderr
    assert len(_valid(cache, monkeypatch)) == 1


def test_a_torn_cache_file_is_a_miss(tmp_path, monkeypatch):
    """A cache file cut short (a copy or a disk that lost the tail) is detected by its digest,
    parsed afresh and rewritten; unpickling the torn bytes could allocate gigabytes."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(cache))
    tdb_index.load(fuzzkit.EXAMPLE, use_cache=True)
    (path,) = _caches(cache)
    data = Path(path).read_bytes()
    for torn in (data[: len(data) // 2], data[:40], b"", data[:60] + b"\xff" * 8 + data[68:]):
        Path(path).write_bytes(torn)
        assert tdb_index.load(fuzzkit.EXAMPLE, use_cache=True).contexts
        assert Path(path).read_bytes() == data  # rewritten whole
    assert len(_valid(cache, monkeypatch)) == 1


def _report_state(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("failures", [1, 99], ids=["new-fails", "restore-fails-too"])
def test_an_interrupted_report_write_keeps_the_previous_report(tmp_path, monkeypatch, ws,
                                                               failures):
    out = tmp_path / "report"
    code, _, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "report", "--html",
                                    str(out)])
    assert code == 0, err
    before = _report_state(out)
    real_replace = os.replace
    left = [failures]

    def boom(src, dst):  # type: ignore[no-untyped-def]
        if os.path.abspath(str(dst)) == str(out) and left[0] > 0:
            left[0] -= 1
            raise OSError(28, "No space left on device", str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", boom)
    code, _, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "report", "--html",
                                    str(out)])
    monkeypatch.setattr(os, "replace", real_replace)
    assert code == 2 and "No space left on device" in err, err
    if failures == 1:
        assert _report_state(out) == before
        assert sorted(os.listdir(tmp_path)) == ["report"]  # no .report.new-* or .old-* left
    else:
        # Putting the old report back failed as well: it must survive beside the target
        # (it used to be deleted with the temp directories), and no half report is in place.
        assert not out.exists()
        (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith(".report.old-")]
        assert _report_state(kept / "report") == before
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report.new-")]


def test_an_interrupted_audit_output_keeps_the_previous_file(tmp_path, monkeypatch, ws):
    out = tmp_path / "audit.json"
    out.write_text("previous\n")
    real_replace = os.replace

    def boom(src, dst):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(os, "replace", boom)
    code, _, err = fuzzkit.run_cli(["--root", ws.root, "--no-cache", "audit", "--diff",
                                    os.path.join(ws.root, "pr.diff"), "-o", str(out)])
    monkeypatch.setattr(os, "replace", real_replace)
    assert code == 2 and "audit.json" in err, err
    assert out.read_text() == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["audit.json"]
