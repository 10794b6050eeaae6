"""The run's validated configuration: every option parsed once from command line and ini file.

The one home of each option's default and validation rule (the command-line tool reuses them). Beside it,
what serves the options alone: :mod:`.output_paths` (the paths a run writes, checked before the first case) and
:mod:`.option_typos` (a misspelt option named with the one it was meant to be).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_dmlbench.config.case_thresholds import NO_CASE_THRESHOLDS, CaseThresholds, load_case_thresholds
from pytest_dmlbench.config.percentages import CPU_OFF as CPU_OFF
from pytest_dmlbench.config.percentages import CpuThreshold as CpuThreshold
from pytest_dmlbench.config.percentages import parse_cpu_threshold as parse_cpu_threshold
from pytest_dmlbench.config.percentages import parse_threshold as parse_threshold  # the options use it too
from pytest_dmlbench.errors import ConfigError

if TYPE_CHECKING:
    import pytest

BACKENDS = ("auto", "gloo", "nccl")
ISOLATIONS = ("persistent", "fresh")
LAUNCHERS = ("fork", "ray", "simulated")
CANARY_MODES = ("on", "off", "during")
FUTILITY_MODES = ("on", "off")
STRICT_MODES = ("on", "off")
InconclusiveScope = Literal["none", "untestable", "all"]
"""Which inconclusive verdicts fail an item: none; the untestable ones, no test could run
(``--dmlbench-fail-on-untestable``); or all, the unsettled ones too, a test ran and could not settle the
threshold (``--dmlbench-fail-on-inconclusive``)."""
# the paired gate's canary adjustment (gates/paired/canary_adjustment.py); measured in docs/evidence/run-logs.md
DEFAULT_CANARY = "off"
# the paired gate's futility stop (gates/paired/statistics.py could_clear); measured in docs/evidence/run-logs.md
DEFAULT_FUTILITY = "off"
DEFAULT_STRICT = "off"  # simulated ranks' strict mode; why off: docs/how-to/strict-mode.md (studies/strict_cost.py)
DEFAULT_WORLD_SIZE = 2
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_THRESHOLD_PCT = 10.0
# CPU time per step is recorded beside wall time and judged at a threshold of its own: one given with
# --dmlbench-cpu-threshold (ini dmlbench_cpu_threshold), the marker's cpu_threshold= or the per-case file judges
# every step; without one, this default judges only steps that compute (gates/computing_share.py), set from CPU
# time's measured per-pair noise on the shipped cases (docs/explanation/statistics.md).
DEFAULT_CPU_THRESHOLD_PCT: float | None = 10.0
DEFAULT_PAIR_BUDGET_S = 60.0
DEFAULT_RUN_ALPHA = 0.01  # the paired gate's chance of a red run on unchanged code (gates/run_level.py)
DEFAULT_BLOCK_SECONDS = 0.2  # paired gate: measured time one block aims at (short: a pair's blocks close in time)
DEFAULT_BLOCK_WARMUP = 2  # paired gate: untimed rounds before each block's timed ones
DEFAULT_BLOCK_MIN_ROUNDS = 5  # paired gate: timed rounds a block has at least, however long a step takes
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"  # glibc's: a fixed threshold, no dynamic adjustment
TRIM_THRESHOLD_ENV = "MALLOC_TRIM_THRESHOLD_"  # set to twice the mmap threshold, as glibc's own adjustment does
DEFAULT_MMAP_THRESHOLD = 0  # paired gate: the block servers' fixed glibc mmap threshold in bytes (0: glibc's own)
DEFAULT_REDRAW_WORLDS = 0  # paired gate: pairs between fresh worlds for a case's blocks (0: a world is kept)
SYSTEM_ALLOCATOR = "system"  # the C library's own allocator in the block servers' ranks


@dataclass(frozen=True)
class NamedAllocator:
    """An allocator the block servers' ranks can preload by name: the library names it is looked up by, in
    order, and where to get it when none is installed."""

    libraries: tuple[str, ...]
    package: str


NAMED_ALLOCATORS = {
    "tcmalloc": NamedAllocator(("tcmalloc_minimal", "tcmalloc"),
                               "libtcmalloc-minimal4 on Debian and Ubuntu, gperftools elsewhere"),
    "jemalloc": NamedAllocator(("jemalloc",), "libjemalloc2 on Debian and Ubuntu, jemalloc elsewhere"),
}
RANK_ALLOCATORS = (SYSTEM_ALLOCATOR, *NAMED_ALLOCATORS)  # by name; a shared library's path is taken too
DEFAULT_RANK_ALLOCATOR = SYSTEM_ALLOCATOR  # paired gate: the block servers' allocator (gates/paired/allocator.py)


def parse_world_size(value: Any, source: str = "--world-size") -> int:
    """An integer >= 1."""
    return parse_count(value, source)


def parse_count(value: Any, source: str, minimum: int = 1, example: int = 4) -> int:
    """An integer >= ``minimum`` (a world size, a number of saved runs, warm-up rounds); ``source`` names the
    option in errors."""
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        raise ConfigError(
            f"{source}: {value!r} is not a whole number; give an integer >= {minimum}, e.g. {source} {example}"
        ) from None
    if number < minimum:
        raise ConfigError(f"{source}: {number} is too small; give an integer >= {minimum}, e.g. {source} {example}")
    return number


def _choice(value: Any, choices: tuple[str, ...], what: str, source: str) -> str:
    """``value`` (case and surrounding spaces ignored) when it is one of ``choices``."""
    text = str(value).strip().lower()
    if text not in choices:
        raise ConfigError(f"{source}: {value!r} is not {what}; choose one of {', '.join(choices)}")
    return text


def parse_warmup_rounds(value: Any, source: str = "--dmlbench-block-warmup") -> int:
    """A whole number of rounds >= 0."""
    return parse_count(value, source, minimum=0, example=2)


def parse_block_min_rounds(value: Any, source: str = "--dmlbench-block-min-rounds") -> int:
    """A whole number of rounds >= 1."""
    return parse_count(value, source, minimum=1, example=DEFAULT_BLOCK_MIN_ROUNDS)


def parse_redraw_worlds(value: Any, source: str = "--dmlbench-redraw-worlds") -> int:
    """A whole number of pairs >= 0 (0: the block servers keep their worlds)."""
    return parse_count(value, source, minimum=0, example=4)


def parse_mmap_threshold(value: Any, source: str = "--dmlbench-mmap-threshold") -> int:
    """A number of bytes >= 0 (0: glibc's own, dynamic threshold)."""
    return parse_count(value, source, minimum=0, example=131072)


def parse_rank_allocator(value: Any, source: str = "--dmlbench-rank-allocator") -> str:
    """An allocator's name (system, tcmalloc, jemalloc) or the path of a shared library (``.so`` in its name)."""
    text = str(value).strip()
    if text.lower() in RANK_ALLOCATORS:
        return text.lower()
    if "/" in text and ".so" in Path(text).name:
        return text
    raise ConfigError(f"{source}: {value!r} is not an allocator; give {', '.join(RANK_ALLOCATORS)} or the path of "
                      f"a shared library, e.g. {source} tcmalloc or {source} /usr/lib/libtcmalloc_minimal.so.4")


def parse_backend(value: Any, source: str = "--dmlbench-backend") -> str:
    """One of auto, gloo, nccl."""
    return _choice(value, BACKENDS, "a backend", source)


def parse_launcher(value: Any, source: str = "--dmlbench-launcher") -> str:
    """fork (rank processes forked from the zygote), ray (rank processes are Ray actors) or simulated (ranks
    are threads of the pytest process, taking turns)."""
    return _choice(value, LAUNCHERS, "a launcher", source)


def parse_positive_seconds(value: Any, source: str = "--dmlbench-timeout") -> float:
    """A finite number of seconds > 0."""
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"{source}: {value!r} is not a number of seconds; give a value > 0, e.g. {source} 60"
        ) from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{source}: {value!r} must be a finite number of seconds > 0, e.g. {source} 60")
    return number


