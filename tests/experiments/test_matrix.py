"""Matrix expansion: one combination per element of the product, in written order, ids showing values."""

from __future__ import annotations

import pytest

from pytest_dmlbench.experiments.matrix import expand, format_value
from pytest_dmlbench.experiments.schema import FieldProblem


def test_product_in_written_order_with_ids() -> None:
    combos = expand({"strategy": ["ddp", "ps"], "world_size": [2, 4], "lr": [0.1]})
    assert [ident for ident, _ in combos] == [
        "strategy=ddp-world_size=2-lr=0.1", "strategy=ddp-world_size=4-lr=0.1",
        "strategy=ps-world_size=2-lr=0.1", "strategy=ps-world_size=4-lr=0.1",
    ]
    assert combos[1][1] == {"strategy": "ddp", "world_size": 4, "lr": 0.1}


def test_single_key_single_value_is_one_combination() -> None:
    assert expand({"epochs": [3]}) == [("epochs=3", {"epochs": 3})]


@pytest.mark.parametrize(("value", "shown"), [
    (True, "true"), (1e-9, "1e-09"), ("allreduce", "allreduce"),
    ({"name": "bucketed", "options": {"bucket_mb": 1}}, "bucketed(bucket_mb=1)"),
    ({"name": "ddp"}, "ddp()"),
])
def test_values_in_ids(value: object, shown: str) -> None:
    assert format_value(value) == shown


@pytest.mark.parametrize(("matrix", "key", "text"), [
    ({"strategy": []}, "matrix.strategy", "is an empty list: the matrix expands to nothing"),
    ({"strategy": "ddp"}, "matrix.strategy", "'ddp' is not a list of values"),
    ({"modle": ["cnn"]}, "matrix.modle", "is not a field that can vary"),
    ({"name": ["a", "b"]}, "matrix.name", "is not a field that can vary"),
    ({}, "matrix", "{} is not a mapping of fields to lists of values"),
    (["ddp"], "matrix", "['ddp'] is not a mapping of fields to lists of values"),
])
def test_bad_matrices(matrix: object, key: str, text: str) -> None:
    with pytest.raises(FieldProblem) as caught:
        expand(matrix)
    assert (caught.value.key, caught.value.text) == (key, text)
    assert "lr" in caught.value.accepted or "[a, b]" in caught.value.accepted
