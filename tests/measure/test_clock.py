from __future__ import annotations

import time

import pytest

from pytest_dmlbench.measure import clock
from pytest_dmlbench.measure.clock import ManualClock, current_clock, now, use_clock


def test_default_clock_is_perf_counter() -> None:
    assert current_clock() is time.perf_counter


def test_use_clock_substitutes_and_restores() -> None:
    fake = ManualClock(5.0)
    with use_clock(fake):
        assert now() == 5.0
        fake.advance(0.25)
        assert now() == 5.25
    assert current_clock() is time.perf_counter


def test_use_clock_restores_after_an_error() -> None:
    with pytest.raises(KeyError), use_clock(ManualClock()):
        raise KeyError("boom")
    assert current_clock() is time.perf_counter


def test_nested_clocks_unwind_in_order() -> None:
    outer, inner = ManualClock(1.0), ManualClock(2.0)
    with use_clock(outer):
        with use_clock(inner):
            assert now() == 2.0
        assert now() == 1.0


def test_non_callable_clock_is_rejected() -> None:
    with pytest.raises(TypeError, match="callable"), use_clock(3.0):  # type: ignore[arg-type]
        pass


def test_manual_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        ManualClock().advance(-1)


def test_library_modules_read_the_one_clock() -> None:
    # every timing module imports now() from the clock module instead of reading time.perf_counter
    from pytest_dmlbench.measure import bandwidth, collective_bench, comm, runner

    for module in (bandwidth, collective_bench, comm, runner):
        assert module.now is clock.now
