"""Reading experiment files: good files give validated runs; every bad file gives one exact message naming
the file, the experiment, the key and what is accepted (never a traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.experiments import Experiment, ExperimentFileError, load_file

DEFAULTS_FIELDS = ("model, dataset, data_dir, strategy, framework, world_size, batch_size, epochs, "
                   "max_batches_per_epoch, eval_batches, lr, momentum, seed, threshold, timeout, pair_budget, "
                   "comm_rounds, min_accuracy")
ALL_FIELDS = "name, " + DEFAULTS_FIELDS

# (id, file name, file text, the exact collection error; {folder} is the file's folder)
BAD_FILES = [
    ('unknown_key', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, modle: x}\n',
     ("dmlbench_a.yaml: experiment 'a': key 'modle': unknown key (did you mean 'model'?); accepted: ") + ALL_FIELDS),
    ('unknown_model', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: resnet5}\n',
     "dmlbench_a.yaml: experiment 'a': key 'model': unknown model 'resnet5' (did you mean 'resnet50'?); "
     "accepted: bn_cnn, "
     'cnn, mlp, resnet18, resnet50, transformer, unet'),
    ('wrong_type', 'dmlbench_a.yaml', "experiments:\n  - {name: a, model: cnn, batch_size: '32'}\n",
     "dmlbench_a.yaml: experiment 'a': key 'batch_size': '32' (a str) is not a whole number; "
     'accepted: a whole number >= 1'),
    ('bool_int', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, epochs: true}\n',
     "dmlbench_a.yaml: experiment 'a': key 'epochs': True (a bool) is not a whole number; "
     'accepted: a whole number >= 1'),
    ('range', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, lr: 0}\n',
     "dmlbench_a.yaml: experiment 'a': key 'lr': 0.0 is out of range; accepted: a number > 0"),
    ('empty_matrix', 'dmlbench_a.yaml', 'experiments:\n  - name: a\n    model: cnn\n    matrix: {strategy: []}\n',
     "dmlbench_a.yaml: experiment 'a': key 'matrix.strategy': is an empty list: the matrix "
     'expands to nothing; accepted: a non-empty list, e.g. strategy: [a, b]'),
    ('yaml_syntax', 'dmlbench_a.yaml', 'experiments:\n  - name: a\n    model: [cnn\n',
     "dmlbench_a.yaml: YAML syntax error at line 4, column 1: expected ',' or ']', but got "
     "'<stream end>'"),
    ('yaml_tab', 'dmlbench_a.yml', 'experiments:\n  - name: a\n\tmodel: cnn\n',
     "dmlbench_a.yml: YAML syntax error at line 3, column 1: found character '\\t' that cannot "
     'start any token'),
    ('json_syntax', 'dmlbench_a.json', '{"experiments": [{"name": "a",}]}',
     'dmlbench_a.json: JSON syntax error at line 1, column 31: Expecting property name enclosed '
     'in double quotes'),
    ('cifar_no_dir', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, dataset: cifar10}\n',
     "dmlbench_a.yaml: experiment 'a': key 'data_dir': is required for dataset cifar10; "
     "accepted: the extracted 'cifar-10-batches-py' folder (absolute, or relative to the file)"),
    ('cifar_missing_dir', 'dmlbench_a.yaml',
     'experiments:\n  - {name: a, model: cnn, dataset: cifar10, data_dir: nowhere}\n',
     "dmlbench_a.yaml: experiment 'a': key 'data_dir': folder '{folder}/nowhere' does not exist;"
     " accepted: the extracted 'cifar-10-batches-py' folder (absolute, or relative to the file)"),
    ('data_dir_synthetic', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, data_dir: x}\n',
     "dmlbench_a.yaml: experiment 'a': key 'data_dir': is only read for dataset cifar10, not "
     "'synthetic'; accepted: no data_dir for synthetic data sets"),
    ('indivisible', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, batch_size: 30, world_size: 4}\n',
     "dmlbench_a.yaml: experiment 'a': key 'batch_size': 30 does not split into equal shards for"
     ' world_size 4; accepted: a multiple of 4'),
    ('ps_indivisible', 'dmlbench_a.yaml',
     'experiments:\n  - {name: a, model: cnn, batch_size: 32, world_size: 4, strategy: ps}\n',
     "dmlbench_a.yaml: experiment 'a': key 'batch_size': 32 does not split into equal shards for"
     ' 3 worker ranks of ps; accepted: a multiple of 3'),
    ('ps_ws1', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: cnn, world_size: 1, strategy: ps}\n',
     "dmlbench_a.yaml: experiment 'a': key 'world_size': ps needs a server rank and at least one"
     ' worker; accepted: >= 2 for strategy ps'),
    ('pipeline', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: mlp, strategy: pipeline}\n',
     "dmlbench_a.yaml: experiment 'a': key 'strategy': 'pipeline' cannot run as an experiment: "
     'its ranks hold one stage each, not the whole model, so an experiment cannot evaluate it; '
     'write a @pytest.mark.dmlbench case instead; accepted: allreduce, bucketed, ddp, fp16, fsdp, '
     'local_sgd, powersgd, ps, robust, tensor_parallel'),
    ('unknown_strategy', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: mlp, strategy: byteps}\n',
     "dmlbench_a.yaml: experiment 'a': key 'strategy': unknown strategy 'byteps'; accepted: "
     'allreduce, bucketed, ddp, fp16, fsdp, local_sgd, powersgd, ps, robust, tensor_parallel'),
    ('strategy_key', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: mlp, strategy: {name: ddp, opts: {}}}\n',
     "dmlbench_a.yaml: experiment 'a': key 'strategy': unknown key(s) 'opts'; accepted: name, "
     'options'),
    ('strategy_options', 'dmlbench_a.yaml',
     'experiments:\n  - {name: a, model: mlp, strategy: {name: ddp, options: [1]}}\n',
     "dmlbench_a.yaml: experiment 'a': key 'strategy.options': [1] (a list) is not a mapping of "
     "option names to values; accepted: a mapping such as {bucket_mb: 1} (the strategy's keyword"
     ' arguments)'),
    ('dataset_mismatch', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: unet}\n',
     "dmlbench_a.yaml: experiment 'a': key 'dataset': 'synthetic' does not fit model 'unet'; "
     'accepted: synthetic_segmentation'),
    ('top_key', 'dmlbench_a.yaml', 'experiment:\n  - {name: a, model: mlp}\n',
     "dmlbench_a.yaml: unknown top-level key 'experiment'; accepted: defaults, experiments"),
    ('no_experiments', 'dmlbench_a.yaml', 'defaults: {model: mlp}\n',
     "dmlbench_a.yaml: 'experiments' must be a non-empty list of experiments; the file needs a "
     "mapping with 'experiments:' (a list of experiments) and optionally 'defaults:'"),
    ('empty_file', 'dmlbench_a.yaml', '',
     "dmlbench_a.yaml: the file is empty; it needs a mapping with 'experiments:' (a list of "
     "experiments) and optionally 'defaults:'"),
    ('defaults_matrix', 'dmlbench_a.yaml', 'defaults: {matrix: {lr: [1]}}\nexperiments:\n  - {name: a, model: mlp}\n',
     ("dmlbench_a.yaml: defaults: key 'matrix': belongs to each experiment, not to defaults; "
     'accepted: ') + DEFAULTS_FIELDS),
    ('defaults_unknown', 'dmlbench_a.yaml', 'defaults: {modle: mlp}\nexperiments:\n  - {name: a, model: mlp}\n',
     ("dmlbench_a.yaml: defaults: key 'modle': unknown key (did you mean 'model'?); accepted: ") + DEFAULTS_FIELDS),
    ('duplicate', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: mlp}\n  - {name: a, model: cnn}\n',
     "dmlbench_a.yaml: experiment 'a': key 'name': is used by another experiment of this file; "
     'accepted: a name unique within the file'),
    ('clash', 'dmlbench_a.yaml', 'experiments:\n  - {name: a, model: mlp, lr: 0.1, matrix: {lr: [0.1, 0.2]}}\n',
     "dmlbench_a.yaml: experiment 'a': key 'lr': is set both directly and in the matrix; "
     'accepted: one place: the matrix, or a single value'),
    ('no_name', 'dmlbench_a.yaml', 'experiments:\n  - {model: mlp}\n',
     "dmlbench_a.yaml: experiment #1: key 'name': is required; accepted: a non-empty string"),
    ('bad_name', 'dmlbench_a.yaml', "experiments:\n  - {name: 'my run', model: mlp}\n",
     "dmlbench_a.yaml: experiment 'my run': key 'name': 'my run' has characters a test id cannot"
     ' carry; accepted: letters, digits and _ . + -'),
    ('combo', 'dmlbench_a.yaml',
     'experiments:\n  - {name: a, model: mlp, batch_size: 32, matrix: {world_size: [2, 3]}}\n',
     "dmlbench_a.yaml: experiment 'a' [world_size=3]: key 'batch_size': 32 does not split into "
     'equal shards for world_size 3; accepted: a multiple of 3'),
    ('accuracy_without_eval', 'dmlbench_a.yaml',
     'experiments:\n  - {name: a, model: mlp, min_accuracy: 0.5, eval_batches: 0}\n',
     "dmlbench_a.yaml: experiment 'a': key 'min_accuracy': needs held-out data, but eval_batches is 0; "
     "accepted: eval_batches >= 1 together with min_accuracy"),
    ('not_mapping', 'dmlbench_a.yaml', 'experiments:\n  - mlp\n',
     "dmlbench_a.yaml: experiment #1 is 'mlp', not a mapping of fields to values"),
]


def _load(tmp_path: Path, name: str, text: str, world_size: int = 2) -> list[Experiment]:
    (tmp_path / name).write_text(text)
    return load_file(tmp_path / name, default_world_size=world_size, shown=name)


@pytest.mark.parametrize(("name", "text", "message"), [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_bad_file_gives_one_exact_message(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ExperimentFileError) as caught:
        _load(tmp_path, name, text)
    assert str(caught.value) == message.replace("{folder}", str(tmp_path))


GOOD_YAML = """
defaults:
  model: cnn
  batch_size: 24
  epochs: 2
  lr: 0.05
