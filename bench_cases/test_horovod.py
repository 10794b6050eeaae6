"""The ``horovod`` strategy under its own launcher: equivalence with single-process SGD and throughput.

Runs only under ``horovodrun`` (Gloo mode), where every rank runs pytest in the external-launcher mode
and has called ``hvd.init()``; elsewhere the cases skip with the command to run them:

    horovodrun -np 2 -H localhost:2 --gloo python -m pytest --dmlbench -p no:randomly bench_cases/test_horovod.py
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from bench_cases.test_equivalence import DRIFT_APART, MODELS, MOMENTA, check_strategy_matches_reference
from bench_cases.test_strategy_throughput import measure_throughput

pytestmark = pytest.mark.skipif(
    "HOROVOD_RANK" not in os.environ,
    reason="Horovod's cases run under horovodrun: horovodrun -np 2 -H localhost:2 --gloo python -m pytest "
           "--dmlbench -p no:randomly bench_cases/test_horovod.py",
)


@pytest.mark.correctness
@pytest.mark.dmlbench
@pytest.mark.dmlbench_smoke("model_name")
@pytest.mark.parametrize("momentum", MOMENTA)
@pytest.mark.parametrize("model_name", MODELS)
def test_horovod_matches_single_process_reference_float64(dist: Any, model_name: str, momentum: float) -> None:
    check_strategy_matches_reference("horovod", model_name, torch.float64, momentum)


@pytest.mark.correctness
@pytest.mark.dmlbench
def test_horovod_negative_control_without_communication_is_refuted(dist: Any) -> None:
    # without its all-reduce each rank steps on its own shard: the ranks drift apart (checked before the reference)
    with pytest.raises(AssertionError, match=DRIFT_APART):
        check_strategy_matches_reference("horovod", "mlp", torch.float64, 0.0, communicate=False)


@pytest.mark.dmlbench(world_size=2, timeout=900)
def test_horovod_vs_allreduce_throughput_resnet18(dist: Any, dmlbench: Any) -> None:
    result = measure_throughput(("allreduce", "horovod"))
    global_batch = result["global_batch"]
    for name in ("allreduce", "horovod"):
        samples = [global_batch / t for t in result[name]["step_times_s"]]
        dmlbench.record(f"{name}_samples_per_s", samples, unit="samples/s", better="higher")
    if dist.is_main:
        for name in ("allreduce", "horovod"):
            figures = result[name]
            print(f"{name}: {figures['samples_per_s']:.1f} samples/s (median step {figures['median_step_s']:.3f} s)")