def parse_run_alpha(value: Any, source: str = "--dmlbench-run-alpha") -> float:
    """A probability in (0, 0.5), given as a number (0.01) or a percentage string (``"1%"``)."""
    text = str(value).strip()
    try:
        number = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not 0.0 < number < 0.5:
        raise ConfigError(f"{source}: {value!r} is not a probability between 0 and 0.5; give e.g. {source} 0.01 "
                          "(a 1 % chance that a run with nothing changed turns red)")
    return number


def parse_canary(value: Any, source: str = "--dmlbench-canary") -> str:
    """on (adjust block pairs for the machine's phase, read by the canary beside each block), during (read
    during each block, and adjust) or off (read beside each block, recorded only)."""
    return _choice(value, CANARY_MODES, "a canary mode", source)


def parse_futility(value: Any, source: str = "--dmlbench-futility") -> bool:
    """on (a first stage ends once no figure reading within the threshold could settle by the cap) or off."""
    return _choice(value, FUTILITY_MODES, "a futility mode", source) == "on"


def parse_strict(value: Any, source: str = "--dmlbench-strict") -> bool:
    """on (simulated ranks complete async work at wait() and sends when matched, as NCCL) or off."""
    return _choice(value, STRICT_MODES, "a strict mode", source) == "on"


def parse_isolation(value: Any, source: str = "--dmlbench-isolation") -> str:
    """persistent (a kept world with the per-case state guard) or fresh (a new world for every case)."""
    return _choice(value, ISOLATIONS, "an isolation", source)


