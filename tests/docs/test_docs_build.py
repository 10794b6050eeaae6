"""The documentation builds with MkDocs in strict mode: every warning, a broken internal link or anchor
included, fails the build. The negative controls build a copy with one broken link and see it fail."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

pytest.importorskip("mkdocs", reason="the docs build needs MkDocs: pip install -e '.[docs]'")


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``project`` into ``site``."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=project, capture_output=True, text=True, timeout=300)


def copy_of_the_docs(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(DOCS, project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    return project


def test_the_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    proc = build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()


@pytest.mark.parametrize(("link", "complaint"), [
    ("[gone](how-to/no-such-page.md)", "no-such-page.md"),
    ("[gone](tutorial.md#no-such-heading)", "no-such-heading"),
], ids=["missing-page", "missing-anchor"])
def test_negative_control_a_broken_internal_link_fails_the_build(tmp_path: Path, link: str, complaint: str) -> None:
    project = copy_of_the_docs(tmp_path)
    assert build(project, tmp_path / "ok").returncode == 0, "the unbroken copy must build"
    index = project / "docs" / "index.md"
    index.write_text(index.read_text() + f"\nSee {link}.\n")
    proc = build(project, tmp_path / "broken")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert complaint in proc.stderr, proc.stderr


def relative_links(markdown: str) -> list[str]:
    """Targets of the Markdown links in ``markdown`` that point into the repository (no scheme, no anchor)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", markdown)
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_links_to_files_that_exist() -> None:
    links = relative_links((ROOT / "README.md").read_text())
    assert "docs/tutorial.md" in links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_negative_control_a_missing_link_target_is_found() -> None:
    links = relative_links("[a](docs/tutorial.md) [b](docs/nowhere.md#x) [c](https://example.org/x.md) [d](#top)")
    assert links == ["docs/tutorial.md", "docs/nowhere.md"]
    assert [link for link in links if not (ROOT / link).exists()] == ["docs/nowhere.md"]


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"
