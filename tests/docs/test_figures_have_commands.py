"""Every measured figure the README, docs/, ci/README.md and studies/README.md quote names the command in the
repository that measured it, and that command exists and its options parse.

The rule writers follow: **a measured figure is dated, and its paragraph names its command.** A paragraph, a
list item or a table row that carries a date (``2026-11-25``; dates inside backticks, such as a recording's
file name, do not count) names in backticks the command that printed its figures: ``python -m studies.<name>
...`` (a study), ``python ci/<script>.py ...``, ``python -m pytest_dmlbench ...``, ``pytest ...`` (or ``python -m
pytest ...``) or ``bash ci/<script>.sh ...``; environment variables, ``/usr/bin/time`` and a launcher
(``torchrun``, ``horovodrun``) before it are allowed, and a script of ``ci/`` named alone (```ci/nightly.sh```)
is its own command, and so is a study's file (```studies/replay_nights.py```). A table row whose command cell says
``same`` takes the command of the row above. A table takes the command named in the paragraph just before it,
and a paragraph the command of a code block right before or after it (``    pytest ...``, one a line).
Every command named this way anywhere in these files must exist (the script, the subcommand, the test files it
names) and every option it gives must be one its program accepts. The changelog is history, not evidence,
and is not walked.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "ci" / "README.md", ROOT / "studies" / "README.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "changelog.md")]
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
CODE = re.compile(r"`([^`]+)`")  # a command may wrap onto the next line
SCRIPT = re.compile(r"^ci/[\w-]+\.(?:py|sh)$")  # a script of ci/ named alone is its command
STUDY = re.compile(r"^studies/(\w+)\.py$")  # so is a study's file: `python -m studies.<name>`
OPTION = re.compile(r"(?<![\w=-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b")
PROGRAMS = ("python", "python3", "pytest", "bash")
LAUNCHERS = ("horovodrun", "torchrun")


@dataclass(frozen=True)
class Block:
    """A paragraph, list item, table row or code block of a page, with the line it starts on."""

    page: str
    line: int
    text: str
    table_row: bool = False
    code: bool = False


def blocks(page: Path, root: Path = ROOT) -> Iterator[Block]:
    """The page's blocks, headings left out; a table row is a block of its own, and so is a code block (fenced,
    or indented by four spaces outside a list item)."""
    name = page.relative_to(root).as_posix()
    lines: list[str] = []
    code: list[str] = []
    start = 0
    fenced = False

    def ended() -> Iterator[Block]:
        if lines:
            yield Block(name, start, "\n".join(lines))
        if code:
            yield Block(name, start, "\n".join(code), code=True)

    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        in_code = fenced or (line.startswith("    ") and not lines)
        if in_code:
            if not code:
                yield from ended()
                lines, start = [], number
            code.append(line.strip())
            continue
        starts_item = line.lstrip().startswith(("- ", "* ")) or re.match(r"\s*\d+\. ", line) is not None
        if code or not line.strip() or line.startswith(("#", "|")) or starts_item:
            yield from ended()
            lines, code = [], []
            if line.startswith("|"):
                yield Block(name, number, line, table_row=True)
            elif starts_item:
                lines, start = [line], number
            continue
        if not lines:
            start = number
        lines.append(line)
    yield from ended()


def commands(text: str) -> list[str]:
    """The commands named in backticks in ``text``, from their program on."""
    found = []
    for code in CODE.findall(text):
        if SCRIPT.match(code):
            found.append(("bash " if code.endswith(".sh") else "python ") + code)
            continue
        if study := STUDY.match(code):
            found.append(f"python -m studies.{study[1]}")
            continue
        try:
            words = shlex.split(code)
        except ValueError:
            continue
        while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("/usr/bin/time", "time", "-v")):
            words.pop(0)
        if words and words[0] in LAUNCHERS:  # the command a launcher runs on every rank
            words = words[next((i for i, w in enumerate(words) if w in PROGRAMS), len(words)):]
        if not words or words[0] not in PROGRAMS:
            continue
        if words[0] in ("python", "python3") and not (words[1:2] and (words[1].endswith(".py")
                                                                     or words[1:3] in (["-m", "pytest"],
                                                                                       ["-m", "pytest_dmlbench"])
                                                                     or (words[1] == "-m" and words[2:3]
                                                                         and words[2].startswith("studies.")))):
            continue
        if words[0] == "bash" and not words[1:2]:
            continue
        found.append(" ".join(words))
    return found


def code_commands(block: Block) -> list[str]:
    """The commands a code block shows, one a line (the body of a shell ``for ...; do COMMAND; done`` too)."""
    found = []
    for line in block.text.splitlines():
        line = line.split("; do ", 1)[-1].split("; done", 1)[0].removeprefix("$ ")
        found += commands(f"`{line}`")
    return found


def undated_text(text: str) -> str:
    return CODE.sub("", text)


def missing_commands(page_blocks: list[Block]) -> list[str]:
    """Every dated block that names no command, as ``page:line: its start``."""
    problems = []
    previous: Block | None = None
    row_command: list[str] = []
    table_command: list[str] = []
    for index, block in enumerate(page_blocks):
        if block.code:
            previous = block
            continue
        named = commands(block.text)
        beside = [b for b in page_blocks[max(0, index - 1):index + 2] if b.code]
        named += [command for b in beside for command in code_commands(b)]
        if block.table_row:
            if previous is None or not previous.table_row:
                table_command = commands(previous.text) if previous is not None else []
                row_command = []
            cells = [c.strip() for c in block.text.strip("|").split("|")]
            if named:
                row_command = named
            elif any(c.startswith("same") for c in cells):
                named = row_command
            named = named or table_command
        if DATE.search(undated_text(block.text)) and not named:
            problems.append(f"{block.page}:{block.line}: {block.text[:100]!r}")
        previous = block
    return problems


@cache
def pytest_parser() -> Any:
    """pytest's own argument parser with every installed plugin's options (this plugin's and xdist's included)."""
    from _pytest.config import get_config

    config = get_config()
    config.pluginmanager.load_setuptools_entrypoints("pytest11")
    return config._parser


def pytest_knows(option: str) -> bool:
    """Whether pytest (with every installed plugin, and this repository's conftests) has ``option`` (given a
    value, which a flag leaves unread)."""
    conftests = "".join(p.read_text() for p in (ROOT / "conftest.py", ROOT / "tests" / "conftest.py"))
    if f'addoption("{option}"' in conftests:
        return True
    try:
        unknown = pytest_parser().parse_known_and_unknown_args([option, "1"])[1]
    except pytest.UsageError:  # known, and "1" is not a value it takes
        return True
    return option not in unknown


def command_problems(command: str) -> list[str]:
    """Why ``command`` does not exist or its options do not parse (nothing when it does and they do)."""
    words = command.split()
    options = OPTION.findall(command)
    if words[0].startswith("python") and words[1:2] == ["-m"] and words[2].startswith("studies."):
        if words[2].startswith("studies.<"):  # a placeholder: `python -m studies.<name> --help`
            return []
        words = [words[0], words[2].replace(".", "/") + ".py", *words[3:]]  # a study is its module's file
        options = OPTION.findall(" ".join(words[2:]))
    if words[0] == "bash" or (words[0].startswith("python") and words[1].endswith(".py")):
        script = ROOT / words[1]
        if not script.is_file():
            return [f"{command}: {words[1]} is not in the repository"]
        source = script.read_text()
        return [f"{command}: {words[1]} has no option {option}" for option in options
                if f'"{option}"' not in source and f"'{option}'" not in source and option not in ("-h",)]
    if words[0].startswith("python") and words[2] == "pytest_dmlbench":
        return dmlbench_cli_problems(command, words[3:])
    args = words[1:] if words[0] == "pytest" else words[3:]
    # a plugin of this repository loaded with -p (ci.cpu_per_test) adds its own options
    plugins = [ROOT / (name.replace(".", "/") + ".py") for flag, name in itertools.pairwise(args)
               if flag == "-p"]
    added = "".join(path.read_text() for path in plugins if path.is_file())
    problems = []
    problems += [f"{command}: pytest has no option {option}" for option in options
                 if f'addoption("{option}"' not in added and not pytest_knows(option)]
    for arg in args:
        path = arg.split("::", 1)[0]
        if path.startswith(("bench_cases/", "tests/", "ci/", "studies/")) and not (ROOT / path).exists():
            problems.append(f"{command}: {path} is not in the repository")
    return problems


def dmlbench_cli_problems(command: str, args: list[str]) -> list[str]:
    """``python -m pytest_dmlbench SUBCOMMAND ...``: the subcommand exists and takes every option given."""
    import argparse

    from pytest_dmlbench.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if args and args[0].startswith("<"):  # a placeholder: `python -m pytest_dmlbench <command> --help`
        return []
    if not args or args[0] not in subparsers.choices:
        return [f"{command}: python -m pytest_dmlbench has no subcommand {args[0] if args else '(none)'}"]
    sub = subparsers.choices[args[0]]
    nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
    if nested and len(args) > 1 and args[1] in nested[0].choices:
        sub = nested[0].choices[args[1]]
    accepted = {flag for action in sub._actions for flag in action.option_strings}
    return [f"{command}: {args[0]} has no option {option}" for option in OPTION.findall(" ".join(args))
            if option not in accepted]


def all_blocks() -> dict[str, list[Block]]:
    return {page.relative_to(ROOT).as_posix(): list(blocks(page)) for page in PAGES}


def test_every_dated_figure_names_its_command() -> None:
    problems = [problem for page_blocks in all_blocks().values() for problem in missing_commands(page_blocks)]
    assert not problems, "dated figures without a command:\n" + "\n".join(problems)


def test_every_command_the_pages_name_exists_and_its_options_parse() -> None:
    named = sorted({c for page_blocks in all_blocks().values() for b in page_blocks
                    for c in (code_commands(b) if b.code else commands(b.text))})
    assert len(named) > 20, named  # the walk finds the pages' commands
    problems = [problem for command in named for problem in command_problems(command)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("text", "found"), [
    ("On 2026-11-25 the step took 1.7x longer.\n", 1),  # a figure added without a command
    ("On 2026-11-25 the step took 1.7x longer (`python -m studies.profiler_cost`).\n", 0),
    ("On 2026-11-25 the step took 1.7x longer (`python -m studies`).\n", 1),  # a package, not a study
    ("On 2026-11-25 the step took 1.7x longer (`studies/profiler_cost.py`).\n", 0),
    ("| target | 2.2 ms | 2026-11-22 | `pytest --dmlbench bench_cases/test_harness.py -s` |\n"
     "| restart | 75 ms | 2026-11-22 | same |\n", 0),
    ("| target | 2.2 ms | 2026-11-22 | none |\n", 1),
    ("The file `night6-2026-11-27.json.gz` holds a night.\n", 0),  # a date in a name is no figure
])
def test_negative_control_a_dated_figure_without_a_command_is_found(tmp_path: Path, text: str, found: int) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    assert len(missing_commands(list(blocks(page, tmp_path)))) == found


@pytest.mark.parametrize(("command", "problem"), [
    ("python ci/no_such_script.py", "python ci/no_such_script.py: ci/no_such_script.py is not in the repository"),
    ("python -m studies.no_such_study", "python -m studies.no_such_study: studies/no_such_study.py is not in the "
                                        "repository"),
    ("python -m studies.profiler_cost --stepz 5", "python -m studies.profiler_cost --stepz 5: "
                                                  "studies/profiler_cost.py has no option --stepz"),
    ("pytest --dmlbench --dmlbench-treshold 5", "pytest --dmlbench --dmlbench-treshold 5: pytest has no option "
                                                "--dmlbench-treshold"),
    ("pytest --dmlbench bench_cases/test_nothing.py", "pytest --dmlbench bench_cases/test_nothing.py: "
                                                      "bench_cases/test_nothing.py is not in the repository"),
    ("python -m pytest_dmlbench comapre A B", "python -m pytest_dmlbench comapre A B: python -m pytest_dmlbench has "
                                              "no subcommand comapre"),
    ("python -m pytest_dmlbench compare A B --treshold 5", "python -m pytest_dmlbench compare A B --treshold 5: "
                                                           "compare has no option --treshold"),
])
def test_negative_control_a_command_that_does_not_exist_or_parse_is_found(command: str, problem: str) -> None:
    assert command_problems(command) == [problem]
