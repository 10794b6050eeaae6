"""Reading results for the command line: a results file, a baseline file, or a folder of baselines at any
level (an identity folder, a machine folder, a baselines root), and finding the baseline of given results.
Errors name the path and say what to pass instead; folders of the older layout are noted on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.store import (
    baseline_files,
    identity_folders,
    layout_folders,
    load_folder,
    load_matching,
    old_layout_note,
    older_schema_fix,
    recorded_identity,
)
from pytest_dmlbench.errors import DmlbenchError
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.jsonio import read_results

FILE_HINT = ("Pass a results file written by --dmlbench-json, a baseline file, or a baseline folder (a baselines "
             "root, <root>/<machine-key>, or <root>/<machine-key>/<identity>).")


def read_file(path: Path) -> RunResults:
    return read_results(path, FILE_HINT, older_schema_fix)


def _note_old_layout(machine_folder: Path) -> None:
    """Say on stderr that a folder walked for baselines holds files of the older layout (never read here)."""
    note = old_layout_note(machine_folder)
    if note is not None:
        first = baseline_files(machine_folder)[0]
        print(f"note: {note} and not read here; `python -m pytest_dmlbench show {first}` gives the command that "
              "re-saves its case.", file=sys.stderr)


def load_any(path: Path) -> list[tuple[str, RunResults]]:
    """Read a results/baseline file, an identity folder, a machine folder or a baselines root (one entry per
    identity folder: ``<root>/<machine-key>/<identity>/``)."""
    if path.is_file():
        return [(str(path), read_file(path))]
    if not path.is_dir():
        raise DmlbenchError(f"{path}: no such file or folder.\n{FILE_HINT}")
    if baseline_files(path) and not identity_folders(path):  # an identity folder, or one of the older layout
        return [(str(path), load_folder(path))]
    folders, old = layout_folders(path)
    if not folders:
        if old:
            load_folder(old[0])  # raises the error of a file of the older layout, naming the file and the fix
        raise DmlbenchError(
            f"{path}: holds no baseline files (*.json) nor machine folders with any.\n{FILE_HINT}"
        )
    for machine in old:
        _note_old_layout(machine)
    return [(str(folder), load_folder(folder)) for folder in folders]


def load_baseline_for(path: Path, current: RunResults, source: Path) -> tuple[str, RunResults]:
    """The baseline to compare ``current`` (read from ``source``) with. A machine folder or a baselines root
    resolves, for each case, to the identity folder of its world size, backend, launcher and isolation, in the
    given machine folder or in the results' machine folder of the case's backend (part of the machine key)."""
    if path.is_file() or not path.is_dir() or (baseline_files(path) and not identity_folders(path)):
        [(label, baseline)] = load_any(path)
        return label, baseline
    given = bool(identity_folders(path))  # a machine folder, compared with whatever machine ran the results

    def machine_folder(backend: str) -> Path:
        return path if given else path / machine_key({**current.machine, "backend": backend})

    for machine in sorted({machine_folder(case.backend) for case in current.cases}):
        _note_old_layout(machine)
    found, merged = load_matching(current, machine_folder, source)
    if found:
        return ", ".join(str(folder) for folder in found), merged
    wanted = sorted({f"{machine_folder(c.backend).name}/{recorded_identity(c, current.run, source).key}"
                     for c in current.cases})
    folders, old = layout_folders(path)
    held = [f"{f.parent.name}/{f.name}" for f in folders] + [f"{m.name} (older layout, schema 1)" for m in old]
    raise DmlbenchError(
        f"{path}: no baseline for these results (looked for {', '.join(wanted) or 'nothing: no cases'}); "
        f"it has: {', '.join(held) or 'nothing'}.\n"
        "Pass one of these folders explicitly to compare across machines or identities, or save baselines with "
        "the options the results were measured with (`pytest --dmlbench --world-size N ... --dmlbench-save`)."
    )
