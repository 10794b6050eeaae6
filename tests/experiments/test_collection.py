"""Experiment files through pytest itself: ids, skipping without --dmlbench, and bad files as collection
errors with their exact message and no traceback."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_pytest, write_files

GOOD = """
    defaults: {model: mlp, batch_size: 8}
    experiments:
      - name: sweep
        matrix: {strategy: [ddp, ps], lr: [0.1, 0.01]}
      - name: single
"""
JSON = '{"experiments": [{"name": "from-json", "model": "transformer", "dataset": "tokens"}]}'


def test_without_dmlbench_experiments_are_skipped_like_cases(tmp_path: Path) -> None:
    write_files(tmp_path, **{"dmlbench_good.yaml": GOOD})
    result = run_pytest(tmp_path, "-rs")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["SKIPPED [5] dmlbench_good.yaml: distributed case: run with --dmlbench",
                                "*= 5 skipped in *"])


def test_good_files_give_ids_and_bad_files_exact_collection_errors(tmp_path: Path) -> None:
    """Ids are ``file::name`` with the matrix values; a bad file names file, experiment, key and the
    accepted values, without a traceback, and does not stop the good files from being collected."""
    write_files(tmp_path, **{
        "sub/dmlbench_more.json": JSON,
        "dmlbench_model.yaml": "experiments:\n  - {name: a, model: resnet5}\n",
        "dmlbench_syntax.yml": "experiments:\n  - name: a\n    model: [cnn\n",
        "dmlbench_syntax.json": '{"experiments": [}',
        "dmlbench_cifar.yaml": "experiments:\n  - {name: c, model: cnn, dataset: cifar10}\n",
        "dmlbench_good.yaml": GOOD,
    })
    result = run_pytest(tmp_path, "--collect-only", "-q", "--dmlbench")
    assert result.returncode == 2, result.output
    result.lines.fnmatch_lines([
        "dmlbench_good.yaml::sweep[strategy=ddp-lr=0.1]",
        "dmlbench_good.yaml::sweep[strategy=ddp-lr=0.01]",
        "dmlbench_good.yaml::sweep[strategy=ps-lr=0.1]",
        "dmlbench_good.yaml::sweep[strategy=ps-lr=0.01]",
        "dmlbench_good.yaml::single",
        "sub/dmlbench_more.json::from-json",
        "*ERROR collecting dmlbench_cifar.yaml*",
        "dmlbench_cifar.yaml: experiment 'c': key 'data_dir': is required for dataset cifar10; accepted: the "
        "extracted 'cifar-10-batches-py' folder (absolute, or relative to the file)",
        "dmlbench_model.yaml: experiment 'a': key 'model': unknown model 'resnet5' (did you mean 'resnet50'?); "
        "accepted: bn_cnn, cnn, mlp, resnet18, resnet50, transformer, unet",
        "dmlbench_syntax.json: JSON syntax error at line 1, column 18: Expecting value",
        "dmlbench_syntax.yml: YAML syntax error at line 4, column 1: expected ',' or ']', but got '<stream end>'",
        "*6 tests collected, 4 errors*",
    ])
    assert "Traceback" not in result.output and "raise " not in result.output
