"""Every measured figure in the README and docs/ is dated and names its command, undated ones included.

``test_figures_have_commands.py`` starts from the dates: a dated paragraph must name its command. This test
starts from the figures, so that a figure quoted without any date is caught too. A **measured figure** is a
number with a unit of time, size, rate, ratio or percent in prose (``5 min 26 s``, ``5.6 %``, ``1.7x``,
``x2.17``, ``1485 MB``, ``47 GFLOPS``; code spans and code blocks are output and commands, not prose). Not
figures: round integers (1-9 followed by zeros, 25, 75, powers of two up to 1024: ``10 %``, ``64 MB``, ``2x``),
which are settings, sizes and thresholds; a number after ``=`` (a worked example);
a number a setting word leads into in its clause (``default``, ``threshold``, ``at most``, ``target``,
``timeout``, ``<=`` ...); and a number followed by ``interval`` or ``confidence`` (a level, not a reading).

**Where a figure finds its date and command**: in its own paragraph, list item or table row, a code block
right beside it (a command), the paragraph that leads into its table or list, the paragraph before a code
block it follows (a transcript and what it shows), and, for the date only, a heading above it. The page's
opening paragraph, and a section's, date and name the command of the later blocks (an evidence page that says
at its top when and with what every figure on it was measured). The changelog is history and is
not walked; ``docs/evidence/test-durations.md`` is written by ``ci/test_durations.py`` and checked by
``test_test_durations.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.test_figures_have_commands import CODE, DATE, ROOT, Block, blocks, code_commands, commands

NOT_WALKED = {
    "docs/changelog.md": "history, not evidence",
    "docs/evidence/test-durations.md": "written by ci/test_durations.py, checked by test_test_durations.py",
}
PAGES = [page for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
         if page.relative_to(ROOT).as_posix() not in NOT_WALKED]

UNITS = "ns|µs|us|ms|s|min|h|seconds|minutes|hours|GFLOPS|GB/s|MB/s|Gbps|B|kB|KB|MB|GB|TB|KiB|MiB|GiB"
UNIT = r"(?:x\b|\s?(?:%|(?:" + UNITS + r")\b))"  # 1.7x, but 1024 x 1024 is arithmetic
FIGURE = re.compile(r"(?<![\w.\-/+=])(\d+(?:\.\d+)?)" + UNIT + r"|(?<![\w.])x(\d+(?:\.\d+)?)\b")
ROUND = re.compile(r"^(?:[1-9]0*|16|32|64|128|256|512|1024|25|75)$")
SETTING_BEFORE = re.compile(r"(default|cores?\b|threshold|at most|at least|up to|<=|>=|≤|≥|<|>|=|target|timeout|budget|"
                            r"\bcap\b|e\.g\.|limit|aims?\b|band|above|below|over|under)[^.;:()|]{0,25}$", re.IGNORECASE)
LEVEL_AFTER = re.compile(r"^\s*(interval|confidence|CI\b|threshold|band|false discovery)", re.IGNORECASE)
ITEM = re.compile(r"^\s*(?:[-*]|\d+\.) ")
SEPARATOR = re.compile(r"^\|[\s|:-]+\|$")


def measured_figures(text: str) -> list[str]:
    """The measured figures of ``text`` (prose: code spans left out), as written."""
    prose = CODE.sub("``", text)
    found = []
    for match in FIGURE.finditer(prose):
        number = match.group(1) or match.group(2)
        if ROUND.match(number):
            continue
        if SETTING_BEFORE.search(prose[max(0, match.start() - 40):match.start()]):
            continue
        if LEVEL_AFTER.search(prose[match.end():match.end() + 20]):
            continue
        found.append(match.group(0))
    return found


def _own(page_blocks: list[Block], index: int) -> tuple[bool, bool]:
    """Whether block ``index`` itself carries a date, and names a command (itself or a code block beside it)."""
    block = page_blocks[index]
    dated = DATE.search(CODE.sub("", block.text)) is not None
    named = bool(commands(block.text)) or any(code_commands(b) for b in page_blocks[max(0, index - 1):index + 2]
                                              if b.code)
    return dated, named


def _leads(page_blocks: list[Block], index: int) -> list[int]:
    """The blocks that lead into block ``index``: a table row's paragraph, a list item's earlier items and lead
    paragraph, the table or list a paragraph follows, the paragraph before a code block it follows."""
    previous = index - 1
    while previous >= 0 and page_blocks[previous].code:
        previous -= 1
    if previous < 0:
        return []
    block, before = page_blocks[index], page_blocks[previous]
    after_code = previous < index - 1
    if block.table_row:
        lead = previous
        while lead >= 0 and (page_blocks[lead].table_row or page_blocks[lead].code):
            lead -= 1
        return [lead, *_leads(page_blocks, lead)] if lead >= 0 else []
    if ITEM.match(block.text) or before.table_row or ITEM.match(before.text) or after_code:
        return [previous, *_leads(page_blocks, previous)]
    return []


def undated_figures(page: Path, root: Path = ROOT) -> list[str]:
    """Every block of ``page`` with a measured figure whose date or command is nowhere it may be, as
    ``page:line: what is missing: the figures``."""
    page_blocks = list(blocks(page, root))
    lines = page.read_text().splitlines()
    headings = [(number, line) for number, line in enumerate(lines, 1) if line.startswith("#")]
    problems = []
    for index, block in enumerate(page_blocks):
        if block.code:
            continue
        figures = measured_figures(block.text)
        if not figures:
            continue
        following = page_blocks[index + 1] if index + 1 < len(page_blocks) else None
        if block.table_row and following is not None and SEPARATOR.match(following.text.strip()):
            continue  # a table's header names columns
        dated, named = _own(page_blocks, index)
        above = [h for h in headings if h[0] < block.line]
        section_start = above[-1][0] if above else 0
        openings = {next((i for i, b in enumerate(page_blocks) if b.line > start and not b.code), index)
                    for start in (0, section_start)}  # the page's opening paragraph, and the section's
        for lead in {*_leads(page_blocks, index), *(i for i in openings if i < index)}:
            lead_dated, lead_named = _own(page_blocks, lead)
            dated, named = dated or lead_dated, named or lead_named
        dated = dated or any(DATE.search(line) for _, line in above)
        missing = [what for what, ok in (("no date", dated), ("no command", named)) if not ok]
        if missing:
            problems.append(f"{block.page}:{block.line}: {' and '.join(missing)}: {', '.join(figures[:4])}")
    return problems


def test_every_measured_figure_is_dated_and_names_its_command() -> None:
    assert len(PAGES) > 30  # the walk finds the pages
    problems = [problem for page in PAGES for problem in undated_figures(page)]
    assert not problems, "measured figures without a date or a command:\n" + "\n".join(problems)


@pytest.mark.parametrize(("text", "expected"), [
    # negative controls: a figure quoted without a date, without a command, or with neither is caught
    ("The install took about 74 s and the job 5 min 26 s.\n", ["page.md:1: no date and no command: 74 s, 26 s"]),
    ("On 2026-11-25 the job took 5 min 26 s.\n", ["page.md:1: no command: 26 s"]),
    ("The job took 5 min 26 s (`pytest --dmlbench --world-size 4`).\n", ["page.md:1: no date: 26 s"]),
    ("The spread was 5.6 % and the speed 47 GFLOPS.\n", ["page.md:1: no date and no command: 5.6 %, 47 GFLOPS"]),
    ("A case read x2.17 slower.\n", ["page.md:1: no date and no command: x2.17"]),
    # a figure with both in its paragraph, or where it may lean on them, passes
    ("On 2026-11-25 the job took 5 min 26 s (`pytest --dmlbench --world-size 4`).\n", []),
    ("Measured 2026-11-25 (`python ci/profiler_cost.py`):\n\n| case | time |\n|---|---|\n| a | 0.23 s |\n", []),
    ("Printed on 2026-11-29 by `pytest --dmlbench`:\n\n    x 1.5\n\nThe step was 4.1 % slower.\n", []),
    ("## Night 5 (2026-11-25)\n\nThe night took 45.5 minutes (`pytest --dmlbench`).\n", []),
    ("## Night 5\n\nMeasured 2026-11-25 by `pytest --dmlbench`.\n\nIt took 45.5 minutes.\n", []),
    # settings, sizes, levels and worked examples are not measured figures
    ("The default threshold is 10 %, blocks aim at 0.2 s, a 64 MB copy, at most 2.5x a plain run.\n", []),
    ("Its 98 % interval lies inside; at s = 5.6 % the floor is 0.127.\n", []),
    ("The file `night-2026-11-27.json` and the command `sleep 1.5s` are code.\n", []),
])
def test_negative_control_an_undated_or_commandless_figure_is_caught(tmp_path: Path, text: str,
                                                                       expected: list[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    assert undated_figures(page, tmp_path) == expected


def test_negative_control_a_sample_page_lacking_its_date_and_command_fails_the_walk(tmp_path: Path) -> None:
    """A page written as the README once was (the main job's time with neither its date nor its command) is
    caught, and the same page once dated and given its command passes."""
    page = tmp_path / "page.md"
    page.write_text("**Run the benchmark cases**:\n\n    pip install -e .\n\nIt takes about 74 s to install and "
                    "5 min 26 s to run, 492 passed.\n")
    assert undated_figures(page, tmp_path) == ["page.md:5: no date and no command: 74 s, 26 s"]
    page.write_text("**Run the benchmark cases**:\n\n    pip install -e .\n\nOn 2026-11-25 (a 2-core machine, "
                    "load 2): about 74 s to install and 5 min 26 s of `pytest --dmlbench --world-size 4`.\n")
    assert undated_figures(page, tmp_path) == []
