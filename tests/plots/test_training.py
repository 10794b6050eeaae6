"""training.png draws per-epoch loss and the final accuracy as what it is, a single end-of-training figure;
bench cases that record only an accuracy get accuracy.png, never an empty training figure."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.plots import training
from pytest_dmlbench.plots.figure import Skipped
from tests.plots.conftest import case, drawn, no_warnings, run

EXPERIMENT = case("exp/test_a.py::test_experiment[ddp]", loss=[2.2, 1.9, 1.6, 1.4], accuracy=[0.46])


def bar_widths(ax: object) -> list[float]:
    return [round(bar.get_width(), 6) for bar in ax.patches]  # type: ignore[attr-defined]


def all_y_values(figure: object) -> list[float]:
    return [float(y) for ax in figure.axes for line in ax.get_lines() for y in line.get_ydata()]  # type: ignore[attr-defined]


def test_experiment_loss_per_epoch_beside_its_final_accuracy(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(training.draw([run(EXPERIMENT)], out))
    assert figure.path.name == "training.png" and figure.path.exists()
    loss_ax, accuracy_ax = figure.drawing.axes
    [line] = loss_ax.get_lines()
    assert list(line.get_xdata()) == [1, 2, 3, 4] and list(line.get_ydata()) == [2.2, 1.9, 1.6, 1.4]
    assert loss_ax.get_xlabel() == "epoch"
    assert bar_widths(accuracy_ax) == [0.46]
    assert "after the last epoch" in accuracy_ax.get_xlabel()
    assert 0.46 not in all_y_values(figure.drawing), "the final accuracy must not be drawn at an epoch"
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == ["experiment[ddp] ws2"]


def test_bench_cases_with_only_an_accuracy_get_bars_not_an_empty_training_figure(out: Path) -> None:
    robust = [case(f"bench/test_robust.py::test_attack[{rule}]", accuracy=[value])
              for rule, value in (("mean", 0.12), ("median", 0.81))]
    with no_warnings():
        [figure] = drawn(training.draw([run(*robust)], out))
    assert figure.path.name == "accuracy.png" and not (out / "training.png").exists()
    [ax] = figure.drawing.axes
    assert bar_widths(ax) == [0.12, 0.81]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["attack[mean] ws2", "attack[median] ws2"]


def test_an_experiment_without_accuracy_draws_the_loss_alone(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(training.draw([run(case("e.py::test_x", loss=[1.0, 0.5]))], out))
    assert len(figure.drawing.axes) == 1 and "accuracy" not in figure.caption


def test_nothing_to_draw_is_said_and_no_file_is_written(out: Path) -> None:
    drawn_or_not = training.draw([run(case("b.py::test_step", step_time_s=[0.1, 0.2, 0.3]))], out)
    assert isinstance(drawn_or_not, Skipped) and "loss" in drawn_or_not.reason
    assert not out.exists() or not list(out.glob("*.png"))
