"""The parts of a forked case's report, unit by unit: where a stuck rank is, the failure text, whether a world
survives a failure, rank warnings, and the CUDA device count made in a child."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.world import cuda_count
from pytest_dmlbench.world.dispatch import group_unharmed
from pytest_dmlbench.world.failure import failure_text
from pytest_dmlbench.world.hang import place_of
from pytest_dmlbench.world.messages import RankOutcome
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport
from pytest_dmlbench.world.rank_warnings import RankWarning, filters_in_force, raise_in_parent, recorded

TORCH = "/venv/lib/python3.11/site-packages/torch"
PLUGIN = "/repo/pytest_dmlbench"


def dump(*frames: str, other_thread: tuple[str, ...] = ()) -> str:
    """A faulthandler dump of the case thread (most recent call first), below it the plugin's frames."""
    lines = []
    if other_thread:
        lines += ["Thread 0x00007f01 (most recent call first):", *other_thread, ""]
    lines += ["Current thread 0x00007f02 (most recent call first):", *frames,
              f'  File "{PLUGIN}/properties/body.py", line 25 in run_case_body',
              f'  File "{PLUGIN}/world/execute.py", line 151 in _run_body']
    return "\n".join(lines)


IN_ALL_REDUCE = dump(f'  File "{TORCH}/distributed/distributed_c10d.py", line 3913 in all_reduce',
                     f'  File "{TORCH}/distributed/c10d_logger.py", line 83 in wrapper',
                     '  File "/work/test_x.py", line 8 in test_hang')
SLEEPING = dump('  File "/work/test_x.py", line 7 in test_hang')


def test_a_rank_in_torch_distributed_waits_in_the_collective_its_line_called() -> None:
    place = place_of(IN_ALL_REDUCE)
    assert place is not None and place.in_collective
    assert str(place) == "waits in all_reduce (test_x.py:8 in test_hang)"


def test_a_rank_elsewhere_is_outside_any_collective() -> None:
    place = place_of(SLEEPING)
    assert place is not None and not place.in_collective
    assert str(place) == "is outside any collective, at test_x.py:7 in test_hang"


def test_a_line_that_waits_on_asynchronous_work_is_in_a_collective(tmp_path: Path) -> None:
    source = tmp_path / "test_w.py"
    source.write_text("def test_w(dist):\n    work.wait()\n")
    place = place_of(dump(f'  File "{source}", line 2 in test_w'))
    assert place is not None and place.collective == "wait() of an asynchronous collective"


def test_the_case_thread_is_found_among_others() -> None:
    stack = dump('  File "/work/test_x.py", line 7 in test_hang',
                 other_thread=(f'  File "{TORCH}/distributed/distributed_c10d.py", line 1 in barrier',))
    place = place_of(stack)
    assert place is not None and not place.in_collective


def test_a_stack_that_is_not_a_faulthandler_dump_has_no_place() -> None:
    assert place_of('  File "/work/test_x.py", line 7, in test_hang\n    time.sleep(600)\n') is None


def reports(*specs: tuple[str, str]) -> list[RankReport]:
    """('stuck', stack) or (status, message) per rank."""
    made = []
    for rank, (kind, text) in enumerate(specs):
        if kind == "stuck":
            made.append(RankReport(rank, stuck=True, stack=text))
        else:
            made.append(RankReport(rank, RankOutcome(1, rank, kind, message=text,  # type: ignore[arg-type]
                                                     traceback=text if kind == "failed" else "")))
    return made


def test_a_timeout_blames_the_rank_outside_the_collective() -> None:
    run = CaseOutcome(reports(("stuck", IN_ALL_REDUCE), ("stuck", SLEEPING), ("stuck", IN_ALL_REDUCE)), 3.0,
                      timed_out=True, world_broken=True, timeout_s=3.0)
    text = failure_text(run, 3, "gloo")
    assert text.splitlines()[:3] == [
        "distributed case timed out after 3 s on 3 rank(s) (gloo): rank(s) 1 held it up, outside any collective, "
        "while rank(s) 0, 2 wait in one; look at what rank(s) 1 do instead.",
        "  ranks 0, 2: in all_reduce (test_x.py:8 in test_hang)",
        "  rank 1: outside any collective, at test_x.py:7 in test_hang",
    ]
    assert text.index("[rank 1]") < text.index("[ranks 0, 2]")  # the rank the others wait for comes first
    assert "Raise the limit" not in text


def test_a_timeout_without_a_rank_in_a_collective_suggests_a_longer_limit() -> None:
    run = CaseOutcome(reports(("stuck", SLEEPING), ("stuck", SLEEPING)), 3.0, timed_out=True, timeout_s=3.0)
    assert "Raise the limit" in failure_text(run, 2, "gloo").splitlines()[0]


