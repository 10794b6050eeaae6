"""A profiled span names torch's operators with their self time and each collective's blocked time."""

from __future__ import annotations

import pytest

from pytest_dmlbench.measure.op_profile import BLOCKED_SUFFIX, BlockProfile, profiled


def test_a_profiled_span_names_its_operators_and_collectives(world1: None) -> None:
    import torch
    import torch.distributed as dist

    a = torch.randn(300, 300)
    with profiled() as slot:
        for _ in range(5):
            b = a @ a
            dist.all_reduce(b)
    profile = slot.profile
    assert profile is not None and profile.wall_s > 0
    assert profile.calls["aten::mm"] == 5 and profile.seconds["aten::mm"] > 0
    assert profile.calls[f"dist.all_reduce{BLOCKED_SUFFIX}"] == 5
    assert "aten::cumsum" not in profile.seconds  # negative control: an operator the span never ran


def test_a_body_that_raises_leaves_no_profile() -> None:
    with pytest.raises(ValueError, match="in the body"), profiled() as slot:
        raise ValueError("in the body")
    assert slot.profile is None


def test_a_profile_survives_the_block_servers_message_form() -> None:
    profile = BlockProfile(0.5, {"aten::mm": 0.25, "dist.all_reduce (blocked)": 0.1}, {"aten::mm": 3})
    assert BlockProfile.from_dict(profile.to_dict()) == profile


@pytest.mark.parametrize("data", [{}, {"wall_s": "x", "seconds": {}}, {"wall_s": 1.0, "seconds": [1, 2]}])
def test_a_malformed_profile_is_refused_with_what_was_sent(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="not a block profile"):
        BlockProfile.from_dict(data)
