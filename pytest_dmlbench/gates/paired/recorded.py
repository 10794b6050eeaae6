"""Recorded nights: the block pairs a paired run kept in its results file, served again to the trial.

A paired run records every case's raw evidence in its results file (``extra.paired.block_medians``: per
stage, pair by pair, A's and B's block median of each figure, and the canary read beside each block).
Pooled over whole-suite A/A runs (nothing changed between A and B), these are draws of what a night's pairs
look like here, slow phases included. :func:`recorded_source` serves a case's pairs drawn by a moving-block
bootstrap: runs of ``block`` consecutive recorded pairs of one run, so that a slow phase spanning
neighbouring pairs stays together. An injected slowdown multiplies A's values by ``1 + s`` (divides them,
for a higher-is-better figure); the canary is never slowed. Each pair costs the case's recorded seconds per
pair, so the pair budget stops a replayed case where it stopped the real one. Derived figures (speedup) are
not recorded per pair, so not replayed; single readings (memory peaks, exact counts) are, by recordings made
from 0.4 on (older ones lack them, and the replay names them).
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dmlbench.config import CPU_OFF, CpuThreshold
from pytest_dmlbench.gates.figures import CPU_TIME_METRICS, is_single_reading
from pytest_dmlbench.gates.paired.pairs import BlockPair, ListSource
from pytest_dmlbench.results import Direction

Pair = tuple[dict[str, float], dict[str, float]]  # A's and B's block medians, per figure (and the canary)
CANARY = "<canary>"
"""The key of the canary beside a side's block in a recorded pair (not a figure's name: figures are identifiers)."""


@dataclass
class RecordedCase:
    """One case's recorded pairs, pooled over runs (each run's pairs kept in their order)."""

    nodeid: str
    world_size: int
    threshold_pct: float
    figures: dict[str, tuple[str, Direction]]  # name -> (unit, better) of the figures tested on pairs
    runs: list[list[Pair]] = field(default_factory=list)
    seconds_per_pair: list[float] = field(default_factory=list)
    budget_s: float = 60.0
    cpu_threshold_pct: float | None = None  # CPU time's threshold in the recorded run (None: it was not judged)

    @property
    def pairs(self) -> int:
        return sum(len(run) for run in self.runs)


def _pairs_of(stages: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[Pair]:
    """Each recorded pair's block medians of ``names``, and the canary beside each block where recorded."""
    pairs: list[Pair] = []
    for stage in stages:
        a, b = stage.get("a", {}), stage.get("b", {})
        canary = stage.get("canary") or {}
        for i in range(len(stage.get("a_first", []))):
            pair = ({n: float(a[n][i]) for n in names if n in a and i < len(a[n])},
                    {n: float(b[n][i]) for n in names if n in b and i < len(b[n])})
            for side, readings in zip(pair, (canary.get("a", []), canary.get("b", [])), strict=True):
                if i < len(readings):
                    side[CANARY] = float(readings[i])
            pairs.append(pair)
    return pairs


def read_results_file(path: Path) -> dict[str, Any]:
    """The results document at ``path`` (``.gz`` read through gzip, as the recordings in ``studies/recordings/``
    are). ValueError names a file that cannot be read, is not gzip where it says so, or is not JSON."""
    try:
        raw = Path(path).read_bytes()
        document: dict[str, Any] = json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{path}: not a readable results file ({exc})") from None
    return document


