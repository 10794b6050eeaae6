"""``studies/simulated_scale.py``'s measurements at 4 simulated ranks (its targets are at 256 and 1024, minutes of a
core, and are checked by running the study, never in unit tests)."""

from __future__ import annotations

from studies import simulated_scale


def test_each_collective_s_cost_per_rank() -> None:
    costs = simulated_scale.collective_costs(4, rounds=2)
    assert list(costs) == ["barrier", "all_reduce (2826 float64)", "broadcast (2826 float64)"]
    assert costs["barrier"] > 0  # what is left of the other two after the barriers around them may be noise


def test_the_ddp_case_s_phases() -> None:
    phases = simulated_scale.ddp_breakdown(4)
    names = list(phases)
    assert names[:3] == ["world start and end (threads, init_process_group)",
                         "model and DistributedDataParallel(...) on every rank",
                         "data: rank 0 makes the global batches and scatters the shards"]
    assert [n for n in names if n.startswith("DDP step")] == [f"DDP step {s} (forward, backward, gradient all-reduce, "
                                                              "SGD)" for s in range(1, 4)]
    assert len(names) == 9 and all(seconds >= 0 for seconds in phases.values())  # and a check after each step
