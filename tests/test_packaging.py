"""What `pip install spprof` gets: the sdist holds every platform's sources and a suite that
collects, the installed metadata carries the licence and the one version (issue "pip install
anywhere")."""

from __future__ import annotations

import re
import shutil
import tarfile
from importlib import metadata
from pathlib import Path

import pytest

import spprof
from conftest import run_python

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {"build", ".venvs", ".git", "__pycache__", ".benchmarks", "results"}

pytestmark = pytest.mark.skipif(
    not (ROOT / "setup.py").is_file(),
    reason="not run from a source tree (no setup.py above tests/)",
)


@pytest.fixture(scope="module")
def sdist_members(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Build the sdist from a copy of the tree (two CI lanes run the suite in one checkout, and
    setuptools writes egg-info into the tree it builds from), return its member paths without
    the leading `spprof-X.Y.Z/`."""
    tmp = tmp_path_factory.mktemp("sdist")
    src = tmp / "tree"
    shutil.copytree(
        ROOT,
        src,
        ignore=lambda d, names: [
            n for n in names if n in SKIP_DIRS or n.endswith((".so", ".egg-info"))
        ],
    )
    out = tmp / "dist"
    r = run_python(
        "-c",
        "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))",
        str(out),
        cwd=str(src),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (name,) = [p for p in out.iterdir() if p.name.endswith(".tar.gz")]
    assert name.name == f"spprof-{spprof.__version__}.tar.gz"
    with tarfile.open(name) as tar:
        return {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name and m.isfile()}


def _tree_files(sub: str, suffixes: tuple[str, ...]) -> set[str]:
    base = ROOT / sub
    return {
        str(p.relative_to(ROOT))
        for p in base.rglob("*")
        if p.is_file()
        and p.suffix in suffixes
        and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)
    }


def test_sdist_has_every_platforms_native_sources(sdist_members: set[str]) -> None:
    sources = _tree_files("src/spprof/_ext", (".cpp", ".h"))
    # The macOS side must be there although this sdist was built on Linux.
    for darwin in (
        "darwin.cpp",
        "darwin_mach.cpp",
        "darwin_mach.h",
        "images_darwin.cpp",
        "stack_darwin.cpp",
    ):
        assert f"src/spprof/_ext/platform/{darwin}" in sources
    assert sources - sdist_members == set()


def test_sdist_has_a_suite_that_collects_and_the_docs(sdist_members: set[str]) -> None:
    needed = _tree_files("tests", (".py", ".c", ".cpp", ".h")) | _tree_files("docs", (".md",))
    assert {"tests/conftest.py", "tests/workloads.py", "docs/usage.md"} <= needed
    assert needed - sdist_members == set()
    for top in ("LICENSE", "README.md", "CHANGELOG.md", "Makefile", "setup.py", "pyproject.toml"):
        assert top in sdist_members
    # Nothing built: no objects, no extension, no bytecode.
    assert not [m for m in sdist_members if m.endswith((".so", ".o", ".pyc"))]


def test_installed_metadata_has_licence_and_one_version() -> None:
    meta = metadata.metadata("spprof")
    assert meta["Version"] == spprof.__version__
    assert meta["License-Expression"] == "MIT"
    assert any(c.startswith("Development Status ::") for c in meta.get_all("Classifier") or [])
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)


def test_cli_version_is_the_package_version() -> None:
    r = run_python("-m", "spprof", "--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"spprof {spprof.__version__}"


def test_long_description_links_work_on_pypi() -> None:
    """PyPI shows the README without the repository around it: every link and image in the
    installed long description is absolute."""
    meta = metadata.metadata("spprof")
    body = meta.get_payload() or meta["Description"] or ""
    assert "pip install spprof" in body
    targets = re.findall(r"\]\(([^)\s]+)\)", body)
    assert len(targets) >= 10
    relative = [t for t in targets if not re.match(r"https?://", t)]
    assert relative == []
