"""Hypothesis on every rank of a world, in lockstep (rank side; imports no pytest).

Each rank runs Hypothesis's own engine on the case. The ranks stay in step because

- they draw from one seed per run, chosen by rank 0 and sent to the others over the side channel (unless
  the case fixes the seed itself: ``@seed``, ``derandomize=True`` or ``--hypothesis-seed``);
- rank 0 alone owns the example database and shares what it reads (:mod:`.database`);
- after every example the ranks exchange their outcome over the side channel (never the user's process
  group) and every rank takes the combined verdict: a failure on any rank fails the example on every
  rank, raised as the same exception type from the same line, so Hypothesis sees one interesting origin
  everywhere and shrinks along the same path to the same minimal example;
- behaviour that would differ between ranks is switched off on the ranks: the per-example ``deadline`` (the
  case's timeout bounds the run), the ``too_slow`` health check (both timing-based) and the ``explain``
  phase (per-process line tracing, which would only point at this module's agreement).

A rank that leaves the run early (an error outside the examples) says so on its next exchange; the others
then stop with :class:`LockstepAborted` instead of waiting for it.
"""

from __future__ import annotations

import functools
import random
import re
import sys
import traceback
import unittest
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.properties.channel import Channel, ChannelBroken, current_channel

PASS, FAIL, REJECT, OVERRUN, SKIP = b"P", b"F", b"R", b"O", b"S"
START, END, FETCH = b"Z", b"E", b"D"
_PLUGIN_FIXTURES = ("dist", "dmlbench")
_STEP = {PASS: "an example", FAIL: "an example", REJECT: "an example", OVERRUN: "an example", SKIP: "an example",
         START: "the start of the run", FETCH: "a database read"}


class LockstepAborted(BaseException):
    """The ranks cannot continue in step (a rank left, or they reached different points of the run).

    A BaseException so that Hypothesis stops instead of trying to shrink it.
    """


class ExampleFailed(Exception):
    """The rank-agreed failure of one example, raised on every rank from the same line."""

    def __init__(self, failed_ranks: list[int], world_size: int, own_error: BaseException | None,
                 example: dict[str, Any]) -> None:
        self.failed_ranks = failed_ranks
        self.world_size = world_size
        self.example = example
        self.own_traceback = _format_own(own_error) if own_error is not None else ""
        self.dmlbench_property: dict[str, Any] | None = None  # the agreed verdict, set once the run has finished
        ranks = ", ".join(map(str, failed_ranks))
        if own_error is not None:
            detail = f"this rank's error: {type(own_error).__name__}: {own_error}"
        else:
            detail = "this rank passed this example and fails it by agreement"
        super().__init__(f"property failed on rank(s) {ranks} of {world_size}; {detail}")


def _format_own(error: BaseException) -> str:
    """The rank's own error, from the case body down (this module's frames left out)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def _status(error: BaseException | None) -> bytes:
    if error is None:
        return PASS
    from hypothesis.errors import StopTest, UnsatisfiedAssumption

    if isinstance(error, UnsatisfiedAssumption):
        return REJECT
    if isinstance(error, StopTest):
        return OVERRUN
    names = {cls.__name__ for cls in type(error).__mro__}
    if "SkipTest" in names or {"OutcomeException", "Skipped"} <= names:
        return SKIP
    return FAIL


def _skip_message(error: BaseException) -> bytes:
    return str(getattr(error, "msg", None) or error).encode()


def _skip_exception(message: str) -> BaseException:
    """The skip another rank took, raised here too: pytest's own when loaded (found by name, not imported)."""
    outcomes = sys.modules.get("_pytest.outcomes")
    if outcomes is not None:
        skipped: BaseException = outcomes.Skipped(msg=message)
        return skipped
    return unittest.SkipTest(message)


