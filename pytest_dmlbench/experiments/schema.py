"""One experiment, validated: the :class:`Experiment` record and the checks that build it.

Every problem is a :class:`FieldProblem` naming the key, what is wrong and what is accepted; the loader
adds the file and the experiment to it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.experiments.fields import (
    FIELDS,
    KEY_ALIASES,
    MODEL_DATASETS,
    STRATEGIES,
    UNSUPPORTED_STRATEGIES,
    Field,
)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.+-]+$")
STRATEGY_KEYS = ("name", "options")


class FieldProblem(Exception):
    """A bad value of one key: ``key``, what is wrong (``text``) and what is accepted (equal, and hashed,
    by those three, so one problem shared by several matrix combinations is reported once)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldProblem) and (self.key, self.text, self.accepted) == (
            other.key, other.text, other.accepted)

    def __hash__(self) -> int:
        return hash((self.key, self.text, self.accepted))

    def __init__(self, key: str, text: str, accepted: str) -> None:
        super().__init__(f"{key}: {text}")
        self.key = key
        self.text = text
        self.accepted = accepted


class FieldProblems(FieldProblem):
    """Every bad key of one experiment, in the order of its fields (read as a FieldProblem: the first)."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        first = problems[0]
        super().__init__(first.key, first.text, first.accepted)
        self.problems = problems


def did_you_mean(word: str, choices: Any) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or nothing when none is close."""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def did_you_mean_key(key: str, keys: Any) -> str:
    """``did_you_mean`` for an unknown key, which also knows the names other tools give a field
    (``learning_rate``: did you mean 'lr'?)."""
    alias = KEY_ALIASES.get(key.strip().lower().replace("-", "_").replace(" ", "_"))
    if alias is not None and alias in keys:
        return f" (did you mean {alias!r}?)"
    return did_you_mean(key, keys)


@dataclass(frozen=True)
class Experiment:
    """A fully specified experiment run (one test item). ``name`` includes the matrix combination."""

    name: str
    source: str
    model: str
    dataset: str
    data_dir: str | None
    strategy: str
    strategy_options: dict[str, Any]
    framework: str
    world_size: int
    batch_size: int
    epochs: int
    max_batches_per_epoch: int
    eval_batches: int
    lr: float
    momentum: float
    seed: int
    threshold: float | None
    timeout: float | None
    pair_budget: float | None
    comm_rounds: int
    min_accuracy: float | None
    combination: dict[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """What describes this run in the results (matched with baselines, shown in reports)."""
        params: dict[str, Any] = {
            "experiment": self.name.split("[", 1)[0],
            "model": self.model,
            "dataset": self.dataset,
            "strategy": self.strategy,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "max_batches_per_epoch": self.max_batches_per_epoch,
            "lr": self.lr,
        }
        if self.framework != "dmlbench":  # the default is left out: results saved before it existed still match
            params["framework"] = self.framework
        if self.strategy_options:
            params["strategy_options"] = dict(sorted(self.strategy_options.items()))
        return params


def _accepted(spec: Field) -> str:
    if spec.choices:
        return ", ".join(spec.choices)
    words = {"str": "a non-empty string", "int": "a whole number", "float": "a number", "path": "a folder path"}
    text = words.get(spec.kind, spec.kind)
    return f"{text} {spec.rule}" if spec.rule else text


def _describe(value: Any) -> str:
    return f"{value!r} (a {type(value).__name__})"


def check_value(spec: Field, value: Any) -> Any:
    """``value`` checked against ``spec`` (ints accepted where numbers are); raises :class:`FieldProblem`."""
    if spec.kind in ("str", "path"):
        if not isinstance(value, str) or not value.strip():
            wanted = "a name" if spec.choices else _accepted(spec)
            raise FieldProblem(spec.name, f"{_describe(value)} is not {wanted}", _accepted(spec))
        if spec.choices and value not in spec.choices:
            raise FieldProblem(spec.name, f"unknown {spec.name} {value!r}{did_you_mean(value, spec.choices)}",
                               _accepted(spec))
        return value
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldProblem(spec.name, f"{_describe(value)} is not a whole number", _accepted(spec))
    elif spec.kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise FieldProblem(spec.name, f"{_describe(value)} is not a finite number", _accepted(spec))
        value = float(value)
    if not spec.accepts(value):
        raise FieldProblem(spec.name, f"{value!r} is out of range", _accepted(spec))
    return value


def check_strategy(value: Any) -> tuple[str, dict[str, Any]]:
    """``ddp`` or ``{name: ddp, options: {...}}`` as (name, options)."""
    accepted = f"one of {', '.join(STRATEGIES)}, or a mapping with keys {', '.join(STRATEGY_KEYS)}"
    options: Any = {}
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in STRATEGY_KEYS)
        if unknown:
            raise FieldProblem("strategy", f"unknown key(s) {', '.join(map(repr, unknown))}", ", ".join(STRATEGY_KEYS))
        if "name" not in value:
            raise FieldProblem("strategy", "the mapping has no 'name'", accepted)
        name, options = value["name"], value.get("options", {})
    else:
        name = value
    if not isinstance(name, str):
        raise FieldProblem("strategy", f"{_describe(name)} is not a strategy name", accepted)
    if name in UNSUPPORTED_STRATEGIES:
        raise FieldProblem("strategy", f"{name!r} cannot run as an experiment: {UNSUPPORTED_STRATEGIES[name]}",
                           ", ".join(STRATEGIES))
    if name not in STRATEGIES:
        raise FieldProblem("strategy", f"unknown strategy {name!r}{did_you_mean(name, STRATEGIES)}",
                           ", ".join(STRATEGIES))
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise FieldProblem("strategy.options", f"{_describe(options)} is not a mapping of option names to values",
                           "a mapping such as {bucket_mb: 1} (the strategy's keyword arguments)")
    try:
        accepted_options = strategy_option_names(name)
    except ConfigError as exc:  # the strategy cannot run on this torch: one more field problem, no traceback
        raise FieldProblem("strategy", str(exc), "a strategy this torch can run") from None
    if accepted_options is not None:
        unknown = sorted(k for k in options if k not in accepted_options)
        if unknown:
            hints = "".join(did_you_mean(k, accepted_options) for k in unknown[:1])
            accepted = ", ".join(sorted(accepted_options)) or f"none: {name} takes no options"
            listed = ", ".join(map(repr, unknown))
            raise FieldProblem("strategy.options", f"unknown option(s) {listed} of strategy {name!r}{hints}", accepted)
    return name, dict(options)