def load_recorded(paths: Sequence[Path], default_threshold_pct: float = 10.0,
                  run_threshold_pct: float | None = None,
                  run_cpu_threshold: CpuThreshold | None = None) -> dict[str, RecordedCase]:
    """Every case with recorded block pairs in the results files ``paths`` (paired runs; ``.gz`` ones are read
    through gzip, as the recordings kept in ``studies/recordings/`` are), pooled by node id.
    ``run_threshold_pct`` replays under another run threshold (``--dmlbench-threshold``) than each file's own,
    and ``run_cpu_threshold`` under another run CPU threshold (a percentage, or ``"off"``), for the CPU pairs a
    run recorded (it records them where it judged CPU time); a case's marker threshold stays. ValueError names
    a file that is not a paired run's results."""
    cases: dict[str, RecordedCase] = {}
    for path in paths:
        document = read_results_file(path)
        run_threshold = run_threshold_pct or (document.get("run") or {}).get("threshold_pct") or default_threshold_pct
        found = 0
        for case in document.get("cases", []):
            paired = (case.get("extra") or {}).get("paired") or {}
            stages = paired.get("block_medians") or []
            # CPU time is replayed only where the recorded run judged it (its pairs are recorded only then), at the
            # threshold it judged it at or at run_cpu_threshold; a case's own threshold wins over either
            run_cpu = (document.get("run") or {}).get("cpu_threshold_pct")
            cpu_threshold = case.get("cpu_threshold_pct") or (run_cpu if run_cpu_threshold is None
                                                               else run_cpu_threshold)
            cpu_threshold = None if cpu_threshold == CPU_OFF else cpu_threshold  # a case that turned it off
            figures = {name: (m["unit"], m["better"]) for name, m in case.get("metrics", {}).items()
                       if m.get("better") in ("higher", "lower")
                       and (name not in CPU_TIME_METRICS or cpu_threshold is not None)
                       and any(name in stage.get("a", {}) for stage in stages)}
            pairs = _pairs_of(stages, list(figures))
            if not pairs:
                continue
            found += 1
            recorded = cases.setdefault(case["nodeid"], RecordedCase(
                case["nodeid"], int(case.get("world_size") or 0),
                float(case.get("threshold_pct") or run_threshold), figures,
                budget_s=float(paired.get("budget_s") or 60.0),
                cpu_threshold_pct=None if cpu_threshold is None else float(cpu_threshold)))
            recorded.figures.update(figures)
            recorded.runs.append(pairs)
            recorded.seconds_per_pair.append(float(paired.get("seconds") or 0.0) / len(pairs))
        if not found:
            raise ValueError(f"{path}: no case records block pairs (is it the results of a --dmlbench-against run "
                             "made with pytest-dmlbench 0.3 or later?)")
    return cases


def resampled(case: RecordedCase, rng: random.Random, block: int = 3) -> Iterator[Pair]:
    """Endless pairs of ``case``: runs of ``block`` consecutive recorded pairs from a randomly chosen run and
    start (a moving-block bootstrap; a run shorter than ``block`` gives all it has)."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    usable = [run for run in case.runs if run]
    if not usable:
        raise ValueError(f"{case.nodeid}: no recorded pairs to resample")
    while True:
        run = rng.choice(usable)
        start = rng.randrange(max(1, len(run) - block + 1))
        yield from run[start:start + block]


def slowed(pair: Pair, figures: Mapping[str, tuple[str, Direction]], slowdown: float) -> Pair:
    """``pair`` with A made ``slowdown`` worse (0.1: 10 % slower, or 10 % less of a higher-is-better rate);
    a fraction (judged in points) rises or falls by ``slowdown`` of itself; memory peaks and counts stay (a
    slowdown takes time, not memory)."""
    if slowdown == 0.0:
        return pair
    a = {name: value if name not in figures or is_single_reading(name) else
         value * (1.0 + slowdown) if figures[name][1] == "lower" else value / (1.0 + slowdown)
         for name, value in pair[0].items()}
    return a, pair[1]


def as_block_pair(pair: Pair) -> BlockPair:
    """A recorded pair as the trial reads it: each figure's block median one sample, the canary beside it."""
    a, b = pair
    return BlockPair({n: (v,) for n, v in a.items() if n != CANARY}, {n: (v,) for n, v in b.items() if n != CANARY},
                     canary_a=a.get(CANARY, math.nan), canary_b=b.get(CANARY, math.nan))


def recorded_source(case: RecordedCase, rng: random.Random, slowdown: float = 0.0, block: int = 3,
                    start: float = 0.0) -> ListSource:
    """``case``'s recorded pairs resampled (:func:`resampled`), A made ``slowdown`` worse (:func:`slowed`),
    each costing the case's recorded seconds per pair on a clock that starts at ``start``."""
    pairs = (as_block_pair(slowed(pair, case.figures, slowdown)) for pair in resampled(case, rng, block))
    return ListSource(pairs, sum(case.seconds_per_pair) / len(case.seconds_per_pair), start)
