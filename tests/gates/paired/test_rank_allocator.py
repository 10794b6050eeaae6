"""``--dmlbench-rank-allocator``: both block servers, their zygotes and their ranks run with a caching allocator
preloaded (checked to load before a server starts); the session's own run keeps the C library's."""

from __future__ import annotations

import ctypes.util
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import NAMED_ALLOCATORS, parse_rank_allocator
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.paired.allocator import PRELOAD_ENV, preload_environment, preload_library
from tests.gates.paired.conftest import NoOptionRun
from tests.gates.paired.one_case_run import paired_one_case

# every rank writes whether tcmalloc is among the libraries its process has mapped
MAPPING_CASE = """
    import os
    import time
    from pathlib import Path

    import pytest

    OUT = Path(os.environ["MAPPINGS_FILE"])


    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_mapping(dist, dmlbench):
        dmlbench(lambda: time.sleep(0.005))
        maps = Path("/proc/self/maps").read_text()
        with OUT.open("a") as out:
            out.write(f"{dist.rank} {int('libtcmalloc' in maps)}\\n")
"""

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is the ELF loader's")
needs_tcmalloc = pytest.mark.skipif(
    not any(ctypes.util.find_library(name) for name in NAMED_ALLOCATORS["tcmalloc"].libraries),
    reason="tcmalloc is not installed (Debian: apt-get install libtcmalloc-minimal4; .ci/run installs it)")


def _paired_lines(tmp_path: Path, *options: str) -> tuple[dict[str, Any], list[str]]:
    return paired_one_case(tmp_path, "test_mapping.py", MAPPING_CASE, "MAPPINGS_FILE", *options)


@pytest.mark.parametrize("text, value", [("system", "system"), (" TCMalloc ", "tcmalloc"), ("jemalloc", "jemalloc"),
                                         ("/opt/lib/libtcmalloc.so.4", "/opt/lib/libtcmalloc.so.4")])
def test_an_allocator_is_a_name_or_a_library_path(text: str, value: str) -> None:
    assert parse_rank_allocator(text) == value


@pytest.mark.parametrize("text", ["mimalloc", "libtcmalloc.so", "/opt/lib/tcmalloc", ""])
def test_a_bad_allocator_names_the_option_and_the_forms(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--dmlbench-rank-allocator: .* give system, tcmalloc, jemalloc or the "
                                          r"path of a shared library, e.g. --dmlbench-rank-allocator tcmalloc"):
        parse_rank_allocator(text)


def test_the_system_allocator_preloads_nothing() -> None:
    assert preload_library("system") is None
    assert preload_environment(None) == ()


def test_the_preload_goes_ahead_of_what_the_user_preloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRELOAD_ENV, raising=False)
    assert preload_environment("/lib/liba.so") == ((PRELOAD_ENV, "/lib/liba.so"),)
    monkeypatch.setenv(PRELOAD_ENV, "/lib/libmine.so")
    assert preload_environment("/lib/liba.so") == ((PRELOAD_ENV, "/lib/liba.so:/lib/libmine.so"),)


@linux_only
def test_a_missing_library_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "libnothere.so.1"
    with pytest.raises(ConfigError, match=rf"{missing} does not exist; give the path of the allocator's shared"):
        preload_library(str(missing))


@linux_only
def test_a_file_the_loader_cannot_preload_is_refused_with_its_words(tmp_path: Path) -> None:
    """The dynamic loader only warns and starts the process without it: the check sees that it is not mapped."""
    not_elf = tmp_path / "libbroken.so.1"
    not_elf.write_bytes(b"this is not a shared library\n")
    with pytest.raises(ConfigError, match=r"libbroken.so.1 could not be preloaded \(.*cannot be preloaded.*\); give a "
                                          r"shared library of an allocator built for this machine"):
        preload_library(str(not_elf))


@linux_only
@needs_tcmalloc
def test_tcmalloc_by_name_is_found_and_loads() -> None:
    library = preload_library("tcmalloc")
    assert library is not None and "tcmalloc" in library


@linux_only
@needs_tcmalloc
def test_every_block_runs_on_ranks_that_preload_the_allocator(tmp_path: Path) -> None:
    paired, lines = _paired_lines(tmp_path, "--dmlbench-rank-allocator", "tcmalloc")
    assert paired["rank_allocator"] == "tcmalloc"
    ordinary, blocks = lines[:2], lines[2:]
    assert sorted(ordinary) == ["0 0", "1 0"]  # the session's own ranks keep the C library's allocator
    assert len(blocks) == 2 * 2 * (1 + sum(paired["pairs_per_stage"])), lines  # 2 ranks, both servers, warm-ups
    assert {line.split()[1] for line in blocks} == {"1"}, lines


@linux_only
def test_without_the_option_no_rank_preloads_it(no_option_run: NoOptionRun) -> None:
    """The negative control: the same run without the option maps no tcmalloc in any rank of either side.
    (The run without options is shared with the other options' negative controls: conftest.py.)"""
    paired, lines = no_option_run["test_mapping.py"]
    assert paired["rank_allocator"] == "system"
    assert len(lines) == 2 * (1 + 2 * (1 + sum(paired["pairs_per_stage"]))), lines
    assert {line.split()[1] for line in lines} == {"0"}, lines
