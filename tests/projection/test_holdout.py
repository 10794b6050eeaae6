"""The collective model against measurements it was not fitted on.

The accuracy test fits the shipped measured results file (gloo on 2, 3 and 4 ranks of a 2-core machine)
without each point's message size and without its world size, and fails when the median error of those
predictions grows past the claim docs/evidence/projection.md states; the negative controls show that wrong
models break the same claim on the same file. The remaining tests check the held-out arithmetic on timings made by the
model, which says nothing about accuracy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pytest_dmlbench.projection.collective_model import AlphaBeta, Timing, fit
from pytest_dmlbench.projection.holdout import (
    HELD_OUT_KINDS,
    Fitter,
    HeldOut,
    HeldOutKind,
    held_out,
    median_error,
    pooled,
    why_not,
)
from pytest_dmlbench.projection.inputs import collective_timings
from pytest_dmlbench.results.jsonio import read_results
from tests.projection.synthetic import ALPHA, BETA, SIZES, collective_case, results

DATA = Path(__file__).parent / "data"
MEASURED = DATA / "results_gloo_ws2-4_collectives.json"
CLAIM_PAGE = Path(__file__).parents[2] / "docs" / "evidence" / "projection.md"
NUMBER = r"(\d+(?:\.\d+)?) %"
CLAIM = re.compile(rf"median held-out error <= {NUMBER} with the message size held out and <= {NUMBER} with the "
                   rf"world size held out over all cases, and <= {NUMBER} and <= {NUMBER} for every collective")


def documented_claim() -> dict[tuple[HeldOutKind, bool], float]:
    """The one statement of the collective model's held-out accuracy in the docs, as fractions keyed by
    (kind held out, per collective)."""
    found = CLAIM.findall(" ".join(CLAIM_PAGE.read_text().split()))
    assert len(found) == 1, f"{CLAIM_PAGE.name} must state the held-out claim once (pattern {CLAIM.pattern!r})"
    size, world, size_each, world_each = (float(x) / 100 for x in found[0])
    return {("size", False): size, ("world_size", False): world, ("size", True): size_each,
            ("world_size", True): world_each}


def broken_claims(rows: list[HeldOut]) -> list[str]:
    """Each documented bound that the rows' median error (over all, or of some collective) exceeds."""
    broken = []
    for (kind, per_op), bound in documented_claim().items():
        for op in sorted({r.op for r in rows}) if per_op else [None]:
            median = median_error(rows, kind, op)
            if median is None or median > bound:
                broken.append(f"{kind}{' per collective' if per_op else ''}: {op or 'all'} median {median} > {bound}")
    return broken


def broken_kinds(rows: list[HeldOut]) -> set[str]:
    return {line.split(":")[0] for line in broken_claims(rows)}


@pytest.fixture(scope="module")
def measured() -> list[Timing]:
    return collective_timings(read_results(MEASURED, ""))


def test_the_measured_file_holds_every_collective_at_several_world_sizes(measured: list[Timing]) -> None:
    points = pooled(measured)
    assert {t.world_size for t in points} == {2, 3, 4}
    assert {t.op for t in points} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}
    assert len(points) == 60


def test_median_held_out_error_on_measurements_stays_within_the_documented_claim(measured: list[Timing]) -> None:
    rows = held_out(measured)
    assert all(r.error(kind) is not None for r in rows for kind in HELD_OUT_KINDS)
    assert broken_claims(rows) == []


def _bandwidth_term_dropped(op: str, timings: list[Timing]) -> AlphaBeta:
    return replace(fit(op, timings), beta_s_per_byte=0.0)


def _coefficients_doubled(op: str, timings: list[Timing]) -> AlphaBeta:
    fitted = fit(op, timings)
    return replace(fitted, alpha_s=2 * fitted.alpha_s, beta_s_per_byte=2 * fitted.beta_s_per_byte)


@dataclass(frozen=True)
class _AtTwoRanks:
    fitted: AlphaBeta

    def predict(self, nbytes: float, p: int) -> float:
        return self.fitted.predict(nbytes, 2)


def _blind_to_world_size(op: str, timings: list[Timing]) -> _AtTwoRanks:
    """A cost that ignores the rank count: fitted and predicted as if every world had 2 ranks."""
    return _AtTwoRanks(fit(op, [replace(t, world_size=2) for t in timings]))


