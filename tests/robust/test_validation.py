"""Bad names, shapes, dtypes, parameters and (n, f) combinations give errors that name the problem."""

from __future__ import annotations

import re

import pytest
import torch

from pytest_dmlbench.robust import AGGREGATORS, ATTACKS, aggregate, attack

X = torch.zeros(4, 3)


def test_unknown_aggregator_lists_the_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown aggregator 'krumm'; valid names: mean, median, "):
        aggregate("krumm", X, f=0)


def test_unknown_attack_and_pre_aggregation_list_the_valid_names() -> None:
    with pytest.raises(ValueError, match=re.escape("valid names: " + ", ".join(ATTACKS))):
        attack("bitflip", X, f=1)
    with pytest.raises(ValueError, match="unknown pre-aggregation 'cclip'; valid names: nnm, bucketing"):
        aggregate("mean", X, f=0, pre=["cclip"])


@pytest.mark.parametrize(
    ("updates", "error", "message"),
    [
        ([[1.0, 2.0]], TypeError, "must be a torch.Tensor of shape"),
        (torch.zeros(3), ValueError, r"shape \(n, d\) .* got \(3,\)"),
        (torch.zeros(0, 3), ValueError, r"got \(0, 3\)"),
        (torch.zeros(3, 2, dtype=torch.int64), TypeError, "floating dtype, got torch.int64; use .float()"),
    ],
    ids=["list", "1d", "empty", "int"],
)
def test_bad_updates(updates: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        aggregate("median", updates, f=0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "n", "f", "message"),
    [
        ("median", 4, 2, "median requires f < n/2, got n=4, f=2"),
        ("trimmed_mean", 4, 2, "trimmed_mean requires n > 2b, got n=4, b=2, f=2"),
        ("meamed", 2, 1, "meamed requires f < n/2, got n=2, f=1"),
        ("krum", 6, 2, "krum requires n >= 2f\\+3, got n=6, f=2"),
        ("bulyan", 6, 1, "bulyan requires n >= 4f\\+3, got n=6, f=1"),
        ("geometric_median", 6, 3, "geometric_median requires f < n/2, got n=6, f=3"),
        ("median", 3, 4, "f must satisfy 0 <= f <= n, got f=4, n=3"),
    ],
)
def test_preconditions_are_named_with_the_values(rule: str, n: int, f: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        aggregate(rule, torch.zeros(n, 2), f=f)


def test_multi_krum_m_bound() -> None:
    with pytest.raises(ValueError, match="multi_krum requires 1 <= m <= n-f, got n=5, f=1, m=5"):
        aggregate("multi_krum", torch.zeros(5, 2), f=1, m=5)


def test_precondition_after_bucketing_mentions_the_pre_aggregation() -> None:
    with pytest.raises(ValueError, match=r"krum requires n >= 2f\+3, got n=4, f=1 \(after pre-aggregation "
                                         r"bucketing: 8 inputs became 4 rows\)"):
        aggregate("krum", torch.zeros(8, 2), f=1, pre=[("bucketing", {"s": 2})])


def test_unknown_parameters_name_the_accepted_ones() -> None:
    with pytest.raises(TypeError, match="aggregator 'krum' does not take m; it accepts: no parameters"):
        aggregate("krum", torch.zeros(5, 2), f=1, m=2)
    with pytest.raises(TypeError, match="pre-aggregation 'clip' does not take tau; it accepts: c"):
        aggregate("mean", X, f=0, pre=[("clip", {"tau": 1.0})])
    with pytest.raises(TypeError, match="attack 'ipm' does not take z; it accepts: eps"):
        attack("ipm", X, f=1, z=1.0)


@pytest.mark.parametrize("f", [-1, 1.5, True, "1"])
def test_bad_f(f: object) -> None:
    with pytest.raises((TypeError, ValueError), match="f must"):
        aggregate("median", X, f=f)  # type: ignore[arg-type]


def test_bad_pre_spec_shows_the_accepted_form() -> None:
    with pytest.raises(TypeError, match=r"names or \(name, params\) pairs"):
        aggregate("mean", X, f=0, pre=[("clip", 1.0)])  # type: ignore[list-item]


def test_every_rule_documents_definition_precondition_and_reference() -> None:
    for name, fn in AGGREGATORS.items():
        doc = fn.__doc__ or ""
        assert "recondition" in doc or name in ("mean", "centered_clipping"), name
        assert "Reference" in doc or name == "mean", name
