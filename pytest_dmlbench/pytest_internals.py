"""Every use of pytest's private API, in one place, each guarded.

pytest offers no public way to do these things, so they read private names: the fixtures a test
function asks for itself, the scope of the fixture definition active for a test, pytest's assertion
explanations outside a running test (for forked ranks), the ``tmp_path`` result key of a test whose call
phase the paired gate's block server runs itself, ending and restarting the terminal's progress rows, and
writing to the terminal while a test's output is captured. Each was checked with pytest :data:`CHECKED`
(``tests/test_pytest_internals.py`` runs each against the installed pytest; the terminal's, through real
terminal output, ``tests/reporting/test_live_progress.py``). When a pytest release
removes a name, the plugin stops with :class:`~pytest_dmlbench.errors.PytestInternalsChanged`, naming the
name, the pytest version and the fix, instead of a traceback from inside pytest.

Rank-side code reads one more private name without importing pytest: ``_pytest.outcomes.Skipped``
(``properties/lockstep.py``), and falls back to ``unittest.SkipTest`` when it is not there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_dmlbench.errors import PytestInternalsChanged

CHECKED = "8.0 to 9.2"


def changed(name: str, purpose: str) -> PytestInternalsChanged:
    return PytestInternalsChanged(
        f"pytest {pytest.__version__} has no {name}, which pytest-dmlbench reads to {purpose}. pytest-dmlbench "
        f"was checked with pytest {CHECKED}: install a pytest in that range (pip install 'pytest<{_next_major()}') "
        "or a pytest-dmlbench release that supports this pytest."
    )


def _next_major() -> int:
    return int(CHECKED.split()[-1].split(".")[0]) + 1


def fixture_argnames(item: pytest.Item) -> tuple[str, ...]:
    """The fixtures the test function names itself, in order (``Item._fixtureinfo.argnames``)."""
    argnames = getattr(getattr(item, "_fixtureinfo", None), "argnames", None)
    if argnames is None:
        raise changed("Item._fixtureinfo.argnames", "find the fixtures a distributed case asks for")
    return tuple(argnames)


def fixture_scopes(item: pytest.Function, names: Iterable[str]) -> dict[str, str]:
    """The scope of the fixture definition active for ``item``, for each of ``names`` that has one
    (``item._request._fixturemanager.getfixtureinfo`` and ``request._get_active_fixturedef``)."""
    try:
        request = item._request
        info = request._fixturemanager.getfixtureinfo(node=item, func=item.function, cls=None)
        wanted = set(names)
        return {name: str(request._get_active_fixturedef(name).scope)
                for name, definitions in info.name2fixturedefs.items() if name in wanted and definitions}
    except AttributeError as exc:
        raise changed(f"the fixture-request internals ({exc})",
                      "tell a case's function-scoped fixtures from its wider ones") from exc


def _explainer(config: pytest.Config) -> Callable[[str, object, object], str | None]:
    def explain(op: str, left: object, right: object) -> str | None:
        for lines in config.hook.pytest_assertrepr_compare(config=config, op=op, left=left, right=right):
            if lines:
                text = "\n~".join(line.replace("\n", "\\n") for line in lines)
                return text.replace("%", "%%") if config.getvalue("assertmode") == "rewrite" else text
        return None

    return explain


@contextmanager
def assertion_explanations(config: pytest.Config) -> Iterator[None]:
    """Within the block, rewritten asserts explain comparisons (``assert a == b`` -> "At index 2 diff: ...")
    as they do inside a pytest test. pytest installs that hook (``_pytest.assertion.util._reprcompare``)
    only while a test runs in the pytest process; installing it while the zygote forks lets every rank
    inherit it, so rank-side code never imports pytest."""
    from _pytest.assertion import util

    if not hasattr(util, "_reprcompare"):
        raise changed("_pytest.assertion.util._reprcompare", "explain failed comparisons on the ranks")
    saved: tuple[Any, Any] = (util._reprcompare, getattr(util, "_config", None))
    util._reprcompare = _explainer(config)
    util._config = config
    try:
        yield
    finally:
        util._reprcompare, util._config = saved


def mark_call_phase_reported(item: pytest.Function) -> None:
    """Record an empty call-phase result for ``item``, whose call phase the block server runs itself: the
    ``tmp_path`` fixture's teardown reads it (``_pytest.tmpdir.tmppath_result_key``; a KeyError in pytest
    8-9 when absent). A pytest without the key does not read it, so nothing is needed there."""
    try:
        from _pytest.tmpdir import tmppath_result_key
    except ImportError:
        return
    item.stash.setdefault(tmppath_result_key, {})


def finish_progress_row(reporter: Any) -> None:
    """End the terminal reporter's current row of result letters with its progress (``[ 42%]`` at the right
    edge, as pytest ends a full row), so that a line printed after it leaves pytest's progress row whole
    (``TerminalReporter._show_progress_info`` and ``_write_progress_information_filling_space``). Nothing is
    written where pytest shows no progress (``console_output_style = classic``)."""
    if not hasattr(reporter, "_show_progress_info"):
        raise changed("TerminalReporter._show_progress_info", "end pytest's progress row before a line of figures")
    if not reporter._show_progress_info:
        return
    fill = getattr(reporter, "_write_progress_information_filling_space", None)
    if fill is None:
        raise changed("TerminalReporter._write_progress_information_filling_space",
                      "end pytest's progress row before a line of figures")
    fill()


def start_rows_afresh(reporter: Any) -> None:
    """Make the terminal reporter start the next file's row without first ending the current one with its
    progress (``TerminalReporter.currentfspath``): a line printed after the last row already ended it."""
    if not hasattr(reporter, "currentfspath"):
        raise changed("TerminalReporter.currentfspath", "start pytest's next row after a line of figures")
    reporter.currentfspath = None


@contextmanager
def output_uncaptured(config: pytest.Config) -> Iterator[None]:
    """Terminal output written meanwhile reaches the terminal, also while pytest captures a test's output (the
    paired gate reports block pairs during a case's call; pytest's live logging does the same): the capture
    manager's ``global_and_fixture_disabled``. Where nothing captures (no capture manager) nothing changes."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        yield
        return
    disabled = getattr(capman, "global_and_fixture_disabled", None)
    if disabled is None:
        raise changed("CaptureManager.global_and_fixture_disabled", "print the paired gate's progress during a case")
    with disabled():
        yield