def strategy_option_names(name: str) -> frozenset[str] | None:
    """The options an experiment may give strategy ``name`` (its keyword arguments, read from the strategy
    itself); None when its factory takes arbitrary keywords, so none can be checked here."""
    from pytest_dmlbench.strategies.options import option_names

    return option_names(name)


def _data_dir(values: Mapping[str, Any], base_dir: Path) -> str | None:
    dataset, data_dir = values["dataset"], values.get("data_dir")
    if dataset != "cifar10":
        if data_dir is not None:
            raise FieldProblem("data_dir", f"is only read for dataset cifar10, not {dataset!r}",
                               "no data_dir for synthetic data sets")
        return None
    if data_dir is None:
        raise FieldProblem("data_dir", "is required for dataset cifar10",
                           "the extracted 'cifar-10-batches-py' folder (absolute, or relative to the file)")
    folder = base_dir / check_value(FIELDS["data_dir"], data_dir)
    if not folder.is_dir():
        raise FieldProblem("data_dir", f"folder {str(folder)!r} does not exist",
                           "the extracted 'cifar-10-batches-py' folder (absolute, or relative to the file)")
    return str(folder)


def _check_shards(strategy: str, world_size: int, batch_size: int) -> None:
    """The global batch must split into equal shards, one per data-holding rank (``ps``: every rank but
    the server)."""
    if strategy == "ps" and world_size < 2:
        raise FieldProblem("world_size", "ps needs a server rank and at least one worker", ">= 2 for strategy ps")
    shards = world_size - 1 if strategy == "ps" else world_size
    if batch_size % shards:
        who = f"{shards} worker ranks of ps" if strategy == "ps" else f"world_size {world_size}"
        raise FieldProblem("batch_size", f"{batch_size} does not split into equal shards for {who}",
                           f"a multiple of {shards}")


def validate(raw: Mapping[str, Any], *, name: str, source: str, default_world_size: int, base_dir: Path,
             combination: Mapping[str, Any] | None = None) -> Experiment:
    """Check every key of one (merged, matrix-expanded) experiment and fill in the defaults; raises
    :class:`FieldProblems` with every problem found (a check that needs a bad key's value is left out)."""
    problems: list[FieldProblem] = []

    def checked(check: Callable[[], Any]) -> Any:
        try:
            return check()
        except FieldProblem as problem:
            problems.append(problem)
            return None

    for key in (str(k) for k in raw if k not in FIELDS):
        problems.append(FieldProblem(key, f"unknown key{did_you_mean_key(key, FIELDS)}", ", ".join(FIELDS)))
    values: dict[str, Any] = {}
    for spec in FIELDS.values():
        value = raw.get(spec.name)
        if spec.required and value is None:
            problems.append(FieldProblem(spec.name, "is required", _accepted(spec)))
        elif spec.kind != "strategy" and spec.name != "data_dir":
            values[spec.name] = spec.default if value is None else checked(partial(check_value, spec, value))
    strategy_and_options = checked(lambda: check_strategy(raw.get("strategy", FIELDS["strategy"].default)))
    model, dataset = values.get("model"), values.get("dataset")
    if model is not None and dataset is not None and dataset not in MODEL_DATASETS[model]:
        problems.append(FieldProblem("dataset", f"{dataset!r} does not fit model {model!r}",
                                     ", ".join(MODEL_DATASETS[model])))
    data_dir = (checked(lambda: _data_dir({**values, "data_dir": raw.get("data_dir")}, base_dir))
                if dataset is not None else None)
    world_size = default_world_size if values.get("world_size") is None else values["world_size"]
    if strategy_and_options is not None and values.get("batch_size") is not None:
        checked(lambda: _check_shards(strategy_and_options[0], world_size, values["batch_size"]))
    if values.get("min_accuracy") is not None and values.get("eval_batches") == 0:
        problems.append(FieldProblem("min_accuracy", "needs held-out data, but eval_batches is 0",
                                     "eval_batches >= 1 together with min_accuracy"))
    if values.get("name") is not None and not NAME_PATTERN.match(values["name"]):
        problems.append(FieldProblem("name", f"{values['name']!r} has characters a test id cannot carry",
                                     "letters, digits and _ . + -"))
    if problems:
        raise FieldProblems(problems)
    strategy, options = strategy_and_options
    del values["name"], values["world_size"]
    return Experiment(name=name, source=source, strategy=strategy, strategy_options=options, data_dir=data_dir,
                      world_size=world_size, combination=dict(combination or {}), **values)
