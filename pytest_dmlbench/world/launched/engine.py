"""Cases under an external launcher (``torchrun``, ``horovodrun``, multi-node): every rank is a pytest process.

Each rank joins the launcher's world with ``env://``, checks that all ranks collected the same cases,
runs each case body in-process and gathers every rank's outcome, so all ranks agree on each verdict;
only rank 0 reports. Limits: a rank stuck in a collective stalls the world until the process-group
timeout (``--dmlbench-timeout``), and a crashed rank ends the launcher's job; the plugin's own worlds
handle those cases better.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, MutableMapping, Sequence
from datetime import timedelta
from typing import Any

from pytest_dmlbench.config import parse_world_size
from pytest_dmlbench.errors import CaseNotRunnable, ConfigError, WorldError
from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.world.backend import BackendChoice, device_for, select_backend
from pytest_dmlbench.world.engine import CollectedCase, PreparedCase
from pytest_dmlbench.world.execute import case_seed, execute_case
from pytest_dmlbench.world.groups import install_p2p_accounting, uninstall_p2p_accounting
from pytest_dmlbench.world.launched.horovodrun import adopt_rank_variables, adopt_store_address, under_horovodrun
from pytest_dmlbench.world.messages import RankOutcome
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def launched_externally(environ: Mapping[str, str]) -> bool:
    """True when a launcher has set up this process as one rank of a world (torchrun, horovodrun or any
    launcher that sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``)."""
    return ("TORCHELASTIC_RUN_ID" in environ or all(name in environ for name in LAUNCHER_VARS)
            or under_horovodrun(environ))


def adopt_launcher_variables(environ: MutableMapping[str, str]) -> None:
    """Give a ``horovodrun`` rank the rank variables ``torch.distributed`` reads (others have them)."""
    if under_horovodrun(environ):
        adopt_rank_variables(environ)


def launcher_world_size(environ: Mapping[str, str], requested: object) -> int:
    """The world size cases default to under a launcher: the launcher's. An explicit ``--world-size`` that
    differs is a usage error (raised on every rank, before any rendezvous)."""
    size = int(environ["WORLD_SIZE"])
    if requested is None:
        return size
    asked = parse_world_size(requested)
    if asked != size:
        raise ConfigError(
            f"--world-size {asked} conflicts with the launcher's world of {size} rank(s) (WORLD_SIZE={size}); "
            f"drop --world-size (cases then run on the launcher's {size} rank(s)) or start {asked} rank(s)"
        )
    return size


class LaunchedEngine:
    """This process's rank in the launcher's world: runs each case body here, in-process."""

    def __init__(self, requested_backend: str, timeout_s: float) -> None:
        import torch
        import torch.distributed as td

        adopt_launcher_variables(os.environ)
        timeout = timedelta(seconds=timeout_s)
        # under horovodrun rank 0 opens the store on its host's address (env:// would listen everywhere)
        store = adopt_store_address(os.environ, timeout) if under_horovodrun(os.environ) else None
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        devices = torch.cuda.device_count() if requested_backend != "gloo" else 0
        choice = select_backend(requested_backend, int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size)), devices)
        self.backend = "gloo" if choice.skip_reason else choice.backend
        if self.backend == "nccl":
            torch.cuda.set_device(local_rank)
        if os.environ.get("MASTER_ADDR") in ("127.0.0.1", "localhost"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        if store is not None:
            td.init_process_group(self.backend, store=store, rank=self.rank, world_size=self.world_size,
                                  timeout=timeout)
        else:
            td.init_process_group(self.backend, init_method="env://", timeout=timeout)
        install_p2p_accounting()
        device = device_for(self.backend, local_rank)
        self.dist = DistInfo(self.rank, self.world_size, self.backend, device)
        self._cases = 0

    @property
    def reports(self) -> bool:
        """Only rank 0 reports; the verdicts are gathered from every rank."""
        return self.rank == 0

    def prepare(self, cases: Sequence[CollectedCase]) -> None:
        """Check that every rank collected the same cases (else their collectives would not match)."""
        import torch.distributed as td

        nodeids = [case.nodeid for case in cases]
        same_cases = hashlib.sha256("\n".join(sorted(nodeids)).encode()).hexdigest()
        same_order = hashlib.sha256("\n".join(nodeids).encode()).hexdigest()
        everyone: list[Any] = [None] * self.world_size
        td.all_gather_object(everyone, (same_cases, len(nodeids), same_order))
        if all(entry == everyone[0] for entry in everyone):
            return
        if all(entry[:2] == everyone[0][:2] for entry in everyone):
            raise CaseNotRunnable(
                "ranks collected the same cases in different orders, so their collectives would not match; a "
                "plugin reorders them differently on each rank (pytest-randomly: give every rank the same "
                "--randomly-seed N, or pass -p no:randomly)")
        lines = [f"rank {r}: {n} case(s), digest {d[:12]}" for r, (d, n, _) in enumerate(everyone)]
        raise CaseNotRunnable("ranks collected different cases, so their collectives would not match:\n  "
                              + "\n  ".join(lines)
                              + "\nrun the same pytest command line, in the same checkout, on every rank")

    def choose_backend(self, requested: str, world_size: int) -> BackendChoice:
        """The launcher's backend; a case pinning another world size is skipped."""
        if world_size != self.world_size:
            return BackendChoice(self.backend, f"needs {world_size} rank(s); the launcher started {self.world_size}")
        return BackendChoice(self.backend)

    def run(self, case: PreparedCase) -> CaseOutcome:
        """Run the body here and gather every rank's outcome."""
        import time

        import torch.distributed as td

        self._cases += 1
        begin = time.monotonic()
        kwargs = {name: case.funcargs[name] for name in case.case.argnames}

        def arguments(bench: Any) -> dict[str, Any]:
            return {name: (self.dist if name == "dist" else bench if name == "dmlbench" else value)
                    for name, value in kwargs.items()}

        outcome = execute_case(self._cases, self.dist, case.case.func, arguments, seed=case_seed(case.case.nodeid),
                               measure_memory=case.uses_bench)
        if not td.is_initialized():
            raise WorldError(
                f"{outcome.rebuild}: under a launcher the launcher's world cannot be rebuilt, so the run "
                "stops here. Leave the default process group in place."
            )
        outcomes: list[Any] = [None] * self.world_size
        td.all_gather_object(outcomes, outcome)
        reports = [RankReport(rank, outcome=o if isinstance(o, RankOutcome) else None)
                   for rank, o in enumerate(outcomes)]
        run = CaseOutcome(reports, time.monotonic() - begin)
        run.check_agreement()
        return run

    def close(self) -> None:
        """Leave together: a launcher ends the whole job when one rank exits early with a failure code,
        which would cut rank 0's report short."""
        import torch.distributed as td

        if td.is_initialized():
            td.barrier()
            td.destroy_process_group()
        uninstall_p2p_accounting()
