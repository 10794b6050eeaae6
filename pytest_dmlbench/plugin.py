"""pytest entry point: options, marker, fixtures and the hooks that send dmlbench cases to rank worlds.

Imports no torch at module level; heavy work starts only when ``--dmlbench`` is given.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.collector import REPORT_ATTR, ResultsCollector, workers_of
from pytest_dmlbench.config import (
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WORLD_SIZE,
    SCALING_ARG,
    CaseSettings,
    DmlbenchConfig,
    case_settings,
    parse_backend,
    parse_positive_seconds,
    parse_threshold,
    parse_world_size,
    scaling_world_sizes,
)
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.failure import DistributedCaseFailed, failure_text

CONFIG_KEY = pytest.StashKey[DmlbenchConfig]()
SESSION_KEY = pytest.StashKey[Any]()
SETTINGS_KEY = pytest.StashKey[CaseSettings]()
RUN_KEY = pytest.StashKey[Any]()
RESULT_KEY = pytest.StashKey[Any]()
LAUNCHED_KEY = pytest.StashKey[Any]()
LOCAL_METRICS_KEY = pytest.StashKey[Any]()

SKIP_REASON = "distributed case: run with --dmlbench"
MARKER_DOC = (
    "dmlbench(world_size=None, backend=None, timeout=None, threshold=None, scaling=False): "
    "run this case on every rank of a torch.distributed world (needs --dmlbench)"
)

_OPTIONS: list[tuple[str, str, dict[str, Any], str]] = [
    ("--world-size", "dmlbench_world_size", {"metavar": "N"},
     f"default world size for cases that do not pin one (integer >= 1; default {DEFAULT_WORLD_SIZE})"),
    ("--dmlbench-backend", "dmlbench_backend", {"metavar": "{auto,gloo,nccl}"},
     "auto: nccl when there is a CUDA device per rank, else gloo (default auto)"),
    ("--dmlbench-timeout", "dmlbench_timeout", {"metavar": "S"},
     f"per-case wall-clock limit in seconds (default {DEFAULT_TIMEOUT_S:g})"),
    ("--dmlbench-baseline-dir", "dmlbench_baseline_dir", {"metavar": "DIR"},
     "where baselines live (default: baselines/ under the rootdir)"),
    ("--dmlbench-json", "dmlbench_json", {"metavar": "PATH"}, "write this run's results as JSON"),
    ("--dmlbench-threshold", "dmlbench_threshold", {"metavar": "PCT"},
     f"default regression threshold in percent (default {DEFAULT_THRESHOLD_PCT:g})"),
    ("--dmlbench-against", "dmlbench_against", {"metavar": "REF"},
     "re-measure REF (a git ref or commit, or 'baseline': the commit the stored baselines were recorded at) "
     "beside the working tree, interleaved in blocks, and judge each case on the paired figures"),
]
_FLAGS: list[tuple[str, str, str]] = [
    ("--dmlbench", "dmlbench", "run the distributed cases (without it they are skipped)"),
    ("--dmlbench-save", "dmlbench_save", "store this run's results as the baselines"),
    ("--dmlbench-no-compare", "dmlbench_no_compare", "do not compare with stored baselines"),
    ("--dmlbench-fail-on-improvement", "dmlbench_fail_on_improvement",
     "also fail cases that improved beyond the threshold (catches stale baselines)"),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dmlbench", "distributed training cases and benchmarks")
    for flag, dest, help_text in _FLAGS:
        group.addoption(flag, action="store_true", default=None, dest=dest, help=help_text)
        parser.addini(dest, f"{help_text} (ini form of {flag})", type="bool", default=None)
    for flag, dest, extra, help_text in _OPTIONS:
        group.addoption(flag, dest=dest, default=None, help=help_text, **extra)
        parser.addini(dest, f"{help_text} (ini form of {flag})", default=None)


def _value(config: pytest.Config, dest: str) -> Any:
    """Command line beats ini; None when neither sets it."""
    value = config.getoption(dest, default=None)
    if value is None:
        value = config.getini(dest)
    return None if value in (None, "", []) else value


def build_config(config: pytest.Config) -> DmlbenchConfig:
    """Read and validate every option once."""
    ws = _value(config, "dmlbench_world_size")
    backend = _value(config, "dmlbench_backend")
    timeout = _value(config, "dmlbench_timeout")
    threshold = _value(config, "dmlbench_threshold")
    baseline_dir = _value(config, "dmlbench_baseline_dir")
    json_path = _value(config, "dmlbench_json")
    against = _value(config, "dmlbench_against")
    return DmlbenchConfig(
        enabled=bool(_value(config, "dmlbench")),
        world_size=DEFAULT_WORLD_SIZE if ws is None else parse_world_size(ws),
        backend="auto" if backend is None else parse_backend(backend),
        timeout_s=DEFAULT_TIMEOUT_S if timeout is None else parse_positive_seconds(timeout),
        threshold_pct=DEFAULT_THRESHOLD_PCT if threshold is None else parse_threshold(threshold),
        save=bool(_value(config, "dmlbench_save")),
        compare=not bool(_value(config, "dmlbench_no_compare")) and against is None,
        baseline_dir=Path(baseline_dir) if baseline_dir else Path(config.rootpath) / "baselines",
        json_path=Path(json_path) if json_path else None,
        fail_on_improvement=bool(_value(config, "dmlbench_fail_on_improvement")),
        against=None if against is None else str(against).strip(),
    )


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists, so other launched ranks can mute it
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    try:
        settings = build_config(config)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[CONFIG_KEY] = settings
    if not settings.enabled:
        return
    from pytest_dmlbench.launcher import LaunchedWorld, launched_externally

    if launched_externally(os.environ):
        launched = LaunchedWorld(settings.backend, settings.timeout_s)
        config.stash[LAUNCHED_KEY] = launched
        if launched.rank != 0:  # only rank 0 reports; the verdicts are gathered from every rank
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                config.pluginmanager.unregister(reporter)
    else:
        from pytest_dmlbench.session import DmlbenchSession

        config.stash[SESSION_KEY] = DmlbenchSession(settings, cores=os.cpu_count() or 1, workers=workers_of(config))
    from pytest_dmlbench.gate import BaselineGate

    config.pluginmanager.register(BaselineGate(config, settings, RESULT_KEY, LOCAL_METRICS_KEY), "dmlbench-gate")
    if settings.against is not None:
        from pytest_dmlbench.paired.register import register_paired_gate

        register_paired_gate(config, settings, RESULT_KEY, SETTINGS_KEY, LAUNCHED_KEY)
    if config.stash.get(LAUNCHED_KEY, None) is None or config.stash[LAUNCHED_KEY].rank == 0:
        config.pluginmanager.register(ResultsCollector(config, settings), "dmlbench-results")


def pytest_unconfigure(config: pytest.Config) -> None:
    for key in (SESSION_KEY, LAUNCHED_KEY):
        owner = config.stash.get(key, None)
        if owner is not None:
            owner.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash.get(CONFIG_KEY, None)
    if settings is None or not settings.enabled:
        return []
    cores = os.cpu_count() or 1
    workers = workers_of(config)
    line = (f"dmlbench: world size {settings.world_size}, backend {settings.backend}, "
            f"timeout {settings.timeout_s:g} s, {cores} core(s)")
    lines = [line]
    if settings.world_size * workers > cores:
        lines.append(
            f"dmlbench: WARNING {settings.world_size} rank(s) x {workers} worker(s) > {cores} core(s): "
            "processes are oversubscribed, timings are pessimistic (recorded with the results)"
        )
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("dmlbench")
    if marker is None or not marker.kwargs.get("scaling"):
        return
    settings = metafunc.config.stash[CONFIG_KEY]
    sizes = scaling_world_sizes(settings.world_size)
    metafunc.fixturenames.append(SCALING_ARG)
    metafunc.parametrize(SCALING_ARG, sizes, ids=[f"ws{n}" for n in sizes])


def _is_case(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and item.get_closest_marker("dmlbench") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    settings = config.stash[CONFIG_KEY]
    for item in items:
        if not _is_case(item):
            continue
        if not settings.enabled:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
            continue
        marker = item.get_closest_marker("dmlbench")
        assert marker is not None
        kwargs = dict(marker.kwargs)
        if marker.args:
            raise pytest.UsageError(f"{item.nodeid}: the dmlbench marker takes keyword arguments only, "
                                    f"got positional {marker.args!r}")
        callspec = getattr(item, "callspec", None)
        if kwargs.get("scaling") and callspec is not None and SCALING_ARG in callspec.params:
            kwargs["world_size"] = callspec.params[SCALING_ARG]
        try:
            item.stash[SETTINGS_KEY] = case_settings(kwargs, settings, item.nodeid)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_collection_finish(session: pytest.Session) -> None:
    launched = session.config.stash.get(LAUNCHED_KEY, None)
    if launched is not None:
        problem = launched.check_same_cases([item.nodeid for item in session.items if SETTINGS_KEY in item.stash])
        if problem:
            raise pytest.UsageError(problem)
        return
    dml = session.config.stash.get(SESSION_KEY, None)
    if dml is None:
        return
    from pytest_dmlbench.world.registry import CaseEntry

    cases = [item for item in session.items if SETTINGS_KEY in item.stash]
    for item in cases:
        assert isinstance(item, pytest.Function)
        callspec = getattr(item, "callspec", None)
        dml.register(item.nodeid, CaseEntry(
            func=item.obj,
            argnames=tuple(item._fixtureinfo.argnames),
            params=dict(callspec.params) if callspec is not None else {},
        ))
    if cases:
        from pytest_dmlbench.introspection import assertion_explanations

        with assertion_explanations(session.config):
            dml.start()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    settings = item.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    from pytest_dmlbench.world.backend import select_backend

    launched = item.config.stash.get(LAUNCHED_KEY, None)
    if launched is not None:
        if settings.world_size != launched.world_size:
            item.add_marker(pytest.mark.skip(
                reason=f"needs {settings.world_size} rank(s); the launcher started {launched.world_size}"))
        item.stash[RUN_KEY] = launched.backend
        return
    dml = item.config.stash[SESSION_KEY]
    choice = select_backend(settings.backend, settings.world_size,
                            dml.cuda_devices() if settings.backend != "gloo" else 0)
    if choice.skip_reason:
        item.add_marker(pytest.mark.skip(reason=choice.skip_reason))  # reported at the case's own line
    item.stash[RUN_KEY] = choice.backend


def _run_in_world(pyfuncitem: pytest.Function, settings: CaseSettings, backend: str, uses_bench: bool) -> Any:
    """Send the item to the ranks of this session's world of its shape."""
    from pytest_dmlbench.session import PreparedCase, UnsendableArgument, split_arguments

    dml = pyfuncitem.config.stash[SESSION_KEY]
    if pyfuncitem.nodeid not in dml.registry:
        pytest.fail(f"{pyfuncitem.nodeid} was not collected before the rank processes started; "
                    "distributed cases must be collected up front", pytrace=False)
    callspec = getattr(pyfuncitem, "callspec", None)
    try:
        registry_args, pickled = split_arguments(
            tuple(pyfuncitem._fixtureinfo.argnames), pyfuncitem.funcargs,
            dict(callspec.params) if callspec is not None else {},
        )
    except UnsendableArgument as exc:
        pytest.fail(str(exc), pytrace=False)
    from pytest_dmlbench.errors import WorldError

    try:
        return dml.run(PreparedCase(pyfuncitem.nodeid, settings, backend, registry_args, pickled, uses_bench))
    except WorldError as exc:
        pytest.fail(f"the rank world could not be started: {exc}", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    settings = pyfuncitem.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return None
    backend = pyfuncitem.stash[RUN_KEY]
    uses_bench = "dmlbench" in pyfuncitem._fixtureinfo.argnames
    launched = pyfuncitem.config.stash.get(LAUNCHED_KEY, None)
    if launched is not None:
        from pytest_dmlbench.session import case_seed

        kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        run = launched.run(pyfuncitem.obj, kwargs, seed=case_seed(pyfuncitem.nodeid), measure_memory=uses_bench)
    else:
        run = _run_in_world(pyfuncitem, settings, backend, uses_bench)
    for report in run.ranks:
        if report.output.strip():
            pyfuncitem.add_report_section("call", f"rank {report.rank} output", report.output)
    statuses = {r.outcome.status for r in run.ranks if r.outcome is not None}
    if run.passed:
        _record_case(pyfuncitem, settings, backend, run)
        return True
    if not run.world_broken and len(statuses) == 1 and all(r.outcome is not None for r in run.ranks):
        first = run.ranks[0].outcome
        assert first is not None
        if first.status == "skipped":
            pytest.skip(first.message)
        if first.status == "xfailed":
            pytest.xfail(first.message)
    raise DistributedCaseFailed(failure_text(run, settings.world_size, backend))


def _record_case(item: pytest.Function, settings: CaseSettings, backend: str, run: Any) -> None:
    """Keep the metrics rank 0 reported (rank-agreed figures are identical on every rank) and the peak
    memory maxed over ranks."""
    from pytest_dmlbench.measure.memory import peak_memory_metrics
    from pytest_dmlbench.recording import case_result, metrics_from_payload, params_of

    first = run.ranks[0].outcome
    metrics = metrics_from_payload(first.payload) if first is not None else {}
    if not metrics:
        return
    peaks = [r.outcome.payload["peak_memory"] for r in run.ranks
             if r.outcome is not None and "peak_memory" in r.outcome.payload]
    if peaks:
        metrics = {**peak_memory_metrics(peaks), **metrics}
    notes = first.payload.get("notes", []) if first is not None else []
    callspec = getattr(item, "callspec", None)
    item.stash[RESULT_KEY] = case_result(
        item.nodeid, params_of(callspec.params if callspec is not None else {}), settings.world_size,
        backend, metrics, settings.threshold_pct, {"notes": notes} if notes else None,
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(DistributedCaseFailed):
        report.longrepr = str(call.excinfo.value)
    if call.when == "call":
        result = item.stash.get(RESULT_KEY, None)
        if result is not None:
            result.outcome = report.outcome
            setattr(report, REPORT_ATTR, result.to_dict())
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
def dmlbench_metrics(request: pytest.FixtureRequest) -> Any:
    """Record figures measured in the pytest process (``.record(name, samples, unit=, better=)``).

    For benchmarks that drive something other than a rank world; skipped without ``--dmlbench``.
    """
    if not request.config.stash[CONFIG_KEY].enabled:
        pytest.skip("benchmark: run with --dmlbench")
    from pytest_dmlbench.recording import LocalMetrics

    metrics = LocalMetrics()
    request.node.stash[LOCAL_METRICS_KEY] = metrics
    return metrics