def test_ranks_left_waiting_after_a_skip_get_a_duration_not_none() -> None:
    run = CaseOutcome(reports(("skipped", "only rank 0"), ("stuck", IN_ALL_REDUCE)), 1.2, grace_s=1.0)
    text = failure_text(run, 2, "gloo")
    assert "None" not in text
    assert ("[rank 1] did not finish within 1 s after rank 0 skipped; it waits in all_reduce "
            "(test_x.py:8 in test_hang)") in text


def test_ranks_that_failed_alike_are_reported_once() -> None:
    run = CaseOutcome(reports(("failed", "GroupMismatch: init_process_group() on rank 0 asks for nccl"),
                              ("failed", "GroupMismatch: init_process_group() on rank 1 asks for nccl"),
                              ("failed", "AssertionError: other")), 0.1)
    text = failure_text(run, 3, "gloo")
    assert text.count("asks for nccl") == 1
    assert "[ranks 0, 1] failed alike (rank 0's shown):" in text
    assert "[rank 2] failed:" in text


def outcome(rank: int, status: str, touched: bool) -> RankReport:
    return RankReport(rank, RankOutcome(1, rank, status, group_touched=touched))  # type: ignore[arg-type]


@pytest.mark.parametrize(("ranks", "kept"), [
    ([outcome(0, "failed", False), outcome(1, "failed", False)], True),  # failed before any collective
    ([outcome(0, "passed", True), outcome(1, "passed", True)], True),
    ([outcome(0, "failed", True), outcome(1, "failed", False)], False),  # a rank used the group
    ([outcome(0, "failed", False), RankReport(1, stuck=True)], False),  # a rank did not answer
])
def test_a_world_survives_a_failure_only_when_its_group_was_not_touched(ranks: list[RankReport], kept: bool) -> None:
    assert group_unharmed(ranks) is kept


def test_warnings_are_recorded_under_the_sent_filters_and_raised_once_in_the_parent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", "quiet")
        sent = filters_in_force()
    per_rank = []
    for rank in range(3):
        with recorded(sent) as caught:
            warnings.warn("shards differ", UserWarning, stacklevel=1)
            warnings.warn("quiet one", UserWarning, stacklevel=1)
        per_rank.append((rank, caught))
    assert [w.message for w in per_rank[0][1]] == ["shards differ"]
    with pytest.warns(UserWarning, match=r"^shards differ \[on ranks 0, 1, 2\]$") as shown:
        raise_in_parent(per_rank)
    assert len(shown) == 1


def test_an_error_filter_raises_on_the_rank() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "fatal")
        sent = filters_in_force()
    with pytest.raises(UserWarning, match="fatal"), recorded(sent):
        warnings.warn("fatal thing", UserWarning, stacklevel=1)


def test_python_default_filters_with_plain_module_strings_travel() -> None:
    with warnings.catch_warnings():
        warnings.resetwarnings()
        cast(list[Any], warnings.filters).insert(0, ("ignore", None, DeprecationWarning, "__main__", 0))
        sent = filters_in_force()
    assert sent[0][3] == r"__main__\Z"


def test_a_warning_class_that_cannot_travel_is_named_in_a_user_warning() -> None:
    class Local(UserWarning):
        pass

    with recorded(()) as caught:
        warnings.warn("odd", Local, stacklevel=1)
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert caught[0].message.endswith("<locals>.Local: odd")
    assert caught[0] == RankWarning(caught[0].message, UserWarning, __file__, caught[0].lineno)


def test_the_device_count_is_read_from_a_child() -> None:
    assert cuda_count._parse("2\n", "how") == 2
    with pytest.raises(WorldError, match=r"counting CUDA devices failed: how:\nTraceback\.\.\.\nRuntimeError: boom"):
        cuda_count._parse("Traceback...\nRuntimeError: boom\n", "how")


def test_a_threaded_process_counts_in_a_new_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_count, "_CHILD_CODE", "print(3)")
    assert cuda_count._count_in_new_interpreter(60) == 3
    monkeypatch.setattr(cuda_count, "_CHILD_CODE", "import sys; sys.exit('no driver here')")
    with pytest.raises(WorldError, match=f"{sys.executable} -c .* exited with status 1:\nno driver here"):
        cuda_count._count_in_new_interpreter(60)


def test_a_single_threaded_process_counts_in_a_forked_child() -> None:
    """The suite hides GPUs (CUDA_VISIBLE_DEVICES=""), so the child counts none."""
    assert cuda_count._count_in_forked_child(60) == 0
