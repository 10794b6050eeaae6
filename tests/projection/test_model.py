"""The exchange and step-time formulas, by hand-computed values."""

from __future__ import annotations

import pytest

from pytest_dmlbench.projection.model import (
    Network,
    Workload,
    exchange_time,
    messages_for,
    project,
    step_time,
)

NET = Network(alpha_s=1e-4, beta_s_per_byte=1e-9)  # 100 us, 1 GB/s


@pytest.mark.parametrize("algorithm", ["ring", "tree", "ps"])
def test_one_rank_exchanges_nothing(algorithm: str) -> None:
    assert exchange_time(algorithm, 1, 1e6, 3, NET) == 0.0


def test_exchange_times_by_hand() -> None:
    g = 8e6
    # ring on 4: 2*3 messages of latency, 2*3/4 of the gradient over one link
    assert exchange_time("ring", 4, g, 1, NET) == pytest.approx(6e-4 + 1.5 * 8e-3)
    # tree on 5: 3 levels up, 3 down, whole message per level
    assert exchange_time("tree", 5, g, 1, NET) == pytest.approx(6 * (1e-4 + 8e-3))
    # parameter server on 4: 3 pushes and 3 pulls through the server's link
    assert exchange_time("ps", 4, g, 2, NET) == pytest.approx(6 * (2e-4 + 8e-3))


def test_ring_bandwidth_term_saturates_and_tree_latency_grows_with_log_p() -> None:
    big = exchange_time("ring", 1024, 1e9, 1, Network(0.0, 1e-9))
    assert big == pytest.approx(2 * 1023 / 1024)
    assert exchange_time("tree", 1024, 0.0, 1, NET) == pytest.approx(20 * 1e-4)


def test_overlap_hides_communication_up_to_the_backward() -> None:
    assert step_time(0.03, 0.01, overlap=False, backward_share=2 / 3) == pytest.approx(0.04)
    assert step_time(0.03, 0.01, overlap=True, backward_share=2 / 3) == pytest.approx(0.03)
    assert step_time(0.03, 0.05, overlap=True, backward_share=2 / 3) == pytest.approx(0.01 + 0.05)


def test_projection_figures_are_consistent() -> None:
    work = Workload(compute_s=0.02, grad_bytes=4e6, messages=1, per_rank_batch=16)
    one = project(work, NET, "ring", 1, overlap=False)
    assert (one.speedup, one.efficiency, one.comm_fraction) == (1.0, 1.0, 0.0)
    eight = project(work, NET, "ring", 8, overlap=False)
    comm = 14e-4 + 2 * 7 / 8 * 4e-3
    assert eight.step_s == pytest.approx(0.02 + comm)
    assert eight.throughput == pytest.approx(8 * 16 / (0.02 + comm))
    assert eight.speedup == pytest.approx(8 * 0.02 / (0.02 + comm))
    assert eight.efficiency == pytest.approx(eight.speedup / 8)
    assert eight.comm_fraction == pytest.approx(comm / (0.02 + comm))


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="rank count"):
        exchange_time("ring", 0, 1.0, 1, NET)
    with pytest.raises(ValueError, match="unknown algorithm"):
        exchange_time("butterfly", 4, 1.0, 1, NET)
    with pytest.raises(ValueError, match=">= 0"):
        Network(-1.0, 1e-9)


def test_messages_follow_ddp_buckets() -> None:
    assert messages_for(1.0) == 1
    assert messages_for(60 * 1024 * 1024) == 3
