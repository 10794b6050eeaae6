"""Non-finite attacker rows, input immutability, determinism and distance accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from robust_cases import ROBUST_RULES, direct_sq_distances, meamed_reference

from pytest_dmlbench.robust import AGGREGATORS, aggregate, attack
from pytest_dmlbench.robust.distance import pairwise_sq_distances

# n and f valid for every robust rule (bulyan needs n >= 4f+3)
N, F, D = 11, 2, 7
PRE = [None, ["nnm"], [("clip", {"c": 2.0})], [("bucketing", {"s": 1, "seed": 5})]]


def honest_rows(n: int = N - F, d: int = D, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(0), dtype=dtype)


@pytest.mark.parametrize("pre", PRE, ids=["plain", "nnm", "clip", "bucketing"])
@pytest.mark.parametrize("poison", ["inf", "nan", "mixed", "huge"])
@pytest.mark.parametrize("rule", ROBUST_RULES)
def test_non_finite_attackers_within_f_keep_the_result_finite(rule: str, poison: str, pre: object) -> None:
    honest = honest_rows()
    bad = {
        "inf": attack("inf", honest, f=F),
        "nan": attack("nan", honest, f=F),
        "mixed": torch.tensor([[math.inf] * D, [-math.inf, math.nan] + [1.0] * (D - 2)], dtype=honest.dtype),
        # far beyond float32's range; Weiszfeld needs ~log(1e30) steps to walk back from the mean
        "huge": torch.full((F, D), 1e30, dtype=honest.dtype),
    }[poison]
    x = torch.cat([bad[:1], honest[:4], bad[1:], honest[4:]])
    out = aggregate(rule, x, f=F, pre=pre)  # type: ignore[arg-type]
    assert bool(torch.isfinite(out).all()), out
    # it also stays near the honest rows, not merely finite
    assert float((out - honest.mean(dim=0)).norm()) < 10 * float(honest.norm(dim=1).max())


def test_non_finite_rows_do_poison_the_mean() -> None:  # negative control
    x = torch.cat([honest_rows(), attack("nan", honest_rows(), f=F)])
    assert not bool(torch.isfinite(aggregate("mean", x, f=F)).all())


@pytest.mark.parametrize("rule", list(AGGREGATORS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inputs_are_not_modified_and_results_repeat(rule: str, dtype: torch.dtype) -> None:
    x = torch.cat([honest_rows(dtype=dtype), attack("inf", honest_rows(dtype=dtype), f=1)])
    x = torch.cat([x, honest_rows(1, dtype=dtype) * 3])
    before = x.clone()
    for pre in PRE:
        first = aggregate(rule, x, f=F, pre=pre)
        second = aggregate(rule, x, f=F, pre=pre)
        assert torch.equal(first, second)
        assert torch.equal(x.nan_to_num(posinf=1e9), before.nan_to_num(posinf=1e9))
        assert first.data_ptr() != x.data_ptr()


def test_bucketing_depends_on_its_seed_only() -> None:
    x = honest_rows(9, 3)
    one = aggregate("median", x, f=1, pre=[("bucketing", {"s": 2, "seed": 1})])
    assert torch.equal(one, aggregate("median", x, f=1, pre=[("bucketing", {"s": 2, "seed": 1})]))
    assert not torch.equal(one, aggregate("median", x, f=1, pre=[("bucketing", {"s": 2, "seed": 2})]))


def test_large_inputs_use_the_chunked_path_and_match_numpy() -> None:
    x = torch.randn(7, 40000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.equal(aggregate("median", x, f=2), torch.from_numpy(np.median(x.numpy(), axis=0)))
    ordered = np.sort(x.numpy(), axis=0)
    assert np.allclose(aggregate("trimmed_mean", x, f=2).numpy(), ordered[2:5].mean(axis=0))


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e6])
def test_gram_distances_match_direct_distances_in_float32(offset: float) -> None:
    # honest-like rows: a large common component plus small differences, the case that breaks the
    # uncentred Gram identity
    g = torch.Generator().manual_seed(2)
    x = offset + 1e-2 * torch.randn(6, 20000, generator=g)
    direct = direct_sq_distances(x.double().numpy())
    got = pairwise_sq_distances(x).numpy()
    assert np.allclose(got, direct, rtol=1e-3, atol=1e-3 * direct.max())


def test_uncentred_gram_identity_fails_the_same_check() -> None:  # negative control of the check above
    g = torch.Generator().manual_seed(2)
    x = 1e3 + 1e-2 * torch.randn(6, 20000, generator=g)
    gram = (x @ x.T).double()
    sq = gram.diagonal()
    naive = (sq[:, None] + sq[None, :] - 2 * gram).clamp_min(0).numpy()
    direct = direct_sq_distances(x.double().numpy())
    assert not np.allclose(naive, direct, rtol=1e-3, atol=1e-3 * direct.max())


def test_krum_ties_go_to_the_lowest_index() -> None:
    x = torch.tensor([[3.0], [-1.0], [1.0], [10.0], [-10.0]])
    # rows 1 and 2 tie (score 4 + 4 with neighbours at distance 2 and ... ) -> the lower index wins
    scores_equal = aggregate("krum", x, f=1)
    assert scores_equal.item() in (-1.0, 1.0, 3.0)
    y = torch.tensor([[-1.0], [1.0], [0.0], [100.0], [-100.0]])
    assert aggregate("krum", y, f=1).item() == 0.0
    z = torch.tensor([[1.0], [-1.0], [50.0], [-50.0], [200.0]])
    assert aggregate("krum", z, f=1).item() == 1.0
    assert aggregate("krum", z.flip(0), f=1).item() == -1.0


def test_geometric_median_matches_a_scipy_minimisation() -> None:
    from scipy.optimize import minimize

    x = torch.randn(9, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x[0] = 50.0
    got = aggregate("geometric_median", x, f=2).numpy()

    def objective(z: np.ndarray) -> float:
        return float(np.linalg.norm(x.numpy() - z, axis=1).sum())

    ref = minimize(objective, x.numpy().mean(axis=0), method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).x
    assert objective(got) <= objective(ref) + 1e-8
    assert np.allclose(got, ref, atol=1e-4)
    assert not np.allclose(x.numpy().mean(axis=0), ref, atol=1e-2)  # the mean is not the answer


def test_centered_clipping_definition_one_step() -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)
    centre = torch.zeros(2, dtype=torch.float64)
    out = aggregate("centered_clipping", x, f=1, tau=1.0, center=centre)
    # (1/3) * ((0,0) + (3,4)*(1/5) + (0.3,0.4))
    assert torch.allclose(out, torch.tensor([0.3, 0.4], dtype=torch.float64))
    default = aggregate("centered_clipping", x, f=1, tau=1.0)  # starts at the coordinate median
    assert not torch.allclose(default, out)


def test_nnm_mixes_each_row_with_its_nearest() -> None:
    from pytest_dmlbench.robust.pre import nnm

    x = torch.tensor([[0.0], [1.0], [10.0]], dtype=torch.float64)
    assert torch.allclose(nnm(x, f=1), torch.tensor([[0.5], [0.5], [5.5]], dtype=torch.float64))


def test_clip_scales_long_rows_only() -> None:
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    out = aggregate("mean", x, f=0, pre=[("clip", {"c": 1.0})])
    assert torch.allclose(out, torch.tensor([(0.6 + 0.3) / 2, (0.8 + 0.4) / 2]))


@pytest.mark.parametrize("rule", [r for r in ROBUST_RULES if r != "geometric_median"])
def test_rows_whose_squares_overflow_are_far_not_poison(rule: str) -> None:
    honest = honest_rows()
    x = torch.cat([torch.full((1, D), 1e300, dtype=honest.dtype), honest,
                   torch.full((1, D), -1e300, dtype=honest.dtype)])
    out = aggregate(rule, x, f=F)
    assert float((out - honest.mean(dim=0)).norm()) < 10 * float(honest.norm(dim=1).max())


def test_meamed_averages_exactly_tied_choices() -> None:
    # median 1; 0 and 2 are equally close: the two choices {0, 1} and {1, 2} are averaged
    x = torch.tensor([[0.0, 5.0], [1.0, 6.0], [2.0, 9.0]], dtype=torch.float64)
    assert torch.equal(aggregate("meamed", x, f=1), torch.tensor([1.0, 5.5], dtype=torch.float64))
    assert torch.equal(aggregate("meamed", x.flip(0), f=1), aggregate("meamed", x, f=1))
    # negative control: the lowest-index tie rule gives 0.5, or 1.5 once the rows are reversed
    assert meamed_reference(x.numpy(), 2)[0][0] == 0.5
    assert meamed_reference(x.flip(0).numpy(), 2)[0][0] == 1.5


@pytest.mark.parametrize("poison", [False, True], ids=["finite", "with-inf-row"])
def test_bucketing_averages_buckets_of_the_seeded_permutation(poison: bool) -> None:
    from pytest_dmlbench.robust.pre import bucketing

    x = torch.randn(7, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    if poison:
        x[3] = math.inf
    shuffled = x[torch.randperm(7, generator=torch.Generator().manual_seed(11))]
    expected = torch.stack([shuffled[i : i + 3].mean(dim=0) for i in range(0, 7, 3)])  # sizes 3, 3, 1
    got = bucketing(x, f=1, s=3, seed=11)
    assert torch.allclose(got, expected) if not poison else torch.equal(got.isinf(), expected.isinf())
    if poison:
        finite = torch.isfinite(expected).all(dim=1)
        assert int(finite.sum()) == 2 and torch.allclose(got[finite], expected[finite])
