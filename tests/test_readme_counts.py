"""The counts the README and the docs quote are what pytest collects now: a case added or removed without
updating the text fails here, with the command that gives the new count."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_root_command import collected_nodeids

ROOT = Path(__file__).resolve().parents[1]

# (the file that quotes it, the sentence with the count as a group, the pytest arguments whose collection gives it)
QUOTED = [
    ("README.md", r"`pytest --dmlbench --world-size 4` collects (\d+) items", ("--dmlbench", "--world-size", "4")),
    ("docs/evidence/harness.md", r"`-m correctness` collects (\d+) cases",
     ("--dmlbench", "--world-size", "2", "-m", "correctness")),
]


def quoted_count(text: str, pattern: str) -> int:
    """The one count ``pattern`` finds in ``text``; AssertionError when it is missing or quoted twice."""
    found = re.findall(pattern, re.sub(r"\s+", " ", text))
    assert len(found) == 1, f"expected one match of {pattern!r}, found {found}"
    return int(found[0])


@pytest.mark.parametrize(("page", "pattern", "args"), QUOTED, ids=["bench-cases", "correctness"])
def test_the_text_quotes_what_pytest_collects(page: str, pattern: str, args: tuple[str, ...]) -> None:
    quoted = quoted_count((ROOT / page).read_text(), pattern)
    actual = len(collected_nodeids(*args))
    assert quoted == actual, f"{page} quotes {quoted}, `pytest {' '.join(args)} --collect-only -q` gives {actual}"


def test_a_stale_or_missing_count_is_caught() -> None:
    pattern = QUOTED[1][1]
    assert quoted_count("the suite: `-m correctness`\n collects 12 cases", pattern) == 12
    with pytest.raises(AssertionError, match="found \\[\\]"):
        quoted_count("the suite collects some cases", pattern)
    with pytest.raises(AssertionError, match="found \\['1', '2'\\]"):
        quoted_count("`-m correctness` collects 1 cases; `-m correctness` collects 2 cases", pattern)
