"""Live progress: each case's headline figure as it finishes (before the summary, under xdist too), a sign
of life within the paired gate's block pairs, and the end-of-run table within narrow terminals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.gate import PairedGate
from pytest_dmlbench.gates.paired.pairs import BlockPair, ListSource
from pytest_dmlbench.gates.paired.stage import CaseJudgement
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.paired.trial import Trial
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.run_level import RunLevelRule
from pytest_dmlbench.reporting.progress import case_summary
from pytest_dmlbench.results import CaseResult, MetricResult, Verdict
from tests.conftest import run_pytest, write_files

pytest_plugins = ["pytester"]

CASES = """
    import time
    import pytest

    def step():
        time.sleep(0.01)

    @pytest.mark.dmlbench(world_size=1)
    @pytest.mark.parametrize("variant", ["a", "b"])
    def test_step(dist, dmlbench, variant):
        dmlbench.pedantic(step, rounds=5, warmup=1, samples_per_call=32)
"""
LINE = "dmlbench test_bench.py::test_step[[]{}]: throughput_samples_per_s * samples/s*"  # [[]: a literal [
NEXT_LINE = "dmlbench test_step[[]{}]: throughput_samples_per_s * samples/s*"  # the file named once


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_files(tmp_path, **{"test_bench.py": CASES, "pytest.ini": "[pytest]\n"})
    return tmp_path


def _dmlbench_part(output: str) -> list[str]:
    """The lines from the first case's progress line to the end of the table (pytest's header, which
    names the temporary folder, and its closing line are pytest's)."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("dmlbench test_"))
    last = max(i for i, line in enumerate(lines) if " passed" not in line and not line.startswith("="))
    return lines[first:last + 1]


@pytest.mark.parametrize("columns", [80, 120])
def test_each_case_prints_its_figure_as_it_finishes_and_every_line_fits(project: Path, columns: int) -> None:
    run = run_pytest(project, "--dmlbench", COLUMNS=str(columns))
    assert run.returncode == 0, run.output
    run.lines.fnmatch_lines(["test_bench.py .*[[] 50%[]]", LINE.format("a"), ".*[[]100%[]]", NEXT_LINE.format("b"),
                             "*= dmlbench =*"])  # each row of letters ends with its percentage before a line
    assert "\x1b[" not in run.output  # a plain log: no colour codes when not on a terminal
    part = _dmlbench_part(run.output)
    assert max(len(line) for line in part) <= columns, "\n".join(part)
    assert any(line.startswith("no verdicts: no case had a baseline") for line in part)  # nothing to compare
    # negative control: without --dmlbench the cases are skipped and print no figure
    skipped = run_pytest(project, COLUMNS=str(columns))
    assert skipped.returncode == 0 and "dmlbench test_bench.py::" not in skipped.output


def test_each_case_prints_its_figure_under_xdist(project: Path) -> None:
    run = run_pytest(project, "--dmlbench", "-n", "2", COLUMNS="80")
    assert run.returncode == 0, run.output
    progress = [i for i, line in enumerate(run.lines.lines) if line.startswith("dmlbench test_")]
    summary = next(i for i, line in enumerate(run.lines.lines) if "= dmlbench =" in line)
    assert len(progress) == 2 and max(progress) < summary, run.output
    assert max(len(line) for line in _dmlbench_part(run.output)) <= 80


def _case(verdicts: list[Verdict], **extra: object) -> CaseResult:
    case = CaseResult("t.py::test_x", {}, 2, "gloo", extra=dict(extra))
    case.add(MetricResult.of("throughput_samples_per_s", [13974.3, 13000.0, 15731.0]))
    case.add(MetricResult.of("peak_rss_mb", [1519.0]))
    case.verdicts = verdicts
    return case


def _verdict(metric: str, kind: str, change: str) -> Verdict:
    return Verdict(metric, kind, 1.0, 1.0, 1.0, 5.0, None, "", change=change)  # type: ignore[arg-type]


