"""Safety: YAML only through safe loaders; no reads or writes outside the tree; no token leaks."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import logging
import os
import shutil
import sys
import traceback
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz import fuzzkit

REPO = Path(fuzzkit.REPO)
PACKAGES = ("testdb", "auditor", "reports")


# ---- YAML loaders ------------------------------------------------------------------------------

def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


UNSAFE_NAMES = ("unsafe_load", "full_load", "FullLoader", "UnsafeLoader", "CFullLoader",
                "CUnsafeLoader")


def _safe_loader_expr(node: ast.expr, safe_names: set[str]) -> bool:
    """``yaml.SafeLoader``, ``yaml.CSafeLoader``, ``getattr(yaml, "CSafeLoader", yaml.SafeLoader)``
    or a module-level name only ever bound to those."""
    if isinstance(node, ast.Name):
        return node.id in safe_names
    text = ast.unparse(node)
    names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return bool(names) and all(n in ("SafeLoader", "CSafeLoader") for n in names) \
        and "Safe" in text


def _yaml_findings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    bad: list[str] = []
    # Names bound (anywhere in the module) only to safe loader expressions.
    binds: dict[str, list[ast.expr]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Name):
                    binds.setdefault(t.id, []).append(n.value)
    safe_names = {k for k, vs in binds.items() if all(_safe_loader_expr(v, set()) for v in vs)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in (*UNSAFE_NAMES, "Loader", "CLoader") \
                and isinstance(n.value, ast.Name) and n.value.id == "yaml":
            bad.append(f"{path}:{n.lineno}: yaml.{n.attr}")
        if isinstance(n, ast.Name) and n.id in UNSAFE_NAMES:
            bad.append(f"{path}:{n.lineno}: {n.id}")
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        f = n.func
        if not (isinstance(f.value, ast.Name) and f.value.id == "yaml"):
            continue
        if f.attr in ("load", "load_all", "compose", "compose_all", "parse", "scan"):
            loader = next((k.value for k in n.keywords if k.arg == "Loader"),
                          n.args[1] if len(n.args) > 1 else None)
            if loader is None or not _safe_loader_expr(loader, safe_names):
                bad.append(f"{path}:{n.lineno}: yaml.{f.attr}(...) without a Safe/CSafe loader: "
                           f"{ast.unparse(n)[:120]}")
        elif f.attr in ("unsafe_load", "full_load", "unsafe_load_all", "full_load_all"):
            bad.append(f"{path}:{n.lineno}: yaml.{f.attr}")
    return bad


def test_yaml_is_only_loaded_with_safe_loaders():
    files = _sources()
    assert len(files) > 20
    bad = [b for p in files for b in _yaml_findings(p)]
    assert not bad, "\n".join(bad)


def test_the_yaml_check_catches_unsafe_calls(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import yaml\nL = yaml.CSafeLoader\n"
                 "yaml.load(t, Loader=L)\n"  # fine
                 "yaml.load(t, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))\n"  # fine
                 "yaml.load(t)\nyaml.load(t, Loader=yaml.Loader)\nyaml.load(t, yaml.FullLoader)\n"
                 "yaml.unsafe_load(t)\nyaml.full_load(t)\n")
    found = _yaml_findings(p)
    assert [f.split(":")[1] for f in found if "without" in f] == ["5", "6", "7"]
    assert any("unsafe_load" in f for f in found) and any("full_load" in f for f in found)


# ---- nothing outside the tree ------------------------------------------------------------------

class _Opens:
    """Every path opened by this process while recording (PEP 578 audit hook; the hook stays
    installed, but records only inside ``recording()``)."""

    paths: typing.ClassVar[list[str]] = []
    on = False
    installed = False

    @classmethod
    @contextlib.contextmanager
    def recording(cls) -> Iterator[list[str]]:
        if not cls.installed:
            def hook(event: str, args: tuple[object, ...]) -> None:
                if cls.on and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
                    cls.paths.append(os.fsdecode(args[0]))
            sys.addaudithook(hook)
            cls.installed = True
        cls.paths = []
        cls.on = True
        try:
            yield cls.paths
        finally:
            cls.on = False


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """(a checkout copy, a secret file outside it)."""
    root = tmp_path / "checkout"
    shutil.copytree(fuzzkit.EXAMPLE, root, symlinks=True)
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP-SECRET-CONTENT\n")
    return root, secret


def _opened_outside(paths: list[str], secret: Path) -> list[str]:
    target = os.path.realpath(secret)
    return [p for p in paths if os.path.realpath(p) == target or os.path.realpath(p).startswith(
        os.path.realpath(secret.parent) + os.sep)]


def _diff_for(name: str) -> str:
    return (f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n"
            "-TOP-SECRET-CONTENT\n+changed\n")


@pytest.mark.parametrize("name", ["../outside/secret.txt", "../../../../../../etc/passwd",
                                  "/etc/passwd", "SECRET_LINK", "tests/../../outside/secret.txt",
                                  "LINKED_DIR/secret.txt"])
def test_a_diff_cannot_read_outside_the_root(tree, tmp_path, name):
    root, secret = tree
    (root / "SECRET_LINK").symlink_to(secret)
    (root / "LINKED_DIR").symlink_to(secret.parent, target_is_directory=True)
    if name.startswith("../outside"):
        pass
    diff = tmp_path / "evil.diff"
    diff.write_text(_diff_for(name))
    for cmd in (["audit", "--diff", str(diff)], ["comment", "--diff", str(diff)],
                ["audit", "--diff", str(diff), "--format", "json"]):
        with _Opens.recording() as opened:
            code, out, err = fuzzkit.run_cli(["--root", str(root), "--no-cache", *cmd])
        assert code == 2, (cmd, code, err)
        assert "leaves the checkout root" in err, err
        assert name in err
        assert "TOP-SECRET" not in out + err and "root:x:0" not in out + err
        assert not _opened_outside(opened, secret), opened
        assert "/etc/passwd" not in opened


def test_a_diff_renaming_a_file_out_of_the_root_is_refused(tree, tmp_path):
    root, secret = tree
    diff = tmp_path / "rename.diff"
    src = "tensorrt_llm/llmapi/llm.py"
    diff.write_text(f"diff --git a/{src} b/../outside/moved.py\nsimilarity index 100%\n"
                    f"rename from {src}\nrename to ../outside/moved.py\n")
    code, _out, err = fuzzkit.run_cli(["--root", str(root), "--no-cache", "audit", "--diff",
                                      str(diff)])
    assert code == 2 and "leaves the checkout root" in err, err
    assert not (secret.parent / "moved.py").exists()


def test_symlinked_list_files_leaving_the_root_are_refused_not_read(tree):
    root, secret = tree
    secret.write_text("ctx:\n- tests: [TOP-SECRET.py::test_x]\n")
    tdb = root / "tests/integration/test_lists/test-db/l0_evil.yml"
    tdb.symlink_to(secret)
    (root / "tests/integration/test_lists/qa/evil.txt").symlink_to(secret)
    with _Opens.recording() as opened:
        code, out, err = fuzzkit.run_cli(["--root", str(root), "--no-cache", "stats"])
    assert code == 2, err
    assert "l0_evil.yml: error: a symlink to a file outside the checkout root is not read" in err
    assert "qa/evil.txt: error: a symlink" in err
    assert "TOP-SECRET" not in out + err
    assert not _opened_outside(opened, secret), opened


def test_directory_symlinks_are_not_followed_by_discovery(tree, tmp_path):
    """glob's `**` followed a link to `/` (walking the disk) or to a parent (a loop)."""
    root, secret = tree
    qa = root / "tests/integration/test_lists/qa"
    (qa / "to-root").symlink_to("/", target_is_directory=True)
    (qa / "loop").symlink_to(tmp_path, target_is_directory=True)
    (qa / "outside").symlink_to(secret.parent, target_is_directory=True)
    (secret.parent / "x.txt").write_text("TOP-SECRET.py::test_y\n")
    with _Opens.recording() as opened, fuzzkit.time_bound(30):
        code, out, err = fuzzkit.run_cli(["--root", str(root), "--no-cache", "stats", "--format",
                                          "json"])
    assert code == 0, err
    assert json.loads(out)["qa_lists"] == 1
    assert not _opened_outside(opened, secret)


