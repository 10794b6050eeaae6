"""studies/injected_night.py and the slowdown it injects (studies/injected_slowdown.py): which parametrizations
are slowed and by how much work, what the flop counter sees of each kind of work, the slowed commit in a real git
clone, the night's summary and the refused options. The live nights themselves (a whole nightly each) are run by
hand and reported in docs/evidence/run-logs.md; a one-case night runs daily with the tests marked slow."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from studies import injected_night
from studies.injected_slowdown import (
    CALIBRATION_ENV,
    UNIT_FLOPS,
    Calibrating,
    SlowedBench,
    Slowing,
    calibrated_units,
    counted_flops,
    extra_work,
    parametrizations,
    slowed,
    spin,
)
from studies.scratch_repo import commits_of, git
from tests.studies.running import run_study

pytest_plugins = ["pytester"]
NODE = "bench_cases/test_training_benchmarks.py::test_strategy_training[ddp]"


class FakeClock:
    """A thread clock that moves only when told (by a step, by a unit of extra work)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingBench:
    """A ``dmlbench`` stand-in that runs what it is given once and keeps it."""

    def __init__(self) -> None:
        self.given: list[Any] = []

    def pedantic(self, fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
                 **_: Any) -> Any:
        self.given.append(fn)
        return fn(*args, **(kwargs or {}))

    def train(self, strategy: Any, batches: Any, **kwargs: Any) -> Any:
        self.given.append((strategy, kwargs.get("twin")))
        return strategy.step(None, None, None)

    def record(self, name: str) -> str:
        return f"recorded {name}"


def test_a_slowed_call_adds_its_share_of_the_calls_own_cpu_time() -> None:
    clock = FakeClock()
    slowing = Slowing("elementwise", 0.05, clock)
    units: list[int] = []

    def unit() -> None:
        clock.advance(0.125)
        units.append(1)

    slowing.work = unit

    def step(x: int) -> int:
        clock.advance(10.0)
        return x + 1

    assert slowing.call(step)(1) == 2
    assert len(units) == 4 and clock.now == 10.5  # 5 % of the step's 10 s, in units of 0.125 s
    assert spin(0.0, lambda: units.append(1), clock) == 0  # a call that took no CPU time adds nothing


def test_the_counted_work_is_counted_by_the_flop_counter_and_the_elementwise_work_is_not() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    counted = {}
    for how in ("counted", "elementwise"):
        work = extra_work(how)
        with FlopCounterMode(display=False) as mode:
            work()
        counted[how] = mode.get_total_flops()
    assert counted == {"counted": 2 * 64 * 64 * 64, "elementwise": 0}
    with pytest.raises(ValueError, match="how='sleep': give one of counted, elementwise"):
        extra_work("sleep")


def step_of_flops(products: int) -> Callable[[], object]:
    """A step of ``products`` 128x128 matrix products (4.2 MFLOPs each: eight units of counted work)."""
    import torch

    matrix = torch.randn(128, 128)

    def step() -> object:
        for _ in range(products):
            torch.mm(matrix, matrix)
        return "stepped"
    return step


def test_counted_work_is_a_fixed_share_of_the_calls_flops_the_same_in_every_round() -> None:
    """The counters judge the slowed side's FLOPs exactly: the extra must be the same count on every call, the first
    included, and in every process (a round) that wraps the same work, whatever the clock did."""
    step = step_of_flops(10)  # 41.9 MFLOPs: 5 % of it is 4 units (exactly 4.0)
    _, plain = counted_flops(step)
    assert plain == 10 * 2 * 128**3
    per_round = []
    for _ in range(2):  # two rounds: each wraps the step anew, as each run of the case does
        slowed_step = Slowing("counted", 0.05).call(step)
        first, first_flops = counted_flops(slowed_step)  # the call that sizes the extra is counted too
        later = [counted_flops(slowed_step)[1] for _ in range(3)]
        assert first == "stepped"
        per_round.append([first_flops, *later])
    assert per_round == [[plain + 4 * UNIT_FLOPS["counted"]] * 4] * 2
    assert per_round[0][0] / plain == pytest.approx(1.05, abs=0.001)


def test_negative_control_work_sized_by_cpu_time_changes_the_count_with_the_clock() -> None:
    """The elementwise injection is sized by time; sized so, counted work would follow the clock: two rounds of the
    same step on clocks that differ count different FLOPs (what made the counters inconclusive), where the
    counted injection above counts the same."""
    counts = []
    for seconds in (10.0, 20.0):  # the same step, measured at 10 s and at 20 s of CPU time
        clock = FakeClock()
        slowing = Slowing("elementwise", 0.05, clock)
        slowing.work = extra_work("counted")
        unit = slowing.work

        def timed_unit(unit: Callable[[], object] = unit, clock: FakeClock = clock) -> object:
            clock.advance(0.125)
            return unit()
        slowing.work = timed_unit

        def step(clock: FakeClock = clock, seconds: float = seconds) -> None:
            clock.advance(seconds)
        counts.append(counted_flops(slowing.call(step))[1])
    assert counts == [4 * UNIT_FLOPS["counted"], 8 * UNIT_FLOPS["counted"]]


