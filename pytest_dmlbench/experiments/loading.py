"""Reading an experiment file: syntax, the file's shape, ``defaults:``, ``matrix:`` and every field.

A file is ``{defaults: {...}, experiments: [{name: ..., ...}, ...]}`` in YAML or JSON. Each experiment is
merged over ``defaults`` and expanded by its ``matrix``; every resulting run is validated. Problems are one
:class:`ExperimentFileError` whose message names the file, then every problem of ``defaults`` (a bad value
there once, not again for each experiment that takes it) and of every experiment (a problem shared by several
matrix combinations once): the section or experiment, the key and what is accepted, with a "did you mean"
where a name is close to an accepted one or is another tool's name for it (``learning_rate``: ``lr``). A file
that cannot be parsed, or whose layout is wrong, stops at that first problem.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_dmlbench.errors import ExperimentFileError
from pytest_dmlbench.experiments.fields import EXPERIMENT_KEYS, FIELDS, FILE_KEYS, MATRIX_KEY
from pytest_dmlbench.experiments.matrix import expand
from pytest_dmlbench.experiments.schema import (
    Experiment,
    FieldProblem,
    FieldProblems,
    check_strategy,
    check_value,
    did_you_mean_key,
    validate,
)

FILE_PATTERNS = ("dmlbench_*.yaml", "dmlbench_*.yml", "dmlbench_*.json")


def is_experiment_file(path: Path) -> bool:
    return any(fnmatch.fnmatchcase(path.name, pattern) for pattern in FILE_PATTERNS)


def _parse_yaml(text: str, shown: str) -> Any:
    try:
        import yaml
    except ModuleNotFoundError:
        raise ExperimentFileError(f"{shown}: reading YAML experiment files needs PyYAML: pip install pyyaml") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ExperimentFileError(f"{shown}: YAML syntax error{where}: {problem}") from None


def read_document(path: Path, shown: str) -> Any:
    """The parsed file (YAML for ``.yaml``/``.yml``, JSON for ``.json``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentFileError(f"{shown}: cannot be read: {exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ExperimentFileError(
                f"{shown}: JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
    return _parse_yaml(text, shown)


def _file_problem(shown: str, text: str) -> ExperimentFileError:
    return ExperimentFileError(f"{shown}: {text}")


def _problem_text(label: str, problem: FieldProblem) -> str:
    return f"experiment {label}: key {problem.key!r}: {problem.text}; accepted: {problem.accepted}"


def _experiment_problem(shown: str, label: str, problem: FieldProblem) -> ExperimentFileError:
    return ExperimentFileError(f"{shown}: {_problem_text(label, problem)}")


def _all_problems(shown: str, texts: list[str]) -> ExperimentFileError:
    """One error for every problem: the one-line form for a single problem, a list for several."""
    if len(texts) == 1:
        return ExperimentFileError(f"{shown}: {texts[0]}")
    return ExperimentFileError(f"{shown}: {len(texts)} problems:\n" + "\n".join(f"  {t}" for t in texts))


def _sections(document: Any, shown: str) -> tuple[Mapping[str, Any], list[Any]]:
    layout = "a mapping with 'experiments:' (a list of experiments) and optionally 'defaults:'"
    if document is None:
        raise _file_problem(shown, f"the file is empty; it needs {layout}")
    if not isinstance(document, Mapping):
        raise _file_problem(shown, f"the file holds a {type(document).__name__}, not {layout}")
    unknown = [str(k) for k in document if k not in FILE_KEYS]
    if unknown:
        raise _file_problem(shown, f"unknown top-level key {unknown[0]!r}; accepted: {', '.join(FILE_KEYS)}")
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise _file_problem(shown, f"'defaults' is {defaults!r}, not a mapping of fields to values")
    experiments = document.get("experiments")
    if not isinstance(experiments, list) or not experiments:
        raise _file_problem(shown, f"'experiments' must be a non-empty list of experiments; the file needs {layout}")
    return defaults, experiments


def _checked_defaults(defaults: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], set[FieldProblem]]:
    """``defaults`` without its unknown keys, every problem of the section as text (each key checked as an
    experiment's is, with the same "did you mean"), and the problems of its values: an experiment that takes
    such a value from ``defaults`` has the same problem, which is reported here once instead."""
    keys = tuple(k for k in EXPERIMENT_KEYS if k not in (MATRIX_KEY, "name"))
    kept: dict[str, Any] = {}
    texts: list[str] = []
    bad_values: set[FieldProblem] = set()
    for key, value in defaults.items():
        if key in (MATRIX_KEY, "name"):
            texts.append(f"defaults: key {key!r}: belongs to each experiment, not to defaults; "
                         f"accepted: {', '.join(keys)}")
            continue
        if key not in keys:
            texts.append(f"defaults: key {str(key)!r}: unknown key{did_you_mean_key(str(key), keys)}; "
                         f"accepted: {', '.join(keys)}")
            continue
        kept[key] = value
        try:
            if key == "strategy":
                check_strategy(value)
            elif key != "data_dir":  # read against the dataset, which each experiment may set
                check_value(FIELDS[key], value)
        except FieldProblem as problem:
            bad_values.add(problem)
            texts.append(f"defaults: key {problem.key!r}: {problem.text}; accepted: {problem.accepted}")
    return kept, texts, bad_values


def _runs_of(entry: Any, index: int, defaults: dict[str, Any], shown: str) -> list[tuple[str, str, dict[str, Any],
                                                                                          dict[str, Any]]]:
    """(label, item name, merged values, combination) for every matrix combination of one experiment."""
    if not isinstance(entry, Mapping):
        raise _file_problem(shown, f"experiment #{index + 1} is {entry!r}, not a mapping of fields to values")
    name = entry.get("name")
    label = repr(name) if isinstance(name, str) else f"#{index + 1}"
    if not isinstance(name, str) or not name:
        raise _experiment_problem(shown, label, FieldProblem("name", "is required", "a non-empty string"))
    merged = {**defaults, **{k: v for k, v in entry.items() if k != MATRIX_KEY}}
    if MATRIX_KEY not in entry:
        return [(label, name, merged, {})]
    try:
        combinations = expand(entry[MATRIX_KEY])
    except FieldProblem as problem:
        raise _experiment_problem(shown, label, problem) from None
    clash = [k for k in entry if k in dict(combinations[0][1])]
    if clash:
        raise _experiment_problem(shown, label, FieldProblem(
            clash[0], "is set both directly and in the matrix", "one place: the matrix, or a single value"))
    return [(f"{label} [{ident}]", f"{name}[{ident}]", {**merged, **combination}, combination)
            for ident, combination in combinations]


def load_file(path: Path, *, default_world_size: int, shown: str | None = None) -> list[Experiment]:
    """Every run the file describes, validated; ``shown`` is how the file is named in messages."""
    shown = shown or str(path)
    section, entries = _sections(read_document(path, shown), shown)
    defaults, problems, bad_defaults = _checked_defaults(section)  # problems: of defaults and of whole experiments
    runs: list[Experiment] = []
    seen: set[str] = set()
    by_combination: dict[tuple[str, FieldProblem], list[str]] = {}  # (experiment, problem) -> its combinations
    combinations: dict[str, int] = {}  # experiment -> how many combinations its matrix gives
    for index, entry in enumerate(entries):
        try:
            expanded = _runs_of(entry, index, defaults, shown)
        except ExperimentFileError as exc:
            problems.append(str(exc).removeprefix(f"{shown}: "))
            continue
        for label, item_name, values, combination in expanded:
            found: list[FieldProblem] = []
            if item_name in seen:
                found.append(FieldProblem("name", "is used by another experiment of this file",
                                          "a name unique within the file"))
            else:
                seen.add(item_name)
                try:
                    runs.append(validate(values, name=item_name, source=shown,
                                         default_world_size=default_world_size, base_dir=path.parent,
                                         combination=combination))
                except FieldProblems as invalid:
                    found = invalid.problems
            base = label.split(" [", 1)[0]
            combinations[base] = len(expanded)
            own = {*entry, *combination}  # keys the experiment sets itself, not taken from defaults
            for problem in found:
                if problem in bad_defaults and problem.key.split(".", 1)[0] not in own:
                    continue  # reported once, for defaults
                by_combination.setdefault((base, problem), []).append(label)
    for (base, problem), labels in by_combination.items():
        # a problem every combination shares is reported once, for the experiment
        shared = len(labels) == combinations[base] and len(labels) > 1
        problems.append(_problem_text(base if shared else ", ".join(labels), problem))
    if problems:
        raise _all_problems(shown, problems)
    return runs

