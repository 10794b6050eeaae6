"""pytest entry point: options, marker, fixtures, and hooks that hand dmlbench cases to the engine.

One engine per process runs the cases (forked worlds, Ray actors, or this process's rank under an external
launcher) and one gate judges them (stored baselines, or REF re-measured beside the working tree); both
are chosen once in ``pytest_configure``. Figures become a case result in ``items/case_results.py``; every item that
recorded figures, dmlbench cases and in-process figures alike, is judged at one point
(``pytest_runtest_call``), where the plugin assigns the gate's verdicts. Imports no torch at module level;
heavy work starts only when ``--dmlbench`` is given.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.baseline.commit import commit_fact
from pytest_dmlbench.baseline.identity import CASE_ISOLATION
from pytest_dmlbench.config import (
    DEFAULT_BLOCK_MIN_ROUNDS,
    DEFAULT_BLOCK_SECONDS,
    DEFAULT_BLOCK_WARMUP,
    DEFAULT_CANARY,
    DEFAULT_CPU_THRESHOLD_PCT,
    DEFAULT_FUTILITY,
    DEFAULT_MMAP_THRESHOLD,
    DEFAULT_PAIR_BUDGET_S,
    DEFAULT_RANK_ALLOCATOR,
    DEFAULT_REDRAW_WORLDS,
    DEFAULT_RUN_ALPHA,
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WORLD_SIZE,
    SCALING_ARG,
    DmlbenchConfig,
    build_config,
    case_settings,
    in_process_gate_settings,
    scaling_world_sizes,
)
from pytest_dmlbench.errors import CaseThresholdsWarning, ConfigError, WorldError, WorldRebuiltWarning
from pytest_dmlbench.gates.choose import choose_gate
from pytest_dmlbench.gates.wording import failing_verdicts, failure_text
from pytest_dmlbench.items.case import (
    IN_PROCESS_FIXTURE,
    callspec_params,
    collected_case,
    prepared_case,
    records_in_process,
)
from pytest_dmlbench.items.case_results import CaseResultBuilder, LocalMetrics
from pytest_dmlbench.items.readers import case_facts, case_record, judged_item
from pytest_dmlbench.items.smoke import SMOKE_MARKER_DOC, smoke_items
from pytest_dmlbench.items.stash_keys import (
    BACKEND_KEY,
    BUILDER_KEY,
    CONFIG_KEY,
    ENGINE_KEY,
    FACTS_KEY,
    GATE_KEY,
    LOCAL_METRICS_KEY,
    RESULT_KEY,
    SETTINGS_KEY,
    SIMULATED_ENGINE_KEY,
)
from pytest_dmlbench.measure.rounds import SMOKE_BUDGET
from pytest_dmlbench.reporting.interruption import InterruptionWatch
from pytest_dmlbench.reporting.not_judged import NotJudgedLedger, report_not_judged
from pytest_dmlbench.reporting.progress import register as register_progress
from pytest_dmlbench.reporting.results_reporter import CASE_ATTR, REPORT_ATTR, ResultsReporter
from pytest_dmlbench.results.table_layout import wrap_text
from pytest_dmlbench.world.engine import Engine
from pytest_dmlbench.world.run_facts import RunFacts

SKIP_REASON = "distributed case: run with --dmlbench"
GATE_MARKER_DOC = (
    "dmlbench_gate(threshold=None, pair_budget=None): the gate's threshold (percent) and seconds of block pairs "
    "for a test that records figures in the pytest process with dmlbench_metrics"
)
MARKER_DOC = (
    "dmlbench(world_size=None, backend=None, timeout=None, threshold=None, cpu_threshold=None, scaling=False, "
    "isolation=None, "
    "pair_budget=None, launcher=None, communicates=True, strict=None): "
    "run this case on every rank of a torch.distributed world (needs --dmlbench)"
)

_OPTIONS: list[tuple[str, str, dict[str, Any], str]] = [
    ("--dmlbench-world-size", "dmlbench_world_size", {"metavar": "N"},
     f"default world size for cases that do not pin one (integer >= 1; default {DEFAULT_WORLD_SIZE}); "
     "--world-size is its short form"),
    ("--dmlbench-backend", "dmlbench_backend", {"metavar": "{auto,gloo,nccl}"},
     "auto: nccl when there is a CUDA device per rank, else gloo (default auto)"),
    ("--dmlbench-timeout", "dmlbench_timeout", {"metavar": "S"},
     f"per-case wall-clock limit in seconds (default {DEFAULT_TIMEOUT_S:g})"),
    ("--dmlbench-baseline-dir", "dmlbench_baseline_dir", {"metavar": "DIR"},
     "where baselines live (default: baselines/ under the rootdir)"),
    ("--dmlbench-json", "dmlbench_json", {"metavar": "PATH"}, "write this run's results as JSON"),
    ("--dmlbench-plots", "dmlbench_plots", {"metavar": "DIR"}, "write this run's plots and report.html into DIR"),
    ("--dmlbench-threshold", "dmlbench_threshold", {"metavar": "PCT"},
     f"default regression threshold in percent (default {DEFAULT_THRESHOLD_PCT:g})"),
    ("--dmlbench-cpu-threshold", "dmlbench_cpu_threshold", {"metavar": "PCT"},
     "judge CPU time per step (the quiet figure recorded beside wall time) at this threshold in percent, or off; "
     f"given, every step's; by default {DEFAULT_CPU_THRESHOLD_PCT:g}, judged only on steps that compute "
     "(ranks on the CPU at least a quarter of the time their cores had)"),
    ("--dmlbench-case-thresholds", "dmlbench_case_thresholds", {"metavar": "FILE"},
     "per-case thresholds (JSON, as studies/case_thresholds.py writes it from measured noise): each listed case is "
     "judged at its own threshold and CPU threshold; a marker's threshold= beats it, it beats the run's"),
    ("--dmlbench-launcher", "dmlbench_launcher", {"metavar": "{fork,ray,simulated}"},
     "fork: rank processes forked from the pytest process (default); ray: ranks are Ray actors on a local "
     "Ray instance, or on the cluster at RAY_ADDRESS; simulated: ranks are threads of the pytest process "
     "taking turns (correctness at up to 1024 ranks; cases that measure are skipped)"),
    ("--dmlbench-strict", "dmlbench_strict", {"metavar": "{on,off}"},
     "simulated ranks only: on completes async work at wait() (outputs poisoned, a read or write before wait() "
     "reported) and a send only when its receive is posted (deadlock cycles reported), as NCCL does; "
     "off completes both at the call, as before (default off; the marker's strict= sets it per case)"),
    ("--dmlbench-isolation", "dmlbench_isolation", {"metavar": "{persistent,fresh}"},
     "persistent: kept worlds with a state guard after every case (default); fresh: a new world per case"),
    ("--dmlbench-against", "dmlbench_against", {"metavar": "REF"},
     "re-measure REF (a git ref or commit, or 'baseline': the commit the stored baselines were recorded at) "
     "beside the working tree, interleaved in blocks, and judge each case on the paired figures"),
    ("--dmlbench-pair-budget", "dmlbench_pair_budget", {"metavar": "S"},
     f"with --dmlbench-against: seconds of block pairs per case, and as many again for the confirmation of a "
     f"flagged figure, before what is still unclear is called inconclusive (default {DEFAULT_PAIR_BUDGET_S:g})"),
    ("--dmlbench-run-alpha", "dmlbench_run_alpha", {"metavar": "P"},
     f"with --dmlbench-against: the chance that a run with nothing changed turns red, split over its cases "
     f"and their distinct tests, figures that are one reading counted once (default {DEFAULT_RUN_ALPHA:g})"),
    ("--dmlbench-canary", "dmlbench_canary", {"metavar": "{on,off,during}"},
     "with --dmlbench-against: on adjusts every block pair for the machine's speed, read by a fixed canary "
     "timed beside each block; during reads it during each block (a thread at a tenth of a core) and adjusts; "
     f"off records the canary read beside each block in the results only (default {DEFAULT_CANARY})"),
    ("--dmlbench-futility", "dmlbench_futility", {"metavar": "{on,off}"},
     "with --dmlbench-against: on ends a case's first stage of block pairs once every figure still unclear reads "
     "within the threshold and could not be clear by the cap of pairs at its measured noise (fewer pairs, a "
     f"little less power); off adds pairs up to the cap or the budget (default {DEFAULT_FUTILITY})"),
    ("--dmlbench-block-seconds", "dmlbench_block_seconds", {"metavar": "S"},
     f"with --dmlbench-against: the measured time one block of a pair aims at (default {DEFAULT_BLOCK_SECONDS:g}); "
     "longer blocks read steadier medians, but fewer pairs fit the pair budget"),
    ("--dmlbench-block-warmup", "dmlbench_block_warmup", {"metavar": "N"},
     f"with --dmlbench-against: untimed rounds before each block's timed ones (default {DEFAULT_BLOCK_WARMUP})"),
    ("--dmlbench-block-min-rounds", "dmlbench_block_min_rounds", {"metavar": "N"},
     "with --dmlbench-against: timed rounds a block has at least, however long a step takes (default "
     f"{DEFAULT_BLOCK_MIN_ROUNDS}); fewer make the blocks of a slow step (seconds a step) shorter, so that more "
     "pairs fit the pair budget"),
    ("--dmlbench-redraw-worlds", "dmlbench_redraw_worlds", {"metavar": "N"},
     "with --dmlbench-against: both sides run a case's blocks on freshly started worlds every N pairs, so that a "
     "speed a world keeps for as long as it lives counts as noise of the pairs rather than as a change; 0 keeps "
     f"each world for the whole run (default {DEFAULT_REDRAW_WORLDS})"),
    ("--dmlbench-mmap-threshold", "dmlbench_mmap_threshold", {"metavar": "BYTES"},
     "with --dmlbench-against: both block servers and their ranks run with glibc's mmap threshold fixed at BYTES "
     "(its trim threshold at twice that), so that a large tensor is allocated the same way in every world whatever "
     "ran before it (glibc otherwise raises both as memory is freed); 0 leaves glibc's own "
     f"(default {DEFAULT_MMAP_THRESHOLD})"),
    ("--dmlbench-rank-allocator", "dmlbench_rank_allocator", {"metavar": "NAME|PATH"},
     "with --dmlbench-against: both block servers and their ranks run with this allocator preloaded (tcmalloc, "
     "jemalloc, or a shared library's path; Linux), so that a large tensor's memory is reused the same way in "
     "every world whatever ran before it; system keeps the C library's own "
     f"(default {DEFAULT_RANK_ALLOCATOR})"),
]
SHORT_FORMS = {"--dmlbench-world-size": ("--world-size",)}  # the one option users type most, kept short
_FLAGS: list[tuple[str, str, str]] = [
    ("--dmlbench", "dmlbench", "run the distributed cases (without it they are skipped)"),
    ("--dmlbench-save", "dmlbench_save", "store this run's results as the baselines"),
    ("--dmlbench-no-compare", "dmlbench_no_compare", "do not compare with stored baselines"),
    ("--dmlbench-ray-spread", "dmlbench_ray_spread",
     "with --dmlbench-launcher ray: place a world's ranks on different nodes (SPREAD) instead of packing them"),
    ("--dmlbench-pin-cores", "dmlbench_pin_cores",
     "pin each forked rank to one core (rank r of every world, A's and REF's alike, on the same core); with "
     "--dmlbench-against, or --dmlbench-no-compare without --dmlbench-save"),
    ("--dmlbench-fail-on-improvement", "dmlbench_fail_on_improvement",
     "also fail cases that improved beyond the threshold (catches stale baselines)"),
    ("--dmlbench-fail-on-untestable", "dmlbench_fail_on_untestable",
     "also fail cases with an untestable figure, one no test could judge (too few rounds, one reading, no saved "
     "run-to-run noise, a unit that changed, figures REF cannot re-measure); unsettled ones are listed"),
    ("--dmlbench-fail-on-inconclusive", "dmlbench_fail_on_inconclusive",
     "also fail cases with any inconclusive figure: untestable ones, and unsettled ones, which a test could not "
     "settle (a pair budget spent while the interval straddled the threshold, overlapping single readings, "
     "validations not judged)"),
    ("--dmlbench-smoke", "dmlbench_smoke",
     "run each case in its smallest form (every parameter value once, not every combination; a sweep named "
     "by @pytest.mark.dmlbench_smoke at its smallest value), each measurement for one round, and judge and save "
     "nothing: checks that the suite runs, in a fraction of its time"),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dmlbench", "distributed training cases and benchmarks")
    for flag, dest, help_text in _FLAGS:
        group.addoption(flag, action="store_true", default=None, dest=dest, help=help_text)
        parser.addini(dest, f"{help_text} (ini form of {flag})", type="bool", default=None)
    for flag, dest, extra, help_text in _OPTIONS:
        group.addoption(flag, *SHORT_FORMS.get(flag, ()), dest=dest, default=None, help=help_text, **extra)
        parser.addini(dest, f"{help_text} (ini form of {flag})", default=None)


def option_names() -> list[str]:
    """Every command-line option of the plugin, short forms included."""
    names = [flag for flag, _, _ in _FLAGS] + [flag for flag, _, _, _ in _OPTIONS]
    return names + [short for shorts in SHORT_FORMS.values() for short in shorts]


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None, None, None]:
    """Once every option is known, a misspelt option of the plugin is refused naming the one it looks like."""
    result = yield
    from pytest_dmlbench.config.option_typos import check_arguments

    check_arguments(parser, args, option_names())
    return result


def _under_launcher(config: pytest.Config, settings: DmlbenchConfig) -> DmlbenchConfig:
    """Under an external launcher the launcher's world size is the default; a conflicting explicit
    ``--world-size`` is a usage error (on every rank, before any rendezvous)."""
    from pytest_dmlbench.world.launched.engine import adopt_launcher_variables, launched_externally, launcher_world_size

    if not launched_externally(os.environ):
        return settings
    adopt_launcher_variables(os.environ)
    try:
        size = launcher_world_size(os.environ, config.getoption("dmlbench_world_size", default=None)
                                   or config.getini("dmlbench_world_size") or None)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    return replace(settings, world_size=size)


def _engine_for(settings: DmlbenchConfig, facts: RunFacts) -> Engine:
    """The execution mode that applies to this process."""
    from pytest_dmlbench.world.launched.engine import LaunchedEngine, launched_externally

    if launched_externally(os.environ):
        return LaunchedEngine(settings.backend, settings.timeout_s)
    if settings.launcher == "simulated":
        from pytest_dmlbench.world.simulated.engine import SimulatedEngine

        return SimulatedEngine()
    if settings.launcher == "ray":
        from pytest_dmlbench.world.ray.engine import RayEngine

        return RayEngine(facts, spread=settings.ray_spread)
    from pytest_dmlbench.world.forked.engine import ForkedEngine

    return ForkedEngine(facts, pin_cores=settings.pin_cores)


def _check_outputs(settings: DmlbenchConfig) -> None:
    """Every path the run will write is written to now (and what that made removed), and what the plots need
    is looked for, before any case runs."""
    from pytest_dmlbench.config.output_paths import check_file_target, check_folder_target

    if settings.json_path is not None:
        check_file_target(settings.json_path, "--dmlbench-json")
    if settings.plots_dir is not None:
        from pytest_dmlbench.plots.figure import INSTALL_HINT, matplotlib_installed

        if not matplotlib_installed():
            raise ConfigError(f"--dmlbench-plots {settings.plots_dir}: plots need matplotlib, which is not installed "
                              f"here: {INSTALL_HINT}, or drop --dmlbench-plots")
        check_folder_target(settings.plots_dir, "--dmlbench-plots")
    if settings.save:
        check_folder_target(settings.baseline_dir, "--dmlbench-save into --dmlbench-baseline-dir")


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists, so a non-reporting rank can mute it
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    config.addinivalue_line("markers", GATE_MARKER_DOC)
    config.addinivalue_line("markers", SMOKE_MARKER_DOC)
    try:
        settings = build_config(config)
        if settings.enabled and not hasattr(config, "workerinput"):  # the xdist controller checked before workers
            _check_outputs(settings)  # started; a worker's check could remove a folder another one is probing
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[CONFIG_KEY] = settings
    facts = RunFacts.here(getattr(config.option, "numprocesses", None))
    config.stash[FACTS_KEY] = facts
    if not settings.enabled:
        return
    settings = _under_launcher(config, settings)
    config.stash[CONFIG_KEY] = settings
    from pytest_dmlbench.items.property_cases import PropertyHealthCheck

    config.pluginmanager.register(PropertyHealthCheck(), "dmlbench-properties")
    config.pluginmanager.register(NotJudgedLedger(), "dmlbench-not-judged")
    engine = _engine_for(settings, facts)
    config.stash[ENGINE_KEY] = engine
    run = {**facts.to_dict(settings.world_size, settings.threshold_pct),
           "cpu_threshold_pct": settings.cpu_threshold_pct,
           "cpu_threshold_judges": "every step" if settings.cpu_threshold_given else "steps that compute",
           **commit_fact(config.rootpath),
           "launcher": settings.launcher, "isolation": settings.isolation, "strict": settings.strict}
    from pytest_dmlbench.world.launched.engine import launched_externally

    config.stash[GATE_KEY] = choose_gate(config, settings, run, launched=launched_externally(os.environ))
    config.stash[BUILDER_KEY] = CaseResultBuilder()
    if engine.reports:
        config.pluginmanager.register(ResultsReporter(config, settings, run), "dmlbench-results")
        config.pluginmanager.register(InterruptionWatch(run), "dmlbench-interruption")
        register_progress(config, config.stash[GATE_KEY])
    else:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter writes the summary
def pytest_sessionfinish(session: pytest.Session) -> None:
    gate = session.config.stash.get(GATE_KEY, None)
    if gate is not None:
        gate.finishing()


def pytest_unconfigure(config: pytest.Config) -> None:
    gate = config.stash.get(GATE_KEY, None)
    if gate is not None:
        gate.close()
    engine = config.stash.get(ENGINE_KEY, None)
    if engine is not None:
        engine.close()


SMOKE_NOTE = ("dmlbench: smoke run (--dmlbench-smoke): each case in its smallest form (every parameter value "
              "once, sweeps at their smallest; the other combinations deselected), each measurement for one "
              "round; the figures are not judged or saved")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    settings = config.stash.get(CONFIG_KEY, None)
    if settings is not None and settings.enabled and settings.smoke:
        terminalreporter.write_line(SMOKE_NOTE)
    gate = config.stash.get(GATE_KEY, None)
    # an interrupted run's block counts, run-level statement and watch list would read like a result
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    lines = gate.summary_lines() if gate is not None and not interrupted else []
    if lines:
        terminalreporter.section("dmlbench gate")
        for line in lines:
            for part in wrap_text(line, config.get_terminal_writer().fullwidth, "    "):
                terminalreporter.write_line(part)


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash.get(CONFIG_KEY, None)
    if settings is None or not settings.enabled:
        return []
    facts = config.stash[FACTS_KEY]
    launcher = "" if settings.launcher == "fork" else f", launcher {settings.launcher}"
    lines = [f"dmlbench: world size {settings.world_size}, backend {settings.backend}, "
             f"timeout {settings.timeout_s:g} s, {facts.cores} core(s){launcher}"]
    if settings.launcher == "simulated":
        lines.append("dmlbench: simulated ranks (threads of this process, taking turns): correctness only, "
                     f"cases that measure are skipped; strict mode {'on' if settings.strict else 'off'}")
    elif settings.strict:
        lines.append("dmlbench: strict mode on for cases on simulated ranks (launcher=\"simulated\"); forked and "
                     "Ray ranks run the real backend")
    if facts.oversubscribed(settings.world_size) and settings.launcher != "simulated":
        lines.append(
            f"dmlbench: WARNING {settings.world_size} rank(s) x {facts.workers} worker(s) > {facts.cores} core(s): "
            "processes are oversubscribed, timings are pessimistic (recorded with the results)"
        )
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("dmlbench")
    if marker is None or not marker.kwargs.get("scaling"):
        return
    sizes = scaling_world_sizes(metafunc.config.stash[CONFIG_KEY].world_size)
    metafunc.fixturenames.append(SCALING_ARG)
    metafunc.parametrize(SCALING_ARG, sizes, ids=[f"ws{n}" for n in sizes])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Experiment files (``dmlbench_*.yaml``/``.yml``/``.json``) are collected as dmlbench cases."""
    from pytest_dmlbench.experiments.loading import is_experiment_file

    if not is_experiment_file(file_path):
        return None
    from pytest_dmlbench.experiments.collect import ExperimentFile

    return ExperimentFile.from_parent(parent, path=file_path,
                                      default_world_size=parent.config.stash[CONFIG_KEY].world_size)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    settings = config.stash[CONFIG_KEY]
    if settings.enabled and settings.smoke:  # every parameter value once, sweeps at their smallest
        kept, left_out = smoke_items(items)
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = kept
    for item in items:
        marker = item.get_closest_marker("dmlbench")
        if not isinstance(item, pytest.Function) or marker is None:
            continue
        if not settings.enabled:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
            continue
        if marker.args:
            raise pytest.UsageError(f"{item.nodeid}: the dmlbench marker takes keyword arguments only, "
                                    f"got positional {marker.args!r}")
        kwargs = dict(marker.kwargs)
        params = callspec_params(item)
        if kwargs.get("scaling") and SCALING_ARG in params:
            kwargs["world_size"] = params[SCALING_ARG]
        try:
            item.stash[SETTINGS_KEY] = case_settings(kwargs, settings, item.nodeid)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_collection_finish(session: pytest.Session) -> None:
    settings = session.config.stash[CONFIG_KEY]
    unmatched = settings.enabled and settings.case_thresholds.matches_none_of(
        [item.nodeid for item in session.items], str(session.config.rootpath))
    if unmatched:
        warnings.warn(unmatched, CaseThresholdsWarning, stacklevel=1)
    engine = session.config.stash.get(ENGINE_KEY, None)
    if engine is None:
        return
    from pytest_dmlbench.errors import CaseNotRunnable
    from pytest_dmlbench.pytest_internals import assertion_explanations

    items = [item for item in session.items if SETTINGS_KEY in item.stash and isinstance(item, pytest.Function)]
    gate = session.config.stash[GATE_KEY]
    judged = items + [item for item in session.items if records_in_process(item)]
    measuring = sum(1 for item in judged
                    if isinstance(item, pytest.Function) and {"dmlbench", IN_PROCESS_FIXTURE} & set(item.fixturenames))
    gate.collected([(item.nodeid, Path(item.path)) for item in judged], measuring)
    try:
        with assertion_explanations(session.config):
            engine.prepare([collected_case(item) for item in items])
    except CaseNotRunnable as exc:
        raise pytest.UsageError(str(exc)) from None
    gate.ready()