def test_a_call_with_too_few_flops_cannot_be_slowed_by_counted_work() -> None:
    slowed_step = Slowing("counted", 0.05).call(step_of_flops(1))  # 5 % of 4.2 MFLOPs is 0.4 of a unit
    with pytest.raises(ValueError, match=r"step: the flop counter counts 4194304 FLOPs in this call, under the "
                                         r"5242880 that 5% of would make half a unit of counted work; slow it with "
                                         r"how='elementwise'"):
        slowed_step()


def test_only_the_named_parametrizations_get_a_slowed_bench() -> None:
    seen: list[Any] = []

    @pytest.mark.parametrize("size", [4, 16])
    @pytest.mark.parametrize("name", ["ddp", "fsdp"], ids=["DDP", "FSDP"])
    def case(dist: object, dmlbench: Any, name: str, size: int) -> None:
        seen.append(dmlbench)

    wrapped = slowed(case, ["DDP-16"], "elementwise", 0.05)
    assert wrapped.__wrapped__ is case and wrapped.pytestmark == case.pytestmark  # type: ignore[attr-defined]
    for name in ("ddp", "fsdp"):
        for size in (4, 16):
            wrapped(dist=None, dmlbench=RecordingBench(), name=name, size=size)
    assert [isinstance(bench, SlowedBench) for bench in seen] == [False, True, False, False]
    with pytest.raises(ValueError, match=r"case has no parametrization \['ddp'\]: its ids are \['DDP-16', 'DDP-4', "
                                         r"'FSDP-16', 'FSDP-4'\]"):
        slowed(case, ["ddp"], "elementwise", 0.05)


def test_pytest_ids_are_read_as_pytest_makes_them(pytester: pytest.Pytester) -> None:
    """The ids the wrapper computes are the ones pytest collects (explicit ids, pytest.param ids, plain values,
    objects, stacked marks), checked against a real collection."""
    pytester.makepyfile(test_ids='''
        import pytest

        @pytest.mark.parametrize("obj", [object(), 2.5])
        @pytest.mark.parametrize("a,b", [(1, "x"), pytest.param(2, "y", id="second")])
        @pytest.mark.parametrize("flag", [True, None], ids=["on", "off"])
        def test_case(flag, a, b, obj):
            pass
    ''')
    collected = pytester.runpytest("--collect-only", "-q", "-p", "no:randomly")
    ids = {line.split("[", 1)[1].rstrip("]") for line in collected.outlines if line.startswith("test_ids.py::")}
    module = pytester.path / "test_ids.py"
    namespace: dict[str, Any] = {}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    marks = parametrizations(namespace["test_case"])
    from studies.injected_slowdown import all_ids

    assert len(ids) == 8 and all_ids(marks) == ids


def test_a_slowed_bench_slows_pedantic_calls_and_training_steps_and_passes_the_rest_through() -> None:
    clock = FakeClock()
    slowing = Slowing("elementwise", 0.5, clock)
    slowing.work = lambda: clock.advance(0.25)
    bench = RecordingBench()
    slowed_bench = SlowedBench(bench, slowing)

    def step(x: int) -> int:
        clock.advance(1.0)
        return x

    assert slowed_bench(step, 3) == 3 and clock.now == pytest.approx(1.5)

    class Strategy:
        model = "the model"

        def step(self, inputs: Any, targets: Any, loss_fn: Any) -> float:
            clock.advance(2.0)
            return 0.5

    twin = Strategy()
    assert slowed_bench.train(Strategy(), [], global_batch_size=4, twin=twin) == 0.5
    assert clock.now == pytest.approx(1.5 + 3.0)
    strategy, given_twin = bench.given[-1]
    assert strategy.model == "the model" and given_twin is not twin and given_twin.model == "the model"
    assert slowed_bench.record("x") == "recorded x"


