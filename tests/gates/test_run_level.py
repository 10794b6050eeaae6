from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_dmlbench.config import parse_run_alpha
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.stage import CaseJudgement, Stage, Timed
from pytest_dmlbench.gates.paired.trial import Trial
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.run_level import RunLevelRule, benjamini_hochberg
from pytest_dmlbench.results import MetricResult
from tests.conftest import run_pytest, write_files


def test_the_run_alpha_is_split_over_cases_and_their_figures() -> None:
    rule = RunLevelRule(run_alpha=0.01, judged_cases=200)
    assert rule.figure_alpha(1) == pytest.approx(0.01 / 200)
    assert rule.figure_alpha(4) == pytest.approx(0.01 / 800)
    # summed over every tested figure of the run, the levels are the run's alpha: the union bound
    figures_per_case = [random.Random(i).randint(1, 6) for i in range(200)]
    assert sum(k * rule.figure_alpha(k) for k in figures_per_case) == pytest.approx(0.01)


def test_the_two_stage_level_counts_the_first_stage_once() -> None:
    """Only for replayed comparisons: were the stages independent, each figure's chance of failing for nothing
    would be the first stage's 1 % times this level, and the run's sum the run alpha again."""
    rule = RunLevelRule(run_alpha=0.01, judged_cases=200, two_stage=True)
    assert rule.figure_alpha(1) == pytest.approx(0.01 / (200 * 0.01))
    assert sum(3 * 0.01 * rule.figure_alpha(3) for _ in range(200)) == pytest.approx(0.01)
    assert RunLevelRule(run_alpha=0.01, judged_cases=2, two_stage=True).figure_alpha(1) == 0.01  # never laxer


def test_a_run_of_one_case_is_no_laxer_than_the_first_stage() -> None:
    assert RunLevelRule(run_alpha=0.2, judged_cases=1).figure_alpha(1) == 0.01
    assert RunLevelRule(run_alpha=0.01, judged_cases=0).figure_alpha(0) == 0.01


@pytest.mark.parametrize("alpha", [0.0, 0.5, -1.0])
def test_a_run_alpha_outside_the_open_interval_is_refused(alpha: float) -> None:
    with pytest.raises(ValueError, match="run_alpha must lie in"):
        RunLevelRule(run_alpha=alpha, judged_cases=3)


def test_benjamini_hochberg_on_a_known_set() -> None:
    # Benjamini & Hochberg (1995), the 15 p-values of their example: at q = 0.05 the first four are rejected
    p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719,
         0.6528, 0.7590, 1.0]
    assert benjamini_hochberg(p, 0.05) == [0, 1, 2, 3]
    # the step-up rule: a p-value above its own line is kept when a larger one is below its line
    assert benjamini_hochberg([0.04, 0.03, 0.5], 0.1) == [0, 1]
    # negative control: a per-figure cut at q would call 9 of them
    assert sum(v <= 0.05 for v in p) == 9


def test_benjamini_hochberg_finds_nothing_in_uniform_noise_most_of_the_time() -> None:
    rng = random.Random(7)
    runs = [benjamini_hochberg([rng.random() for _ in range(300)], 0.1) for _ in range(200)]
    assert sum(bool(r) for r in runs) <= 0.1 * 200 * 1.5  # FDR control under the global null: P(any) <= q
    assert benjamini_hochberg([], 0.1) == []


def _trial() -> Trial:
    """The paired gate's trial with no REF process: only the verdict on given block medians is exercised."""
    return Trial(VerdictWriter("HEAD", "0" * 40), RunLevelRule(0.01, 1), alpha=0.01)


def _stage(ratios: list[float]) -> Stage:
    """A stage whose block pairs read A slower than B by ``ratios`` (B's block medians all 10 ms)."""
    return Stage(a={"step_time_s": [0.01 * r for r in ratios]}, b={"step_time_s": [0.01] * len(ratios)},
                 a_first=[True] * len(ratios))


def test_a_confirmation_at_the_run_level_share_is_needed_to_fail() -> None:
    """The same two stages of a +20 % reading at moderate evidence (p about 1e-3): a regression at the
    ordinary per-figure level; once the run's 1 % is split over 300 cases, not confirmed, and not proven unchanged
    either (both stages read about +20 %), so tested, not settled."""
    trial = _trial()
    ratios = [1.2, 1.05, 1.35, 1.1, 1.3, 1.15]
    first, confirm = _stage(ratios), _stage(ratios)
    timed = Timed("step_time_s", "lower", "s")
    metric = MetricResult.of("step_time_s", [0.012])
    item = JudgedItem("t.py::test_x", Path("t.py"), 60.0)
    p = confirm.estimate("step_time_s", "lower", "ratio", 0.01)
    assert p is not None and 1e-5 < p.p_worse < 0.01, p
    judgement = CaseJudgement("t.py::test_x")
    # negative control: confirmed at the ordinary level, the figure fails
    lax = trial.timed_verdict(item, metric, timed, "regression", first, confirm, 10.0, judgement,
                              RunLevelRule(0.01, 1).figure_alpha(1))
    assert lax.kind == "regression", lax.message
    strict = trial.timed_verdict(item, metric, timed, "regression", first, confirm, 10.0, judgement,
                                 RunLevelRule(0.01, 300).figure_alpha(1))
    assert strict.kind == "inconclusive" and strict.cause == "unsettled", strict.message
    assert "confirmed no" in strict.message and "run-level rule" in strict.message
    assert "a regression in the first stage and not confirmed by the second" in strict.message


@pytest.mark.parametrize("value", ["0", "0.5", "7%x", "often"])
def test_a_bad_run_alpha_is_a_usage_error(tmp_path: Path, value: str) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-run-alpha", value)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["ERROR: --dmlbench-run-alpha: * is not a probability between 0 and 0.5*"])


def test_a_run_alpha_in_percent_is_read_as_a_probability() -> None:
    assert parse_run_alpha("1%") == pytest.approx(0.01) and parse_run_alpha("0.05") == 0.05
