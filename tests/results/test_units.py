"""One formatter per unit kind, natural order of sizes, node ids wrapped but never cut."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dmlbench.gates import wording
from pytest_dmlbench.results.table import wrap_nodeid
from pytest_dmlbench.results.units import format_quantity, natural_key, parse_size, scale_for


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.0123, "s", "12.3 ms"),
        (2.5e-7, "s", "250 ns"),
        (42.0, "s", "42 s"),
        (1.2e6, "bytes", "1.2 MB"),  # SI: 10^6 bytes, not 1.144 MiB
        (4096, "bytes", "4.096 kB"),
        (0, "bytes", "0 B"),
        (1500.0, "MB", "1500 MB"),  # peak_rss_mb stays in MB, the unit its name gives
        (537.5, "MB", "537.5 MB"),
        (0.00297, "GB/s", "0.00297 GB/s"),  # busbw_gbps stays in GB/s
        (13974.3, "samples/s", "13974 samples/s"),  # no exponent
        (0.25, "fraction", "25 %"),
        (248.2, "samples/s", "248.2 samples/s"),
        (float("inf"), "ratio", "inf ratio"),
        (None, "s", "n/a"),
        (float("nan"), "s", "n/a"),
    ],
)
def test_format_quantity(value: float | None, unit: str, text: str) -> None:
    assert format_quantity(value, unit) == text


def test_verdict_messages_and_the_table_share_one_formatter() -> None:
    assert vars(wording)["format_quantity"] is format_quantity
    scale = scale_for("s", 0.0123)
    assert scale.quantity(0.0123) == format_quantity(0.0123, "s")
    assert scale.quantity(0.0004) == "0.4 ms"  # IQR in the median's unit, not rescaled on its own


def test_sizes_sort_by_the_quantity_they_name() -> None:
    ids = ["op[16MB]", "op[1MB]", "op[4KB]", "op[64KB]", "op[4MB]", "op[1GB]"]
    assert sorted(ids, key=natural_key) == ["op[4KB]", "op[64KB]", "op[1MB]", "op[4MB]", "op[16MB]", "op[1GB]"]
    assert sorted(ids) != sorted(ids, key=natural_key)  # negative control: plain string order is wrong
    assert sorted(["bs128", "bs32", "ws2", "ws10"], key=natural_key) == ["bs32", "bs128", "ws2", "ws10"]
    assert parse_size("16MB") == 16 * 2**20 and parse_size("4kB") == 4000 and parse_size("fast") is None


LONG = "bench_cases/test_collectives.py::test_collective_bandwidth[reduce_scatter-16MB]"


def test_wrapping_breaks_only_at_natural_points() -> None:
    lines = wrap_nodeid(LONG, 34)
    assert lines == ["bench_cases/test_collectives.py::", "test_collective_bandwidth",
                     "[reduce_scatter-16MB]"]
    assert wrap_nodeid("t.py::short[a]", 34) == ["t.py::short[a]"]
    assert wrap_nodeid("x" * 50, 10) == ["x" * 50]  # no break point: whole, never cut


@given(st.lists(st.sampled_from(["a", "bc", "/", "::", "[", "]", "-", "_", ",", "16MB", "x" * 12]), max_size=40),
       st.integers(min_value=4, max_value=60))
def test_wrapped_lines_give_the_node_id_back(parts: list[str], width: int) -> None:
    nodeid = "".join(parts)
    lines = wrap_nodeid(nodeid, width)
    assert "".join(lines) == nodeid
    for line in lines:
        assert len(line) <= width or not any(sep in line[:-1] for sep in ("/", "::", "-", ",", "_")), line
