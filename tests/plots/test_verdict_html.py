"""The report's banner: the worst outcome first, inconclusive figures counted by cause."""

from __future__ import annotations

from pytest_dmlbench.gates.wording import Decision, word
from pytest_dmlbench.plots.verdict_html import headline
from pytest_dmlbench.results import Verdict
from tests.results.casefactory import make_case, make_run


def _verdict(kind: str, **more: object) -> Verdict:
    return word(Decision("step_time_s", kind, "s", "lower", 0.010, 0.011, 10.0, "REF main",  # type: ignore[arg-type]
                         "the evidence", **more))  # type: ignore[arg-type]


def test_the_banner_counts_inconclusive_figures_by_cause() -> None:
    case = make_case()
    case.verdicts = [_verdict("inconclusive"), _verdict("inconclusive", cause="unsettled"),
                     _verdict("inconclusive", cause="unsettled"), _verdict("unchanged")]
    css, sentence = headline(make_run([case]))
    assert css == "warn"
    assert sentence == ("no regression; 3 figure(s) inconclusive: 1 untestable (no test could run), 2 unsettled "
                        "(tested, not settled)")
    case.verdicts.append(_verdict("regression"))  # negative control: a regression outranks them
    assert headline(make_run([case]))[0] == "bad"