@dataclass
class LockstepRun:
    """One property run on this rank: its side channel, example counter and what it agreed."""

    channel: Channel
    examples: int = 0
    ended: bool = False
    seed_note: str = ""
    output: list[str] = field(default_factory=list)

    def agree(self, payload: bytes, what: str) -> list[bytes]:
        """Exchange ``payload``; every rank gets the same list and takes the same decision from it."""
        vector = self.channel.exchange(payload)
        kinds = [entry[:1] for entry in vector]
        if END in kinds:
            self.ended = True
            if payload[:1] != END:
                left = ", ".join(str(r) for r, kind in enumerate(kinds) if kind == END)
                raise LockstepAborted(
                    f"rank(s) {left} ended the property run while this rank was at {what}; "
                    "their own outcome says why (an error outside the examples, or a rank-dependent run)")
            return vector
        steps = {_STEP.get(kind, repr(kind)) for kind in kinds}
        if len(steps) > 1:
            self.ended = True
            where = "; ".join(f"rank {r} at {_STEP.get(k, repr(k))}" for r, k in enumerate(kinds))
            raise LockstepAborted(f"the ranks' property runs are out of step ({where}); the case must draw "
                                  "and decide the same way on every rank")
        return vector

    def agree_seed(self, wrapped: Any) -> int | None:
        """Rank 0's fresh seed for this run, or None when the case fixes its own."""
        from hypothesis import core

        settings = wrapped._hypothesis_internal_use_settings
        user_seed = getattr(wrapped, "_hypothesis_internal_use_seed", None)
        if user_seed is not None:
            self.seed_note = f"seeded by the case's @seed({user_seed})"
        elif settings.derandomize:
            self.seed_note = "derandomized (settings(derandomize=True))"
        elif core.global_force_seed is not None:
            self.seed_note = f"seeded by --hypothesis-seed={core.global_force_seed}"
        fixed = bool(self.seed_note)
        proposal = b"" if fixed or self.channel.rank != 0 else str(random.SystemRandom().getrandbits(64)).encode()
        vector = self.agree(START + proposal, _STEP[START])
        if fixed:
            return None
        seed = int(vector[0][1:])
        self.seed_note = (f"this run's examples came from seed {seed} (chosen by rank 0); reproduce them with "
                          f"@seed({seed}) on the case")
        return seed

    def example(self, inner: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one example here, agree on its outcome with every rank, act on the agreed verdict."""
        self.examples += 1
        own: BaseException | None = None
        result = None
        try:
            result = inner(*args, **kwargs)
        except BaseException as exc:  # judged below, after the ranks agree; re-raised or reported as failed
            own = exc
        status = _status(own)
        vector = self.agree(status + (_skip_message(own) if status == SKIP and own else b""),
                            f"example {self.examples}")
        kinds = [entry[:1] for entry in vector]
        failed = [rank for rank, kind in enumerate(kinds) if kind == FAIL]
        if failed:
            agreed = ExampleFailed(failed, self.channel.world_size, own if status == FAIL else None,
                                   {k: v for k, v in kwargs.items() if k not in _PLUGIN_FIXTURES})
            own = None
            raise agreed  # one line for every rank: Hypothesis sees the same origin everywhere
        if SKIP in kinds:
            if own is not None and status == SKIP:
                raise own
            skipped = [rank for rank, kind in enumerate(kinds) if kind == SKIP]
            raise _skip_exception(f"rank {skipped[0]}: {vector[skipped[0]][1:].decode(errors='replace')}")
        if OVERRUN in kinds and status != OVERRUN:
            self.ended = True
            raise LockstepAborted(
                f"at example {self.examples} some ranks ran out of drawn data and others did not: the case draws "
                "differently on different ranks (a data.draw that depends on the rank?)")
        if REJECT in kinds and status != REJECT:
            from hypothesis.errors import UnsatisfiedAssumption

            raise UnsatisfiedAssumption("another rank rejected this example")
        if own is not None:
            raise own
        return result

    def finish(self) -> list[int]:
        """Tell the others this rank's run is over (a closing exchange; stragglers abort).

        Returns the ranks that were still running examples: the runs diverged."""
        if self.ended:
            return []
        vector = self.agree(END, "the end of the run")
        return [rank for rank, entry in enumerate(vector) if entry[:1] != END]


def _rank_settings(original: Any, run: LockstepRun, max_examples: int | None = None) -> Any:
    from hypothesis import HealthCheck, Phase, settings

    from pytest_dmlbench.properties.database import RankZeroDatabase

    database = original.database
    return settings(
        parent=original,
        max_examples=original.max_examples if max_examples is None else min(max_examples, original.max_examples),
        deadline=None,
        phases=[phase for phase in original.phases if phase != Phase.explain],
        database=RankZeroDatabase(database, run.channel, run.agree) if database is not None else None,
        suppress_health_check=[*original.suppress_health_check, HealthCheck.too_slow],
    )


def run_in_lockstep(wrapped: Any, kwargs: dict[str, Any], channel: Channel | None = None,
                    max_examples: int | None = None) -> Any:
    """Call the ``@given`` test ``wrapped`` with its fixture ``kwargs`` in lockstep with the other ranks
    (``max_examples``: at most that many examples; None keeps the test's own setting).

    Every rank must call it for the same test. A falsified property raises :class:`ExampleFailed` (on every
    rank) carrying ``dmlbench_property``: the minimal example, the ranks that failed, this rank's error.
    """
    from hypothesis.reporting import with_reporter

    run = LockstepRun(channel or current_channel())
    inner = wrapped.hypothesis.inner_test
    saved = (wrapped._hypothesis_internal_use_settings, getattr(wrapped, "_hypothesis_internal_use_seed", None))
    try:
        seed = run.agree_seed(wrapped)
        wrapped.hypothesis.inner_test = functools.wraps(inner)(lambda *a, **kw: run.example(inner, a, kw))
        wrapped._hypothesis_internal_use_settings = _rank_settings(saved[0], run, max_examples)
        if seed is not None:
            wrapped._hypothesis_internal_use_seed = seed
        with with_reporter(lambda value: run.output.append(str(value))):
            try:
                result = wrapped(**kwargs)
            except ExampleFailed as exc:
                exc.dmlbench_property = _payload(exc, run)
                run.finish()
                raise
            except ChannelBroken:
                run.ended = True  # nobody to say goodbye to
                raise
            except BaseException:
                run.finish()
                raise
            stragglers = run.finish()
            if stragglers:
                raise LockstepAborted(
                    f"this rank's property run ended after {run.examples} example(s) while rank(s) "
                    f"{', '.join(map(str, stragglers))} were still running examples: the ranks' runs diverged "
                    "(draws, assumptions or outcomes that depend on the rank)")
    finally:
        wrapped.hypothesis.inner_test = inner
        wrapped._hypothesis_internal_use_settings, wrapped._hypothesis_internal_use_seed = saved
    return result


_RANK_FIXTURE_LINE = re.compile(rf"^\s+(?:{'|'.join(_PLUGIN_FIXTURES)})=.*\n", re.MULTILINE)


def _payload(exc: ExampleFailed, run: LockstepRun) -> dict[str, Any]:
    # the plugin's fixtures differ by rank and are not part of the example: leave their lines out
    notes = [_RANK_FIXTURE_LINE.sub("", str(note)) for note in getattr(exc, "__notes__", [])]
    return {
        "failed_ranks": exc.failed_ranks,
        "world_size": exc.world_size,
        "example": "\n".join(notes),
        "seed": run.seed_note,
        "own_traceback": exc.own_traceback,
        "examples_run": run.examples,
        "output": "\n".join(run.output),
    }


@dataclass(frozen=True)
class Counterexample:
    """The rank-agreed minimal counterexample of a refuted property (the same on every rank)."""

    example: dict[str, Any]
    failed_ranks: list[int]
    text: str
    own_error: str


def refute(prop: Any, /, **fixtures: Any) -> Counterexample:
    """Run the ``@given`` function ``prop`` in lockstep on every rank (call it on every rank) and return
    its agreed minimal counterexample; AssertionError when it held for every example tried.

    For negative controls inside a case: a property that must be falsified, and shrunk.
    """
    try:
        run_in_lockstep(prop, fixtures)
    except ExampleFailed as exc:
        payload = exc.dmlbench_property
        assert payload is not None, "run_in_lockstep raises ExampleFailed with its agreed verdict set"
        return Counterexample(exc.example, exc.failed_ranks, payload["example"], exc.own_traceback)
    raise AssertionError(f"{getattr(prop, '__name__', prop)!r} held for every example tried; it was expected to "
                         "be refuted (a negative control that cannot fail proves nothing)")