def test_a_case_line_gives_the_headline_its_verdict_and_the_pairs_it_rested_on() -> None:
    text, verdict = case_summary(_case([]))
    assert text == "t.py::test_x: throughput_samples_per_s 13974 samples/s (IQR 1366, 3 round(s))"
    assert verdict is None
    judged = _case([_verdict("throughput_samples_per_s", "regression", "+9.3 % slower"),
                    _verdict("peak_rss_mb", "regression", "+2.0 % larger")],
                   paired={"pairs_per_stage": [6, 4], "seconds": 41.7})
    text, verdict = case_summary(judged)
    assert text.endswith("; REGRESSION +9.3 % slower (also REGRESSION: peak_rss_mb); block pairs 6+4 in 42 s")
    assert verdict is not None and verdict.metric == "throughput_samples_per_s"


PAIRS_CONFTEST = """
    from pytest_dmlbench.reporting.progress import LiveProgress

    NOW = [0.0]

    def pytest_configure(config):
        every = float(config.getini("every_s") or 10)
        config.pluginmanager.register(LiveProgress(config, every_s=every, clock=lambda: NOW[0]), "progress")

    def pytest_addoption(parser):
        parser.addini("every_s", "interval")
"""
PAIRS_TEST = """
    import conftest

    def test_long_gate(request):
        progress = request.config.pluginmanager.get_plugin("progress")
        for pairs in range(1, 31):  # 30 pairs of 2 s each
            conftest.NOW[0] += 2.0
            progress.pairs_done(request.node.nodeid, pairs)
"""


