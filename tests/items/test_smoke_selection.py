"""``--dmlbench-smoke`` keeps every value of every parameter once and a sweep's smallest value only."""

from __future__ import annotations

import itertools

import pytest

from pytest_dmlbench.items.smoke import covering

pytest_plugins = ["pytester"]


def _grid(**values: list[str]) -> list[dict[str, str]]:
    names = list(values)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())]


def _covers(rows: list[dict[str, str]], kept: list[int], sweeps: tuple[str, ...] = ()) -> bool:
    """Every value of every other parameter among the kept rows, and each sweep at its first value only."""
    shown = [rows[i] for i in kept]
    return (all({row[name] for row in shown} == {row[name] for row in rows} for name in rows[0] if name not in sweeps)
            and all({row[name] for row in shown} == {rows[0][name]} for name in sweeps))


def test_every_value_of_every_parameter_runs_once_and_a_sweep_at_its_first_value() -> None:
    rows = _grid(ws=["1", "2", "4"], name=["ddp", "allreduce", "bucketed", "ps", "local_sgd"],
                 model=["mlp", "cnn", "transformer"], momentum=["0", "0.9"])
    kept = covering(rows, sweeps=["model"])
    assert len(rows) == 90 and len(kept) == 5  # the most values of one parameter, not their product
    assert _covers(rows, kept, ("model",))
    assert _covers(rows, covering(rows)) and len(covering(rows)) == 5  # no sweep: every model too


def test_negative_control_a_selection_that_drops_a_value_is_caught() -> None:
    rows = _grid(op=["all_reduce", "broadcast"], size=["4KB", "64MB"])
    assert _covers(rows, covering(rows, sweeps=["size"]), ("size",))
    assert not _covers(rows, [0], ("size",))  # the first case alone leaves broadcast out
    assert not _covers(rows, [0, 1, 2, 3], ("size",))  # every case runs the sweep's large size too


def test_a_smoke_run_deselects_the_rest_and_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases="""
        import pytest

        @pytest.mark.dmlbench(world_size=1)
        @pytest.mark.dmlbench_smoke("size")
        @pytest.mark.parametrize("size", ["4KB", "64MB"])
        @pytest.mark.parametrize("op", ["all_reduce", "broadcast", "all_gather"])
        def test_bandwidth(op, size):
            pass

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_plain(n):
            pass
    """)
    result = pytester.runpytest_inprocess("--dmlbench", "--dmlbench-smoke", "--collect-only", "-q",
                                          "-p", "no:cacheprovider", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["*6/9 tests collected (3 deselected)*"])
    kept = [line for line in result.outlines if "::test_bandwidth[" in line]
    assert kept == [f"test_cases.py::test_bandwidth[{op}-4KB]" for op in ("all_reduce", "broadcast", "all_gather")]
    full = pytester.runpytest_inprocess("--dmlbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    full.stdout.fnmatch_lines(["9 tests collected*"])  # without --dmlbench-smoke every case runs
