"""How much of a run its verdicts settled, in the summary, the JSON record and the ``-v`` table."""

from __future__ import annotations

from pytest_dmlbench.gates.wording import Decision, word
from pytest_dmlbench.results import PairedEvidence, RunResults, Verdict, VerdictKind
from pytest_dmlbench.results.settled import MIN_PER_FIGURE, Settled, settled_record, settled_text
from pytest_dmlbench.results.table import interval_text
from pytest_dmlbench.results.table_layout import terminal_table
from tests.results.casefactory import make_case, make_run


def _verdict(metric: str, kind: VerdictKind, cause: str | None = None, paired: PairedEvidence | None = None) -> Verdict:
    return word(Decision(metric, kind, "s", "lower", 0.01, 0.0101, 10.0, "REF main", "evidence",
                         cause=cause, paired=paired, detectable_pct=7.5))  # type: ignore[arg-type]


def test_settled_counts_found_changes_and_proven_unchanged_and_not_the_rest() -> None:
    verdicts = [_verdict("step_time_s", "unchanged"), _verdict("step_time_s", "regression"),
                _verdict("step_time_s", "inconclusive", "unsettled"), _verdict("my", "inconclusive"),
                _verdict("my", "new")]
    assert Settled.of(verdicts) == Settled(judged=4, settled=2, unsettled=1, untestable=1)


def test_the_summary_and_the_json_count_per_figure_only_where_a_run_has_enough_of_it() -> None:
    run = make_run([make_case(f"t.py::test_{i}") for i in range(MIN_PER_FIGURE)])
    for i, case in enumerate(run.cases):
        case.verdicts = [_verdict("step_time_s", "unchanged" if i % 4 else "inconclusive", "unsettled"),
                         _verdict("peak_rss_mb", "inconclusive", "unsettled")] + (
                             [_verdict("rare", "unchanged")] if i == 0 else [])
    text = settled_text(run)
    assert text.startswith(f"settled: {MIN_PER_FIGURE * 3 // 4 + 1} of {2 * MIN_PER_FIGURE + 1} judged figure(s)")
    assert f"not settled: {MIN_PER_FIGURE // 4 + MIN_PER_FIGURE} tested, 0 untestable" in text
    assert f"per figure: peak_rss_mb 0 of {MIN_PER_FIGURE}, step_time_s {MIN_PER_FIGURE * 3 // 4} of" in text
    assert "rare" not in text  # one verdict of it: too few to count apart
    record = settled_record(run)
    assert record["per_figure"]["peak_rss_mb"] == {"judged": MIN_PER_FIGURE, "settled": 0,
                                                   "unsettled": MIN_PER_FIGURE, "untestable": 0}
    assert settled_text(RunResults.from_dict(run.to_dict())) == text  # the record is made from what files keep
    assert settled_text(make_run([make_case()])) == ""  # negative control: nothing judged, nothing said


def test_verbose_table_shows_each_figures_interval_and_what_it_could_detect() -> None:
    evidence = PairedEvidence("ratio", 1.012, 0.93, 1.11, 0.98, 12, 6.1, "first")
    verdict = _verdict("step_time_s", "inconclusive", "unsettled", evidence)
    assert interval_text(verdict) == "ratio 1.012, 98% CI 0.930-1.110 over 12 pairs; detects 7.5 %"
    run = make_run([make_case("t.py::test_a")])
    run.cases[0].verdicts = [verdict]
    run.cases[0].extra["paired"] = {}
    verbose = terminal_table(run, verbose=True, width=100)
    assert "ratio 1.012, 98% CI 0.930-1.110 over 12 pairs; detects 7.5 %" in verbose
    assert "ratio 1.012" not in terminal_table(run, verbose=False, width=100)  # only -v
    assert "REF: REF's median over its blocks" in verbose  # the columns of a paired run say what they hold
