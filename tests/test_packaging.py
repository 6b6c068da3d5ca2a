"""pyproject.toml's license is the SPDX string form (PEP 639): the table form
(`license = {text = ...}`) made setuptools warn on every install (issue 25, item 12).

The real check builds the project's metadata with the setuptools a fresh virtualenv seeds
(no download), the way pip builds it, and reads what it wrote and what it warned."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+; on 3.10 the build check still runs


def test_license_is_an_spdx_string_and_the_backend_reads_it() -> None:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert doc["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", ()))
    from packaging.requirements import Requirement

    st = next(Requirement(r) for r in doc["build-system"]["requires"]
              if Requirement(r).name == "setuptools")
    assert "76.1" not in st.specifier and "77.0" in st.specifier, "setuptools 77 reads it"


def test_metadata_builds_without_a_license_warning(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True,
                   timeout=300)
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for pkg in ("testdb", "auditor", "reports"):  # the packages' code is not metadata
        (src / pkg).mkdir()
        (src / pkg / "__init__.py").write_text("", encoding="utf-8")
    out = tmp_path / "meta"
    out.mkdir()
    res = subprocess.run(
        [str(venv / "bin" / "python"), "-W", "always", "-c",
         "import sys; from setuptools import build_meta as b; "
         "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))", str(out)],
        cwd=src, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    meta = next(out.glob("*.dist-info/METADATA")).read_text(encoding="utf-8")
    assert "License-Expression: Apache-2.0" in meta
    assert "license" not in res.stderr.lower(), res.stderr
