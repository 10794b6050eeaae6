"""The fields of an experiment: their type, default, accepted values and meaning (one table, used by
validation and by the README's field reference).

The zoo's model names and the strategy names are listed here rather than imported, so that collecting an
experiment file never imports torch; ``tests/experiments/test_fields.py`` checks them against
:data:`pytest_dmlbench.training.models.MODELS` and :func:`pytest_dmlbench.strategies.available`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.experiments.frameworks import RUNNERS

MODELS = ("bn_cnn", "cnn", "mlp", "resnet18", "resnet50", "transformer", "unet")
# Strategies whose trained model every rank can evaluate: the data-parallel ones hold it whole, the sharded
# ones (fsdp, tensor_parallel) gather it (``unsharded_model``), so held-out accuracy can be measured.
STRATEGIES = ("allreduce", "bucketed", "ddp", "fp16", "fsdp", "local_sgd", "powersgd", "ps", "robust",
              "tensor_parallel")
# Strategies that exist but cannot run as an experiment, and why.
UNSUPPORTED_STRATEGIES = {
    "deepspeed": "not yet checked as an experiment; write a @pytest.mark.dmlbench case with strategies.build instead",
    "horovod": "Horovod needs its own launcher (horovodrun): run bench_cases/test_horovod.py under it",
    "pipeline": "its ranks hold one stage each, not the whole model, so an experiment cannot evaluate it; "
                "write a @pytest.mark.dmlbench case instead",
}
DATASETS = ("cifar10", "synthetic", "synthetic_segmentation", "tokens")
# Which datasets feed which model (input shape and label kind must match).
MODEL_DATASETS: dict[str, tuple[str, ...]] = {
    "mlp": ("synthetic",),
    "cnn": ("synthetic", "cifar10"),
    "bn_cnn": ("synthetic", "cifar10"),
    "resnet18": ("synthetic", "cifar10"),
    "resnet50": ("synthetic", "cifar10"),
    "unet": ("synthetic_segmentation",),
    "transformer": ("tokens",),
}
FRAMEWORKS = tuple(RUNNERS)


@dataclass(frozen=True)
class Field:
    """One experiment field. ``kind``: str, int, float, bool, strategy, options or path."""

    name: str
    kind: str
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    rule: str = ""  # a numeric range: ">= 1", "> 0", "[0, 1)" or "[0, 1]"
    required: bool = False

    def accepts(self, value: float) -> bool:
        """Whether ``value`` lies in :attr:`rule`'s range."""
        return RULES[self.rule](value) if self.rule else True


RULES: dict[str, Callable[[float], bool]] = {
    ">= 0": lambda v: v >= 0,
    ">= 1": lambda v: v >= 1,
    "> 0": lambda v: v > 0,
    "[0, 1)": lambda v: 0 <= v < 1,
    "[0, 1]": lambda v: 0 <= v <= 1,
}


FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        Field("name", "str", None, "the experiment's name; the item id is `file::name`", required=True),
        Field("model", "str", None, "a model of the zoo (`pytest_dmlbench.training.models`)", MODELS, required=True),
        Field("dataset", "str", "synthetic", "training and held-out data; must suit the model", DATASETS),
        Field("data_dir", "path", None,
              "the extracted `cifar-10-batches-py` folder (cifar10 only; relative to the file)"),
        Field("strategy", "strategy", "ddp",
              "a strategy name, or `{name: ..., options: {...}}` passed to `pytest_dmlbench.strategies.build`",
              STRATEGIES),
        Field("framework", "str", "dmlbench", "which engine trains the model on the ranks", FRAMEWORKS),
        Field("world_size", "int", None, "ranks (default: `--world-size`)", rule=">= 1"),
        Field("batch_size", "int", 32, "global batch size, split into equal per-rank shards", rule=">= 1"),
        Field("epochs", "int", 1, "passes over the training set", rule=">= 1"),
        Field("max_batches_per_epoch", "int", 8,
              "training steps per epoch at most (synthetic sets hold exactly this many batches)", rule=">= 1"),
        Field("eval_batches", "int", 2, "held-out batches for the final accuracy (0: no accuracy)", rule=">= 0"),
        Field("lr", "float", 0.01, "SGD learning rate", rule="> 0"),
        Field("momentum", "float", 0.0, "SGD momentum", rule="[0, 1)"),
        Field("seed", "int", 0, "model initialisation, data and shuffling", rule=">= 0"),
        Field("threshold", "float", None, "regression threshold in percent (default: `--dmlbench-threshold`)",
              rule=">= 0"),
        Field("timeout", "float", None, "wall-clock limit in seconds (default: `--dmlbench-timeout`)", rule="> 0"),
        Field("pair_budget", "float", None,
              "with `--dmlbench-against`: seconds of block pairs for this run, and as many again for a "
              "confirmation stage (default: `--dmlbench-pair-budget`)",
              rule="> 0"),
        Field("comm_rounds", "int", 4,
              "rounds of step vs no-communication twin after training, for `exposed_comm_fraction` (0: skip)",
              rule=">= 0"),
        Field("min_accuracy", "float", None,
              "fail the item when the final held-out accuracy is below this fraction", rule="[0, 1]"),
    )
}
# Not fields of one run: ``matrix`` is expanded before validation.
MATRIX_KEY = "matrix"
EXPERIMENT_KEYS = (*FIELDS, MATRIX_KEY)
# Names other tools give a field (written lower case, with _ for - and spaces), suggested as the field.
KEY_ALIASES = {
    **dict.fromkeys(("learning_rate", "learningrate", "base_lr"), "lr"),
    **dict.fromkeys(("batch", "bs", "batchsize", "global_batch_size", "global_batch"), "batch_size"),
    **dict.fromkeys(("ranks", "num_ranks", "n_ranks", "nprocs", "nproc", "nproc_per_node", "num_processes"),
                    "world_size"),
    **dict.fromkeys(("num_epochs", "n_epochs", "epoch", "max_epochs"), "epochs"),
    **dict.fromkeys(("steps_per_epoch", "batches_per_epoch", "max_steps", "max_batches"), "max_batches_per_epoch"),
    **dict.fromkeys(("eval_steps", "val_batches", "test_batches", "eval_batches_per_epoch"), "eval_batches"),
    **dict.fromkeys(("arch", "architecture", "network", "model_name"), "model"),
    **dict.fromkeys(("data", "dataset_name"), "dataset"),
    **dict.fromkeys(("data_path", "data_root", "dataset_dir", "datadir"), "data_dir"),
    **dict.fromkeys(("algorithm", "parallelism", "distributed_strategy"), "strategy"),
    **dict.fromkeys(("random_seed", "rng_seed", "manual_seed"), "seed"),
    **dict.fromkeys(("threshold_pct", "regression_threshold"), "threshold"),
    **dict.fromkeys(("timeout_s", "time_limit"), "timeout"),
    **dict.fromkeys(("target_accuracy", "min_acc"), "min_accuracy"),
}
FILE_KEYS = ("defaults", "experiments")
