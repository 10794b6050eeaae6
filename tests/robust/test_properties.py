"""Hypothesis properties 1-11 of the reference list (float64, bounded values).

Property 12 (bit-identical results on every rank of a real process group) belongs to the distributed
``robust`` strategy and is tested there.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import assume, find, given, settings
from hypothesis import strategies as st
from robust_cases import (
    COORDINATE_RULES,
    KRUM_FAMILY,
    MIN_N,
    TIE_TOL,
    Attacked,
    Example,
    attacked,
    examples,
    identical_honest_kept,
    kappa_robust,
    returns_an_input,
    run,
    scale_of,
    selection_gap,
    within_honest_bounds,
)

from pytest_dmlbench.robust import aggregate
from pytest_dmlbench.robust.pre import PreSpec

ROBUST = settings(settings.get_profile(os.environ.get("DMLBENCH_ROBUST_PROFILE", "robust-ci")))

ALL_RULES = list(MIN_N)
EQUIVARIANT = ["mean", "median", "trimmed_mean", "meamed", "krum", "multi_krum", "bulyan", "geometric_median"]
PRE_CHAINS: list[list[PreSpec]] = [["nnm"], [("clip", {"c": 50.0})], [("bucketing", {"s": 2, "seed": 3})]]


def close(a: np.ndarray, b: np.ndarray, rule: str, scale: float) -> bool:
    tol = (1e-6 if rule in ("geometric_median", "centered_clipping") else 1e-9) * scale
    return bool(np.allclose(a, b, rtol=0.0, atol=tol))


def no_near_tie(rule: str, ex: Example, pre: list[PreSpec] | None = None) -> bool:
    return bool(selection_gap(rule, ex.x, ex.f, pre) > TIE_TOL * scale_of(ex.x) ** 2)


# 1. shape, dtype, finiteness
@pytest.mark.parametrize("rule", ALL_RULES)
@ROBUST
@given(data=st.data())
def test_p1_shape_dtype_finite(rule: str, data: st.DataObject) -> None:
    ex = data.draw(examples(rule))
    out = aggregate(rule, ex.tensor, f=ex.f)
    assert out.shape == (ex.x.shape[1],)
    assert out.dtype == torch.float64
    assert bool(torch.isfinite(out).all())


@pytest.mark.parametrize("pre", PRE_CHAINS, ids=["nnm", "clip", "bucketing"])
@pytest.mark.parametrize("rule", ["median", "krum", "geometric_median"])
@ROBUST
@given(data=st.data())
def test_p1_with_pre_aggregation(rule: str, pre: list[PreSpec], data: st.DataObject) -> None:
    ex = data.draw(examples(rule, max_f=1, max_extra=6))
    n_after = -(-len(ex.x) // 2) if pre[0][0] == "bucketing" else len(ex.x)
    assume(n_after >= MIN_N[rule](ex.f))
    out = aggregate(rule, ex.tensor, f=ex.f, pre=pre)
    assert out.shape == (ex.x.shape[1],) and bool(torch.isfinite(out).all())


# 2. permutation invariance
@pytest.mark.parametrize("rule", ALL_RULES)
@ROBUST
@given(data=st.data())
def test_p2_permutation_invariance(rule: str, data: st.DataObject) -> None:
    ex = data.draw(examples(rule))
    if rule in KRUM_FAMILY:
        assume(no_near_tie(rule, ex))
    perm = np.array(data.draw(st.permutations(range(len(ex.x)))))
    assert close(run(rule, ex.x[perm], ex.f), run(rule, ex.x, ex.f), rule, scale_of(ex.x))


def test_p2_checker_fails_on_lowest_index_tie_breaking() -> None:
    # all three Krum scores tie: the pick follows the row order, which is why the property assumes
    # no tie at the selection boundary
    x = np.array([[-1.0], [0.0], [1.0]])
    assert not close(run("krum", x[::-1].copy(), 0), run("krum", x, 0), "krum", 1.0)


# 3. translation equivariance
@pytest.mark.parametrize("rule", [*EQUIVARIANT, "nnm+median", "nnm+krum"])
@ROBUST
@given(data=st.data(), shift=st.floats(-100, 100, allow_subnormal=False))
def test_p3_translation_equivariance(rule: str, data: st.DataObject, shift: float) -> None:
    base = rule.split("+")[1] if "+" in rule else rule
    pre: list[PreSpec] | None = ["nnm"] if "+" in rule else None
    ex = data.draw(examples(base))
    assume(no_near_tie(base, ex, pre) and no_near_tie(base, Example(ex.x + shift, ex.f), pre))
    got = aggregate(base, torch.from_numpy(ex.x + shift), f=ex.f, pre=pre).numpy()
    want = aggregate(base, ex.tensor, f=ex.f, pre=pre).numpy() + shift
    assert close(got, want, base, scale_of(ex.x) + abs(shift))


@ROBUST
@given(shift=st.floats(1.0, 100.0))
def test_p3_checker_fails_on_clip(shift: float) -> None:
    x = np.array([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    got = aggregate("mean", torch.from_numpy(x + shift), f=0, pre=[("clip", {"c": 1.0})]).numpy()
    want = aggregate("mean", torch.from_numpy(x), f=0, pre=[("clip", {"c": 1.0})]).numpy() + shift
    assert not close(got, want, "mean", scale_of(x) + shift)


# 4. scale equivariance (a > 0 for all; a < 0 for coordinate-wise and distance-based rules)
@pytest.mark.parametrize("rule", [*EQUIVARIANT, "nnm+median"])
@ROBUST
@given(data=st.data(), a=st.floats(0.1, 10.0) | st.floats(-10.0, -0.1))
def test_p4_scale_equivariance(rule: str, data: st.DataObject, a: float) -> None:
    base = rule.split("+")[1] if "+" in rule else rule
    pre: list[PreSpec] | None = ["nnm"] if "+" in rule else None
    ex = data.draw(examples(base))
    assume(no_near_tie(base, ex, pre) and no_near_tie(base, Example(ex.x * a, ex.f), pre))
    got = aggregate(base, torch.from_numpy(ex.x * a), f=ex.f, pre=pre).numpy()
    want = aggregate(base, ex.tensor, f=ex.f, pre=pre).numpy() * a
    assert close(got, want, base, scale_of(ex.x) * max(1.0, abs(a)))


# 5. coordinate-wise rules depend on column j only
@pytest.mark.parametrize("rule", COORDINATE_RULES)
@ROBUST
@given(data=st.data())
def test_p5_coordinatewise(rule: str, data: st.DataObject) -> None:
    ex = data.draw(examples(rule))
    full = run(rule, ex.x, ex.f)
    for j in range(ex.x.shape[1]):
        column = run(rule, np.ascontiguousarray(ex.x[:, j : j + 1]), ex.f)
        assert close(full[j : j + 1], column, rule, scale_of(ex.x))


def test_p5_checker_fails_on_krum() -> None:
    # column 0 alone selects 1.1; the second column makes that row the outlier
    x = np.array([[0.0, 0.0], [1.0, 0.0], [1.1, 50.0], [1.2, 0.0], [9.0, 0.0]])
    full, first = run("krum", x, 1), run("krum", np.ascontiguousarray(x[:, :1]), 1)
    assert not close(full[:1], first, "krum", scale_of(x))


# 6. reductions
@ROBUST
@given(ex=examples("mean", max_f=0))
def test_p6_trimmed_mean_b0_multi_krum_all_bulyan_f0_equal_the_mean(ex: Example) -> None:
    mean = run("mean", ex.x, 0)
    assert close(run("trimmed_mean", ex.x, 0, b=0), mean, "mean", scale_of(ex.x))
    assert close(run("multi_krum", ex.x, 0, m=len(ex.x)), mean, "mean", scale_of(ex.x))
    if len(ex.x) >= 3:
        assert close(run("bulyan", ex.x, 0), mean, "mean", scale_of(ex.x))


@pytest.mark.parametrize("rule", ALL_RULES)
@ROBUST
@given(ex=examples("mean", max_f=0))
def test_p6_nnm_with_f0_then_any_rule_is_the_mean(rule: str, ex: Example) -> None:
    assume(len(ex.x) >= MIN_N[rule](0))
    got = aggregate(rule, ex.tensor, f=0, pre=["nnm"]).numpy()
    assert close(got, run("mean", ex.x, 0), rule, scale_of(ex.x))


@ROBUST
@given(ex=examples("median"))
def test_p6_trimmed_mean_with_maximal_b_is_the_median(ex: Example) -> None:
    b = (len(ex.x) - 1) // 2
    assert close(run("trimmed_mean", ex.x, ex.f, b=b), run("median", ex.x, ex.f), "median", scale_of(ex.x))
    assert close(run("median", ex.x, ex.f), np.median(ex.x, axis=0), "median", scale_of(ex.x))


def test_p6_checker_fails_on_the_lower_median() -> None:
    x = np.array([[1.0], [2.0], [3.0], [10.0]])
    lower = torch.median(torch.from_numpy(x), dim=0).values.numpy()
    assert not close(run("trimmed_mean", x, 0, b=1), lower, "median", 1.0)


# 7. identical inputs
@pytest.mark.parametrize("rule", ALL_RULES)
@ROBUST
@given(data=st.data())
def test_p7_identical_inputs(rule: str, data: st.DataObject) -> None:
    ex = data.draw(examples(rule))
    c = ex.x[0]
    same = np.tile(c, (len(ex.x), 1))
    assert close(run(rule, same, ex.f), c, rule, scale_of(c))


# 8-10 and the negative control 11
P8_RULES = ["median", "trimmed_mean", "meamed", "krum", "multi_krum", "bulyan", "geometric_median"]
P10_RULES = ["median", "trimmed_mean", "krum", "geometric_median"]


@pytest.mark.parametrize("rule", P8_RULES)
@ROBUST
@given(data=st.data())
def test_p8_identical_honest_rows_survive_f_attackers(rule: str, data: st.DataObject) -> None:
    assert identical_honest_kept(rule, data.draw(attacked(rule, equal_honest=True)))


@pytest.mark.parametrize("rule", ["median", "trimmed_mean"])
@ROBUST
@given(data=st.data())
def test_p9_coordinate_bounds(rule: str, data: st.DataObject) -> None:
    assert within_honest_bounds(rule, data.draw(attacked(rule, equal_honest=False)))


@ROBUST
@given(data=st.data())
def test_p9_krum_returns_an_input(data: st.DataObject) -> None:
    assert returns_an_input("krum", data.draw(attacked("krum", equal_honest=False)))


@pytest.mark.parametrize("rule", P10_RULES)
@ROBUST
@given(data=st.data())
def test_p10_f_kappa_robustness(rule: str, data: st.DataObject) -> None:
    assert kappa_robust(rule, data.draw(attacked(rule, equal_honest=False, max_d=2)))


FIND_SETTINGS = settings(max_examples=500, database=None, deadline=None)


@pytest.mark.parametrize(
    ("check", "equal_honest"),
    [(identical_honest_kept, True), (within_honest_bounds, False), (returns_an_input, False),
     (kappa_robust, False)],
    ids=["p8", "p9-bounds", "p9-input", "p10"],
)
def test_p11_mean_fails_the_robustness_properties(check: Callable[[str, Attacked], bool], equal_honest: bool) -> None:
    def fails(ex: Attacked) -> bool:
        return not check("mean", ex)

    counterexample = find(attacked("krum", equal_honest=equal_honest), fails, settings=FIND_SETTINGS)
    assert fails(counterexample)
