"""The paired gate's run without any block-server option, made once for the negative controls of those options:
the redraw, mmap-threshold and rank-allocator cases judged in one session, each writing its own file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SharedSessions, run_pytest
from tests.gates.paired.gitrepo import make_repo

NoOptionRun = dict[str, tuple[dict[str, Any], list[str]]]


def _cases() -> dict[str, tuple[str, str]]:
    """Each negative control's case: its file, its source and the variable naming the file it writes."""
    from tests.gates.paired.test_mmap_threshold import ALLOCATING_CASE
    from tests.gates.paired.test_rank_allocator import MAPPING_CASE
    from tests.gates.paired.test_redraw_worlds import PID_CASE

    return {"test_pid.py": (PID_CASE, "PIDS_FILE"), "test_allocating.py": (ALLOCATING_CASE, "ALLOCATIONS_FILE"),
            "test_mapping.py": (MAPPING_CASE, "MAPPINGS_FILE")}


def _no_option_run(folder: Path) -> NoOptionRun:
    """As :func:`tests.gates.paired.one_case_run.paired_one_case` without options, for all three cases at once:
    per case file, its ``extra.paired`` and the lines its runs wrote."""
    cases = _cases()
    repo = make_repo(folder / "repo", **{name: source for name, (source, _) in cases.items()})
    results = folder / "results.json"
    outputs = {name: folder / f"{name}.txt" for name in cases}
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-block-seconds", "0.05",
                     "--dmlbench-json", str(results), timeout=600,
                     **{env: str(outputs[name]) for name, (_, env) in cases.items()})
    assert run.returncode == 0, run.output[-3000:]
    cases_judged = json.loads(results.read_text())["cases"]
    judged = {case["nodeid"].split("::")[0]: case["extra"]["paired"] for case in cases_judged}
    return {name: (judged[name], outputs[name].read_text().splitlines()) for name in cases}


@pytest.fixture
def no_option_run(shared_sessions: SharedSessions) -> NoOptionRun:
    """The paired run without block-server options; ``no_option_run["test_pid.py"]`` is that case's."""
    return shared_sessions.get("paired-no-option", _no_option_run)[0]