@dataclass(frozen=True)
class DmlbenchConfig:
    """Every option of the plugin, validated."""

    enabled: bool
    world_size: int
    backend: str
    timeout_s: float
    threshold_pct: float
    save: bool
    compare: bool
    baseline_dir: Path
    json_path: Path | None
    fail_on_improvement: bool
    plots_dir: Path | None = None
    isolation: str = "persistent"
    against: str | None = None  # --dmlbench-against REF: the paired gate (stored baselines not compared)
    launcher: str = "fork"  # "ray": Ray actors (world/ray/engine.py); "simulated": threads (world/simulated/)
    strict: bool = DEFAULT_STRICT == "on"  # simulated ranks: async work pending until wait(), sends until matched
    ray_spread: bool = False  # Ray launcher: spread a world's ranks across nodes
    fail_on_inconclusive: InconclusiveScope = "none"  # which inconclusive verdicts fail their item
    pair_budget_s: float = DEFAULT_PAIR_BUDGET_S  # paired gate: seconds of block pairs per case
    run_alpha: float = DEFAULT_RUN_ALPHA  # paired gate: the run's chance of a red for nothing (gates/run_level.py)
    canary_adjust: bool = DEFAULT_CANARY != "off"  # paired gate: adjust pairs for the canary's machine phase
    canary_during: bool = DEFAULT_CANARY == "during"  # paired gate: read the canary during blocks, not beside
    futility: bool = DEFAULT_FUTILITY == "on"  # paired gate: end first stages that could not settle by the cap
    pin_cores: bool = False  # forked ranks pinned to one core each, rank r of every world on the same core
    block_seconds: float = DEFAULT_BLOCK_SECONDS  # paired gate: measured time one block aims at
    block_warmup: int = DEFAULT_BLOCK_WARMUP  # paired gate: untimed rounds before each block's timed ones
    block_min_rounds: int = DEFAULT_BLOCK_MIN_ROUNDS  # paired gate: timed rounds a block has at least
    redraw_worlds: int = DEFAULT_REDRAW_WORLDS  # paired gate: both sides start fresh worlds every this many pairs
    mmap_threshold: int = DEFAULT_MMAP_THRESHOLD  # paired gate: the block servers' fixed mmap threshold (0: dynamic)
    rank_allocator: str = DEFAULT_RANK_ALLOCATOR  # paired gate: the allocator the block servers' ranks preload
    smoke: bool = False  # every measurement one round, nothing saved or judged: the cases run, nothing is measured
    cpu_threshold_pct: float | None = DEFAULT_CPU_THRESHOLD_PCT  # CPU time per step's threshold (None: not judged)
    cpu_threshold_given: bool = False  # the run's CPU threshold was given: it judges every step, not only computing
    case_thresholds: CaseThresholds = NO_CASE_THRESHOLDS  # --dmlbench-case-thresholds: listed cases' own thresholds


