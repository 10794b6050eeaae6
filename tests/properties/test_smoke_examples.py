"""``--dmlbench-smoke`` runs a property case for one example (the rank-side body call, in this process on the
one-rank channel): the same lockstep path, one draw; the ordinary run keeps the case's own ``max_examples``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dmlbench.measure.rounds import SMOKE_BUDGET, is_smoke
from pytest_dmlbench.properties.body import run_case_body


def _counting_property(drawn: list[int]) -> Any:
    @settings(max_examples=15, database=None)
    @given(x=st.integers(0, 10**6))
    def prop(x: int) -> None:
        drawn.append(x)

    return prop


def test_a_smoke_run_draws_one_example_and_the_ordinary_run_its_own_count() -> None:
    smoke: list[int] = []
    run_case_body(_counting_property(smoke), {}, max_examples=1 if is_smoke(SMOKE_BUDGET) else None)
    assert len(smoke) == 1
    ordinary: list[int] = []  # negative control: no smoke run, the test's own 15 examples
    run_case_body(_counting_property(ordinary), {}, max_examples=None)
    assert len(ordinary) == 15


def test_the_rank_side_body_call_passes_the_smoke_block_on(world1: None) -> None:
    """The case execution a rank runs: one example under the smoke block, the test's own count without."""
    from pytest_dmlbench.measure.dist_info import DistInfo
    from pytest_dmlbench.world.execute import execute_case

    local = DistInfo(0, 1, "gloo", "cpu")
    for block, expected in ((SMOKE_BUDGET, 1), (None, 15)):  # the ordinary run as negative control
        drawn: list[int] = []
        outcome = execute_case(1, local, _counting_property(drawn), lambda bench: {}, seed=0,
                               measure_memory=False, block=block)
        assert outcome.status == "passed" and len(drawn) == expected, (block, outcome.status, len(drawn))
