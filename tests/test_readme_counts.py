"""The counts the README and the docs quote are what pytest collects now: a case added or removed without
updating the text fails here, with the command that gives the new count."""

from __future__ import annotations

import re
import shlex
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


def quick_command(readme: str) -> tuple[int, tuple[str, ...]]:
    """The README's quick first command: the case count it quotes and its pytest arguments."""
    found = re.findall(r"\*\*A quick first look\*\* \((\d+) cases:.*?\n\n    pytest (.+?)\n", readme, flags=re.DOTALL)
    assert len(found) == 1, f"README: expected one quick first command, found {found}"
    count, command = found[0]
    return int(count), tuple(shlex.split(command))


def test_the_quick_command_selects_the_cases_it_quotes() -> None:
    quoted, args = quick_command((ROOT / "README.md").read_text())
    assert args[:2] == ("--dmlbench", "--world-size")
    actual = collected_nodeids(*args)
    assert quoted == len(actual), f"README.md quotes {quoted} cases for its quick command, which collects {actual}"


def test_negative_control_a_quick_command_is_read_with_its_quoting() -> None:
    text = '**A quick first look** (3 cases: a, b)\n\n    pytest --dmlbench -k "a or b" x.py\n'
    assert quick_command(text) == (3, ("--dmlbench", "-k", "a or b", "x.py"))
    with pytest.raises(AssertionError, match="found \\[\\]"):
        quick_command("no quick command here")
