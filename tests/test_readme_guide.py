"""The README is a user guide (issue 33): at most 600 lines, the internals in docs/, and no link in the
README, CONTRIBUTING.md or docs/ that points at a file that is not there."""

from __future__ import annotations

import re

import pytest
from support import REPO

PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_stays_a_guide_of_at_most_600_lines():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 600


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_points_at_a_file(page):
    targets = [m.group(1) for m in LINK.finditer(page.read_text(encoding="utf-8"))]
    missing = [
        t
        for t in targets
        if not t.startswith(("http:", "https:", "mailto:")) and not (page.parent / t).exists()
    ]
    assert missing == []


def test_every_docs_page_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"docs/{p.name}" not in readme] == []
