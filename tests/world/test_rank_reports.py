"""Reports of forked ranks end to end, in one inner run: a hang blamed on the rank outside the collective at
the case's timeout, rank warnings in pytest's summary (``-W error`` honoured), one GroupMismatch message and
the world kept, a duration instead of "after None", torch's own CUDA error on a CUDA build without a driver
(with the old device count poisoning fork as the negative control), and the how-to's runnable example."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

from tests.conftest import Outcome, run_pytest, write_files
from tests.world.test_failures import section

ROOT = Path(__file__).resolve().parents[2]
HOW_TO = ROOT / "docs" / "how-to" / "run-existing-scripts.md"


def the_how_tos_example() -> str:
    """The test file of the how-to's runnable example, as the page shows it."""
    text = HOW_TO.read_text()
    start = text.index("```python", text.index("## A runnable example")) + len("```python")
    return text[start:text.index("```", start)]

CASES = """
    import os, time, warnings
    import pytest, torch, torch.distributed as td

    def note(name, dist):
        with open(os.environ["PIDS_FILE"], "a") as out:
            out.write(f"{name} {dist.rank} {os.getpid()}\\n")

    @pytest.mark.dmlbench(timeout=3)
    def test_hang(dist):
        if dist.rank == 1:
            time.sleep(600)
        td.all_reduce(torch.ones(1))

    @pytest.mark.dmlbench
    def test_group_timeout_beyond_the_case_timeout(dist):
        gloo = td.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
        assert gloo.options._timeout.total_seconds() > 24 * 3600

    @pytest.mark.dmlbench
    def test_warns(dist):
        warnings.warn("careful with the shards", UserWarning)

    @pytest.mark.dmlbench
    @pytest.mark.filterwarnings("ignore:quietly")
    def test_filtered_warning(dist):
        warnings.warn("quietly dropped", UserWarning)

    @pytest.mark.dmlbench
    def test_fatal_warning(dist):
        warnings.warn("fatal: the -W error filter applies on the rank", UserWarning)

    @pytest.mark.dmlbench
    def test_mismatch(dist):
        note("mismatch", dist)
        td.init_process_group("nccl")

    @pytest.mark.dmlbench
    def test_after_mismatch(dist):
        note("after_mismatch", dist)

    @pytest.mark.dmlbench
    def test_fails_after_a_collective(dist):
        note("collective", dist)
        td.all_reduce(torch.ones(1))
        assert False, "fails on every rank"

    @pytest.mark.dmlbench
    def test_after_the_failure(dist):
        note("after_collective", dist)

    @pytest.mark.dmlbench
    def test_skips_on_rank_0(dist):
        if dist.rank == 0:
            pytest.skip("only rank 0")
        td.barrier()

    @pytest.mark.dmlbench
    def test_cuda_call(dist):
        torch.zeros(1, device="cuda")

    def _cuda_error_in_forked_child():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                torch.zeros(1, device="cuda")
                os.write(write, b"no error")
            except BaseException as exc:
                os.write(write, str(exc).encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        return os.read(read, 4096).decode()

    def test_a_counting_in_a_child_leaves_fork_safe():
        from pytest_dmlbench.world.cuda_count import cuda_device_count

        assert cuda_device_count() == 0
        print("COUNTED:", _cuda_error_in_forked_child())

    def test_b_torch_device_count_poisons_fork():
        assert torch.cuda.device_count() == 0
        print("POISONED:", _cuda_error_in_forked_child())
"""


def _no_nvidia_driver() -> bool:
    for library in ("libcuda.so.1", "libnvidia-ml.so.1"):
        try:
            ctypes.CDLL(library)
        except OSError:
            continue
        return False
    return True


def _cuda_build() -> bool:
    import torch

    return bool(torch.backends.cuda.is_built())  # type: ignore[no-untyped-call]


CUDA_BUILD_WITHOUT_DRIVER = _cuda_build() and _no_nvidia_driver()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, dict[str, set[int]]]:
    folder = tmp_path_factory.mktemp("reports")
    write_files(folder, **{"test_cases.py": CASES, "test_train.py": the_how_tos_example()})
    (folder / "train.py").write_text((ROOT / "tests" / "world" / "data" / "ddp_tutorial.py").read_text())
    pids = folder / "pids.txt"
    # "0" makes torch ask the CUDA runtime once NVML finds no driver: the path that poisoned fork
    visible = "0" if CUDA_BUILD_WITHOUT_DRIVER else ""
    outcome = run_pytest(folder, "--dmlbench", "--world-size", "2", "-W", "error:fatal", "-s", "-v",
                         PIDS_FILE=str(pids), CUDA_VISIBLE_DEVICES=visible)
    by_case: dict[str, set[int]] = {}
    for line in Path(pids).read_text().splitlines():
        name, _rank, pid = line.split()
        by_case.setdefault(name, set()).add(int(pid))
    return outcome, by_case