def test_the_slowed_commit_rebinds_the_case_and_changes_nothing_else(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    case_text = ('import pytest\n\n@pytest.mark.parametrize("name", ["ddp", "fsdp"])\n'
                 'def test_step(dist, dmlbench, name):\n    pass\n')
    (source / "bench_cases").mkdir()
    commits_of(source, {"base": {"bench_cases/test_steps.py": case_text, "README.md": "cases\n"}})
    clone, units = injected_night.slowed_clone(source, tmp_path / "clone",
                                               ["bench_cases/test_steps.py::test_step[fsdp]"], "elementwise", 0.05)
    assert units == {}  # elementwise work is sized by each call's time, nothing calibrated
    assert git(clone, "diff", "--name-only", "HEAD~1", "HEAD") == "bench_cases/test_steps.py"
    text = (clone / "bench_cases" / "test_steps.py").read_text()
    assert text.startswith(case_text)
    assert "test_step = _injected_slowed(test_step, ['fsdp'], 'elementwise', 0.05)" in text
    ast.parse(text)
    namespace: dict[str, Any] = {}
    exec(compile(text, "test_steps.py", "exec"), namespace)
    assert namespace["test_step"].__wrapped__.__name__ == "test_step"
    with pytest.raises(ValueError, match=r"names bench_cases/test_other\.py, which .* does not have"):
        injected_night.slowed_clone(source, tmp_path / "clone2", ["bench_cases/test_other.py::test_x"],
                                    "elementwise", 0.05)


TIMED_CASE = """\
import pytest
import torch


@pytest.mark.dmlbench(world_size=2)
@pytest.mark.parametrize("size", [128, 192])
def test_step(dist, dmlbench, size):
    matrix = torch.randn(size, size)
    dmlbench.pedantic(torch.mm, args=(matrix, matrix), rounds=12, warmup=1)


@pytest.mark.dmlbench(world_size=2)
@pytest.mark.parametrize("size", [1])
def test_untimed(dist, dmlbench, size):
    pass
"""


def test_a_counted_night_calibrates_fixed_units_on_a_real_run(tmp_path: Path) -> None:
    """``counted``: one plain run of the slowed cases reads each call's CPU time and the unit's, and the slowed commit
    carries the units per call it gives; the clone is otherwise left as it was."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "bench_cases").mkdir()
    (source / "studies").mkdir()
    studies = Path(injected_night.__file__).parent  # the injected line imports the slowing from the clone's studies/
    commits_of(source, {"base": {"bench_cases/test_steps.py": TIMED_CASE, "studies/__init__.py": "",
                                 "studies/injected_slowdown.py": (studies / "injected_slowdown.py").read_text()}})
    nodes = ["bench_cases/test_steps.py::test_step[128]", "bench_cases/test_steps.py::test_step[192]"]
    clone, units = injected_night.slowed_clone(source, tmp_path / "clone", nodes, "counted", 0.5)
    assert set(units) == set(nodes) and all(n >= 1 for n in units.values()), units
    assert units[nodes[1]] > units[nodes[0]], units  # 3.4x the FLOPs of the smaller step: more units
    text = (clone / "bench_cases" / "test_steps.py").read_text()
    expected = {"128": units[nodes[0]], "192": units[nodes[1]]}
    assert f"_injected_slowed(test_step, ['128', '192'], 'counted', 0.5, units={expected!r})" in text
    assert git(clone, "diff", "--name-only", "HEAD~1", "HEAD") == "bench_cases/test_steps.py"
    assert git(clone, "status", "--porcelain") == ""  # the calibrating lines did not stay
    with pytest.raises(RuntimeError, match=r"read no timed call"):  # a case that times no step cannot be calibrated
        injected_night.slowed_clone(source, tmp_path / "clone2", ["bench_cases/test_steps.py::test_untimed[1]"],
                                    "counted", 0.5)


def test_calibrated_units_are_the_share_of_the_median_call_over_the_median_unit() -> None:
    readings: list[dict[str, Any]] = [{"unit_cpu_s": 0.001}, {"unit_cpu_s": 0.003}, {"unit_cpu_s": 0.002},
                {"id": "a", "call_cpu_s": 0.4}, {"id": "a", "call_cpu_s": 9.0}, {"id": "a", "call_cpu_s": 0.8},
                {"id": "b", "call_cpu_s": 0.001}]
    assert calibrated_units(readings, 0.05) == {"a": 20, "b": 1}  # 5 % of 0.8 s over 2 ms; at least one
    with pytest.raises(ValueError, match="read no timed call"):
        calibrated_units([{"unit_cpu_s": 0.001}], 0.05)


def test_a_calibrating_call_is_read_not_slowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readings = tmp_path / "readings.jsonl"
    monkeypatch.setenv(CALIBRATION_ENV, str(readings))
    monkeypatch.setattr(Calibrating, "unit_cpu_s", None)
    clock = FakeClock()
    calibrating = Calibrating("test_steps.py::test_step[ddp]", clock)
    calibrating.work = lambda: clock.advance(0.001)

    def step() -> str:
        clock.advance(0.25)
        return "stepped"
    wrapped = calibrating.call(step)
    assert [wrapped(), wrapped()] == ["stepped", "stepped"] and clock.now == pytest.approx(2.5)  # 2 s of units, once
    lines = [json.loads(line) for line in readings.read_text().splitlines()]
    call = {"id": "test_steps.py::test_step[ddp]", "call_cpu_s": pytest.approx(0.25)}
    assert lines == [{"unit_cpu_s": pytest.approx(0.001)}, call, call]
    monkeypatch.delenv(CALIBRATION_ENV)
    with pytest.raises(ValueError, match=f"needs {CALIBRATION_ENV}"):
        Calibrating("x")


def test_fixed_units_are_done_after_every_call_whatever_it_counts() -> None:
    slowed_step = Slowing("counted", 0.05, units=7).call(step_of_flops(1))
    assert [counted_flops(slowed_step)[1] for _ in range(2)] == [2 * 128**3 + 7 * UNIT_FLOPS["counted"]] * 2
    with pytest.raises(ValueError, match="for how='counted' only"):
        Slowing("elementwise", 0.05, units=7)


def test_a_shipped_case_can_be_slowed_by_its_node_id() -> None:
    from bench_cases import test_training_benchmarks

    path, function, ident = injected_night.parse_node(NODE)
    assert (path, function, ident) == ("bench_cases/test_training_benchmarks.py", "test_strategy_training", "ddp")
    wrapped = slowed(getattr(test_training_benchmarks, function), [ident], "elementwise", 0.05)
    assert wrapped.__wrapped__ is test_training_benchmarks.test_strategy_training  # type: ignore[attr-defined]


def test_the_summary_reads_which_figure_caught_the_slowed_case_and_what_else_was_red(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def verdict(metric: str, kind: str, estimate: float | None) -> dict[str, Any]:
        return {"metric": metric, "kind": kind, "ratio": estimate, "paired": {"estimate": estimate}}

    results = {"cases": [
        {"nodeid": NODE, "outcome": "failed", "verdicts": [verdict("step_time_s", "inconclusive", 1.03),
                                                            verdict("cpu_time_s", "regression", 1.06)]},
        {"nodeid": "bench_cases/test_x.py::test_y", "outcome": "failed",
         "verdicts": [verdict("step_time_s", "regression", 1.2)]},
        {"nodeid": "bench_cases/test_x.py::test_z", "outcome": "passed",
         "verdicts": [verdict("step_time_s", "unchanged", 1.0)]},
    ]}
    night = injected_night.summarize_results(results, [NODE, "bench_cases/test_x.py::test_missing"])
    assert night["slowed"][NODE]["caught"] and night["slowed"][NODE]["decided_by"] == ["cpu_time_s"]
    assert night["slowed"]["bench_cases/test_x.py::test_missing"] == {"ran": False}
    assert night["red_for_nothing"] == ["bench_cases/test_x.py::test_y"]
    assert night["verdict_kinds"] == {"inconclusive": 1, "regression": 2, "unchanged": 1}
    report = {"slow": [NODE], "how": "elementwise", "share": 0.05, "exit": 1, "wall_s": 600.0, "night": night}
    (tmp_path / "night.json").write_text(json.dumps(report))
    done = run_study(injected_night.main, capsys, "--summarize", str(tmp_path / "night.json"))
    assert done.returncode == 0, done.stderr
    assert "slowed elementwise 5%: 1 of 2 caught" in done.stdout
    assert f"{NODE}: failed; failed by cpu_time_s; cpu_time_s regression 1.060, step_time_s inconclusive 1.030" \
        in done.stdout
    assert "bench_cases/test_x.py::test_missing: did not run" in done.stdout
    assert "red for nothing: bench_cases/test_x.py::test_y" in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    ([], "give at least one --slow NODEID"),
    (["--slow", "tests/test_x.py::test_y"], "--slow 'tests/test_x.py::test_y': give a case's node id under "
                                           "bench_cases/"),
    (["--slow", NODE, "--share", "1.5"], "--share 1.5: give a fraction between 0 and 1"),
    (["--slow", NODE, "--env", "THRESHOLD=5"], "--env 'THRESHOLD=5': give NAME=VALUE with a DMLBENCH_ name"),
])
def test_bad_options_are_refused_before_anything_runs(capsys: pytest.CaptureFixture[str], args: list[str],
                                                      message: str) -> None:
    done = run_study(injected_night.main, capsys, *args)
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.slow
def test_a_one_case_night_catches_its_slowed_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One shipped case with 90 % more work a step (a change no noise hides at a 30 % threshold), the nightly run on
    it alone."""
    out = tmp_path / "night.json"
    done = run_study(injected_night.main, capsys, "--slow", NODE, "--share", "0.9", "--select",
                     "test_strategy_training and ddp", "--env", "DMLBENCH_THRESHOLD=30", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    night = json.loads(out.read_text())
    assert night["exit"] == 1 and night["night"]["slowed"][NODE]["caught"], done.stdout
    assert night["night"]["red_for_nothing"] == []
