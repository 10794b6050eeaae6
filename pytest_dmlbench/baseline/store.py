"""Baseline store: ``<root>/<machine-key>/<identity-key>/<case-slug>-<hash>.json``, one file per case.

The machine key names the machine class (:mod:`fingerprint`), the identity key what else changes the figures
(world size, backend, launcher, isolation: :mod:`identity`), e.g. ``ws2-gloo-fork-persistent``.

One file per case (named by a hash of the node id) is what makes concurrent saving safe without locks:
pytest-xdist workers save different cases, hence different files, so no worker ever reads-merges-writes a
file another worker is writing; and each write is atomic, so two saves of the same case leave one complete
file (the later one). Each file is a results document (schema 2) holding the fingerprint, the run facts
(with the launcher and isolation) and exactly one case (raw samples, params), so ``show``/``compare`` read
baseline and results files alike.

Reading never writes: a corrupt, truncated, old-schema or misplaced file raises :class:`BaselineError` and
stays as it is until the user saves explicitly (``--dmlbench-save``), which replaces it. Files of the older
layout (schema 1, directly in the machine folder) are never compared with, moved or deleted here.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.identity import (
    DEFAULT_ISOLATION,
    DEFAULT_LAUNCHER,
    BaselineIdentity,
    refresh_command,
)
from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.results import CaseResult, RunResults
from pytest_dmlbench.results.jsonio import TEMP_PREFIX, dumps_strict, read_results, write_atomic

SAVE_HINT = "Delete the file, or re-run with --dmlbench-save to replace it with this run's figures."
OLD_LAYOUT = "older layout (schema 1)"


def case_filename(nodeid: str) -> str:
    """Readable and collision-safe: the test name slug (for humans) plus a hash of the full node id."""
    name = nodeid.rsplit("::", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:60] or "case"
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:16]
    return f"{slug}-{digest}.json"


def baseline_files(folder: Path) -> list[Path]:
    """The baseline files directly in ``folder`` (temporary files of writes in progress excluded)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(TEMP_PREFIX))


def identity_folders(machine_folder: Path) -> list[Path]:
    """The identity folders of one machine folder that hold baseline files."""
    if not machine_folder.is_dir():
        return []
    return sorted(p for p in machine_folder.iterdir()
                  if p.is_dir() and BaselineIdentity.is_key(p.name) and baseline_files(p))


def old_layout_note(machine_folder: Path) -> str | None:
    """The sentence saying that files of the older layout sit in ``machine_folder``, or None when none do."""
    count = len(baseline_files(machine_folder))
    if not count:
        return None
    files = "1 baseline file" if count == 1 else f"{count} baseline files"
    verb, pronoun = ("is", "it is") if count == 1 else ("are", "they are")
    return f"{files} of an {OLD_LAYOUT} {verb} in {machine_folder}; {pronoun} left untouched"


def _root_of(path: Path) -> Path:
    """The baselines root a baseline file lies under (either layout)."""
    parent = path.parent
    return parent.parent.parent if BaselineIdentity.is_key(parent.name) else parent.parent


def baselines_root(path: Path) -> Path | None:
    """The baselines root of a baseline file, identity folder, machine folder or root; None for a file outside
    the layout (a results file)."""
    if path.is_file():
        return _root_of(path) if BaselineIdentity.is_key(path.parent.name) else None
    if BaselineIdentity.is_key(path.name) and baseline_files(path):
        return path.parent.parent
    return path.parent if identity_folders(path) else path


def layout_folders(path: Path) -> tuple[list[Path], list[Path]]:
    """The identity folders of a machine folder or of every machine folder of a baselines root, and the
    machine folders that also hold files of the older layout."""
    machines = [path] if identity_folders(path) else sorted(p for p in path.iterdir() if p.is_dir())
    return [f for m in machines for f in identity_folders(m)], [m for m in machines if baseline_files(m)]


def older_schema_fix(path: Path, document: Mapping[str, Any]) -> str:
    """What to do with a file an older pytest-dmlbench wrote: the command that writes it anew in this layout.

    A baseline file (one case, named after it) gets that case's refresh command; a results file the command
    that re-runs its cases with ``--dmlbench-json``. Schema 1 recorded no launcher and isolation.
    """
    cases = document.get("cases")
    cases = cases if isinstance(cases, list) else []
    first: Mapping[str, Any] = cases[0] if cases and isinstance(cases[0], dict) else {}
    try:
        identity = BaselineIdentity(int(first.get("world_size", 2)), str(first.get("backend", "gloo")),
                                    DEFAULT_LAUNCHER, DEFAULT_ISOLATION)
    except (TypeError, ValueError):  # a file this broken gets the general command
        identity = BaselineIdentity(2, "gloo", DEFAULT_LAUNCHER, DEFAULT_ISOLATION)
    unrecorded = ("Schema 1 did not record the launcher and isolation: add --dmlbench-launcher ray or "
                  "--dmlbench-isolation fresh if the figures were measured so.")
    nodeid = str(first.get("nodeid", ""))
    if len(cases) == 1 and path.name == case_filename(nodeid):
        command = refresh_command(identity, nodeid, _root_of(path))
        return (f"Re-save the case with this version (it writes the file into the {identity.key} folder of the new "
                f"layout and leaves this one alone; delete this one afterwards): {command}\n{unrecorded}")
    command = shlex.join(["pytest", *identity.options(), "--dmlbench-json", str(path)])
    return f"Write the results anew with this version: {command}\n{unrecorded}"


def recorded_identity(case: CaseResult, run: Mapping[str, Any], path: Path) -> BaselineIdentity:
    """The identity ``path`` records for ``case``; BaselineError naming the file when it records none valid."""
    try:
        return BaselineIdentity.recorded(case, run)
    except ValueError as exc:
        raise BaselineError(f"{path}: {case.nodeid} records no valid baseline identity ({exc}).\n"
                            f"Write the file anew with pytest-dmlbench (--dmlbench-save or --dmlbench-json).") from exc


