"""A one-case repository judged against its own HEAD, for tests that watch what its blocks did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_pytest
from tests.gates.paired.gitrepo import make_repo


def paired_one_case(tmp_path: Path, file_name: str, source: str, output_env: str,
                    *options: str) -> tuple[dict[str, Any], list[str]]:
    """Run ``source`` (as ``file_name``) paired against HEAD in blocks of 0.05 s, with ``options``; its
    ``extra.paired`` and the lines the case's runs wrote to the file named by the variable ``output_env``
    (both sides write there: REF's copy of the case lives in REF's worktree)."""
    repo = make_repo(tmp_path / "repo", **{file_name: source})
    results, output = tmp_path / "results.json", tmp_path / "case-output.txt"
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-block-seconds", "0.05",
                     "--dmlbench-json", str(results), *options, timeout=600, **{output_env: str(output)})
    assert run.returncode == 0, run.output[-3000:]
    return json.loads(results.read_text())["cases"][0]["extra"]["paired"], output.read_text().splitlines()
