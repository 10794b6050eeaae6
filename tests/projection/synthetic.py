"""Results files made from a known network: collective timings and training cases that follow the
alpha-beta model exactly, so that a fit must give back the alpha and beta they were made from. They test
the arithmetic of fit and prediction, never the model's accuracy (circular by construction)."""

from __future__ import annotations

from pytest_dmlbench.config import SCALING_ARG
from pytest_dmlbench.projection.collective_model import coefficients
from pytest_dmlbench.projection.model import Network, exchange_time
from pytest_dmlbench.results import CaseResult, MetricResult, RunResults

ALPHA = 50e-6  # 50 us per message
BETA = 1.0 / 2e9  # 2 GB/s per link
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
GRAD_BYTES = 4_000_000.0
COMPUTE_S = 0.020
PER_RANK_BATCH = 16


def collective_case(op: str, nbytes: int, p: int, alpha: float = ALPHA, beta: float = BETA) -> CaseResult:
    latency, width = coefficients(op, p)
    seconds = latency * alpha + width * nbytes * beta
    case = CaseResult(f"bench_cases/test_collectives.py::test_collective_bandwidth[{op}-{nbytes}]",
                      {"op": op, "size": str(nbytes)}, p, "gloo")
    case.add(MetricResult.of("step_time_s", [seconds] * 3))
    case.add(MetricResult.of("algbw_gbps", [nbytes / seconds / 1e9] * 3))
    return case


def training_case(p: int, step_s: float, compute_s: float = COMPUTE_S, grad_bytes: float = GRAD_BYTES) -> CaseResult:
    case = CaseResult(f"bench_cases/test_training.py::test_weak[ws{p}]", {SCALING_ARG: str(p)}, p, "gloo")
    case.add(MetricResult.of("step_time_s", [step_s] * 5))
    case.add(MetricResult.of("exposed_comm_fraction", [1 - compute_s / step_s] * 5))
    case.add(MetricResult.of("comm_bytes_per_step", [grad_bytes if p > 1 else 0.0] * 5))
    case.add(MetricResult.of("throughput_samples_per_s", [PER_RANK_BATCH * p / step_s] * 5))
    return case


def results(cases: list[CaseResult], cores: int = 64) -> RunResults:
    return RunResults(machine={"logical_cores": cores, "backend": "gloo"}, created="2026-11-23T00:00:00+00:00",
                      run={"world_size": 4, "xdist_workers": 0, "cores": cores}, cases=cases)


def modelled_run(algorithm: str = "ring", ops: tuple[str, ...] = ("all_reduce",), world_sizes: tuple[int, ...] = (2, 4),
                 training_sizes: tuple[int, ...] = (1, 2, 4)) -> RunResults:
    """Collectives at every size and world size, and a weak-scaling case whose step is compute + exchange
    under ``algorithm`` on the same network."""
    net = Network(ALPHA, BETA)
    cases = [collective_case(op, n, p) for op in ops for p in world_sizes for n in SIZES]
    cases += [training_case(p, COMPUTE_S + exchange_time(algorithm, p, GRAD_BYTES, 1, net)) for p in training_sizes]
    return results(cases)