def read_baseline_file(path: Path) -> RunResults:
    """Read one baseline file; raises BaselineError naming the file and the fix when it is unusable."""
    return read_results(path, SAVE_HINT, older_schema_fix)


class BaselineStore:
    """The baselines of one machine class and one identity (world size, backend, launcher, isolation)."""

    def __init__(self, root: Path, fingerprint: Mapping[str, Any], identity: BaselineIdentity) -> None:
        self.root = Path(root)
        self.fingerprint = dict(fingerprint)
        self.identity = identity
        self.key = machine_key(fingerprint)
        self.machine_folder = self.root / self.key
        self.folder = self.machine_folder / identity.key

    def path_for(self, nodeid: str) -> Path:
        return self.folder / case_filename(nodeid)

    def exists(self) -> bool:
        """Whether any baseline was saved for this machine and identity (the plugin compares only then)."""
        return bool(baseline_files(self.folder))

    def other_identities(self, nodeid: str | None = None) -> list[str]:
        """The other identity keys of this machine holding baselines (of ``nodeid`` when it is given)."""
        others = [f for f in identity_folders(self.machine_folder) if f.name != self.identity.key]
        if nodeid is not None:
            others = [f for f in others if (f / case_filename(nodeid)).is_file()]
        return [f.name for f in others]

    def old_layout_note(self) -> str | None:
        """Whether files of the older layout sit in this machine's folder (they are never read here)."""
        return old_layout_note(self.machine_folder)

    def refresh_command(self, nodeid: str | None) -> str:
        """The command that saves ``nodeid`` (every case when None) under this identity."""
        return refresh_command(self.identity, nodeid, self.root)

    def save_case(self, case: CaseResult, run: Mapping[str, Any] | None = None) -> Path:
        """Store one case atomically (replacing its previous baseline, even an unreadable one)."""
        if BaselineIdentity.of_case(case, self.identity.launcher, self.identity.isolation) != self.identity:
            raise BaselineError(f"{case.nodeid} (world size {case.world_size}, backend {case.backend}) does not "
                                f"belong in the baselines of {self.identity.key}; save it with its own store")
        stored = CaseResult.from_dict(case.to_dict())
        stored.verdicts = []  # verdicts belong to a comparison, not to the reference figures
        document = RunResults(
            machine=self.fingerprint,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            run={**(run or {}), **self.identity.run_facts()},
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
                stored = recorded_identity(case, document.run, path)
                if stored != self.identity:
                    raise BaselineError(
                        f"{path}: holds a baseline of {stored.key} but lies in the folder of {self.identity.key}.\n"
                        f"Move it to {self.machine_folder / stored.key}, or replace it with this run's figures: "
                        f"{self.refresh_command(nodeid)}"
                    )
                return case
        found = ", ".join(repr(c.nodeid) for c in document.cases) or "no case"
        raise BaselineError(
            f"{path}: expected the baseline of {nodeid!r} but the file holds {found}.\n{SAVE_HINT}"
        )

    def load_all(self) -> RunResults:
        """Every stored case of this machine and identity as one RunResults (for the CLI and reports)."""
        return load_folder(self.folder, self.fingerprint)


def load_folder(folder: Path, fingerprint: Mapping[str, Any] | None = None) -> RunResults:
    """Merge the baseline files of one identity folder; the first file's fingerprint names the machine."""
    folder = Path(folder)
    files = baseline_files(folder)
    if not files:
        identities = ", ".join(f.name for f in identity_folders(folder))
        where = (f"it is a machine folder; give one of its identity folders: {identities}" if identities else
                 "save baselines with `pytest --dmlbench --dmlbench-save`, or give the folder of one machine "
                 "key and identity (<root>/<machine-key>/<identity>, e.g. .../ws2-gloo-fork-persistent)")
        raise BaselineError(f"{folder}: no baseline files (*.json) here.\n{where[0].upper()}{where[1:]}.")
    merged = RunResults(machine=dict(fingerprint or {}), created="", run={}, cases=[])
    for path in files:
        document = read_baseline_file(path)
        if not merged.machine:
            merged.machine = document.machine
        merged.created = max(merged.created, document.created)
        merged.run = merged.run or document.run
        merged.cases.extend(document.cases)
    return merged


def load_matching(current: RunResults, machine_folder: Callable[[str], Path],
                  source: Path) -> tuple[list[Path], RunResults]:
    """The stored baselines of ``current``'s cases and the identity folders they came from.

    Each case is looked up in the identity folder of its world size, backend and the launcher and isolation
    ``current`` (read from ``source``) records (their defaults when it records none), in
    ``machine_folder(backend)``. Stored cases
    of other identities are left out; stored cases ``current`` lacks are kept once (to be listed as missing).
    """
    wanted: dict[Path, set[str]] = {}
    for case in current.cases:
        folder = machine_folder(case.backend) / recorded_identity(case, current.run, source).key
        wanted.setdefault(folder, set()).add(case.nodeid)
    ran = {case.nodeid for case in current.cases}
    found = sorted(folder for folder in wanted if baseline_files(folder))
    merged = RunResults(machine={}, created="", run={}, cases=[])
    for folder in found:
        loaded = load_folder(folder)
        merged.machine = merged.machine or loaded.machine
        merged.created = max(merged.created, loaded.created)
        merged.run = merged.run or loaded.run
        kept = {c.nodeid for c in merged.cases}
        merged.cases.extend(c for c in loaded.cases
                            if c.nodeid in wanted[folder] or (c.nodeid not in ran and c.nodeid not in kept))
    return found, merged
