"""The docs' front page links every page of the docs, as the site's navigation does (``mkdocs build
--strict`` checks the navigation; nothing else checks the front page)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def unlisted(index_text: str, pages: list[str]) -> list[str]:
    """The pages ``index_text`` does not link to."""
    linked = set(re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", index_text))
    return [page for page in pages if page not in linked]


def test_the_front_page_links_every_page() -> None:
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if p.name != "index.md")
    assert pages and unlisted((DOCS / "index.md").read_text(encoding="utf-8"), pages) == []


def test_negative_control_a_page_left_out_is_found() -> None:
    assert unlisted("[tutorial](tutorial.md), [drift](how-to/drift.md#top)", ["tutorial.md", "how-to/drift.md",
                                                                           "how-to/new.md"]) == ["how-to/new.md"]
