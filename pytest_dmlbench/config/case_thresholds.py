"""Per-case thresholds read from a file (``--dmlbench-case-thresholds FILE``, ini ``dmlbench_case_thresholds``).

Each listed case is judged at the threshold its own measured noise supports: a quiet case at a tighter one (it
catches smaller changes), a noisy one at a wider one (it settles rather than stays inconclusive).
``studies/case_thresholds.py`` writes the file from recorded A/A runs. The file is JSON::

    {"schema": 1, "cases": {"<node id>": {"threshold": 7.5, "cpu_threshold": 2.5}, ...}}

``"cpu_threshold": "off"`` leaves the case's CPU time unjudged. Either key of a case may be left out; other
keys (the study's measurements) are for people and ignored here.
Precedence, highest first: the marker's ``threshold=`` / ``cpu_threshold=``, this file, the run's
``--dmlbench-threshold`` / ``--dmlbench-cpu-threshold``. A case the file does not list keeps the run's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dmlbench.config.percentages import CpuThreshold, parse_cpu_threshold, parse_threshold
from pytest_dmlbench.errors import ConfigError

SCHEMA = 1
KEYS = ("threshold", "cpu_threshold")
OPTION = "--dmlbench-case-thresholds"


@dataclass(frozen=True)
class CaseThreshold:
    """One case's thresholds in percent (None: the run's)."""

    threshold_pct: float | None = None
    cpu_threshold_pct: CpuThreshold | None = None  # "off": CPU time not judged


@dataclass(frozen=True)
class CaseThresholds:
    """The thresholds of the cases a file lists, by node id; ``source`` names the file (empty: no file)."""

    source: str = ""
    cases: Mapping[str, CaseThreshold] = field(default_factory=dict)

    def of(self, nodeid: str) -> CaseThreshold:
        """``nodeid``'s thresholds (both None where the file does not list it)."""
        return self.cases.get(nodeid, CaseThreshold())

    def matches_none_of(self, nodeids: Sequence[str], rootdir: str) -> str | None:
        """A warning when the file lists cases and none of the run's ``nodeids`` is among them; else None.

        Node ids are relative to the rootdir, so a file written from another rootdir (or a run whose path
        argument moved it) matches nothing, and every case would be judged at the run's thresholds unsaid."""
        if not self.cases or not nodeids or any(nodeid in self.cases for nodeid in nodeids):
            return None
        return (f"{OPTION} {self.source}: none of this run's {len(nodeids)} case(s) is among the {len(self.cases)} "
                f"it lists, so every case is judged at the run's thresholds. Node ids follow the rootdir "
                f"({rootdir}): the file lists e.g. {next(iter(self.cases))!r}, this run has e.g. {nodeids[0]!r}. "
                f"Run from the rootdir the file was written for, and give it as {OPTION}=FILE (pytest takes an "
                "existing path among its arguments into its choice of rootdir)")


NO_CASE_THRESHOLDS = CaseThresholds()


def parse_case_thresholds(document: Any, source: str) -> CaseThresholds:
    """The thresholds of a decoded file; ConfigError names what is wrong, where, and the accepted form."""
    form = f'{{"schema": {SCHEMA}, "cases": {{"<node id>": {{"threshold": PCT, "cpu_threshold": PCT or "off"}}}}}}'
    if not isinstance(document, dict) or not isinstance(document.get("cases"), dict):
        raise ConfigError(f"{OPTION} {source}: expected a JSON object {form}")
    if document.get("schema") != SCHEMA:
        raise ConfigError(f"{OPTION} {source}: schema {document.get('schema')!r} is not {SCHEMA}; write the file "
                          "again with this version's studies/case_thresholds.py")
    cases: dict[str, CaseThreshold] = {}
    for nodeid, entry in document["cases"].items():
        where = f"{OPTION} {source}: {nodeid}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected an object such as {{\"threshold\": 7.5}}, got {entry!r}")
        unknown = sorted(set(entry) - set(KEYS) - {"measured"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(KEYS)}")
        threshold, cpu = entry.get("threshold"), entry.get("cpu_threshold")
        cases[nodeid] = CaseThreshold(None if threshold is None else parse_threshold(threshold, f"{where}: threshold"),
                                      None if cpu is None else parse_cpu_threshold(cpu, f"{where}: cpu_threshold"))
    return CaseThresholds(source, cases)


def load_case_thresholds(path: Path) -> CaseThresholds:
    """The thresholds in the file at ``path``; ConfigError when it cannot be read or is not such a file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{OPTION} {path}: cannot read it ({exc.strerror or exc}); give the path of a file "
                          "that studies/case_thresholds.py wrote") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{OPTION} {path}: not JSON ({exc}); write it again with studies/case_thresholds.py") \
            from None
    return parse_case_thresholds(document, str(path))
