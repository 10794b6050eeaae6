"""Option, ini and marker validation: bad values are usage errors that name the value and the accepted form."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.config import (
    parse_backend,
    parse_positive_seconds,
    parse_threshold,
    parse_world_size,
    scaling_world_sizes,
)
from pytest_dmlbench.errors import ConfigError
from tests.conftest import run_pytest, write_files

CASE = """
    import pytest

    @pytest.mark.dmlbench
    def test_case(dist):
        assert dist.world_size >= 1
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--world-size", "0"], "*--world-size: 0 is too small; give an integer >= 1, e.g. --world-size 4*"),
        (["--world-size", "abc"], "*--world-size: 'abc' is not a whole number; give an integer >= 1*"),
        (["--dmlbench-timeout", "-5"], "*--dmlbench-timeout: '-5' must be a finite number of seconds > 0*"),
        (["--dmlbench-timeout", "soon"], "*--dmlbench-timeout: 'soon' is not a number of seconds*"),
        (["--dmlbench-backend", "mpi"], "*--dmlbench-backend: 'mpi' is not a backend; choose one of auto, gloo, nccl*"),
        (["--dmlbench-threshold", "-1"], "*--dmlbench-threshold: '-1' must be a finite percentage >= 0*"),
    ],
    ids=["ws-zero", "ws-text", "timeout-negative", "timeout-text", "backend", "threshold"],
)
def test_bad_option_is_a_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    write_files(tmp_path, **{"test_x.py": CASE})
    result = run_pytest(tmp_path, "--dmlbench", *args)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.output
    result.lines.fnmatch_lines(["ERROR: " + message.lstrip("*")])
    assert "Traceback" not in result.output


def test_bad_ini_value_names_the_ini_key(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASE, "pytest.ini": "[pytest]\ndmlbench_world_size = two\n"})
    result = run_pytest(tmp_path, "--dmlbench")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    result.lines.fnmatch_lines(["ERROR: --world-size: 'two' is not a whole number*"])


def test_ini_sets_defaults_and_command_line_wins(tmp_path: Path) -> None:
    write_files(tmp_path, **{
        "pytest.ini": "[pytest]\ndmlbench = true\ndmlbench_world_size = 3\n",
        "test_x.py": """
            import pytest

            @pytest.mark.dmlbench
            def test_size(dist):
                print("size", dist.world_size)
                assert False, "show output"
        """,
    })
    from_ini = run_pytest(tmp_path)
    from_ini.lines.fnmatch_lines(["size 3"])
    from_cli = run_pytest(tmp_path, "--world-size", "2")
    from_cli.lines.fnmatch_lines(["size 2"])
    from_long_form = run_pytest(tmp_path, "--dmlbench-world-size", "1")
    from_long_form.lines.fnmatch_lines(["size 1"])


def test_the_long_form_of_the_world_size_is_checked_like_the_short_one(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASE})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-world-size", "0")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.output
    result.lines.fnmatch_lines(["ERROR: --world-size: 0 is too small*"])


def test_bad_marker_argument_is_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest

        @pytest.mark.dmlbench(world_size=0)
        def test_zero(dist):
            pass

        @pytest.mark.dmlbench(wrold_size=2)
        def test_typo(dist):
            pass

        @pytest.mark.dmlbench(pair_budget=-5)
        def test_budget(dist):
            pass
    """})
    result = run_pytest(tmp_path, "--dmlbench", "test_x.py::test_zero")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    result.lines.fnmatch_lines(["ERROR: test_x.py::test_zero: world_size=: 0 is too small*"])
    result = run_pytest(tmp_path, "--dmlbench", "test_x.py::test_typo")
    result.lines.fnmatch_lines(
        ["ERROR: test_x.py::test_typo: unknown dmlbench marker argument(s) wrold_size; accepted:*pair_budget*"]
    )
    result = run_pytest(tmp_path, "--dmlbench", "test_x.py::test_budget")
    result.lines.fnmatch_lines(["ERROR: test_x.py::test_budget: pair_budget=: -5 must be a finite number of "
                                "seconds > 0*"])


def test_without_the_flag_cases_are_skipped_with_the_reason(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASE, "test_plain.py": "def test_plain():\n    assert True\n"})
    result = run_pytest(tmp_path, "-rs")
    assert result.returncode == 0
    result.lines.fnmatch_lines(
        ["SKIPPED [[]1[]] test_x.py:4: distributed case: run with --dmlbench", "*1 passed, 1 skipped*"]
    )


def test_fixtures_outside_a_case_say_what_to_do(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_plain(dist):\n    pass\n"})
    result = run_pytest(tmp_path, "--dmlbench")
    result.lines.fnmatch_lines(
        ["*the 'dist' fixture needs a distributed case; mark the test with @pytest.mark.dmlbench*"]
    )


@pytest.mark.parametrize(("text", "value"), [("1", 1), (" 4 ", 4), (8, 8)])
def test_world_size_accepts_positive_integers(text: object, value: int) -> None:
    assert parse_world_size(text) == value


@pytest.mark.parametrize("text", ["0", "-2", "1.5", "", "four"])
def test_world_size_rejects_the_rest(text: str) -> None:
    with pytest.raises(ConfigError, match="--world-size"):
        parse_world_size(text)


def test_other_parsers() -> None:
    assert parse_backend("GLOO") == "gloo"
    assert parse_positive_seconds("2.5") == 2.5
    assert parse_threshold("15%") == 15.0
    for bad in ("nan", "inf", "0"):
        with pytest.raises(ConfigError):
            parse_positive_seconds(bad)


@pytest.mark.parametrize(("top", "sizes"), [(1, [1]), (2, [1, 2]), (4, [1, 2, 4]), (6, [1, 2, 4, 6])])
def test_scaling_world_sizes(top: int, sizes: list[int]) -> None:
    assert scaling_world_sizes(top) == sizes


def test_xdist_worker_count() -> None:
    from pytest_dmlbench.world.run_facts import xdist_worker_count

    assert xdist_worker_count(None, {}, 8) == 1
    assert xdist_worker_count(3, {}, 8) == 3
    assert xdist_worker_count("auto", {}, 8) == 8
    assert xdist_worker_count(None, {"PYTEST_XDIST_WORKER_COUNT": "2"}, 8) == 2
