"""Which Ray placement strategy a world asks for; pure, so it runs without Ray (the two-node cluster test in
``test_world.py`` shows a spread world on two nodes)."""

from __future__ import annotations

import pytest

from pytest_dmlbench.world.ray.world import placement_strategy


@pytest.mark.parametrize(("spread", "world_size", "nodes", "expected"), [
    (False, 4, 4, "PACK"),
    (True, 2, 2, "STRICT_SPREAD"),
    (True, 2, 3, "STRICT_SPREAD"),
    (True, 4, 2, "SPREAD"),
])
def test_spread_is_strict_only_where_every_rank_can_have_a_node(spread: bool, world_size: int, nodes: int,
                                                                 expected: str) -> None:
    assert placement_strategy(spread, world_size, nodes) == expected
