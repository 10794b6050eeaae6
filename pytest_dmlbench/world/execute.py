"""Running one case body on one rank and describing how it went (shared by forked and launched ranks).

Imports no pytest: pytest's outcome exceptions (skip, xfail) are recognised by class name.
"""

from __future__ import annotations

import pickle
import random
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pytest_dmlbench.errors import NotJudged
from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.measure.memory import release_freed_memory
from pytest_dmlbench.measure.op_profile import profiled
from pytest_dmlbench.measure.rounds import BlockBudget, is_smoke
from pytest_dmlbench.properties.body import property_verdict, run_case_body
from pytest_dmlbench.world import adopt_group
from pytest_dmlbench.world.groups import GroupWatch
from pytest_dmlbench.world.guard import StateSnapshot, Unrestorable, snapshot
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, Status
from pytest_dmlbench.world.rank_warnings import Filter, RankWarning, recorded
from pytest_dmlbench.world.registry import CaseEntry


def case_arguments(entry: CaseEntry, request: CaseRequest, dist: DistInfo, bench: Any) -> dict[str, Any]:
    """The case body's keyword arguments on a rank: its identity, its ``dmlbench`` object, direct parametrize
    values from the rank's own copy of the case, and the fixture values the parent pickled."""
    values: dict[str, Any] = pickle.loads(request.pickled_args) if request.pickled_args else {}
    kwargs: dict[str, Any] = {}
    for name in entry.argnames:
        if name == "dist":
            kwargs[name] = dist
        elif name == "dmlbench":
            kwargs[name] = bench
        elif name in request.registry_args:
            kwargs[name] = entry.params[name]
        else:
            kwargs[name] = values[name]
    return kwargs


def case_seed(nodeid: str) -> int:
    """A per-case seed that is the same in every run and process (rank r adds r)."""
    return zlib.crc32(nodeid.encode("utf-8")) & 0x7FFFFFFF


def seed_everything(seed: int) -> None:
    """Seed Python, torch and (when loaded) numpy with one value."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def warm_up() -> None:
    """Do once, in the zygote, what every rank's first case would otherwise do on its own: import
    ``numpy.random`` (seeding loads it lazily; tens of ms per rank) and what the flop counter's first count
    imports (seconds per rank: :func:`~pytest_dmlbench.measure.flops.preload`), build the guard's settings and
    install the adopting ``init_process_group``/``destroy_process_group``."""
    from pytest_dmlbench.measure import flops
    from pytest_dmlbench.world import guard

    if "numpy" in sys.modules:
        import numpy.random  # noqa: F401
    flops.preload()
    guard.warm_up()
    adopt_group.install()  # before the ranks' clean snapshot, which then holds the adopting functions


def classify(exc: BaseException) -> Status:
    """pytest's skip/xfail outcomes, recognised by class name (they present themselves as builtins), and a
    validation that could not judge (:class:`~pytest_dmlbench.errors.NotJudged`)."""
    if isinstance(exc, NotJudged):
        return "not_judged"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "OutcomeException" in names:
        if "Skipped" in names:
            return "skipped"
        if "XFailed" in names:
            return "xfailed"
    return "failed"


def format_exception(exc: BaseException) -> str:
    """The traceback from the case body down, without this module's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def execute_case(
    case_id: int,
    dist: DistInfo,
    func: Callable[..., Any],
    arguments: Callable[[Any], dict[str, Any]],
    *,
    seed: int,
    measure_memory: bool,
    clean_state: StateSnapshot | None = None,
    block: BlockBudget | None = None,
    warning_filters: tuple[Filter, ...] | None = None,
) -> RankOutcome:
    """Seed, build the arguments (given the rank's ``dmlbench`` object), run the body, report; then put
    the guarded state back and report on the default group (see ``guard`` and ``groups``).

    ``clean_state`` is the state to restore; by default the state just before the body. A rank that runs
    nothing but cases passes the one snapshot it took at start: after each restore the state equals it.
    ``warning_filters`` (a process of its own only): the body runs under them and the outcome carries the
    warnings they show (``rank_warnings``).
    """
    adopt_group.install()  # no-op once installed; before the snapshot, so the guard keeps it
    state = clean_state if clean_state is not None else snapshot()
    groups = GroupWatch.start()
    with adopt_group.adopting(dist), _warnings_of(warning_filters) as caught:  # init/destroy adopt the world's group
        outcome = _run_body(case_id, dist, func, arguments, seed=seed, measure_memory=measure_memory, block=block)
    outcome = replace(outcome, warnings=tuple(caught), **after_case(state, groups))
    # hand the case's freed heap back now, not at the next case's start: a world waits idle while others run
    # (the paired gate keeps three: the session's and two block servers'), and held 1-2 GB a rank after ResNet-50
    release_freed_memory()
    return outcome


def _run_body(
    case_id: int,
    dist: DistInfo,
    func: Callable[..., Any],
    arguments: Callable[[Any], dict[str, Any]],
    *,
    seed: int,
    measure_memory: bool,
    block: BlockBudget | None,
) -> RankOutcome:
    from pytest_dmlbench.measure.bench import RankBench

    start = time.perf_counter()
    bench = RankBench(dist, block)
    profile: dict[str, Any] | None = None
    try:
        kwargs = arguments(bench)
        seed_everything(seed + dist.rank)
        bench.begin_case(measure_memory=measure_memory)
        if block is not None and block.profile:
            with profiled() as slot:
                run_case_body(func, kwargs)
            profile = slot.profile.to_dict() if slot.profile is not None else None
        else:  # a @given case runs in lockstep with the other ranks; in a smoke run one example
            run_case_body(func, kwargs, max_examples=1 if is_smoke(block) else None)
        bench.end_case()
    except BaseException as exc:
        status = classify(exc)
        return RankOutcome(
            case_id,
            dist.rank,
            status,
            message=str(getattr(exc, "msg", None) or exc),
            traceback=format_exception(exc) if status == "failed" else "",
            duration_s=time.perf_counter() - start,
            property_verdict=property_verdict(exc),
        )
    return RankOutcome(
        case_id,
        dist.rank,
        "passed",
        duration_s=time.perf_counter() - start,
        metrics=dict(bench.metrics),
        peak_memory=bench.peak_memory,
        notes=tuple(bench.notes),
        profile=profile,
    )


@contextmanager
def _warnings_of(filters: tuple[Filter, ...] | None) -> Iterator[list[RankWarning]]:
    if filters is None:
        yield []
        return
    with recorded(filters) as caught:
        yield caught


def after_case(state: StateSnapshot, groups: GroupWatch) -> dict[str, Any]:
    """Restore the state, destroy the case's sub-groups; the outcome fields that say how the world is."""
    reasons = []
    try:
        state.restore()
    except Unrestorable as exc:
        reasons.append(f"state the case changed cannot be restored ({exc})")
    report = groups.finish()
    if report.rebuild:
        reasons.append(report.rebuild)
    return {"collectives": report.collectives, "rebuild": "; ".join(reasons), "group_touched": report.touched}