@pytest.mark.parametrize(("every_s", "lines"), [(10, 6), (0, 30)])  # 0: the negative control, one per pair
def test_the_gate_shows_pairs_done_without_flooding_the_log(pytester: pytest.Pytester, every_s: int,
                                                            lines: int) -> None:
    pytester.makeconftest(PAIRS_CONFTEST)
    pytester.makepyfile(test_gate=PAIRS_TEST)
    pytester.makeini(f"[pytest]\nevery_s = {every_s}\n")
    result = pytester.runpytest("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=1)
    said = [line for line in result.outlines if re.search(r"block pairs? so far", line)]
    assert len(said) == lines, result.outlines
    if every_s:
        assert said[0] == "dmlbench test_gate.py::test_long_gate: 5 block pairs so far, 10 s"
        assert said[-1].endswith(": 30 block pairs so far, 60 s")


SWALLOWED_CONFTEST = """
    from pytest_dmlbench.reporting import progress

    def swallowed(self, nodeid, pairs):  # the old way: written straight to pytest's terminal during the call
        self._write(nodeid, f"{pairs} block pairs so far, 0 s")

    progress.LiveProgress.pairs_done = swallowed
"""
ROW_TESTS = """
    import conftest

    def test_a(): pass
    def test_b(): pass

    def test_long_gate(request):
        progress = request.config.pluginmanager.get_plugin("progress")
        for pairs in range(1, 31):
            conftest.NOW[0] += 2.0
            progress.pairs_done(request.node.nodeid, pairs)
"""


@pytest.mark.parametrize("swallowed", [False, True], ids=["uncaptured", "negative-control-captured"])
def test_pairs_lines_reach_the_terminal_during_the_case_and_the_row_keeps_its_width(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, swallowed: bool) -> None:
    """In a subprocess, whose output pytest captures at the file descriptor as a terminal's would be: a line
    written during a case's call must get past the capture. Written straight to pytest's terminal (the negative
    control), it went into the case's captured output, and the row of result letters after it ran past the
    terminal's width (pytest counted the row from the lost line's end)."""
    pytester.makeconftest(PAIRS_CONFTEST + (SWALLOWED_CONFTEST if swallowed else ""))
    pytester.makepyfile(test_gate=ROW_TESTS)
    pytester.makeini("[pytest]\nevery_s = 10\n")
    monkeypatch.setenv("COLUMNS", "80")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rP")
    result.assert_outcomes(passed=3)
    rows = [line for line in result.outlines if re.search(r"\[ *\d+%\]$", line)]  # pytest's progress rows
    captured = result.outlines.index(next(line for line in result.outlines if "PASSES" in line))
    said = [i for i, line in enumerate(result.outlines) if re.search(r"block pairs? so far", line)]
    assert rows and said, result.outlines
    widest = max(len(line) for line in rows)
    if swallowed:
        assert all(i > captured for i in said) and widest > 80, result.outlines
    else:
        assert all(i < captured for i in said) and widest <= 80, result.outlines


def test_the_paired_gate_reports_each_pair() -> None:
    """The trial tells its listener after every block pair, counted over the case's stages; the live gate
    hands the listener to its trial."""
    pairs = [BlockPair({"step_time_s": (0.01 * (1 + 0.01 * (i % 3)),)}, {"step_time_s": (0.01,)}) for i in range(60)]
    trial = Trial(VerdictWriter("HEAD", "0" * 40), RunLevelRule(0.01, 1), SequentialRule())
    item = JudgedItem("t.py::test_x", Path("t.py"), 60.0)
    directed = {"step_time_s": MetricResult.of("step_time_s", [0.01])}
    judgement = CaseJudgement(item.nodeid)
    source = ListSource(pairs)
    trial.judge_case(item, directed, {"step_time_s": "s"}, 10.0, source, judgement, 0.0)  # nobody listening
    told: list[tuple[str, int]] = []
    trial.on_pair = lambda nodeid, done: told.append((nodeid, done))
    judgement = CaseJudgement(item.nodeid)
    trial.judge_case(item, directed, {"step_time_s": "s"}, 10.0, ListSource(pairs), judgement, 0.0)
    assert source.served >= 4 and told == [("t.py::test_x", n) for n in range(1, sum(judgement.stages) + 1)], told
    assert isinstance(PairedGate.on_pair, property) and PairedGate.on_pair.fset is not None


GATED_CASE = """
    import time
    import pytest

    @pytest.mark.dmlbench(world_size=1, threshold=50, pair_budget=5)
    def test_same(dist, dmlbench):
        dmlbench(time.sleep, 0.01)
"""


def test_under_the_paired_gate_a_case_line_gives_its_verdict_and_block_pairs(tmp_path: Path) -> None:
    from tests.gates.paired.gitrepo import make_repo

    repo = make_repo(tmp_path / "repo", **{"test_cases.py": GATED_CASE, "pytest.ini": "[pytest]\n"})
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", COLUMNS="120", timeout=600)
    assert run.returncode == 0, run.output
    lines = run.lines.lines
    line = next(i for i, text in enumerate(lines)  # the file named once: by a pairs line when one came first
                if re.match(r"dmlbench (test_cases\.py::)?test_same: ", text) and "so far" not in text)
    more = [text.strip() for text in lines[line + 1:line + 3] if re.match(r"    \S", text)]  # not pytest's [100%]
    said = " ".join([lines[line], *more])
    assert max(len(text) for text in lines[line:line + 3]) <= 120
    assert "; unchanged " in said or "; inconclusive " in said, said
    assert re.search(r"; block pairs \d+(\+\d+)? in \d+ s$", said), said
    assert line < next(i for i, text in enumerate(lines) if "= dmlbench gate =" in text)
    gate_section = lines[next(i for i, text in enumerate(lines) if "= dmlbench gate =" in text) + 1:]
    gate_lines = [text for text in gate_section[:next((i for i, t in enumerate(gate_section) if t.startswith("=")),
                                                      len(gate_section))]]
    assert gate_lines and all(_fits(text, 120) for text in gate_lines), gate_lines


def _fits(line: str, width: int) -> bool:
    """Within ``width``, or a single word too long to break (a path, a command to copy) after its indent."""
    return len(line) <= width or len(line.strip().split(" ")) == 1 or line.strip().startswith(("pytest ", "`pytest"))


SLOWED_CASE = GATED_CASE.replace("dmlbench(time.sleep, 0.01)", "dmlbench(time.sleep, 0.01 * SLOW)").replace(
    "import pytest\n", "import pytest\n\n    SLOW = 1\n")


def test_a_failing_verdict_is_wrapped_to_the_terminal(tmp_path: Path) -> None:
    from tests.gates.paired.gitrepo import make_repo

    repo = make_repo(tmp_path / "repo", **{"test_cases.py": SLOWED_CASE, "pytest.ini": "[pytest]\n"})
    (repo / "test_cases.py").write_text((repo / "test_cases.py").read_text().replace("SLOW = 1", "SLOW = 5"))
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", COLUMNS="70", timeout=600)
    assert run.returncode == 1, run.output
    lines = run.lines.lines
    start = next(i for i, text in enumerate(lines) if "step_time_s regressed against REF HEAD" in text)
    message = lines[start:next(i for i in range(start, len(lines)) if lines[i].startswith(("=", "_", "-")))]
    assert len(message) > 3, message  # one verdict's message, several lines at 70 columns
    assert all(_fits(text, 70) for text in message), message