@dataclass(frozen=True)
class CaseSettings:
    """The marker's settings for one case, merged over the run's defaults."""

    world_size: int
    backend: str
    timeout_s: float
    threshold_pct: float | None
    scaling: bool
    isolation: str = "persistent"
    cpu_threshold_pct: CpuThreshold | None = None  # the marker's cpu_threshold= ("off": not judged; None: the run's)
    communicates: bool = True  # False: the case means its ranks never to use the world's group
    pair_budget_s: float | None = None  # paired gate: this case's seconds of block pairs (None: the run's)
    launcher: str = "fork"  # the marker's launcher="simulated" runs this case on simulated ranks
    strict: bool = False  # simulated ranks in strict mode (the marker's strict=, else the run's --dmlbench-strict)


SCALING_ARG = "dmlbench_world_size"  # the parameter ``scaling=True`` adds (ids ws1, ws2, ...)
MARKER_KEYS = ("world_size", "backend", "timeout", "threshold", "cpu_threshold", "scaling", "isolation", "pair_budget",
               "launcher", "communicates", "strict")


def case_settings(marker_kwargs: dict[str, Any], defaults: DmlbenchConfig, where: str) -> CaseSettings:
    """Validate ``@pytest.mark.dmlbench(...)`` keyword arguments; ``where`` names the case in errors."""
    unknown = sorted(set(marker_kwargs) - set(MARKER_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown dmlbench marker argument(s) {', '.join(unknown)}; accepted: {', '.join(MARKER_KEYS)}"
        )
    ws = marker_kwargs.get("world_size")
    backend = marker_kwargs.get("backend")
    timeout = marker_kwargs.get("timeout")
    threshold = marker_kwargs.get("threshold")
    cpu_threshold = marker_kwargs.get("cpu_threshold")
    isolation = marker_kwargs.get("isolation")
    budget = marker_kwargs.get("pair_budget")
    launcher = marker_kwargs.get("launcher")
    return CaseSettings(
        world_size=defaults.world_size if ws is None else parse_world_size(ws, f"{where}: world_size="),
        backend=defaults.backend if backend is None else parse_backend(backend, f"{where}: backend="),
        timeout_s=defaults.timeout_s if timeout is None else parse_positive_seconds(timeout, f"{where}: timeout="),
        threshold_pct=None if threshold is None else parse_threshold(threshold, f"{where}: threshold="),
        scaling=bool(marker_kwargs.get("scaling", False)),
        isolation=defaults.isolation if isolation is None else parse_isolation(isolation, f"{where}: isolation="),
        pair_budget_s=None if budget is None else parse_positive_seconds(budget, f"{where}: pair_budget="),
        launcher=defaults.launcher if launcher is None else parse_launcher(launcher, f"{where}: launcher="),
        cpu_threshold_pct=(None if cpu_threshold is None
                           else parse_cpu_threshold(cpu_threshold, f"{where}: cpu_threshold=")),
        communicates=_flag(marker_kwargs.get("communicates", True), f"{where}: communicates="),
        strict=defaults.strict if marker_kwargs.get("strict") is None
        else _flag(marker_kwargs["strict"], f"{where}: strict="),
    )


def _run_cpu_threshold(value: Any) -> float | None:
    """The run's CPU-time threshold in percent; None where ``off`` leaves CPU time unjudged."""
    parsed = parse_cpu_threshold(value, "--dmlbench-cpu-threshold")
    return None if parsed == CPU_OFF else float(parsed)


def _flag(value: Any, source: str) -> bool:
    """A marker's True or False, refused in any other form (a string "False" would read as true)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{source} {value!r} must be True or False")
    return value



IN_PROCESS_MARKER_KEYS = ("threshold", "pair_budget")


def in_process_gate_settings(marker_kwargs: dict[str, Any], where: str) -> tuple[float | None, float | None]:
    """Validate ``@pytest.mark.dmlbench_gate(threshold=, pair_budget=)`` of a test that records in the pytest
    process (``dmlbench_metrics``): its threshold in percent and its seconds of block pairs (None: the run's)."""
    unknown = sorted(set(marker_kwargs) - set(IN_PROCESS_MARKER_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown dmlbench_gate marker argument(s) {', '.join(unknown)}; "
                          f"accepted: {', '.join(IN_PROCESS_MARKER_KEYS)}")
    threshold = marker_kwargs.get("threshold")
    budget = marker_kwargs.get("pair_budget")
    return (None if threshold is None else parse_threshold(threshold, f"{where}: threshold="),
            None if budget is None else parse_positive_seconds(budget, f"{where}: pair_budget="))


def scaling_world_sizes(max_world_size: int) -> list[int]:
    """1, 2, 4, ... up to ``max_world_size`` (which is included even when not a power of two)."""
    sizes = []
    n = 1
    while n < max_world_size:
        sizes.append(n)
        n *= 2
    sizes.append(max_world_size)
    return sizes


def _value(config: pytest.Config, dest: str) -> Any:
    """Command line beats ini; None when neither sets it."""
    value = config.getoption(dest, default=None)
    if value is None:
        value = config.getini(dest)
    return None if value in (None, "", []) else value


def build_config(config: pytest.Config) -> DmlbenchConfig:
    """Read and validate every option once (a ConfigError names the bad value and the accepted form)."""
    ws = _value(config, "dmlbench_world_size")
    backend = _value(config, "dmlbench_backend")
    timeout = _value(config, "dmlbench_timeout")
    threshold = _value(config, "dmlbench_threshold")
    cpu_threshold = _value(config, "dmlbench_cpu_threshold")
    baseline_dir = _value(config, "dmlbench_baseline_dir")
    json_path = _value(config, "dmlbench_json")
    plots_dir = _value(config, "dmlbench_plots")
    isolation = _value(config, "dmlbench_isolation")
    against = _value(config, "dmlbench_against")
    launcher = _value(config, "dmlbench_launcher")
    budget = _value(config, "dmlbench_pair_budget")
    run_alpha = _value(config, "dmlbench_run_alpha")
    canary_mode = parse_canary(DEFAULT_CANARY if (canary := _value(config, "dmlbench_canary")) is None else canary)
    futility = _value(config, "dmlbench_futility")
    strict = _value(config, "dmlbench_strict")
    block_seconds = _value(config, "dmlbench_block_seconds")
    block_warmup = _value(config, "dmlbench_block_warmup")
    block_min_rounds = _value(config, "dmlbench_block_min_rounds")
    redraw_worlds = _value(config, "dmlbench_redraw_worlds")
    mmap_threshold = _value(config, "dmlbench_mmap_threshold")
    rank_allocator = _value(config, "dmlbench_rank_allocator")
    smoke = bool(_value(config, "dmlbench_smoke"))
    scope: InconclusiveScope = ("all" if _value(config, "dmlbench_fail_on_inconclusive")
                                else "untestable" if _value(config, "dmlbench_fail_on_untestable") else "none")
    if smoke and (against is not None or _value(config, "dmlbench_save")):
        raise ConfigError("--dmlbench-smoke runs every measurement once, so there is nothing to "
                          f"{'compare with REF' if against is not None else 'save'}: drop --dmlbench-smoke, or "
                          f"{'--dmlbench-against' if against is not None else '--dmlbench-save'}")
    pin_cores = bool(_value(config, "dmlbench_pin_cores"))
    launcher_name = "fork" if launcher is None else parse_launcher(launcher)
    if pin_cores and not hasattr(os, "sched_setaffinity"):
        raise ConfigError("--dmlbench-pin-cores needs os.sched_setaffinity, which this platform lacks (Linux has "
                          "it): drop --dmlbench-pin-cores")
    if pin_cores and launcher_name != "fork":
        raise ConfigError(f"--dmlbench-pin-cores pins forked rank processes; the {launcher_name} launcher places "
                          "its ranks itself: drop --dmlbench-pin-cores, or use the fork launcher")
    stored = (against is None and not _value(config, "dmlbench_no_compare")) or _value(config, "dmlbench_save")
    if pin_cores and stored:
        raise ConfigError("--dmlbench-pin-cores changes the figures and stored baselines do not record it: use it "
                          "with --dmlbench-against (both sides pinned alike), or with --dmlbench-no-compare and "
                          "without --dmlbench-save")
    return DmlbenchConfig(
        enabled=bool(_value(config, "dmlbench")),
        world_size=DEFAULT_WORLD_SIZE if ws is None else parse_world_size(ws),
        backend="auto" if backend is None else parse_backend(backend),
        timeout_s=DEFAULT_TIMEOUT_S if timeout is None else parse_positive_seconds(timeout),
        threshold_pct=DEFAULT_THRESHOLD_PCT if threshold is None else parse_threshold(threshold),
        cpu_threshold_pct=DEFAULT_CPU_THRESHOLD_PCT if cpu_threshold is None else _run_cpu_threshold(cpu_threshold),
        cpu_threshold_given=cpu_threshold is not None,
        save=bool(_value(config, "dmlbench_save")),
        compare=not bool(_value(config, "dmlbench_no_compare")) and against is None and not smoke,
        baseline_dir=Path(baseline_dir) if baseline_dir else Path(config.rootpath) / "baselines",
        json_path=Path(json_path) if json_path else None,
        fail_on_improvement=bool(_value(config, "dmlbench_fail_on_improvement")),
        plots_dir=Path(plots_dir) if plots_dir else None,
        against=None if against is None else str(against).strip(),
        isolation="persistent" if isolation is None else parse_isolation(isolation),
        launcher=launcher_name,
        strict=parse_strict(DEFAULT_STRICT if strict is None else strict),
        ray_spread=bool(_value(config, "dmlbench_ray_spread")),
        fail_on_inconclusive=scope,
        pair_budget_s=(DEFAULT_PAIR_BUDGET_S if budget is None
                       else parse_positive_seconds(budget, "--dmlbench-pair-budget")),
        run_alpha=DEFAULT_RUN_ALPHA if run_alpha is None else parse_run_alpha(run_alpha),
        canary_adjust=canary_mode != "off",
        canary_during=canary_mode == "during",
        futility=parse_futility(DEFAULT_FUTILITY if futility is None else futility),
        pin_cores=pin_cores,
        block_seconds=(DEFAULT_BLOCK_SECONDS if block_seconds is None
                       else parse_positive_seconds(block_seconds, "--dmlbench-block-seconds")),
        block_warmup=DEFAULT_BLOCK_WARMUP if block_warmup is None else parse_warmup_rounds(block_warmup),
        block_min_rounds=(DEFAULT_BLOCK_MIN_ROUNDS if block_min_rounds is None
                          else parse_block_min_rounds(block_min_rounds)),
        redraw_worlds=DEFAULT_REDRAW_WORLDS if redraw_worlds is None else parse_redraw_worlds(redraw_worlds),
        mmap_threshold=DEFAULT_MMAP_THRESHOLD if mmap_threshold is None else parse_mmap_threshold(mmap_threshold),
        rank_allocator=DEFAULT_RANK_ALLOCATOR if rank_allocator is None else parse_rank_allocator(rank_allocator),
        smoke=smoke,
        case_thresholds=_case_thresholds(config),
    )


def _case_thresholds(config: pytest.Config) -> CaseThresholds:
    """The per-case thresholds file's (``--dmlbench-case-thresholds``): a relative path given on the command line
    is read from the working directory, one given in the ini file from the rootdir."""
    given = config.getoption("dmlbench_case_thresholds", default=None)
    if given in (None, ""):
        given = config.getini("dmlbench_case_thresholds")
        if given in (None, "", []):
            return NO_CASE_THRESHOLDS
        path = Path(str(given))
        return load_case_thresholds(path if path.is_absolute() else Path(config.rootpath) / path)
    return load_case_thresholds(Path(str(given)))
