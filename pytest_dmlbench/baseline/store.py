"""Baseline store: ``<root>/<machine-key>/<case-slug>-<hash>.json``, one file per case.

One file per case (named by a hash of the node id) is what makes concurrent saving safe without locks:
pytest-xdist workers save different cases, hence different files, so no worker ever reads-merges-writes a
file another worker is writing; and each write is atomic, so two saves of the same case leave one complete
file (the later one). Each file is a schema-1 results document holding the fingerprint, the run facts and
exactly one case (raw samples, params), so ``show``/``compare`` read baseline and results files alike.

Reading never writes: a corrupt, truncated or old-schema file raises :class:`BaselineError` and stays as
it is until the user saves explicitly (``--dmlbench-save``), which replaces it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.jsonio import TEMP_PREFIX, dumps_strict, read_results, write_atomic
from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.results import CaseResult, RunResults

SAVE_HINT = "Delete the file, or re-run with --dmlbench-save to replace it with this run's figures."


def case_filename(nodeid: str) -> str:
    """Readable and collision-safe: the test name slug (for humans) plus a hash of the full node id."""
    name = nodeid.rsplit("::", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:60] or "case"
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:16]
    return f"{slug}-{digest}.json"


def baseline_files(folder: Path) -> list[Path]:
    """The baseline files of one machine folder (temporary files of writes in progress excluded)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(TEMP_PREFIX))


def read_baseline_file(path: Path) -> RunResults:
    """Read one baseline file; raises BaselineError naming the file and the fix when it is unusable."""
    return read_results(path, SAVE_HINT)


class BaselineStore:
    """The baselines of one machine class under ``root``."""

    def __init__(self, root: Path, fingerprint: Mapping[str, Any]) -> None:
        self.root = Path(root)
        self.fingerprint = dict(fingerprint)
        self.key = machine_key(fingerprint)
        self.folder = self.root / self.key

    def path_for(self, nodeid: str) -> Path:
        return self.folder / case_filename(nodeid)

    def exists(self) -> bool:
        """Whether any baseline was saved for this machine (the plugin compares only then)."""
        return bool(baseline_files(self.folder))

    def save_case(self, case: CaseResult, run: Mapping[str, Any] | None = None) -> Path:
        """Store one case atomically (replacing its previous baseline, even an unreadable one)."""
        stored = CaseResult.from_dict(case.to_dict())
        stored.verdicts = []  # verdicts belong to a comparison, not to the reference figures
        document = RunResults(
            machine=self.fingerprint,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            run=dict(run or {}),
            cases=[stored],
        )
        path = self.path_for(case.nodeid)
        write_atomic(path, dumps_strict(document.to_dict()))
        return path

    def save_run(self, results: RunResults) -> list[Path]:
        return [self.save_case(case, results.run) for case in results.cases]

    def load_case(self, nodeid: str) -> CaseResult | None:
        """The stored case, or None when this case has no baseline; BaselineError for an unusable file."""
        path = self.path_for(nodeid)
        if not path.exists():
            return None
        document = read_baseline_file(path)
        for case in document.cases:
            if case.nodeid == nodeid:
                return case
        found = ", ".join(repr(c.nodeid) for c in document.cases) or "no case"
        raise BaselineError(
            f"{path}: expected the baseline of {nodeid!r} but the file holds {found}.\n{SAVE_HINT}"
        )

    def load_all(self) -> RunResults:
        """Every stored case of this machine as one RunResults (for the CLI and reports)."""
        return load_folder(self.folder, self.fingerprint)


def load_folder(folder: Path, fingerprint: Mapping[str, Any] | None = None) -> RunResults:
    """Merge the baseline files of one machine folder; the first file's fingerprint names the machine."""
    files = baseline_files(Path(folder))
    if not files:
        raise BaselineError(
            f"{folder}: no baseline files (*.json) here.\n"
            "Save baselines with `pytest --dmlbench --dmlbench-save`, or give the folder of one machine key."
        )
    merged = RunResults(machine=dict(fingerprint or {}), created="", run={}, cases=[])
    for path in files:
        document = read_baseline_file(path)
        if not merged.machine:
            merged.machine = document.machine
        merged.created = max(merged.created, document.created)
        merged.run = merged.run or document.run
        merged.cases.extend(document.cases)
    return merged
