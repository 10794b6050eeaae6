"""pytest's private API, each use checked against the installed pytest, and the guard that names a change."""

from __future__ import annotations

import types

import pytest
from _pytest.assertion import util

from pytest_dmlbench import pytest_internals
from pytest_dmlbench.errors import PytestInternalsChanged
from pytest_dmlbench.pytest_internals import (
    assertion_explanations,
    fixture_argnames,
    fixture_scopes,
    mark_call_phase_reported,
)

pytest_plugins = ["pytester"]

SOURCE = """
    import pytest

    @pytest.fixture(scope="module")
    def wide():
        return 1

    @pytest.fixture
    def narrow():
        return 2

    def test_func(narrow, wide, request):
        pass
"""


def test_the_fixtures_a_test_names_itself(pytester: pytest.Pytester) -> None:
    item = pytester.getitem(SOURCE)
    assert fixture_argnames(item) == ("narrow", "wide", "request")


def test_the_scope_of_each_fixture_in_use(pytester: pytest.Pytester) -> None:
    """Read where the plugin reads it: in the call phase, its fixtures set up."""
    pytester.makeconftest("""
        import pytest
        from pytest_dmlbench.pytest_internals import fixture_scopes

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_call(item):
            print("SCOPES", sorted(fixture_scopes(item, ["narrow", "wide", "absent"]).items()))
    """)
    pytester.makepyfile(SOURCE)
    result = pytester.runpytest_inprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SCOPES [[]('narrow', 'function'), ('wide', 'module')[]]"])


def test_assertion_explanations_are_installed_and_put_back(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    before = util._reprcompare
    with assertion_explanations(config):
        assert util._reprcompare is not before
        installed = util._reprcompare
        assert installed is not None
        explanation = installed("==", [1, 2, 3], [1, 2, 4])
    assert util._reprcompare is before
    assert explanation is not None and "At index 2 diff" in explanation


def test_a_call_phase_result_is_recorded_for_tmp_path(pytester: pytest.Pytester) -> None:
    from _pytest.tmpdir import tmppath_result_key

    item = pytester.getitem(SOURCE)
    assert isinstance(item, pytest.Function)
    mark_call_phase_reported(item)
    assert item.stash[tmppath_result_key] == {}


def test_a_removed_private_name_is_a_clear_error_not_a_traceback_into_pytest(monkeypatch: pytest.MonkeyPatch,
                                                                          pytester: pytest.Pytester) -> None:
    """Negative controls: what each accessor says when the installed pytest lacks what it reads."""
    item = types.SimpleNamespace()  # an item of a pytest without _fixtureinfo or _request
    with pytest.raises(PytestInternalsChanged, match=r"pytest \S+ has no Item\._fixtureinfo\.argnames.*"
                                                     r"checked with pytest 8\.0 to 9\.2: install a pytest in "
                                                     r"that range \(pip install 'pytest<10'\)"):
        fixture_argnames(item)  # type: ignore[arg-type]
    with pytest.raises(PytestInternalsChanged, match="fixture-request internals"):
        fixture_scopes(item, ["x"])  # type: ignore[arg-type]
    config = pytester.parseconfigure()
    monkeypatch.delattr(util, "_reprcompare")
    with pytest.raises(PytestInternalsChanged, match="_reprcompare"), assertion_explanations(config):
        pass
    assert pytest_internals.CHECKED in str(pytest_internals.changed("x", "y"))
