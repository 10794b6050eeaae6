"""Block pairs measured live: one block of the working tree's case (A's block server) and one of REF's (B's),
in an order drawn at random for each pair, with the canary read beside (or during) each block.

The messages to both servers are :mod:`.protocol`'s, unchanged; an answer's figures become a
:class:`~pytest_dmlbench.gates.paired.pairs.BlockPair` here, at the edge of the wire.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.client import RefProcess
from pytest_dmlbench.gates.paired.pairs import BlockPair, Readings
from pytest_dmlbench.gates.paired.plan import BlockPlan, case_key
from pytest_dmlbench.gates.paired.protocol import BlockAnswer
from pytest_dmlbench.measure.canary import CanaryDuring, bracket, read_canary


class BlockFailed(Exception):
    """A block did not pass on one side; the message says which and why."""


def readings(answer: BlockAnswer) -> Readings:
    """An answer's samples per figure."""
    return {name: tuple(figure.get("samples", [])) for name, figure in answer["metrics"].items()}


def redraw_interval(asked: int, servers: Sequence[RefProcess]) -> tuple[int, str | None]:
    """The pairs between fresh worlds (0: worlds kept), from ``asked`` and the servers' hellos; when a server
    cannot start fresh ones, 0 and a note naming it and its version."""
    unable = [server for server in servers if not server.offers("redraws_worlds")]
    if asked == 0 or not unable:
        return asked, None
    return 0, (f"worlds kept, not redrawn: {unable[0].launch.speaker} (pytest-dmlbench "
               f"{unable[0].plugin_version}) cannot start fresh ones for its blocks")


@dataclass
class BlockServers:
    """B's block server (``ref``) and A's (``own``), the cases each announced (case key -> its node id) and
    the rounds of warm-up each block runs first."""

    ref: RefProcess
    own: RefProcess
    repo_root: Path
    block_warmup: int
    ref_cases: dict[str, str] = field(default_factory=dict)
    own_cases: dict[str, str] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)

    def has(self, item: JudgedItem) -> bool:
        """Whether REF has ``item``'s case."""
        return case_key(item.nodeid, item.path, self.repo_root) in self.ref_cases

    def ref_answer(self, item: JudgedItem, plan: BlockPlan, profile: bool = False,
                   fresh_world: bool = False) -> BlockAnswer:
        """A block of REF's case, in B's block server."""
        ref_nodeid = self.ref_cases[case_key(item.nodeid, item.path, self.repo_root)]
        answer = self.ref.block(ref_nodeid, plan.rounds, self.block_warmup, plan.iterations, item.timeout_s + 60.0,
                                profile=profile, fresh_world=fresh_world)
        if answer["status"] != "passed":
            raise BlockFailed(f"{item.nodeid}: not compared with REF {self.ref.launch.label}: the case "
                              f"{answer['status']} there.\n{answer['message']}")
        return answer

    def own_answer(self, item: JudgedItem, plan: BlockPlan, profile: bool = False,
                   fresh_world: bool = False) -> BlockAnswer:
        """A block of the working tree's case, in A's block server (never in this session's worlds)."""
        # beside a REF whose experiments train in full in every block, A's do too, so both measure the same work
        whole = not self.ref.offers("budgeted_experiments")
        own_nodeid = self.own_cases.get(case_key(item.nodeid, item.path, self.repo_root))
        if own_nodeid is None:
            raise BlockFailed(f"{item.nodeid}: {self.own.launch.speaker} did not collect this case, so its "
                              f"blocks cannot run; its pytest output is in {self.own.named_log()}")
        answer = self.own.block(own_nodeid, plan.rounds, self.block_warmup, plan.iterations, item.timeout_s + 60.0,
                                whole_experiment=whole, profile=profile, fresh_world=fresh_world)
        if answer["status"] != "passed":
            raise BlockFailed(f"{item.nodeid}: a block of the working tree's case {answer['status']} after its "
                              f"ordinary run passed.\n{answer['message']}")
        return answer

    def warm_up(self, item: JudgedItem, plan: BlockPlan, fresh_world: bool) -> Mapping[str, str | None]:
        """B's warm-up block, then A's, both discarded: the unit of each figure REF's case records."""
        ref = self.ref_answer(item, plan.warm_up(), fresh_world=fresh_world)
        self.own_answer(item, plan.warm_up(), fresh_world=fresh_world)  # both sides ran the same work
        return {name: figure.get("unit") for name, figure in ref["metrics"].items()}

    def profiled(self, item: JudgedItem, plan: BlockPlan) -> tuple[BlockAnswer, BlockAnswer]:
        """One profiled block of each side, in a random order: A's answer and B's."""
        if self.rng.random() < 0.5:
            a = self.own_answer(item, plan, profile=True)
            return a, self.ref_answer(item, plan, profile=True)
        b = self.ref_answer(item, plan, profile=True)
        return self.own_answer(item, plan, profile=True), b


class LiveSource:
    """A case's block pairs from the two block servers; its clock is the monotonic one."""

    def __init__(self, servers: BlockServers, item: JudgedItem, plan: BlockPlan, canary_during: bool = False) -> None:
        self.servers, self.item, self.plan = servers, item, plan
        self.canary_during = canary_during  # read the canary during each block, not beside it

    def pair(self, fresh_world: bool, confirming: bool) -> BlockPair:
        servers, item, plan = self.servers, self.item, self.plan
        a_first = servers.rng.random() < 0.5
        own = _with_canary(lambda: servers.own_answer(item, plan, fresh_world=fresh_world), self.canary_during)
        ref = _with_canary(lambda: servers.ref_answer(item, plan, fresh_world=fresh_world), self.canary_during)
        if a_first:
            (a, canary_a), (b, canary_b) = own(), ref()
        else:
            (b, canary_b), (a, canary_a) = ref(), own()
        return BlockPair(readings(a), readings(b), a_first, canary_a, canary_b, fresh_world)

    def now(self) -> float:
        return time.monotonic()


def _with_canary(block: Callable[[], BlockAnswer], during: bool) -> Callable[[], tuple[BlockAnswer, float]]:
    """A block to run: its answer, and the canary read just before and just after it, or during it
    (``measure/canary.py``)."""
    def run() -> tuple[BlockAnswer, float]:
        if during:
            with CanaryDuring() as canary:
                answer = block()
            return answer, canary.reading()
        before = read_canary()
        answer = block()
        return answer, bracket(before, read_canary())
    return run
