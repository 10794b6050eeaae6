"""Calibration, workloads and the check of training cases, on results files made by the model.

The tests named ``arithmetic`` feed the code timings made from the same formulas it fits or predicts
with: they check the bookkeeping, not accuracy (tests/projection/test_holdout.py checks that on
measurements).
"""

from __future__ import annotations

import pytest

from pytest_dmlbench.errors import ProjectionError
from pytest_dmlbench.projection.analysis import Check, calibrate, validate, workloads
from pytest_dmlbench.projection.model import Network, exchange_time
from tests.projection.synthetic import (
    ALPHA,
    BETA,
    COMPUTE_S,
    GRAD_BYTES,
    PER_RANK_BATCH,
    collective_case,
    modelled_run,
    results,
    training_case,
)


def test_arithmetic_calibration_gives_back_the_network_a_results_file_was_made_from() -> None:
    cal = calibrate(modelled_run(ops=("all_reduce", "all_gather", "broadcast")))
    assert cal.network.alpha_s == pytest.approx(ALPHA, rel=1e-9)
    assert cal.network.beta_s_per_byte == pytest.approx(BETA, rel=1e-9)
    assert set(cal.fits) == {"all_reduce", "all_gather", "broadcast"}
    assert cal.source == "fit of all_reduce"


def test_given_latency_and_bandwidth_win_over_the_fit() -> None:
    cal = calibrate(modelled_run(), latency_us=10.0, bandwidth_gbps=100.0)
    assert cal.network == Network(10e-6, 1 / 100e9)
    half = calibrate(modelled_run(), bandwidth_gbps=100.0)
    assert half.network.alpha_s == pytest.approx(ALPHA) and half.network.beta_s_per_byte == 1 / 100e9
    assert "bandwidth given" in half.source


def test_workload_takes_compute_from_the_smallest_world_and_bytes_from_the_largest() -> None:
    [family] = workloads(modelled_run())
    assert family.name == "test_weak"
    assert [c.world_size for c in family.cases] == [1, 2, 4]
    assert family.workload.compute_s == pytest.approx(COMPUTE_S)
    assert family.workload.grad_bytes == GRAD_BYTES
    assert family.workload.per_rank_batch == pytest.approx(PER_RANK_BATCH)


def test_arithmetic_cases_made_by_the_model_are_predicted_exactly() -> None:
    checks = validate(workloads(modelled_run("ring")), calibrate(modelled_run("ring")).network, "ring")
    assert [c.world_size for c in checks] == [1, 2, 4]
    for check in checks:
        assert Check.error(check.own_step_s, check.measured_step_s) == pytest.approx(0.0, abs=1e-9)
        assert Check.error(check.base_step_s, check.measured_step_s) == pytest.approx(0.0, abs=1e-9)
        assert Check.error(check.base_speedup, check.measured_speedup) == pytest.approx(0.0, abs=1e-9)


def test_negative_control_a_tree_world_checked_with_the_ring_model_shows_an_error() -> None:
    run = modelled_run("tree")
    checks = validate(workloads(run), calibrate(run).network, "ring")
    ws4 = checks[-1]
    expected = (COMPUTE_S + exchange_time("ring", 4, GRAD_BYTES, 1, Network(ALPHA, BETA))) / (
        COMPUTE_S + exchange_time("tree", 4, GRAD_BYTES, 1, Network(ALPHA, BETA))) - 1
    assert Check.error(ws4.own_step_s, ws4.measured_step_s) == pytest.approx(expected)
    assert abs(expected) > 0.05


def test_oversubscription_is_flagged_per_case() -> None:
    run = modelled_run()
    run.machine["logical_cores"] = run.run["cores"] = 2
    flags = [c.oversubscribed for c in validate(workloads(run), Network(ALPHA, BETA))]
    assert flags == [False, False, True]


def test_results_without_collectives_name_the_command_to_run() -> None:
    run = results([training_case(2, 0.03)])
    with pytest.raises(ProjectionError, match="no collective cases") as info:
        calibrate(run)
    assert "--dmlbench-json" in str(info.value) and "--latency-us" in str(info.value)
    assert calibrate(run, latency_us=5, bandwidth_gbps=1).network == Network(5e-6, 1e-9)


def test_a_single_message_size_is_refused_with_the_reason() -> None:
    with pytest.raises(ProjectionError, match="two or more message sizes"):
        calibrate(results([collective_case("all_reduce", 1 << 20, 4)]))


def test_an_unphysical_fit_is_refused() -> None:
    # time falls with size: the fit's time per byte is negative
    cases = [collective_case("all_reduce", 1 << 10, 4), collective_case("all_reduce", 1 << 20, 4)]
    cases[1].metrics["step_time_s"].samples[:] = [1e-7] * 3
    cases[1].metrics["algbw_gbps"].samples[:] = [(1 << 20) / 1e-7 / 1e9] * 3
    with pytest.raises(ProjectionError, match="not physical"):
        calibrate(results(cases))


def test_results_without_training_cases_are_refused() -> None:
    with pytest.raises(ProjectionError, match="no training cases"):
        workloads(results([collective_case("all_reduce", 1 << 20, 4)]))


def test_collectives_at_several_world_sizes_are_also_fitted_per_world_size() -> None:
    cal = calibrate(modelled_run(ops=("all_reduce", "broadcast"), world_sizes=(2, 4)))
    assert sorted(cal.by_world_size) == [("all_reduce", 2), ("all_reduce", 4), ("broadcast", 2), ("broadcast", 4)]
    for fitted in cal.by_world_size.values():
        assert fitted.alpha_s == pytest.approx(ALPHA, rel=1e-9)
    assert calibrate(modelled_run(world_sizes=(4,))).by_world_size == {}


def test_cases_without_a_usable_compute_time_are_left_out() -> None:
    run = modelled_run()
    broken = training_case(8, 0.05)
    broken.metrics["exposed_comm_fraction"].samples[:] = [1.0] * 5  # the twin took no time
    run.cases.append(broken)
    [family] = workloads(run)
    assert [c.world_size for c in family.cases] == [1, 2, 4]
