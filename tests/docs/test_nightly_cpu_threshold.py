"""The CPU-time threshold the nightly runs with is the one the docs state and justify, and it is passed to pytest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = re.compile(r'cpu_threshold="\$\{DMLBENCH_CPU_THRESHOLD:-([0-9.]+)\}"')
STATED = re.compile(r"`ci/nightly\.sh` judges it at a threshold of ([0-9.]+) %")


def nightly_cpu_threshold(script: str) -> str:
    """The default percent nightly.sh judges CPU time at; AssertionError when it is not passed to pytest."""
    (default,) = DEFAULT.findall(script)
    assert '--dmlbench-cpu-threshold "$cpu_threshold"' in script, "nightly.sh does not pass its CPU threshold"
    return str(default)


def test_the_nightly_judges_cpu_time_at_the_threshold_the_docs_state() -> None:
    script = (ROOT / "ci" / "nightly.sh").read_text()
    stated = STATED.findall(re.sub(r"\s+", " ", (ROOT / "docs" / "explanation" / "statistics.md").read_text()))
    assert stated == [nightly_cpu_threshold(script)]
    # negative controls: a script that sets the value and never passes it, and a docs statement of another value
    with pytest.raises(AssertionError, match="does not pass"):
        nightly_cpu_threshold(script.replace('--dmlbench-cpu-threshold "$cpu_threshold"', ""))
    assert STATED.findall("`ci/nightly.sh` judges it at a threshold of 5 %") != [nightly_cpu_threshold(script)]
