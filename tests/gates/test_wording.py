"""One wording for every verdict: signs, factors, units, and each verdict kind's lead."""

from __future__ import annotations

import math

import pytest

from pytest_dmlbench.gates.wording import Decision, change_text, failing_verdicts, failure_text, word
from pytest_dmlbench.results import PairedEvidence, Verdict


@pytest.mark.parametrize(("reference", "current", "better", "unit", "expected"), [
    (10.0, 11.88, "lower", "s", "+18.8 % slower"),  # a step 1.188x as long
    (1000.0, 1000 / 1.188, "higher", "samples/s", "+18.8 % slower"),  # the same slowdown as a rate
    (11.88, 10.0, "lower", "s", "+18.8 % faster"),
    (1.0, 255.0, "higher", "GB/s", "x255 faster"),  # was "-25455.5% better"
    (1.0, 255.0, "lower", "s", "x255 slower"),
    (400.0, 480.0, "lower", "MB", "+20.0 % larger"),
    (0.20, 0.231, "lower", "fraction", "+3.1 pp worse"),
    (0.90, 0.80, "higher", "fraction", "+10.0 pp worse"),  # accuracy down: never a negative for worse
    (0.80, 0.90, "higher", "fraction", "+10.0 pp better"),
    (5.0, 5.0, "lower", "s", "no change"),
    (0.0, 72.0, "lower", "bytes", "larger (from 0 to 72)"),
    (None, 1.0, "lower", "s", ""),
    (1.0, math.nan, "lower", "s", ""),
])
def test_change_text(reference: float | None, current: float | None, better: str, unit: str, expected: str) -> None:
    assert change_text(reference, current, better, unit) == expected  # type: ignore[arg-type]


def test_a_worse_figure_never_reads_as_a_negative_percentage() -> None:
    for ratio in (0.3, 0.5, 0.84, 0.99, 1.01, 1.19, 2.0, 300.0):
        for better in ("lower", "higher"):
            text = change_text(100.0, 100.0 * ratio, better, "s")
            assert "-" not in text, text
            worse = ratio > 1 if better == "lower" else ratio < 1
            assert text.split()[-2 if "(" in text else -1] in ("slower" if worse else "faster",), text


def _decision(kind: str, **more: object) -> Decision:
    base: dict[str, object] = dict(metric="step_time_s", kind=kind, unit="s", better="lower", reference=0.010,
                                   current=0.0125, threshold_pct=10.0, against="REF main (abc)",
                                   evidence="the evidence")
    base.update(more)
    return Decision(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kind", "lead"), [
    ("regression", "step_time_s regressed against REF main (abc): 10 ms -> 12.5 ms, +25.0 % slower; "
                   "threshold 10 %; the evidence"),
    ("improvement", "step_time_s improved against REF main (abc): "),
    ("inconclusive", "step_time_s inconclusive (not tested) against REF main (abc): 10 ms -> 12.5 ms"),
    ("new", "step_time_s new against REF main (abc): the evidence (current 12.5 ms)"),
])
def test_each_kind_has_its_lead(kind: str, lead: str) -> None:
    verdict = word(_decision(kind))
    assert verdict.kind == kind and verdict.message.startswith(lead), verdict.message
    assert verdict.change == ("+25.0 % slower" if kind != "new" else verdict.change)


def test_unchanged_states_the_smallest_change_it_could_detect_and_remedies_follow_on_their_own_line() -> None:
    unchanged = word(_decision("unchanged", current=0.0101, detectable_pct=4.2))
    assert unchanged.message.endswith("smallest change this test could detect: 4.2 %; read by wall time, which sees "
                                      "everything, the neighbours on a shared machine too")
    assert unchanged.detectable_pct == 4.2
    failing = word(_decision("regression", remedy="Reproduce: pytest --dmlbench x"))
    assert failing.message.endswith(".\nReproduce: pytest --dmlbench x")
    points = word(_decision("unchanged", unit="fraction", reference=0.2, current=0.21, detectable_pct=1.5))
    assert "threshold 10 pp" in points.message and "detect: 1.5 pp" in points.message