def test_outcomes(run: tuple[Outcome, dict[str, set[int]]]) -> None:
    outcome, _ = run
    for passing in ("group_timeout_beyond_the_case_timeout", "warns", "filtered_warning", "after_mismatch",
                    "after_the_failure", "a_counting_in_a_child_leaves_fork_safe", "b_torch_device_count_poisons_fork"):
        assert re.search(rf"test_cases.py::test_{passing} (.*\n)?PASSED", outcome.output), passing
    assert "test_train.py::test_train PASSED" in outcome.output  # the how-to's example, on forked ranks
    outcome.lines.fnmatch_lines(["*6 failed, 8 passed, 1 warning*"])


def test_a_hang_is_blamed_on_the_rank_outside_the_collective_at_the_case_timeout(
        run: tuple[Outcome, dict[str, set[int]]]) -> None:
    outcome, _ = run
    block = section(outcome, "test_hang")
    pytest.LineMatcher(block.splitlines()).fnmatch_lines([
        "distributed case timed out after 3 s on 2 rank(s) (gloo): rank(s) 1 held it up, outside any collective, "
        "while rank(s) 0 wait in one; look at what rank(s) 1 do instead.",
        "  rank 0: in all_reduce (test_cases.py:13 in test_hang)",
        "  rank 1: outside any collective, at test_cases.py:12 in test_hang",
        "[[]rank 1[]] still running at the 3 s timeout; it is outside any collective, at test_cases.py:12 in "
        "test_hang; its stack:",
        "[[]rank 0[]] still running at the 3 s timeout; it waits in all_reduce (test_cases.py:13 in test_hang); "
        "its stack:",
    ])
    assert "make the check hold on every rank" not in block  # no advice meant for assertions


def test_rank_warnings_reach_the_summary_and_the_filters_apply_on_the_ranks(
        run: tuple[Outcome, dict[str, set[int]]]) -> None:
    outcome, _ = run
    summary = outcome.output[outcome.output.index("warnings summary"):]
    pytest.LineMatcher(summary.splitlines()).fnmatch_lines([
        "test_cases.py::test_warns",
        "*test_cases.py:22: UserWarning: careful with the shards [[]on ranks 0, 1[]]",
    ])
    assert summary.count("UserWarning: careful with the shards") == 1  # once, not once per rank
    assert "quietly dropped" not in outcome.output  # the item's filterwarnings mark held on the ranks
    fatal = section(outcome, "test_fatal_warning")  # -W error:fatal made the warning each rank's failure
    assert "failed on rank(s) 0, 1 of 2" in fatal
    assert "UserWarning: fatal: the -W error filter applies on the rank" in fatal


def test_one_group_mismatch_message_and_the_world_kept(run: tuple[Outcome, dict[str, set[int]]]) -> None:
    outcome, pids = run
    block = section(outcome, "test_mismatch")
    assert block.count("asks for what this case's world") == 1, block
    assert "[ranks 0, 1] failed alike (rank 0's shown):" in block
    assert "torn down" not in block
    assert pids["mismatch"] == pids["after_mismatch"]  # the same rank processes ran the next case
    # negative control: a failure after a collective still rebuilds the world
    assert "torn down" in section(outcome, "test_fails_after_a_collective")
    assert not pids["collective"] & pids["after_collective"]


def test_a_duration_where_after_none_was(run: tuple[Outcome, dict[str, set[int]]]) -> None:
    outcome, _ = run
    block = section(outcome, "test_skips_on_rank_0")
    assert "after None" not in outcome.output
    assert ("[rank 1] did not finish within 1 s after rank 0 skipped; it waits in barrier "
            "(test_cases.py:56 in test_skips_on_rank_0)") in block


@pytest.mark.skipif(not CUDA_BUILD_WITHOUT_DRIVER, reason="needs a CUDA build of torch on a machine without the "
                    "NVIDIA driver (the CPU runners' case)")
def test_a_cuda_call_on_a_rank_gets_torchs_own_error(run: tuple[Outcome, dict[str, set[int]]]) -> None:
    outcome, _ = run
    block = section(outcome, "test_cuda_call")
    assert "Found no NVIDIA driver on your system" in block, block
    assert "Cannot re-initialize CUDA in forked subprocess" not in block
    assert "COUNTED: Found no NVIDIA driver on your system" in outcome.output
    # negative control: counting the old way in the forking process poisons every later fork
    assert "POISONED: Cannot re-initialize CUDA in forked subprocess" in outcome.output
