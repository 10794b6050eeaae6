"""The field table agrees with the code it names (zoo, strategies, runners) and with the docs."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_dmlbench.experiments import fields
from pytest_dmlbench.experiments.frameworks import RUNNERS, runner_for

ROOT = Path(__file__).resolve().parents[2]
FIELDS_PAGE = ROOT / "docs" / "reference" / "experiment-files.md"
HOW_TO = ROOT / "docs" / "how-to" / "experiments.md"


def test_model_names_are_the_zoo() -> None:
    from pytest_dmlbench.training.models import MODELS

    assert set(fields.MODELS) == set(MODELS) == set(fields.MODEL_DATASETS)


def test_strategy_names_are_the_registry_minus_the_unsupported() -> None:
    from pytest_dmlbench.strategies import available

    assert set(fields.STRATEGIES) | set(fields.UNSUPPORTED_STRATEGIES) == set(available())
    assert not set(fields.STRATEGIES) & set(fields.UNSUPPORTED_STRATEGIES)


def test_every_dataset_fits_some_model() -> None:
    assert {d for ds in fields.MODEL_DATASETS.values() for d in ds} == set(fields.DATASETS)


def test_every_framework_resolves_to_a_runner() -> None:
    assert set(fields.FRAMEWORKS) == set(RUNNERS)
    for name in RUNNERS:
        assert callable(runner_for(name))


def test_documented_field_table_lists_every_field() -> None:
    table = FIELDS_PAGE.read_text().split("| Field | Default | Accepted | Meaning |", 1)[1].split("\n\n", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert documented == [*fields.FIELDS, "matrix"]


def test_documented_example_file_is_valid(tmp_path: Path) -> None:
    from pytest_dmlbench.experiments import load_file

    example = HOW_TO.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "data" / "cifar-10-batches-py").mkdir(parents=True)
    (tmp_path / "dmlbench_example.yaml").write_text(example)
    runs = load_file(tmp_path / "dmlbench_example.yaml", default_world_size=2)
    assert [r.name for r in runs] == [
        "cnn_allreduce_vs_bucketed[strategy=allreduce-world_size=2]",
        "cnn_allreduce_vs_bucketed[strategy=allreduce-world_size=4]",
        "cnn_allreduce_vs_bucketed[strategy=bucketed(bucket_mb=0.25)-world_size=2]",
        "cnn_allreduce_vs_bucketed[strategy=bucketed(bucket_mb=0.25)-world_size=4]",
        "ResNet50_CIFAR10",
    ]


def test_shipped_experiment_files_are_valid_at_world_sizes_2_and_4() -> None:
    from pytest_dmlbench.experiments import load_file

    files = sorted((ROOT / "bench_cases").glob("dmlbench_*.yaml"))
    assert [f.name for f in files] == ["dmlbench_ray_train_vs_ddp.yaml", "dmlbench_seed000_resnet50.yaml",
                                       "dmlbench_seed001_cnn_bucketing.yaml", "dmlbench_seed004_strategies.yaml"]
    for world_size in (2, 4):
        assert sum(len(load_file(f, default_world_size=world_size)) for f in files) == 8