def test_which_kinds_fail() -> None:
    verdicts = [word(_decision(k)) for k in ("regression", "improvement", "inconclusive", "new", "unchanged")]
    assert [v.kind for v in failing_verdicts(verdicts)] == ["regression"]
    assert [v.kind for v in failing_verdicts(verdicts, fail_on_improvement=True)] == ["regression", "improvement"]
    assert [v.kind for v in failing_verdicts(verdicts, fail_on_inconclusive="all")] == ["regression", "inconclusive"]
    assert failure_text(failing_verdicts(verdicts)) == verdicts[0].message


def test_the_inconclusive_scope_fails_untestable_figures_alone_or_every_inconclusive_one() -> None:
    untestable = word(_decision("inconclusive"))
    unsettled = word(_decision("inconclusive", cause="unsettled", detectable_pct=14.0))
    verdicts = [untestable, unsettled, word(_decision("unchanged"))]
    assert failing_verdicts(verdicts, fail_on_inconclusive="none") == []
    assert failing_verdicts(verdicts, fail_on_inconclusive="untestable") == [untestable]
    assert failing_verdicts(verdicts, fail_on_inconclusive="all") == [untestable, unsettled]
    # negative control: without its cause the unsettled verdict would read (and fail) as untestable
    assert failing_verdicts([word(_decision("inconclusive", detectable_pct=14.0))], fail_on_inconclusive="untestable")


def test_an_unsettled_verdict_says_a_test_ran_and_what_it_could_detect() -> None:
    unsettled = word(_decision("inconclusive", cause="unsettled", detectable_pct=14.0))
    assert unsettled.message.startswith("step_time_s inconclusive (tested, not settled) against REF main (abc): ")
    assert unsettled.message.endswith("smallest change this test could detect: 14.0 %"), unsettled.message
    assert unsettled.cause == "unsettled" and not unsettled.untestable
    untestable = word(_decision("inconclusive", detectable_pct=14.0))
    assert "(not tested)" in untestable.message and "smallest change" not in untestable.message
    assert untestable.cause == "untestable" and untestable.untestable
    for verdict in (unsettled, untestable):  # the cause survives the results JSON
        data = verdict.to_dict()
        assert data["inconclusive_cause"] == verdict.cause
        assert Verdict.from_dict(data) == verdict
    assert "inconclusive_cause" not in word(_decision("unchanged")).to_dict()


def test_the_paired_estimate_survives_the_results_json_and_bad_records_are_named() -> None:
    evidence = PairedEvidence("ratio", 1.074, 1.016, 1.135, 0.9996, 8, 6.5, "confirmation")
    verdict = word(_decision("regression", paired=evidence))
    data = verdict.to_dict()
    assert data["paired"] == {"scale": "ratio", "estimate": 1.074, "ci_low": 1.016, "ci_high": 1.135,
                              "confidence": 0.9996, "pairs": 8, "noise_pct": 6.5, "stage": "confirmation"}
    assert Verdict.from_dict(data) == verdict
    assert "paired" not in word(_decision("unchanged")).to_dict()  # a stored-baseline verdict has none
    for field, bad, named in [("scale", "log", "'paired.scale' must be one of ratio, points"),
                              ("stage", "third", "'paired.stage' must be one of first, confirmation"),
                              ("pairs", 1, "'paired.pairs' must be a whole number of at least 2"),
                              ("estimate", "fast", "not a number")]:
        with pytest.raises(ValueError, match=named):
            Verdict.from_dict({**data, "paired": {**data["paired"], field: bad}})
    with pytest.raises(ValueError, match="'paired' must be an object"):
        Verdict.from_dict({**data, "paired": [1.074]})
