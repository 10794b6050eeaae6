"""The paired gate's block length and per-block warm-up: validated, and carried into every block."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_dmlbench.config import DEFAULT_BLOCK_SECONDS, parse_block_min_rounds, parse_warmup_rounds
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.paired.plan import BlockPlan
from tests.conftest import run_pytest
from tests.gates.paired.gitrepo import make_repo


def sleeping_case(name: str, calls_file: str, step_s: float) -> str:
    """A case whose step sleeps ``step_s``: its time, and so each block's round count, does not depend on the
    machine's load. Rank 0 writes one line per run of the body (the ordinary run's, then one per block): the
    calls that run made."""
    return f"""
    import time
    from pathlib import Path

    import pytest

    CALLS = Path(__file__).with_name("{calls_file}")


    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def {name}(dist, dmlbench):
        calls = []
        dmlbench(lambda: (calls.append(1), time.sleep({step_s})))
        if dist.rank == 0:
            with CALLS.open("a") as out:
                out.write(f"{{len(calls)}}\\n")
"""


COUNTED_CASE = sleeping_case("test_counted", "calls.txt", 0.01)
# a step of 0.1 s: a block of 0.15 s would need 2 rounds, so its round count is the least a block may have
SLOW_CASE = sleeping_case("test_slow", "slow_calls.txt", 0.1)


def test_longer_blocks_time_more_rounds_of_the_same_step() -> None:
    short = BlockPlan.for_step([0.01] * 5)
    long = BlockPlan.for_step([0.01] * 5, target_s=5 * DEFAULT_BLOCK_SECONDS)
    assert (short.rounds, short.iterations) == (20, 1)
    assert (long.rounds, long.iterations) == (100, 1)


def test_a_slow_step_gets_the_least_rounds_a_block_may_have() -> None:
    assert BlockPlan.for_step([3.5] * 5).rounds == 5  # a ResNet-50 step: 5 rounds by default, 17.5 s a block
    assert BlockPlan.for_step([3.5] * 5, min_rounds=2).rounds == 2
    assert BlockPlan.for_step([0.01] * 5, min_rounds=2).rounds == 20  # a fast step keeps its 0.2 s
    assert BlockPlan.for_step([], fallback_rounds=1, min_rounds=3).rounds == 3  # no step time: its own count


@pytest.mark.parametrize("parse, text, rounds", [
    (parse_warmup_rounds, "0", 0), (parse_warmup_rounds, " 3 ", 3), (parse_warmup_rounds, 7, 7),
    (parse_block_min_rounds, " 1 ", 1), (parse_block_min_rounds, 5, 5)])
def test_a_warmup_or_a_least_count_is_a_whole_number_of_rounds(parse: Callable[[object], int], text: object,
                                                                rounds: int) -> None:
    assert parse(text) == rounds


@pytest.mark.parametrize("parse, form, text", [
    *[(parse_warmup_rounds, ">= 0, e.g. --dmlbench-block-warmup 2", text) for text in ["-1", "two", "1.5", True]],
    *[(parse_block_min_rounds, ">= 1, e.g. --dmlbench-block-min-rounds 5", text) for text in ["0", "-1", "two", "2.5"]],
])
def test_a_bad_count_of_rounds_names_the_option_and_the_form(parse: Callable[[object], int], form: str,
                                                              text: object) -> None:
    option = form.rpartition(" ")[0].rpartition(" ")[2]
    with pytest.raises(ConfigError, match=rf"{option}: .* give an integer {re.escape(form)}"):
        parse(text)


@pytest.mark.parametrize("option, value, expected", [
    ("--dmlbench-block-seconds", "0", "*--dmlbench-block-seconds: '0' must be a finite number of seconds > 0*"),
    ("--dmlbench-block-seconds", "long", "*--dmlbench-block-seconds: 'long' is not a number of seconds*"),
    ("--dmlbench-block-warmup", "-2", "*--dmlbench-block-warmup: -2 is too small; give an integer >= 0*"),
    ("--dmlbench-block-min-rounds", "0", "*--dmlbench-block-min-rounds: 0 is too small; give an integer >= 1*"),
])
def test_a_bad_block_option_stops_the_run_before_any_world_starts(tmp_path: Path, option: str, value: str,
                                                                   expected: str) -> None:
    run = run_pytest(tmp_path, "--dmlbench", option, value)
    assert run.returncode != 0
    run.lines.fnmatch_lines([expected])


def test_every_block_times_the_rounds_the_options_ask_for(tmp_path: Path) -> None:
    """Blocks of 0.15 s with no warm-up call the step the rounds the ordinary run's step times ask for at 0.15 s
    (15 for 10 ms), with no warm-up calls: were the options not carried to the block servers, blocks would be
    the rounds for 0.2 s plus 2 of warm-up (the ordinary calibration run calls it 12 times, 10 rounds after 2 of
    warm-up; A's warm-up block 5). The rounds follow the measured step, which a loaded machine stretches past
    the sleep's 10 ms. The canary is read during each block (``--dmlbench-canary during``). A second case, of
    0.1 s a step, gets the least rounds asked for (``--dmlbench-block-min-rounds 2``), not the default 5."""
    repo = make_repo(tmp_path / "repo", **{"test_counted.py": COUNTED_CASE, "test_slow.py": SLOW_CASE})
    results = tmp_path / "results.json"
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-block-seconds", "0.15",
                     "--dmlbench-block-warmup", "0", "--dmlbench-canary", "during", "--dmlbench-json", str(results),
                     "--dmlbench-block-min-rounds", "2", timeout=600)
    assert run.returncode == 0, run.output[-3000:]
    cases = {case["nodeid"].rpartition("::")[2]: case for case in json.loads(results.read_text())["cases"]}
    slow = cases["test_slow"]
    assert (slow["extra"]["paired"]["block_rounds"], slow["extra"]["paired"]["block_min_rounds"]) == (2, 2)
    slow_bodies = Counter(int(line) for line in (repo / "slow_calls.txt").read_text().split())
    assert slow_bodies[2] >= sum(slow["extra"]["paired"]["pairs_per_stage"]), slow_bodies  # A's blocks: 2 rounds
    assert slow_bodies[5] == 0, slow_bodies  # negative control: the default least of 5 rounds
    case = cases["test_counted"]
    paired = case["extra"]["paired"]
    assert paired["block_warmup"] == 0
    steps = case["metrics"]["step_time_s"]["samples"]
    asked, default = BlockPlan.for_step(steps, target_s=0.15), BlockPlan.for_step(steps)
    assert (paired["block_iterations"], paired["block_rounds"]) == (asked.iterations, asked.rounds), steps
    assert asked.rounds < default.rounds  # negative control: the default length would ask for more rounds
    bodies = Counter(int(line) for line in (repo / "calls.txt").read_text().split())
    pairs = sum(paired["pairs_per_stage"])
    assert bodies[paired["block_rounds"]] >= pairs, bodies  # A's blocks: rounds, no warm-up calls
    assert bodies[paired["block_rounds"] + 2] == 0, bodies
    assert paired["canary"] == "during"
    for stage in paired["block_medians"]:  # a canary read during every block of either side
        canaries = [*stage["canary"]["a"], *stage["canary"]["b"]]
        assert len(canaries) == 2 * len(stage["a_first"]) and all(0.0 < c < 1.0 for c in canaries), stage["canary"]
