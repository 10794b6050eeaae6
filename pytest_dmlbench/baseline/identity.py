"""A baseline's identity besides the machine: what else changes the figures, and how to re-save a case.

World size, backend, launcher (``fork``/``ray``) and isolation (``persistent``/``fresh``, the run's or the
case marker's own) each change what a case measures, so each combination has a folder of its own under the
machine's folder (``<root>/<machine-key>/ws2-gloo-fork-persistent/``), and the refresh command printed in a
verdict repeats them, so that following it re-saves the case with the options it was measured with.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dmlbench.config import ISOLATIONS, LAUNCHERS
from pytest_dmlbench.results import CaseResult

DEFAULT_LAUNCHER = "fork"
DEFAULT_ISOLATION = "persistent"
CASE_ISOLATION = "isolation"  # a case's ``extra`` key: its marker's isolation where that differs from the run's
DEFAULT_DIR_NAME = "baselines"  # --dmlbench-baseline-dir's default: baselines/ under the rootdir
OPTION_BACKENDS = ("gloo", "nccl")  # backends --dmlbench-backend accepts ("local" cases run in pytest)
_KEY = re.compile(r"ws(?P<world_size>[1-9][0-9]*)-(?P<backend>[a-z0-9_]+)-(?P<launcher>[a-z]+)-(?P<isolation>[a-z]+)")


@dataclass(frozen=True)
class BaselineIdentity:
    """What a baseline's figures depend on besides the machine (whose key covers the backend too)."""

    world_size: int
    backend: str
    launcher: str
    isolation: str

    def __post_init__(self) -> None:
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) or self.world_size < 1:
            raise ValueError(f"baseline identity: world size must be an integer >= 1, got {self.world_size!r}")
        if not re.fullmatch(r"[a-z0-9_]+", self.backend):
            raise ValueError(f"baseline identity: backend must be a lower-case name like gloo, got {self.backend!r}")
        if self.launcher not in LAUNCHERS:
            raise ValueError(
                f"baseline identity: launcher must be one of {', '.join(LAUNCHERS)}, got {self.launcher!r}"
            )
        if self.isolation not in ISOLATIONS:
            raise ValueError(
                f"baseline identity: isolation must be one of {', '.join(ISOLATIONS)}, got {self.isolation!r}"
            )

    @property
    def key(self) -> str:
        """The folder name, e.g. ``ws2-gloo-fork-persistent``."""
        return f"ws{self.world_size}-{self.backend}-{self.launcher}-{self.isolation}"

    @classmethod
    def from_key(cls, key: str) -> BaselineIdentity:
        """Parse a folder name made by :attr:`key`; ValueError naming the expected form otherwise."""
        match = _KEY.fullmatch(key)
        if match is None:
            raise ValueError(
                f"{key!r} is not a baseline identity folder name; expected ws<N>-<backend>-<launcher>-<isolation>, "
                "e.g. ws2-gloo-fork-persistent"
            )
        return cls(int(match["world_size"]), match["backend"], match["launcher"], match["isolation"])

    @classmethod
    def is_key(cls, name: str) -> bool:
        """Whether ``name`` is an identity folder name."""
        try:
            cls.from_key(name)
        except ValueError:
            return False
        return True

    @classmethod
    def of_case(cls, case: CaseResult, launcher: str, isolation: str) -> BaselineIdentity:
        """The identity a case is measured under in a run with this launcher and isolation (a case whose marker
        sets its own isolation records it in ``extra``, and that one counts)."""
        return cls(case.world_size, case.backend, launcher, str(case.extra.get(CASE_ISOLATION, isolation)))

    @classmethod
    def recorded(cls, case: CaseResult, run: Mapping[str, Any]) -> BaselineIdentity:
        """The identity a results or baseline file records for ``case`` (launcher and isolation from its run
        facts; their defaults where a file does not record them)."""
        launcher = str(run.get("launcher", DEFAULT_LAUNCHER))
        return cls.of_case(case, launcher, str(run.get("isolation", DEFAULT_ISOLATION)))

    def describe(self) -> str:
        """For messages within one machine folder (whose key already names the backend)."""
        return f"world size {self.world_size}, launcher {self.launcher}, isolation {self.isolation}"

    def run_facts(self) -> dict[str, Any]:
        """What a baseline file's ``run`` section records of the identity."""
        return {"launcher": self.launcher, "isolation": self.isolation, "identity": self.key}

    def options(self, baseline_dir: Path | None = None) -> list[str]:
        """The pytest options that measure a case under this identity (``baseline_dir``: None for the default)."""
        args = ["--dmlbench", "--world-size", str(self.world_size)]
        if self.backend in OPTION_BACKENDS:
            args += ["--dmlbench-backend", self.backend]
        if self.launcher != DEFAULT_LAUNCHER:
            args += ["--dmlbench-launcher", self.launcher]
        if self.isolation != DEFAULT_ISOLATION:
            args += ["--dmlbench-isolation", self.isolation]
        if baseline_dir is not None:
            args += ["--dmlbench-baseline-dir", str(baseline_dir)]
        return args


def explicit_dir(root: Path | None) -> Path | None:
    """``root`` when a command run from here must name it, None when it is the default ``./baselines`` (or
    None: not known)."""
    if root is None:
        return None
    try:
        default = (Path.cwd() / DEFAULT_DIR_NAME).resolve()
        return None if Path(root).resolve() == default else Path(root)
    except OSError:  # the working folder is gone: naming the folder is never wrong
        return Path(root)


def refresh_command(identity: BaselineIdentity, nodeid: str | None, root: Path | None) -> str:
    """``pytest --dmlbench --world-size N --dmlbench-backend B [...] '<nodeid>' --dmlbench-save`` (every case
    of the run when ``nodeid`` is None)."""
    selection = [] if nodeid is None else [nodeid]
    return shlex.join(["pytest", *identity.options(explicit_dir(root)), *selection, "--dmlbench-save"])


def refresh_template(identity: BaselineIdentity, root: Path | None) -> str:
    """:func:`refresh_command` as a ``str.format`` template with ``{nodeid}`` (the shell-quoted node id) in place,
    the form ``CompareSettings.refresh_command`` takes."""
    marker = "NODEID-PLACEHOLDER"
    command = refresh_command(identity, marker, root).replace("{", "{{").replace("}", "}}")
    return command.replace(marker, "{nodeid}")