def test_ids_naming_paths_outside_the_root_are_not_read(tree):
    """Test ids are paths too: the inventory and lint must not follow them out of the tree."""
    root, secret = tree
    qa = root / "tests/integration/test_lists/qa/llm_function_core.txt"
    qa.write_text(qa.read_text() + "../../../outside/secret.txt::test_x\n"
                  f"{secret}::test_y\n../../../../../../etc/passwd::test_z\n")
    for cmd in (["lint"], ["where", "test_x"], ["stats"],
                ["report", "--html", str(root.parent / "rep")]):
        with _Opens.recording() as opened:
            code, _out, err = fuzzkit.run_cli(["--root", str(root), "--no-cache", *cmd])
        assert code in (0, 1, 2), (cmd, err)
        assert "Traceback" not in err
        assert not _opened_outside(opened, secret), (cmd, opened)
        assert "/etc/passwd" not in [os.path.realpath(p) for p in opened]


def test_report_never_replaces_a_directory_that_is_not_a_report(tree, tmp_path):
    root, secret = tree
    link = tmp_path / "html-link"
    link.symlink_to(secret.parent, target_is_directory=True)
    for target in (secret.parent, link, root):
        code, _out, err = fuzzkit.run_cli(["--root", str(root), "--no-cache", "report", "--html",
                                          str(target)])
        assert code == 2 and "not a testdb report" in err, err
    assert secret.read_text() == "TOP-SECRET-CONTENT\n"
    assert sorted(os.listdir(secret.parent)) == ["secret.txt"]


