"""What a pytest run does with baselines, in one object the plugin calls once per finished case.

Policy: ``--dmlbench-save`` stores every case (replacing its file, even an unreadable one, and carrying
the stored run history forward, see ``history``) and compares nothing, since the run becomes the
reference; otherwise, unless ``--dmlbench-no-compare``, each case is compared with the baseline of its
machine class whenever that machine has any baseline, and a case without one is ``new``. Code that
imports this module does not import pytest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dmlbench.baseline.compare import (
    DEFAULT_ALPHA,
    CompareSettings,
    compare_case,
    failing_verdicts,
)
from pytest_dmlbench.baseline.fingerprint import machine_fingerprint
from pytest_dmlbench.baseline.history import with_history
from pytest_dmlbench.baseline.store import BaselineStore
from pytest_dmlbench.config import DEFAULT_THRESHOLD_PCT
from pytest_dmlbench.errors import BaselineError, BaselineWarning
from pytest_dmlbench.results import CaseResult, Verdict


@dataclass(frozen=True)
class BaselineOptions:
    """The baseline-related options of a run, read once from the command line / ini file."""

    root: Path
    save: bool = False
    compare: bool = True
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    alpha: float = DEFAULT_ALPHA
    fail_on_improvement: bool = False


class BaselineKeeper:
    """Saves or compares finished cases; one per pytest process (controller or xdist worker)."""

    def __init__(
        self,
        options: BaselineOptions,
        fingerprint_for: Callable[[str], dict[str, Any]] = machine_fingerprint,
    ) -> None:
        self.options = options
        self.settings = CompareSettings(options.threshold_pct, options.alpha)
        self._fingerprint_for = fingerprint_for
        self._stores: dict[str, BaselineStore] = {}

    def store_for(self, backend: str) -> BaselineStore:
        """The store of this machine class for ``backend`` (the fingerprint is taken once per backend)."""
        if backend not in self._stores:
            self._stores[backend] = BaselineStore(self.options.root, self._fingerprint_for(backend))
        return self._stores[backend]

    def process(self, case: CaseResult, run: Mapping[str, Any] | None = None) -> list[Verdict]:
        """Save or compare one finished case; sets ``case.verdicts`` and returns the verdicts that fail it.

        Raises BaselineError (message names the file and the fix) when the case's baseline file is
        unusable; the plugin reports that as the item's failure without a traceback.
        """
        store = self.store_for(case.backend)
        if self.options.save:
            try:
                previous = store.load_case(case.nodeid)
            except BaselineError as exc:
                previous = None
                problem = str(exc).splitlines()[0]
                note = f"--dmlbench-save replaced an unreadable baseline; its run history starts over. {problem}"
                case.extra.setdefault("notes", []).append(note)
                warnings.warn(note, BaselineWarning, stacklevel=2)
            store.save_case(with_history(case, previous, self.settings), run)
            case.verdicts = []
            return []
        if not self.options.compare or not store.exists():
            case.verdicts = []
            return []
        case.verdicts = compare_case(store.load_case(case.nodeid), case, self.settings)
        return failing_verdicts(case.verdicts, self.options.fail_on_improvement)
