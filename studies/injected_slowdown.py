"""A slowdown injected into a shipped benchmark case, for a live night that must catch it.

``studies/injected_night.py`` appends one line to a benchmark module in the night's slowed commit, rebinding a
case function to ``slowed(case, ids, how, share)``. The slowed case's timed calls (``dmlbench(fn)``,
``dmlbench.pedantic(fn)``, the strategy and twin of ``dmlbench.train``) each do extra work after the call. The
work, and how much of it, is one of:

* ``counted``: 64x64 matrix products, which torch's flop counter counts, the same number after every call (the
  first included), so the slowed side's ``flops_per_step`` is one exact figure in every round and on every rank
  that does the same work. How many: given per id (``units``, from :func:`calibrated_units`: ``share`` of the
  call's thread CPU time on the host that calibrated, read by a run with ``how="calibrate"``; what
  ``studies/injected_night.py`` does, so the case is ``share`` slower), else ``share`` of the call's own counted
  FLOPs, counted on the wrapped callable's first call (``share`` more counted work, whose time share depends on how
  much of the case's time its counted work takes: +5 % of FLOPs read +1.7 % of CPU time on the DDP training
  step). A call that counts too few FLOPs for one product (a collective alone) cannot be sized by FLOPs: it
  fails, naming ``elementwise``;
* ``elementwise``: elementwise additions on a 16k-element tensor, which the flop counter does not count (the same
  counted work done slower: only time can see it), for ``share`` of the thread CPU time the call itself spent (a
  fixed share of the case's own work, whatever its neighbours do).

Only the parametrizations named in ``ids`` (pytest's ids, as in ``test_step[ddp]``) are slowed; a case that
records its steps another way (``training_steps()``, ``collective()``) is not slowed by this wrapper.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

HOWS = ("counted", "elementwise")
UNIT_FLOPS = {"counted": 2 * 64 * 64 * 64}  # what one unit of counted work adds to the flop counter's count
PRIMITIVE = (str, int, float, bool, type(None))


def extra_work(how: str) -> Callable[[], object]:
    """One small unit of the extra work ``how`` names."""
    import torch

    if how == "counted":
        matrix = torch.randn(64, 64)
        return lambda: torch.mm(matrix, matrix)
    if how == "elementwise":
        source, target = torch.randn(16384), torch.empty(16384)
        return lambda: torch.add(source, 1.0, out=target)
    raise ValueError(f"how={how!r}: give one of {', '.join(HOWS)}")


def spin(seconds: float, work: Callable[[], object], clock: Callable[[], float] = time.thread_time) -> int:
    """Do ``work`` until ``clock`` has moved ``seconds`` (at least once when ``seconds`` > 0); the units done."""
    if seconds <= 0:
        return 0
    end = clock() + seconds
    units = 0
    while True:
        work()
        units += 1
        if clock() >= end:
            return units


def repeat(units: int, work: Callable[[], object]) -> int:
    """Do ``work`` ``units`` times; the units done."""
    for _ in range(units):
        work()
    return units


def counted_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and the FLOPs torch's flop counter counted in it."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:
        result = fn(*args, **kwargs)
    return result, float(mode.get_total_flops())


class Slowing:
    """Wraps a timed callable so that each call is followed by ``share`` more work: of the call's counted FLOPs
    (``counted``: a fixed number of units per call of the wrapped callable, sized on its first call, which the flop
    counter slows as the plugin's own count slows its first warm-up round) or of its own thread CPU time
    (``elementwise``)."""

    def __init__(self, how: str, share: float, clock: Callable[[], float] = time.thread_time,
                 units: int | None = None) -> None:
        if not 0 < share < 1:
            raise ValueError(f"share={share}: give a fraction between 0 and 1 (0.05 is 5 % more work)")
        if units is not None and (how not in UNIT_FLOPS or units < 1):
            raise ValueError(f"units={units}: a fixed number of units (at least 1) is for how='counted' only")
        self.how = how
        self.work = extra_work(how)
        self.share = share
        self.clock = clock
        self.units = units  # counted: the units per call, calibrated beforehand; None sizes them by FLOPs

    def call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if self.how in UNIT_FLOPS:
            return self._counted_call(fn)

        @functools.wraps(fn)
        def slowed_call(*args: Any, **kwargs: Any) -> Any:
            start = self.clock()
            result = fn(*args, **kwargs)
            spin(self.share * (self.clock() - start), self.work, self.clock)
            return result
        return slowed_call

    def _counted_call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        units: list[int] = [] if self.units is None else [self.units]  # else sized on the first call

        @functools.wraps(fn)
        def slowed_call(*args: Any, **kwargs: Any) -> Any:
            if units:
                result = fn(*args, **kwargs)
            else:
                result, flops = counted_flops(fn, *args, **kwargs)
                units.append(self.counted_units(flops, getattr(fn, "__name__", repr(fn))))
            repeat(units[0], self.work)
            return result
        return slowed_call

    def counted_units(self, flops: float, name: str) -> int:
        """Units of counted work per call: ``share`` of a call's ``flops``, rounded to whole units."""
        units = round(self.share * flops / UNIT_FLOPS[self.how])
        if units < 1:
            raise ValueError(f"{name}: the flop counter counts {flops:.0f} FLOPs in this call, under the "
                             f"{UNIT_FLOPS[self.how] / 2 / self.share:.0f} that {self.share:.0%} of would make half "
                             "a unit of counted work; slow it with how='elementwise' (a share of its CPU time)")
        return units

    def steppable(self, strategy: Any) -> Any:
        """``strategy`` (a ``.step(inputs, targets, loss_fn)`` object or such a callable) with a slowed step."""
        if callable(getattr(strategy, "step", None)):
            return SlowedStrategy(strategy, self.call(strategy.step))
        return self.call(strategy)


CALIBRATION_ENV = "DMLBENCH_INJECTION_CALIBRATION"  # the file a calibrating run appends its readings to
CALIBRATION_UNITS = 2000  # units of counted work timed once per process for the cost of one


class Calibrating(Slowing):
    """Reads, instead of slowing: each wrapped call's own thread CPU time, and once per process the thread CPU time
    of one unit of counted work, appended as JSON lines (``{"id", "call_cpu_s"}``, ``{"unit_cpu_s"}``) to the file
    ``DMLBENCH_INJECTION_CALIBRATION`` names (each rank appends its own lines, one ``write`` each)."""

    unit_cpu_s: float | None = None  # per process

    def __init__(self, ident: str, clock: Callable[[], float] = time.thread_time) -> None:
        super().__init__("counted", 0.5, clock)
        self.ident = ident
        self.path = os.environ.get(CALIBRATION_ENV, "")
        if not self.path:
            raise ValueError(f"a calibrating run needs {CALIBRATION_ENV}: the file to append its readings to")

    def _append(self, reading: dict[str, object]) -> None:
        with open(self.path, "a") as out:
            out.write(json.dumps(reading) + "\n")

    def call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if Calibrating.unit_cpu_s is None:
            start = self.clock()
            repeat(CALIBRATION_UNITS, self.work)
            Calibrating.unit_cpu_s = (self.clock() - start) / CALIBRATION_UNITS
            self._append({"unit_cpu_s": Calibrating.unit_cpu_s})

        @functools.wraps(fn)
        def read_call(*args: Any, **kwargs: Any) -> Any:
            start = self.clock()
            result = fn(*args, **kwargs)
            self._append({"id": self.ident, "call_cpu_s": self.clock() - start})
            return result
        return read_call


def calibrated_units(readings: Iterable[dict[str, Any]], share: float) -> dict[str, int]:
    """Units of counted work per call for each id a calibrating run read: ``share`` of the median call's thread CPU
    time over the median unit's, rounded (at least one). The same count then goes to every call, in every round and
    on every rank, so the counters read one exact figure; the time it adds is ``share`` on the calibrating host."""
    from statistics import median

    calls: dict[str, list[float]] = {}
    units: list[float] = []
    for reading in readings:
        if "unit_cpu_s" in reading:
            units.append(float(reading["unit_cpu_s"]))
        else:
            calls.setdefault(str(reading["id"]), []).append(float(reading["call_cpu_s"]))
    if not units or not calls:
        raise ValueError("the calibrating run read no timed call: do the slowed cases time their steps through "
                         "dmlbench(fn), dmlbench.pedantic or dmlbench.train?")
    unit = median(units)
    return {ident: max(1, round(share * median(times) / unit)) for ident, times in sorted(calls.items())}


class SlowedStrategy:
    """A strategy whose ``step`` is slowed; every other attribute is the strategy's own."""

    def __init__(self, strategy: Any, step: Callable[..., Any]) -> None:
        self._strategy = strategy
        self.step = step

    def __getattr__(self, name: str) -> Any:
        return getattr(self._strategy, name)


class SlowedBench:
    """The ``dmlbench`` fixture's value with its timed calls slowed; the rest is the fixture's own."""

    def __init__(self, bench: Any, slowing: Slowing) -> None:
        self._bench = bench
        self._slowing = slowing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bench, name)

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._bench.pedantic(self._slowing.call(fn), args=args, kwargs=kwargs)

    def pedantic(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._bench.pedantic(self._slowing.call(fn), *args, **kwargs)

    def train(self, strategy: Any, batches: Any, **kwargs: Any) -> Any:
        if kwargs.get("twin") is not None:
            kwargs["twin"] = self._slowing.steppable(kwargs["twin"])
        return self._bench.train(self._slowing.steppable(strategy), batches, **kwargs)


def _names(argnames: str | Iterable[str]) -> list[str]:
    return [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else list(argnames)


def _value_id(value: object, name: str, index: int) -> str:
    return str(value) if isinstance(value, PRIMITIVE) else f"{name}{index}"


def parametrizations(case: Callable[..., Any]) -> list[tuple[list[str], list[tuple[tuple[Any, ...], str]]]]:
    """Each ``parametrize`` mark of ``case``, nearest the function first (pytest's id order): its argument names
    and, per value set, the values and their id (the mark's ``ids``, ``pytest.param``'s ``id``, else pytest's
    rule for plain values)."""
    found = []
    for mark in getattr(case, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = _names(mark.args[0])
        ids = mark.kwargs.get("ids")
        sets = []
        for index, value in enumerate(mark.args[1]):
            given = getattr(value, "id", None)
            values = tuple(value.values) if hasattr(value, "values") and not isinstance(value, dict) else (
                tuple(value) if len(names) > 1 else (value,))
            if given is None and isinstance(ids, (list, tuple)):
                given = ids[index]
            sets.append((values, given if given is not None else
                         "-".join(_value_id(v, n, index) for v, n in zip(values, names, strict=True))))
        found.append((names, sets))
    return found


def call_id(marks: list[tuple[list[str], list[tuple[tuple[Any, ...], str]]]], kwargs: dict[str, Any]) -> str:
    """The pytest id of the parametrization ``kwargs`` are the arguments of."""
    parts = []
    for names, sets in marks:
        values = tuple(kwargs[n] for n in names)
        parts.append(next(ident for candidate, ident in sets if candidate == values))
    return "-".join(parts)


def all_ids(marks: list[tuple[list[str], list[tuple[tuple[Any, ...], str]]]]) -> set[str]:
    ids = [""]
    for _, sets in marks:
        ids = [f"{before}-{ident}" if before else ident for before in ids for _, ident in sets]
    return set(ids)


def reading_key(case: Callable[..., Any], ident: str) -> str:
    """How a calibrating run names a parametrization of ``case``: its file's name, the function and the id, as the
    end of its node id (``test_steps.py::test_step[ddp]``)."""
    name = f"{os.path.basename(case.__code__.co_filename)}::{case.__name__}"
    return f"{name}[{ident}]" if ident else name


def slowed(case: Callable[..., Any], ids: Iterable[str], how: str, share: float,
           units: dict[str, int] | None = None) -> Callable[..., Any]:
    """``case`` with the parametrizations ``ids`` slowed (``how``, ``share``; ``units``: each id's fixed units of
    counted work per call, as :func:`calibrated_units` gives them); the others run as they were. ``how="calibrate"``
    reads the calls instead of slowing them (:class:`Calibrating`)."""
    marks = parametrizations(case)
    wanted = set(ids)
    unknown = wanted - all_ids(marks)
    if unknown:
        raise ValueError(f"{case.__name__} has no parametrization {sorted(unknown)}: its ids are "
                         f"{sorted(all_ids(marks))}")
    if units is not None and set(units) != wanted:
        raise ValueError(f"units are given for {sorted(units)}, the slowed ids are {sorted(wanted)}")
    slowings: dict[str, Slowing] = {}

    def slowing_for(ident: str) -> Slowing:
        if ident not in slowings:
            slowings[ident] = (Calibrating(reading_key(case, ident)) if how == "calibrate" else
                               Slowing(how, share, units=None if units is None else units[ident]))
        return slowings[ident]

    if how != "calibrate":
        Slowing(how, share)  # a bad ``how`` or ``share`` is refused here, not in a rank

    @functools.wraps(case)
    def slowed_case(*args: Any, **kwargs: Any) -> Any:
        ident = call_id(marks, kwargs)
        if ident in wanted and "dmlbench" in kwargs:
            kwargs["dmlbench"] = SlowedBench(kwargs["dmlbench"], slowing_for(ident))
        return case(*args, **kwargs)
    return slowed_case
