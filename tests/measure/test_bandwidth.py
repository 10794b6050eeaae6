from __future__ import annotations

import pytest

from pytest_dmlbench.measure.bandwidth import algbw_gbps, bus_factor, busbw_gbps, memcpy_gbps


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 1, 0.0),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 2, 0.5),
        ("broadcast", 4, 1.0),
        ("reduce", 8, 1.0),
    ],
    ids=lambda v: str(v),
)
def test_bus_factors_are_those_of_nccl_tests(op: str, n: int, factor: float) -> None:
    assert bus_factor(op, n) == pytest.approx(factor)


def test_algbw_is_bytes_over_time_in_decimal_gigabytes() -> None:
    assert algbw_gbps(2_000_000_000, 0.5) == pytest.approx(4.0)


def test_busbw_is_algbw_times_factor() -> None:
    # 64 MB all_reduce over 4 ranks in 0.1 s: algbw 0.64 GB/s, busbw 0.64 * 1.5
    assert busbw_gbps("all_reduce", 64_000_000, 0.1, 4) == pytest.approx(0.96)


def test_unknown_collective_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown collective 'allreduce'.*all_reduce"):
        bus_factor("allreduce", 2)


@pytest.mark.parametrize("seconds", [0.0, -1.0], ids=["zero", "negative"])
def test_non_positive_time_is_rejected(seconds: float) -> None:
    with pytest.raises(ValueError, match="> 0 s"):
        algbw_gbps(1, seconds)


def test_memcpy_bandwidth_gives_one_positive_sample_per_round() -> None:
    samples = memcpy_gbps(1 << 20, iters=2, rounds=3)
    assert len(samples) == 3
    assert all(s > 0 for s in samples)


def test_memcpy_rejects_empty_copies() -> None:
    with pytest.raises(ValueError, match="nbytes"):
        memcpy_gbps(0)
