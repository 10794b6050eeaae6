from __future__ import annotations

import pytest

from pytest_dmlbench.measure.clock import ManualClock, now, use_clock
from pytest_dmlbench.measure.rounds import RankSync, RoundPlan, run_rounds


def test_fixed_plan_runs_warmup_then_exactly_the_rounds() -> None:
    calls: list[int] = []

    def body() -> list[float]:
        calls.append(1)
        return [float(len(calls))]

    rows = run_rounds(body, RoundPlan(warmup=2, rounds=3), width=1)
    assert len(calls) == 5
    assert rows == [[3.0], [4.0], [5.0]]  # warm-up rounds 1 and 2 discarded


def test_adaptive_plan_stops_once_min_time_is_measured() -> None:
    fake = ManualClock()

    def body() -> list[float]:
        start = now()
        fake.advance(0.3)
        return [now() - start]

    with use_clock(fake):
        rows = run_rounds(body, RoundPlan(warmup=1, rounds=None, min_time_s=1.0, min_rounds=2), width=1)
    assert len(rows) == 4  # 0.3 s each: 0.9 s after three rounds is short of 1.0 s, 1.2 s after four
    assert all(r == [pytest.approx(0.3)] for r in rows)


def test_adaptive_plan_honours_min_and_max_rounds() -> None:
    plan = RoundPlan(warmup=0, rounds=None, min_time_s=100.0, min_rounds=3, max_rounds=5)
    assert len(run_rounds(lambda: [1.0], plan, width=1)) == 5
    quick = RoundPlan(warmup=0, rounds=None, min_time_s=0.0, min_rounds=3, max_rounds=5)
    assert len(run_rounds(lambda: [1.0], quick, width=1)) == 3


def test_body_width_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="returned 2 values, expected 1"):
        run_rounds(lambda: [1.0, 2.0], RoundPlan(warmup=0, rounds=1), width=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warmup": -1}, "warmup must be >= 0"),
        ({"rounds": 0}, "rounds must be >= 1"),
        ({"rounds": None, "min_rounds": 5, "max_rounds": 2}, "min_rounds <= max_rounds"),
        ({"rounds": None, "min_time_s": float("inf")}, "min_time_s"),
    ],
    ids=["warmup", "rounds", "min-max", "min-time"],
)
def test_bad_plans_are_rejected_with_the_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RoundPlan(**kwargs)  # type: ignore[arg-type]


def test_sync_without_a_process_group_is_local() -> None:
    sync = RankSync()
    assert (sync.world_size, sync.rank, sync.distributed) == (1, 0, False)
    assert sync.exchange(1.0, [2.0, 3.0]) == (True, [2.0, 3.0])