def _case_engine(config: pytest.Config, launcher: str) -> Engine | None:
    """The engine of a case's launcher: the run's, or simulated ranks for a case marked
    ``launcher="simulated"``; None when the case asks for another launcher than the run's."""
    if launcher == config.stash[CONFIG_KEY].launcher:
        return config.stash[ENGINE_KEY]
    if launcher != "simulated":
        return None
    if SIMULATED_ENGINE_KEY not in config.stash:
        from pytest_dmlbench.world.simulated.engine import SimulatedEngine

        config.stash[SIMULATED_ENGINE_KEY] = SimulatedEngine()
    return config.stash[SIMULATED_ENGINE_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Consecutive Ray Train experiments share one Ray instance; any other next item finds none."""
    collect = sys.modules.get("pytest_dmlbench.experiments.collect")  # None: no experiment file was collected
    if collect is not None and any(isinstance(node, collect.ExperimentItem) for node in (item, nextitem)):
        collect.hand_on_ray(item, nextitem)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    settings = item.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    engine = _case_engine(item.config, settings.launcher)
    if engine is None:
        run_launcher = item.config.stash[CONFIG_KEY].launcher
        item.add_marker(pytest.mark.skip(reason=f"the case asks for launcher {settings.launcher!r} and the run "
                                         f"uses {run_launcher!r}: run it with --dmlbench-launcher "
                                         f"{settings.launcher}"))
        item.stash[BACKEND_KEY] = settings.backend
        return
    choice = engine.choose_backend(settings.backend, settings.world_size)
    if choice.skip_reason:
        item.add_marker(pytest.mark.skip(reason=choice.skip_reason))  # reported at the case's own line
    item.stash[BACKEND_KEY] = choice.backend


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    settings = pyfuncitem.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return None
    from pytest_dmlbench.errors import CaseNotRunnable, DistributedCaseFailed
    from pytest_dmlbench.world.failure import failure_text as rank_failure_text

    backend = pyfuncitem.stash[BACKEND_KEY]
    case = prepared_case(pyfuncitem, pyfuncitem.config.stash[GATE_KEY].case_budget())
    try:
        engine = _case_engine(pyfuncitem.config, settings.launcher)
        assert engine is not None  # a case of another launcher was skipped in its set-up
        run = engine.run(case)
    except CaseNotRunnable as exc:
        pytest.fail(str(exc), pytrace=False)
    except WorldError as exc:  # a launcher's world that cannot go on
        pytest.exit(f"{pyfuncitem.nodeid}: {exc}", returncode=1)
    for report in run.ranks:
        if report.output.strip():
            pyfuncitem.add_report_section("call", f"rank {report.rank} output", report.output)
    if run.rebuilt_because and settings.isolation != "fresh":  # a fresh world is discarded after the case anyway
        pyfuncitem.warn(WorldRebuiltWarning(
            f"{pyfuncitem.nodeid} left its world unusable ({run.rebuilt_because}); the world was rebuilt "
            "before the next case. Leave the default process group in place, or mark the case "
            "isolation=\"fresh\"."))
    if run.passed:
        facts = case_facts(pyfuncitem, settings.world_size, backend, settings.threshold_pct, settings.cpu_threshold_pct)
        result = pyfuncitem.config.stash[BUILDER_KEY].from_ranks(facts, [r.outcome for r in run.ranks])
        if result is not None:
            if settings.isolation != pyfuncitem.config.stash[CONFIG_KEY].isolation:  # the marker's own
                result.extra[CASE_ISOLATION] = settings.isolation
            if settings.launcher != pyfuncitem.config.stash[CONFIG_KEY].launcher:
                result.extra["launcher"] = settings.launcher
            pyfuncitem.stash[RESULT_KEY] = result
        return True
    statuses = {r.outcome.status for r in run.ranks if r.outcome is not None}
    first = run.ranks[0].outcome
    if not run.unmatched and len(statuses) == 1 and first is not None and all(r.outcome for r in run.ranks):
        if first.status == "not_judged":
            fail = pyfuncitem.config.stash[CONFIG_KEY].fail_on_inconclusive == "all"  # a test ran, unsettled
            report_not_judged(pyfuncitem, first.message, fail=fail)
        if first.status == "skipped":
            pytest.skip(first.message)
        if first.status == "xfailed":
            pytest.xfail(first.message)
    from pytest_dmlbench.items.property_cases import property_failure_text

    text = property_failure_text(run, settings.world_size, backend)
    raise DistributedCaseFailed(text or rank_failure_text(run, settings.world_size, backend))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The one verdict point: after the body ran (on the ranks or here), the gate judges the figures."""
    outcome = yield
    builder = item.config.stash.get(BUILDER_KEY, None)
    if builder is None or not isinstance(item, pytest.Function):
        return outcome
    result = item.stash.get(RESULT_KEY, None)
    local = item.stash.get(LOCAL_METRICS_KEY, None)
    in_process = result is None and local is not None
    if result is None and local is not None:
        world_size, backend, threshold = getattr(item, "dmlbench_local_run", (1, "local", None))
        result = builder.from_local(case_facts(item, world_size, backend, threshold), local)
        if result is not None:
            item.stash[RESULT_KEY] = result
    if result is None:
        return outcome
    settings = item.config.stash[CONFIG_KEY]
    decision = item.config.stash[GATE_KEY].judge(judged_item(item, result, in_process), result)
    result.verdicts = decision.verdicts
    result.extra.update(decision.extra)
    if decision.notes:
        result.extra.setdefault("notes", []).extend(decision.notes)
    if decision.problem is not None:
        pytest.fail(decision.problem, pytrace=False)
    failing = failing_verdicts(decision.verdicts, settings.fail_on_improvement, settings.fail_on_inconclusive)
    if failing:
        width = item.config.get_terminal_writer().fullwidth
        pytest.fail("\n".join(wrap_text(failure_text(failing), width, "    ")), pytrace=False)
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    from pytest_dmlbench.errors import DistributedCaseFailed

    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(DistributedCaseFailed):
        report.longrepr = str(call.excinfo.value)
    if call.when == "call":
        result = item.stash.get(RESULT_KEY, None)
        if result is not None:
            result.outcome = report.outcome
            setattr(report, REPORT_ATTR, result.to_dict())
    case = case_record(item)
    if case is not None:
        setattr(report, CASE_ATTR, case)
    return report


class _ParentSide:
    """What ``dist``/``dmlbench`` are in the pytest process: the real objects exist only on the ranks."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        raise RuntimeError(
            f"the {self._name!r} fixture is only usable inside the case body, which runs on the ranks; "
            "fixtures run once in the pytest process, so pass plain values to the case instead"
        )


def _case_only(request: pytest.FixtureRequest, name: str) -> _ParentSide:
    if SETTINGS_KEY not in request.node.stash and request.node.get_closest_marker("dmlbench") is None:
        raise pytest.UsageError(
            f"{request.node.nodeid}: the {name!r} fixture needs a distributed case; "
            "mark the test with @pytest.mark.dmlbench"
        )
    return _ParentSide(name)


@pytest.fixture
def dist(request: pytest.FixtureRequest) -> _ParentSide:
    """This rank's identity: ``rank``, ``world_size``, ``backend``, ``device``, ``is_main`` (dmlbench cases only)."""
    return _case_only(request, "dist")


@pytest.fixture
def dmlbench(request: pytest.FixtureRequest) -> _ParentSide:
    """Time ``dmlbench(fn, *args, **kwargs)`` on every rank in rank-agreed rounds (dmlbench cases only)."""
    return _case_only(request, "dmlbench")


@pytest.fixture
def dmlbench_metrics(request: pytest.FixtureRequest) -> LocalMetrics:
    """Record figures measured in the pytest process (``.record(name, samples, unit=, better=)``).

    For benchmarks that drive something other than a rank world; skipped without ``--dmlbench``.
    """
    if not request.config.stash[CONFIG_KEY].enabled:
        pytest.skip("benchmark: run with --dmlbench")
    marker = request.node.get_closest_marker("dmlbench_gate")
    if marker is not None and not hasattr(request.node, "dmlbench_local_run"):  # experiment items set their own
        try:
            threshold, budget = in_process_gate_settings(dict(marker.kwargs), request.node.nodeid)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        request.node.dmlbench_local_run = (1, "local", threshold)
        request.node.dmlbench_pair_budget = budget
    metrics = LocalMetrics()
    if request.config.stash[CONFIG_KEY].smoke:
        metrics.block = SMOKE_BUDGET  # a body that follows the block runs its shortest form
    request.node.stash[LOCAL_METRICS_KEY] = metrics
    return metrics
