"""Turn-taking's waits: an abort wakes every waiting rank at once, and the waiting ranks' look for an abort they
were not woken for stays rare in a large world (each look takes the GIL from the rank that runs)."""

from __future__ import annotations

import threading

import pytest

from pytest_dmlbench.world.simulated.turns import TurnTaking, WorldAborted


def turn_taking(world_size: int) -> TurnTaking:
    return TurnTaking(world_size, on_switch=lambda leaving, entering: None, on_stall=lambda: "stalled")


@pytest.mark.parametrize("world_size", [2, 64, 1024])
def test_all_waiting_ranks_together_look_for_an_abort_at_most_four_times_a_second(world_size: int) -> None:
    turns = turn_taking(world_size)
    assert turns.poll_s >= 5.0
    assert world_size / turns.poll_s <= 4.0  # 1024 ranks looking every 5 s starved the running rank (205 a second)


def test_an_abort_wakes_a_waiting_rank_at_once_not_at_its_next_look() -> None:
    turns = turn_taking(1024)  # a look every 256 s
    raised: list[BaseException] = []

    def rank_one() -> None:
        try:
            turns.await_first_turn(1)
        except WorldAborted as exc:
            raised.append(exc)

    thread = threading.Thread(target=rank_one, daemon=True)
    thread.start()
    turns.begin()  # rank 0 holds the turn; rank 1 waits for its own
    turns.abort("the host stopped the case")
    thread.join(timeout=turns.poll_s / 4)
    assert not thread.is_alive()
    assert [str(exc) for exc in raised] == ["the host stopped the case"]
