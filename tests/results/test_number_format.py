"""One number format and one unit per metric: no exponents, no rescaling against a metric's name."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dmlbench.results import MetricResult
from pytest_dmlbench.results.table import metric_cells
from pytest_dmlbench.results.units import format_number, named_scale, scale_for


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (13974.3, "13974"),  # was 1.397e+04 beside an IQR of 2731
        (2731.2, "2731"),
        (999.96, "1000"),
        (920.0, "920"),
        (248.23, "248.2"),
        (42.0, "42"),
        (0.00549, "0.00549"),
        (2.5e-7, "0.00000025"),
        (-0.012345, "-0.01235"),
        (0.0, "0"),
        (1e9, "1000000000"),
        (float("inf"), "inf"),
        (float("nan"), "nan"),
    ],
)
def test_numbers_have_one_format(value: float, text: str) -> None:
    assert format_number(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15))
def test_no_number_is_written_with_an_exponent(value: float) -> None:
    text = format_number(value)
    assert "e" not in text
    if abs(value) >= 1e-3:  # 4 significant digits below 1000, the whole number above
        assert math.isclose(float(text), value, rel_tol=1e-3, abs_tol=0.5)


def test_a_metric_keeps_the_unit_its_name_gives() -> None:
    busbw = MetricResult.of("busbw_gbps", [0.00549, 0.0055])
    memory = MetricResult.of("peak_rss_mb", [1519.0])
    assert metric_cells(busbw, None).median == "0.005495 GB/s"  # was "5.49 MB/s"
    assert metric_cells(memory, None).median == "1519 MB"  # was "1.519 GB"
    assert named_scale("fraction").quantity(0.25) == "25 %"
    # negative control: the readable scale a plot axis uses does rescale a base unit
    assert scale_for("s", 0.0123).label == "ms" and scale_for("bytes", 1.5e9).label == "GB"
    assert scale_for("GB/s", 0.00549).label == "GB/s"  # a unit recorded in a multiple is kept
