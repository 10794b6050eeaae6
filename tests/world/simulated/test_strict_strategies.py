"""The project's own strategies pass strict mode: the equivalence suite at scale (``bench_cases/
test_simulated_equivalence.py``: DDP, all-reduce, bucketed, parameter server, local SGD) at 64 ranks in one
strict world, and pipeline, FSDP2, tensor parallelism and DDP's communication hooks (fp16, PowerSGD) with
their equivalence checks at 4 ranks in another. 1024 ranks run under the ``scale`` marker
(``pytest --dmlbench -m scale bench_cases/test_simulated_equivalence.py``). The negative control: the same
checks fail on the strategy that skips synchronisation, in strict mode too."""

from __future__ import annotations

from typing import Any

import pytest

from tests.world.simulated.helpers import passed, simulate


def test_the_equivalence_suite_passes_strict_mode_at_64_ranks() -> None:
    from bench_cases import test_simulated_equivalence as suite

    def body(info: Any) -> None:
        for name, options, momentum in suite.EXACT:
            strategy, reference = suite.build_pair(name, "mlp", momentum, **options)
            suite.check_at_scale(strategy, "mlp", reference)
        lazy, reference = suite.build_pair("allreduce", "mlp", 0.9, communicate=False)
        with pytest.raises(AssertionError, match="not bit-identical to rank 0 on ranks 1-63"):
            suite.check_at_scale(lazy, "mlp", reference)

    assert passed(simulate(body, 64, strict=True), 64)


def test_pipeline_fsdp2_tensor_parallel_and_ddp_hooks_pass_strict_mode() -> None:
    from bench_cases import test_equivalence as equivalence
    from bench_cases import test_sharded_equivalence as sharded
    from pytest_dmlbench.strategies.sharded import sharding_support

    if sharding_support() is not None:
        pytest.skip(f"{sharding_support()}")

    def body(info: Any) -> None:
        equivalence.check_pipeline_equals_unsplit(4, 2, momentum=0.9)
        equivalence.check_pipeline_equals_unsplit(2, 2, momentum=0.9)  # two stages, two replicas
        sharded.check_strategy("fsdp", "mlp", 0.9)
        sharded.check_strategy("fsdp", "mlp", 0.9, reshard_after_forward=False)
        sharded.check_strategy("tensor_parallel", "mlp", 0.9)
        equivalence.check_fp16_gradient_error("cnn")
        equivalence.check_powersgd_projection("cnn")

    assert passed(simulate(body, 4, strict=True), 4)
