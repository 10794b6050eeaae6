"""``--dmlbench-mmap-threshold BYTES``: both block servers, their zygotes and their ranks run with glibc's mmap
threshold fixed, so a large allocation is mapped afresh in every world whatever was freed before it; without
the option glibc raises the threshold once a mapped block is freed, and the next one comes from the heap."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import parse_mmap_threshold
from pytest_dmlbench.errors import ConfigError
from tests.gates.paired.conftest import NoOptionRun
from tests.gates.paired.one_case_run import paired_one_case

# rank 0 frees a 16 MB block, allocates another and writes whether that one was mapped (glibc's mallinfo2)
ALLOCATING_CASE = """
    import ctypes
    import os
    import time
    from pathlib import Path

    import pytest

    OUT = Path(os.environ["ALLOCATIONS_FILE"])


    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                           "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


    def mapped_blocks():
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallInfo2
        return libc.mallinfo2().hblks


    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_allocating(dist, dmlbench):
        dmlbench(lambda: time.sleep(0.005))
        if dist.rank == 0:
            first = bytearray(16 << 20)
            del first
            before = mapped_blocks()
            second = bytearray(16 << 20)
            mapped = mapped_blocks() - before
            del second
            with OUT.open("a") as out:
                out.write(f"{os.environ.get('MALLOC_MMAP_THRESHOLD_', '-')} "
                          f"{os.environ.get('MALLOC_TRIM_THRESHOLD_', '-')} {mapped}\\n")
"""

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the mmap threshold is glibc's")


def _paired_lines(tmp_path: Path, *options: str) -> tuple[dict[str, Any], list[str]]:
    return paired_one_case(tmp_path, "test_allocating.py", ALLOCATING_CASE, "ALLOCATIONS_FILE", *options)


@pytest.mark.parametrize("text, value", [("0", 0), (" 131072 ", 131072)])
def test_a_threshold_is_a_whole_number_of_bytes(text: str, value: int) -> None:
    assert parse_mmap_threshold(text) == value


@pytest.mark.parametrize("text", ["-1", "128k", "1.5"])
def test_a_bad_threshold_names_the_option_and_the_form(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--dmlbench-mmap-threshold: .* give an integer >= 0, e.g. "
                                          r"--dmlbench-mmap-threshold 131072"):
        parse_mmap_threshold(text)


@glibc_only
def test_every_block_maps_its_large_allocation_when_the_threshold_is_fixed(tmp_path: Path) -> None:
    paired, lines = _paired_lines(tmp_path, "--dmlbench-mmap-threshold", "131072")
    assert paired["mmap_threshold"] == 131072
    ordinary, blocks = lines[0], lines[1:]
    assert ordinary == "- - 0"  # the session's own run is not a block server's: glibc's dynamic threshold
    assert len(blocks) == 2 * (1 + sum(paired["pairs_per_stage"])), lines  # both servers, warm-up and pairs
    assert set(blocks) == {"131072 262144 1"}, lines


@glibc_only
def test_without_the_option_a_freed_block_raises_the_threshold_in_every_world(no_option_run: NoOptionRun) -> None:
    """The negative control: glibc's own threshold serves the second 16 MB from the heap, on both sides.
    (The run without options is shared with the other options' negative controls: conftest.py.)"""
    paired, lines = no_option_run["test_allocating.py"]
    assert paired["mmap_threshold"] == 0
    assert set(lines) == {"- - 0"}, lines
