"""The project's own strategies pass strict mode at 64 ranks: the equivalence suite at scale
(``bench_cases/test_simulated_equivalence.py``: DDP, all-reduce, bucketed, parameter server, local SGD) in one
strict world, and pipeline (4 stages x 16 replicas), FSDP2, tensor parallelism and DDP's communication hooks
(fp16, PowerSGD) with their equivalence checks in another; the variants beside them (a pipeline of 4 stages
alone, 2 stages x 2 replicas, FSDP2 keeping its parameters after the forward) in a strict world of 4 ranks.
1024 ranks run under the ``scale`` marker, the same checks in strict mode
(``pytest --dmlbench -m scale -k ranks1024-strict bench_cases/test_simulated_equivalence.py``).
The negative controls: the same checks fail, in strict mode at 64 ranks too, on the all-reduce strategy that
skips synchronisation and on FSDP2 without its gradient reduce-scatter (the other faulty strategies are caught
at 2 ranks in ``bench_cases``: strict mode cannot make a check pass that would fail, since a result read before
it is delivered is poison). What the 64-rank worlds cost, with strict mode and without: docs/how-to/strict-mode.md."""

from __future__ import annotations

from typing import Any

import pytest

from tests.world.simulated.helpers import passed, simulate

# Global batches at 64 ranks (bench_cases/test_simulated_equivalence.py's STRICT_CHECKS): one sample per data
# rank for FSDP2 and the hooks, two per pipeline replica (4 stages x 16 replicas, its two micro-batches); tensor
# parallelism gives every rank the whole batch of 16 and needs a hidden width the 64 ranks divide ("wide_mlp").
# FSDP2 and tensor parallelism take two steps there (the second uses momentum).
RANKS = 64


def test_the_equivalence_suite_passes_strict_mode_at_64_ranks() -> None:
    from bench_cases import test_simulated_equivalence as suite

    def body(info: Any) -> None:
        for name, options, momentum in suite.EXACT:
            strategy, reference = suite.build_pair(name, "mlp", momentum, **options)
            suite.check_at_scale(strategy, "mlp", reference)
        lazy, reference = suite.build_pair("allreduce", "mlp", 0.9, communicate=False)
        with pytest.raises(AssertionError, match="not bit-identical to rank 0 on ranks 1-63"):
            suite.check_at_scale(lazy, "mlp", reference)

    assert passed(simulate(body, RANKS, strict=True), RANKS)


def test_pipeline_fsdp2_tensor_parallel_and_ddp_hooks_pass_strict_mode_at_64_ranks() -> None:
    from bench_cases import test_simulated_equivalence as suite
    from pytest_dmlbench.strategies.sharded import sharding_support

    if sharding_support() is not None:
        pytest.skip(f"{sharding_support()}")

    def body(info: Any) -> None:
        for check in suite.STRICT_CHECKS.values():  # the checks the scale suite runs at 1024 ranks, one world here
            check(RANKS)

    assert passed(simulate(body, RANKS, strict=True), RANKS)


def test_pipeline_and_fsdp2_variants_pass_strict_mode_at_4_ranks() -> None:
    from bench_cases import test_equivalence as equivalence
    from bench_cases import test_sharded_equivalence as sharded
    from pytest_dmlbench.strategies.sharded import sharding_support

    if sharding_support() is not None:
        pytest.skip(f"{sharding_support()}")

    def body(info: Any) -> None:
        equivalence.check_pipeline_equals_unsplit(4, 2, momentum=0.9)  # four stages, no replica
        equivalence.check_pipeline_equals_unsplit(2, 2, momentum=0.9)  # two stages, two replicas
        sharded.check_strategy("fsdp", "mlp", 0.9, reshard_after_forward=False)

    assert passed(simulate(body, 4, strict=True), 4)