def _all_reduce_doubled(op: str, timings: list[Timing]) -> AlphaBeta:
    return _coefficients_doubled(op, timings) if op == "all_reduce" else fit(op, timings)


ALL_KINDS = {"size", "world_size", "size per collective", "world_size per collective"}


@pytest.mark.parametrize(("wrong", "broken"), [
    (_bandwidth_term_dropped, ALL_KINDS),
    (_coefficients_doubled, ALL_KINDS),
    (_blind_to_world_size, ALL_KINDS),
    # one collective wrong: the median over all cases hides it, the bound per collective does not
    (_all_reduce_doubled, {"size per collective", "world_size per collective"}),
], ids=["bandwidth-term-dropped", "coefficients-doubled", "blind-to-world-size", "all-reduce-doubled"])
def test_negative_control_a_wrong_model_breaks_the_claim_on_the_same_file(measured: list[Timing], wrong: Fitter,
                                                                         broken: set[str]) -> None:
    assert broken_kinds(held_out(measured, fitter=wrong)) == broken


# --- the held-out arithmetic, on timings made by the model (not evidence of accuracy) ---


def _modelled(world_sizes: tuple[int, ...] = (2, 3, 4)) -> list[Timing]:
    return collective_timings(results([collective_case(op, n, p) for op in ("all_reduce", "broadcast")
                                       for p in world_sizes for n in SIZES]))


def test_arithmetic_timings_made_by_the_model_are_predicted_without_error() -> None:
    rows = held_out(_modelled())
    assert len(rows) == 2 * 3 * len(SIZES)
    for row in rows:
        for kind in HELD_OUT_KINDS:
            assert row.error(kind) == pytest.approx(0.0, abs=1e-9)


def test_arithmetic_a_disturbed_point_shows_its_error_where_it_is_held_out() -> None:
    timings = _modelled()
    target = next(t for t in timings if t.op == "all_reduce" and t.world_size == 3 and t.nbytes == SIZES[2])
    disturbed = [replace(t, seconds=t.seconds * 2) if t is target else t for t in timings]
    row = next(r for r in held_out(disturbed) if (r.op, r.world_size, r.nbytes) == ("all_reduce", 3, SIZES[2]))
    assert row.error("size") == pytest.approx(-0.5, rel=1e-6)  # the fit did not see the doubled point
    assert row.error("world_size") == pytest.approx(-0.5, rel=1e-6)


def test_sizes_rounded_to_the_world_size_are_held_out_together() -> None:
    timings = [Timing("all_gather", p, n - (n % p), p * ALPHA + n * BETA) for p in (2, 3) for n in SIZES]
    seen: list[list[Timing]] = []

    def recording(op: str, training: list[Timing]) -> AlphaBeta:
        seen.append(training)
        return fit(op, training)

    held_out(timings, fitter=recording)
    size_fits = seen[0::2]  # size held out, then world size held out, per point
    for point, training in zip(pooled(timings), size_fits, strict=True):
        assert all(abs(t.nbytes - point.nbytes) > 0.01 * point.nbytes for t in training)


def test_repeated_points_are_pooled_into_their_median() -> None:
    runs = [Timing("all_reduce", 2, 1024, s) for s in (3.0, 1.0, 2.0)] + [Timing("all_reduce", 1, 1024, 9.0)]
    assert pooled(runs) == [Timing("all_reduce", 2, 1024, 2.0)]


def test_one_world_size_says_why_the_world_size_is_not_checked() -> None:
    rows = held_out(_modelled(world_sizes=(4,)))
    assert all(r.world_size_out_s is None for r in rows)
    assert median_error(rows, "world_size") is None
    assert median_error(rows, "size") == pytest.approx(0.0, abs=1e-9)
    assert "one world size (4)" in (why_not(rows, "world_size") or "")
    assert why_not(rows, "size") is None


def test_two_sizes_leave_too_few_to_hold_one_out() -> None:
    rows = held_out([Timing("all_reduce", 4, n, 6 * ALPHA + 1.5 * n * BETA) for n in SIZES[:2]])
    assert [r.size_out_s for r in rows] == [None, None]
    assert "three or more" in (why_not(rows, "size") or "")
