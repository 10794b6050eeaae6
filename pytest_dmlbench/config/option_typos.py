"""A misspelt option of the plugin (``--dmlbench-treshold``) named with the option it was meant to be, instead of
pytest's bare "unrecognized arguments".

The check runs once the initial conftests are loaded (every option pytest will know is added by then), on the
same arguments pytest parses next, ``addopts`` and ``PYTEST_ADDOPTS`` included.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import pytest

PREFIX = "--dmlbench-"
CUTOFF = 0.75  # difflib's similarity from which a whole unknown flag reads as a misspelling of an option
TAIL_CUTOFF = 0.6  # the same for what follows --dmlbench- (the prefix alone would make every tail look close)
HELP = "`pytest --help` lists the plugin's options under \"distributed training cases and benchmarks\""


def closest(name: str, options: Sequence[str]) -> str | None:
    """The option of ``options`` that ``name`` most likely misspells, if any is close."""
    if name.startswith(PREFIX):
        tails = {option[len(PREFIX):]: option for option in options if option.startswith(PREFIX)}
        close = difflib.get_close_matches(name[len(PREFIX):], list(tails), n=1, cutoff=TAIL_CUTOFF)
        return tails[close[0]] if close else None
    close = difflib.get_close_matches(name, options, n=1, cutoff=CUTOFF)
    return close[0] if close else None


def misspelt(unknown: Sequence[str], options: Sequence[str]) -> list[str]:
    """One line for each unknown flag that is, or looks like, an option of the plugin (``options``); flags
    far from every one of them are left to pytest."""
    lines = []
    for flag in unknown:
        name = flag.split("=", 1)[0]
        meant = closest(name, options)
        if meant is not None:
            lines.append(f"{name}: did you mean {meant}?")
        elif name.startswith(PREFIX.rstrip("-")):
            lines.append(f"{name}: not an option of pytest-dmlbench")
    return lines


def check_arguments(parser: pytest.Parser, args: Sequence[str], options: Sequence[str]) -> None:
    """A UsageError naming every misspelt plugin option in ``args`` with its likely meaning (and any other
    unknown flag, which pytest would refuse next); nothing when pytest will parse ``args`` or refuse them for
    another reason."""
    try:
        _, unknown = parser.parse_known_and_unknown_args(args)
    except pytest.UsageError:  # a bad value of a known option: pytest's own message says it
        return
    ours = misspelt(unknown, options)
    if not ours:
        return
    named = {line.split(":", 1)[0] for line in ours}
    others = [flag for flag in unknown if flag.split("=", 1)[0] not in named]
    text = "unrecognized option" + ("s" if len(ours) > 1 else "") + ":\n" + "\n".join(f"  {line}" for line in ours)
    if others:
        text += f"\n  also unrecognized: {' '.join(others)}"
    raise pytest.UsageError(f"{text}\n{HELP}")
