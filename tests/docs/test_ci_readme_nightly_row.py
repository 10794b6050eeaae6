"""ci/README.md's table row for ``nightly.sh`` states the options the script runs with by default (it once said
a 5 % threshold while the script ran at 10 %)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULTED = re.compile(r'(--dmlbench-[a-z-]+) "\$\{[A-Z_]+:-([^}]+)\}"')
ASSIGNED = re.compile(r'^([a-z_]+)="\$\{[A-Z_]+:-([^}]+)\}"', re.MULTILINE)
PASSED = re.compile(r'(--dmlbench-[a-z-]+) "\$([a-z_]+)"')


def script_defaults(script: str) -> dict[str, str]:
    """``{option: default}`` for every option nightly.sh passes as ``--option "${VARIABLE:-default}"``, or as
    ``--option "$name"`` after ``name="${VARIABLE:-default}"``."""
    assigned = dict(ASSIGNED.findall(script))
    passed = {option: assigned[name] for option, name in PASSED.findall(script) if name in assigned}
    return {**dict(DEFAULTED.findall(script)), **passed}


def row_problems(readme: str, defaults: dict[str, str]) -> list[str]:
    rows = [line for line in readme.splitlines() if line.startswith("| `nightly.sh")]
    assert len(rows) == 1, "ci/README.md: expected one table row for nightly.sh"
    return [f"{option} {value} is what nightly.sh runs with" for option, value in defaults.items()
            if f"{option} {value}" not in rows[0]]


def test_the_nightly_row_states_the_script_s_defaults() -> None:
    defaults = script_defaults((ROOT / "ci" / "nightly.sh").read_text())
    assert {"--dmlbench-threshold", "--dmlbench-futility", "--dmlbench-rank-allocator",
            "--dmlbench-cpu-threshold", "--dmlbench-block-min-rounds", "--dmlbench-block-warmup"} <= set(defaults)
    assert row_problems((ROOT / "ci" / "README.md").read_text(), defaults) == []
    # negative control: the row as it stood, at 5 %
    stale = ("| `nightly.sh [RESULTS] [JUNIT] [REPORT_DIR]` | ... --dmlbench-threshold 5 --dmlbench-futility on "
             "--dmlbench-rank-allocator tcmalloc ... |")
    assert row_problems(stale, defaults) == ["--dmlbench-threshold 10 is what nightly.sh runs with",
                                             "--dmlbench-block-min-rounds 2 is what nightly.sh runs with",
                                             "--dmlbench-block-warmup 1 is what nightly.sh runs with",
                                             "--dmlbench-cpu-threshold 10 is what nightly.sh runs with"]
