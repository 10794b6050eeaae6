"""What a pytest run does with baselines, in one object the plugin calls once per finished case.

Policy: ``--dmlbench-save`` stores every case (replacing its file, even an unreadable one, and carrying
the stored run history forward, see ``history``) and compares nothing, since the run becomes the
reference; the case records how many saved runs its baseline holds now against the :data:`MIN_RUNS` a
verdict needs to measure run-to-run noise (``saved run 2 of 3``). Otherwise, unless
``--dmlbench-no-compare``, each case is compared with the baseline of its machine class and identity
(world size, backend, launcher, isolation) whenever that identity has any baseline, and a case without
one is ``new``. When the identity has none but the machine has baselines of other identities, or files
of the older layout, every case is ``new`` and says what exists and the command that saves it. Code that
imports this module does not import pytest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_dmlbench.baseline.fingerprint import machine_fingerprint
from pytest_dmlbench.baseline.identity import BaselineIdentity, refresh_template
from pytest_dmlbench.baseline.store import BaselineStore
from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.errors import BaselineError, BaselineWarning
from pytest_dmlbench.gates.stored.between_runs import MIN_RUNS
from pytest_dmlbench.gates.stored.compare import DEFAULT_SETTINGS, compare_case
from pytest_dmlbench.gates.stored.history import with_history
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.gates.wording import failing_verdicts
from pytest_dmlbench.results import CaseResult, Verdict
from pytest_dmlbench.results.table import SAVED_RUNS_KEY


def saved_runs(saved: CaseResult) -> int:
    """The saved runs a case's baseline holds now, this one counted: one more than its longest history (a
    history starts over where a save accepted a change)."""
    return 1 + max((len(metric.history) for metric in saved.metrics.values()), default=0)


class BaselineKeeper:
    """Saves or compares finished cases; one per pytest process (controller or xdist worker)."""

    def __init__(
        self,
        config: DmlbenchConfig,
        fingerprint_for: Callable[[str], dict[str, Any]] = machine_fingerprint,
    ) -> None:
        self.config = config  # the run's options: baselines root, save or compare, thresholds, identity
        self.settings = DEFAULT_SETTINGS  # the rule's own parameters (alpha, saved runs needed)
        self._fingerprint_for = fingerprint_for
        self._fingerprints: dict[str, dict[str, Any]] = {}
        self._stores: dict[BaselineIdentity, BaselineStore] = {}
        self._warned: set[Path] = set()

    @property
    def thresholds(self) -> Thresholds:
        """The run's thresholds (``--dmlbench-threshold``, ``--dmlbench-cpu-threshold``)."""
        return Thresholds(self.config.threshold_pct, self.config.cpu_threshold_pct,
                          cpu_where_computing=not self.config.cpu_threshold_given)

    def store_for(self, case: CaseResult) -> BaselineStore:
        """The store of this machine class and the case's identity (the fingerprint is taken once per backend)."""
        identity = BaselineIdentity.of_case(case, self.config.launcher, self.config.isolation)
        if identity not in self._stores:
            if case.backend not in self._fingerprints:
                self._fingerprints[case.backend] = self._fingerprint_for(case.backend)
            self._stores[identity] = BaselineStore(self.config.baseline_dir, self._fingerprints[case.backend], identity)
        return self._stores[identity]

    def process(self, case: CaseResult, run: Mapping[str, Any] | None = None) -> list[Verdict]:
        """Save or compare one finished case; sets ``case.verdicts`` and returns the verdicts that fail it.

        Raises BaselineError (message names the file and the fix) when the case's baseline file is
        unusable; the plugin reports that as the item's failure without a traceback.
        """
        store = self.store_for(case)
        if self.config.save or self.config.compare:
            self._warn_old_layout(store)
        if self.config.save:
            try:
                previous = store.load_case(case.nodeid)
            except BaselineError as exc:
                previous = None
                problem = str(exc).splitlines()[0]
                note = f"--dmlbench-save replaced an unreadable baseline; its run history starts over. {problem}"
                case.extra.setdefault("notes", []).append(note)
                warnings.warn(note, BaselineWarning, stacklevel=2)
            saved = with_history(case, previous, self.thresholds, self.settings.alpha)
            store.save_case(saved, run)
            case.extra[SAVED_RUNS_KEY] = {"runs": saved_runs(saved), "needed": MIN_RUNS}
            case.verdicts = []
            return []
        if not self.config.compare:
            case.verdicts = []
            return []
        settings = replace(self.settings, refresh_command=refresh_template(store.identity, store.root))
        if (waiting := self.thresholds.waiting_note(case)) is not None:
            case.extra.setdefault("notes", []).append(waiting)
        if store.exists():
            baseline = store.load_case(case.nodeid)
            reason = "no baseline yet" if baseline is not None else new_reason(store, case.nodeid)
            case.verdicts = compare_case(baseline, case, settings, self.thresholds, new_reason=reason)
        elif store.other_identities() or store.old_layout_note() is not None:
            case.verdicts = compare_case(None, case, settings, self.thresholds,
                                         new_reason=new_reason(store, case.nodeid))
        else:  # nothing stored for this machine at all: nothing to compare with
            case.verdicts = []
        return failing_verdicts(case.verdicts, self.config.fail_on_improvement)

    def _warn_old_layout(self, store: BaselineStore) -> None:
        """Say once per process and machine folder that files of the older layout are there and unused."""
        note = store.old_layout_note()
        if note is None or store.machine_folder in self._warned:
            return
        self._warned.add(store.machine_folder)
        warnings.warn(
            f"{note}; this version neither compares with nor replaces files of that layout (it keeps baselines in "
            f"{store.machine_folder}/<identity>/, e.g. {store.identity.key}/). Re-save the cases with this "
            f"version ({store.refresh_command(None)}, with this run's selection of tests), then delete the old "
            "files.",
            BaselineWarning,
            stacklevel=3,
        )


def new_reason(store: BaselineStore, nodeid: str) -> str:
    """Why a case without a baseline under its identity is new (the text after "new, "): what this machine
    holds instead, and the command that saves the case."""
    others = store.other_identities(nodeid)
    old = store.old_layout_note()
    if not others and old is None and store.exists():
        return "no baseline yet"
    command = store.refresh_command(nodeid)
    head = f"no baseline at {store.identity.describe()} on this machine"
    if others:
        head += f" (this case has baselines for: {', '.join(others)})"
    elif not store.exists() and store.other_identities():
        head += f" (this machine has baselines for: {', '.join(store.other_identities())}; none for this case)"
    if old is not None:
        return f"{head}; {old}; re-save with: {command}"
    return f"{head}; save one with: {command}"
