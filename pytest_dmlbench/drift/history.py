"""The nightly history: one small JSON file per night in a folder kept across nights.

Each file holds what a night measured per case-metric (the median, the paired A/B ratio when the night ran
the paired gate, the direction that is better) with the night's commit, date and REF. A night is only ever
added, as a new file written atomically (temp file + rename), so a crash or a second writer never damages a
stored night, and a corrupt file is reported by name and never rewritten.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.errors import HistoryError
from pytest_dmlbench.results import Direction, RunResults
from pytest_dmlbench.results.jsonio import TEMP_PREFIX, dumps_strict, write_atomic

HISTORY_SCHEMA = 1
KIND = "dmlbench-nightly-history"
NIGHT_GLOB = "night-*.json"
Key = tuple[str, str]  # (case node id, metric)


@dataclass(frozen=True)
class Point:
    """One case-metric of one night: its median and, from a paired night, A's over B's (geometric mean of
    the block pairs' ratios; None when the night was not paired)."""

    median: float
    better: Direction
    unit: str = ""
    ratio: float | None = None


@dataclass
class Night:
    """What one nightly run measured."""

    commit: str
    date: str  # ISO 8601, UTC
    ref: str = ""  # the REF the night gated against, as given ("" when it ran without one)
    ref_commit: str = ""
    anchor: bool = False  # the night gated against the fixed anchor instead of the last green night
    points: dict[Key, Point] = field(default_factory=dict)
    machine: str = ""  # the machine key (baseline/fingerprint.py): medians compare only on one machine

    @property
    def label(self) -> str:
        return f"{self.commit[:12] or 'unknown'} ({self.date[:10] or 'no date'})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": HISTORY_SCHEMA, "kind": KIND, "commit": self.commit, "date": self.date, "ref": self.ref,
            "ref_commit": self.ref_commit, "anchor": self.anchor, "machine": self.machine,
            "points": [{"case": case, "metric": metric, "median": p.median, "better": p.better, "unit": p.unit,
                        "ratio": p.ratio} for (case, metric), p in sorted(self.points.items())],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Night:
        """Parse a night file's document; ValueError/KeyError/TypeError on a malformed one."""
        if data.get("kind") != KIND or data.get("schema") != HISTORY_SCHEMA:
            raise ValueError(f"not a night of schema {HISTORY_SCHEMA} (kind {data.get('kind')!r}, "
                             f"schema {data.get('schema')!r})")
        points: dict[Key, Point] = {}
        for entry in data["points"]:
            better = entry["better"]
            if better not in ("higher", "lower"):
                raise ValueError(f"{entry['case']} {entry['metric']}: 'better' must be 'higher' or 'lower'")
            ratio = entry.get("ratio")
            points[(str(entry["case"]), str(entry["metric"]))] = Point(
                float(entry["median"]), better, str(entry.get("unit", "")), None if ratio is None else float(ratio))
        return cls(str(data["commit"]), str(data["date"]), str(data.get("ref", "")), str(data.get("ref_commit", "")),
                   bool(data.get("anchor", False)), points, str(data.get("machine", "")))


def paired_ratio(case_extra: Mapping[str, Any], metric: str) -> float | None:
    """A's over B's for ``metric``: the geometric mean of the recorded block pairs' ratios, or None."""
    paired = case_extra.get("paired") or {}
    logs: list[float] = []
    for stage in paired.get("block_medians") or []:
        a = (stage.get("a") or {}).get(metric) or []
        b = (stage.get("b") or {}).get(metric) or []
        logs += [math.log(x / y) for x, y in zip(a, b, strict=False)
                 if isinstance(x, int | float) and isinstance(y, int | float) and x > 0 and y > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def night_from_results(results: RunResults, *, commit: str = "", date: str = "", ref: str = "",
                       anchor: bool = False) -> Night:
    """The night ``results`` describe: every judged-direction metric with a positive finite median.
    ``commit`` and ``date`` default to the run's recorded commit and creation time."""
    commit = commit or str(results.run.get("commit") or "")
    date = date or results.created or datetime.now(timezone.utc).isoformat(timespec="seconds")
    points: dict[Key, Point] = {}
    ref_commit = ""
    for case in results.cases:
        paired = case.extra.get("paired") or {}
        ref_commit = ref_commit or str(paired.get("commit") or "")
        verdicts = {v.metric: v for v in case.verdicts}
        for name, metric in case.metrics.items():
            median = metric.stats.median
            if metric.better is None or not math.isfinite(median) or median <= 0:
                continue
            ratio = paired_ratio(case.extra, name)
            verdict = verdicts.get(name)
            if ratio is None and verdict is not None and verdict.ratio is not None and math.isfinite(verdict.ratio):
                ratio = verdict.ratio
            points[(case.nodeid, name)] = Point(median, metric.better, metric.unit, ratio)
    return Night(commit, date, ref, ref_commit, anchor, points, machine_key(results.machine))


def _file_name(night: Night) -> str:
    stamp = re.sub(r"[^0-9A-Za-z]", "", night.date)[:15] or "undated"
    return f"night-{stamp}-{re.sub(r'[^0-9a-f]', '', night.commit.lower())[:12] or 'nocommit'}.json"


def append_night(folder: Path, night: Night) -> Path:
    """Store ``night`` as a new file in ``folder`` (created if needed); an existing night is never replaced."""
    if folder.exists() and not folder.is_dir():
        raise HistoryError(f"{folder}: the history path is a file, not a folder. Give a folder (it is created).")
    path = folder / _file_name(night)
    if path.exists():
        raise HistoryError(f"{path}: this night (same date and commit) is already recorded; nothing was written. "
                           "Record each nightly results file once.")
    write_atomic(path, dumps_strict(night.to_dict()))
    return path


def load_history(folder: Path) -> list[Night]:
    """Every stored night in ``folder``, oldest first. A missing folder or unusable file is a HistoryError
    naming it and the fix; nothing is changed on disk."""
    if not folder.is_dir():
        raise HistoryError(
            f"{folder}: no nightly history there ({'not a folder' if folder.exists() else 'no such folder'}). "
            f"Record a night first: python -m pytest_dmlbench drift record RESULTS.json --history {folder}")
    nights = []
    for path in sorted(p for p in folder.glob(NIGHT_GLOB) if not p.name.startswith(TEMP_PREFIX)):
        try:
            nights.append(Night.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HistoryError(
                f"{path}: unusable night file ({type(exc).__name__}: {exc}). The other nights are intact: move "
                f"this file out of {folder} (or restore it from an earlier copy of the history) and run again."
            ) from exc
    return sorted(nights, key=lambda n: n.date)


def series(nights: Sequence[Night], key: Key) -> list[tuple[Night, Point]]:
    """The nights that measured ``key``, oldest first, with its point."""
    return [(night, night.points[key]) for night in nights if key in night.points]