# ---- the GitHub token --------------------------------------------------------------------------

TOKEN = "ghs_FuzZLeakCheck0123456789abcdefXYZ"


@pytest.fixture
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _fake_github():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(REPO / "tests" / "reports"))
    try:
        import fake_github
    finally:
        sys.path.pop(0)
    return fake_github


@pytest.mark.usefixtures("_no_proxy")
@pytest.mark.parametrize("failure", ["server-errors", "bad-credentials", "read-only",
                                     "not-found", "rate-limited", "timeout", "ok"])
def test_github_token_never_leaks(failure, tmp_path, monkeypatch, ws):
    fg = _fake_github()
    audit = tmp_path / "audit.json"
    audit.write_bytes(fuzzkit.seed_bytes("<generated>", fuzzkit.formats()["audit_json"], ws.root))
    import reports.github as gh

    monkeypatch.setitem(gh.upsert_comment.__kwdefaults__, "sleep", lambda s: None)
    # The timeout case waits out every attempt's socket timeout (twice: the second run is the
    # traceback path): a short one there; the answered cases keep a loaded machine's margin.
    monkeypatch.setitem(gh.upsert_comment.__kwdefaults__, "timeout",
                        0.25 if failure == "timeout" else 1.0)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.chdir(tmp_path)
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))
            if record.exc_info:
                records.append("".join(traceback.format_exception(*record.exc_info)))

    handler = Keep(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    old_level = logging.getLogger().level
    logging.getLogger().setLevel(logging.DEBUG)
    server_token = "ghs_other" if failure == "bad-credentials" else TOKEN
    try:
        with fg.FakeGitHub(token=server_token, prs={"octo/hello": (7,)},
                           read_only=failure == "read-only") as fake:
            if failure == "server-errors":
                fake.inject(*[fg.server_error(502) for _ in range(20)])
            elif failure == "rate-limited":
                fake.inject(*[fg.rate_limited(2_000_000_000) for _ in range(5)])
            elif failure == "timeout":
                fake.inject(*[fg.slow(1.5) for _ in range(10)])
            repo = "octo/missing" if failure == "not-found" else "octo/hello"
            argv = ["--root", ws.root, "comment", "--audit", str(audit), "--post", "--pr", "7",
                    "--repo", repo, "--api-url", fake.url]
            code, out, err = fuzzkit.run_cli(argv)
            monkeypatch.setenv("TESTDB_DEBUG", "1")  # the traceback path must not leak either
            tb = ""
            try:
                fuzzkit.run_cli(argv)
            except Exception as exc:
                tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                tb += repr(exc.args) + repr(getattr(exc, "__dict__", {}))
            stored = json.dumps(fake.comments("octo/hello", 7))
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(old_level)
    if failure == "ok":
        assert code == 0, err
    else:
        assert code == 2, (code, err)
        assert "error: " in err
    everything = "\n".join([out, err, tb, stored, *records])
    assert TOKEN not in everything
    assert TOKEN[4:20] not in everything  # not even a piece of it
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    cache = Path(os.environ["TESTDB_CACHE_DIR"])
    for path in cache.rglob("*") if cache.is_dir() else []:
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_token_is_not_in_usage_errors(monkeypatch, ws):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    code, out, err = fuzzkit.run_cli(["--root", ws.root, "comment", "--post", "--pr", "7",
                                      "--diff", "nope.diff"])
    assert code == 2 and TOKEN not in out + err
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        code, out, err = fuzzkit.run_cli(["--root", ws.root, "comment", "--post", "--pr", "7",
                                          "--repo", "octo/hello", "--api-url", "ftp://x"])
    assert TOKEN not in out + err + buf.getvalue()