experiments:
  - name: side-by-side
    world_size: 4
    matrix:
      strategy: [ddp, {name: bucketed, options: {bucket_mb: 1}}]
      momentum: [0.0, 0.9]
  - name: single
    model: mlp
    batch_size: 8
"""


def test_defaults_and_matrix_give_one_run_per_combination(tmp_path: Path) -> None:
    runs = _load(tmp_path, "dmlbench_good.yaml", GOOD_YAML, world_size=2)
    assert [r.name for r in runs] == [
        "side-by-side[strategy=ddp-momentum=0.0]",
        "side-by-side[strategy=ddp-momentum=0.9]",
        "side-by-side[strategy=bucketed(bucket_mb=1)-momentum=0.0]",
        "side-by-side[strategy=bucketed(bucket_mb=1)-momentum=0.9]",
        "single",
    ]
    bucketed = runs[3]
    assert (bucketed.model, bucketed.strategy, bucketed.strategy_options) == ("cnn", "bucketed", {"bucket_mb": 1})
    assert (bucketed.world_size, bucketed.batch_size, bucketed.epochs, bucketed.lr, bucketed.momentum) == (
        4, 24, 2, 0.05, 0.9)
    assert bucketed.combination == {"strategy": {"name": "bucketed", "options": {"bucket_mb": 1}}, "momentum": 0.9}
    single = runs[4]
    assert (single.model, single.batch_size, single.world_size, single.strategy) == ("mlp", 8, 2, "ddp")
    assert (single.max_batches_per_epoch, single.eval_batches, single.seed, single.comm_rounds) == (8, 2, 0, 4)
    assert single.threshold is None and single.timeout is None and single.min_accuracy is None


def test_json_and_yml_read_like_yaml(tmp_path: Path) -> None:
    import json

    import yaml

    from_yaml = _load(tmp_path, "dmlbench_good.yaml", GOOD_YAML)
    from_json = _load(tmp_path, "dmlbench_good.json", json.dumps(yaml.safe_load(GOOD_YAML)))
    from_yml = _load(tmp_path, "dmlbench_good.yml", GOOD_YAML)
    strip = [dict(vars(r), source="") for r in from_yaml]
    assert [dict(vars(r), source="") for r in from_json] == strip == [dict(vars(r), source="") for r in from_yml]


def test_cifar10_data_dir_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "cifar").mkdir()
    text = "experiments:\n  - {name: c, model: resnet18, dataset: cifar10, data_dir: cifar}\n"
    (run,) = _load(tmp_path, "dmlbench_c.yaml", text)
    assert run.data_dir == str(tmp_path / "cifar")


@pytest.mark.parametrize(("name", "collected"), [
    ("dmlbench_x.yaml", True), ("dmlbench_x.yml", True), ("dmlbench_x.json", True),
    ("x.yaml", False), ("dmlbench_x.toml", False), ("test_dmlbench.yaml", False),
])
def test_file_names_collected(name: str, collected: bool) -> None:
    from pytest_dmlbench.experiments import is_experiment_file

    assert is_experiment_file(Path(name)) is collected


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "dmlbench_many.yaml"
    path.write_text("experiments:\n"
                    "  - {name: a, model: resnet5, epochs: 0}\n"
                    "  - {name: b, model: mlp, strategy: {name: bucketed, options: {bucket_mbb: 1}}}\n"
                    "  - name: c\n    model: mlp\n    lr: -1\n    matrix: {world_size: [1, 2]}\n")
    with pytest.raises(ExperimentFileError) as error:
        load_file(path, default_world_size=2, shown=path.name)
    assert str(error.value).splitlines() == [
        "dmlbench_many.yaml: 4 problems:",
        "  experiment 'a': key 'model': unknown model 'resnet5' (did you mean 'resnet50'?); accepted: bn_cnn, cnn, "
        "mlp, resnet18, resnet50, transformer, unet",
        "  experiment 'a': key 'epochs': 0 is out of range; accepted: a whole number >= 1",
        "  experiment 'b': key 'strategy.options': unknown option(s) 'bucket_mbb' of strategy 'bucketed' (did you "
        "mean 'bucket_mb'?); accepted: broadcast_buffers, bucket_mb",
        # shared by both combinations of the matrix: once, for the experiment
        "  experiment 'c': key 'lr': -1.0 is out of range; accepted: a number > 0",
    ]


def test_a_strategy_option_is_checked_against_the_strategy_s_own_parameters(tmp_path: Path) -> None:
    path = tmp_path / "dmlbench_o.yaml"
    path.write_text("experiments:\n  - {name: p, model: mlp, strategy: {name: powersgd, options: {matrix_rank: 2}}}\n"
                    "  - {name: l, model: mlp, strategy: {name: local_sgd, options: {period: 4}}}\n")
    assert [e.strategy_options for e in load_file(path, default_world_size=2)] == [{"matrix_rank": 2}, {"period": 4}]
    # negative control: an option the strategy lacks (it would have reached the ranks as a TypeError)
    path.write_text("experiments:\n  - {name: l, model: mlp, strategy: {name: local_sgd, options: {periods: 4}}}\n")
    with pytest.raises(ExperimentFileError, match=r"unknown option\(s\) 'periods' of strategy 'local_sgd' "
                                                  r"\(did you mean 'period'\?\); accepted: period$"):
        load_file(path, default_world_size=2)


def test_defaults_are_checked_like_experiments_every_problem_at_once(tmp_path: Path) -> None:
    """Two typos under ``defaults:`` (one another tool's name for the field), a bad default value and an
    experiment's own problem, in one message: a default's bad value once, not again for each experiment that
    takes it, and still for the experiment that sets the same value itself."""
    path = tmp_path / "dmlbench_d.yaml"
    path.write_text("defaults: {modle: mlp, learning_rate: 0.1, epochs: 0}\n"
                    "experiments:\n"
                    "  - {name: a, model: mlp, batch_size: 0}\n"
                    "  - {name: b, model: mlp}\n"
                    "  - {name: c, model: mlp, epochs: 0}\n")
    with pytest.raises(ExperimentFileError) as error:
        load_file(path, default_world_size=2, shown=path.name)
    assert str(error.value).splitlines() == [
        "dmlbench_d.yaml: 5 problems:",
        f"  defaults: key 'modle': unknown key (did you mean 'model'?); accepted: {DEFAULTS_FIELDS}",
        f"  defaults: key 'learning_rate': unknown key (did you mean 'lr'?); accepted: {DEFAULTS_FIELDS}",
        "  defaults: key 'epochs': 0 is out of range; accepted: a whole number >= 1",
        "  experiment 'a': key 'batch_size': 0 is out of range; accepted: a whole number >= 1",
        "  experiment 'c': key 'epochs': 0 is out of range; accepted: a whole number >= 1",
    ]


@pytest.mark.parametrize(("key", "meant"), [("learning_rate", "lr"), ("Learning-Rate", "lr"), ("bs", "batch_size"),
                                             ("num_epochs", "epochs"), ("nproc_per_node", "world_size"),
                                             ("batchsize", "batch_size"), ("seeed", "seed")])
def test_an_experiment_key_another_tool_uses_is_suggested_as_the_field(tmp_path: Path, key: str, meant: str) -> None:
    with pytest.raises(ExperimentFileError, match=rf"key '{key}': unknown key \(did you mean '{meant}'\?\)"):
        _load(tmp_path, "dmlbench_k.yaml", f"experiments:\n  - {{name: a, model: mlp, {key}: 1}}\n")
