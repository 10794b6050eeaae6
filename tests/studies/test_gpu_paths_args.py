"""``studies/gpu_paths.py`` on a CPU host: its options, the world it picks, and its report, from results files made
here (the cases' outcomes are written by hand: no GPU ran them); the whole script with no CUDA device."""

from __future__ import annotations

from pathlib import Path

import pytest

from studies import gpu_paths


def test_options_parse_and_bad_values_are_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    args = gpu_paths.parse_args(["--ranks", "2", "--timeout-s", "300", "--keep", "out"])
    assert (args.ranks, args.timeout_s, args.keep) == (2, 300.0, Path("out"))
    defaults = gpu_paths.parse_args([])
    assert (defaults.ranks, defaults.timeout_s, defaults.keep) == (None, 540.0, None)
    for bad, message in ((["--ranks", "0"], "give 1 or more ranks"), (["--timeout-s", "900"], "at most 600 s")):
        with pytest.raises(SystemExit):
            gpu_paths.parse_args(bad)
        assert message in capsys.readouterr().err


def test_the_world_takes_a_device_a_rank() -> None:
    assert gpu_paths.world_size(None, 0) == (0, "no CUDA device on this host (torch.cuda.device_count() is 0)")
    assert gpu_paths.world_size(None, 2) == (2, None)
    assert gpu_paths.world_size(None, 16) == (8, None)
    assert gpu_paths.world_size(1, 4) == (1, None)
    assert gpu_paths.world_size(3, 2) == (0, "--ranks 3 needs 3 CUDA devices, this host has 2")


def case(name: str, outcome: str = "passed", **medians: float) -> dict[str, object]:
    return {"nodeid": f"test_gpu_paths.py::{name}", "outcome": outcome,
            "metrics": {metric: {"stats": {"median": value}} for metric, value in medians.items()}}


ALL_PASSED = [case("test_set_device_per_rank"), case("test_nccl_collectives"),
              case("test_nccl_busbw[all_reduce]", busbw_gbps=120.0), case("test_peak_cuda_mb", peak_cuda_mb=134.2),
              case("test_cuda_oom_search"), case("test_matches_single_process_reference_float64[ws2-ddp-mlp-sgd]")]


def test_the_report_gives_a_line_a_path() -> None:
    lines = gpu_paths.path_lines(ALL_PASSED, 2, None)
    assert len(lines) == len(gpu_paths.PATHS) and all(line.startswith("  passed ") for line in lines), lines
    assert any("busbw_gbps=120" in line for line in lines) and any("peak_cuda_mb=134.2" in line for line in lines)


def test_failures_missing_cases_small_peaks_and_paths_that_need_more_ranks_are_said() -> None:
    failed = [case("test_set_device_per_rank", "failed"), *ALL_PASSED[1:3], case("test_peak_cuda_mb", peak_cuda_mb=2.0)]
    lines = gpu_paths.path_lines(failed, 2, None)
    assert lines[0].startswith("  FAILED   set_device per rank: 1 failed; test_set_device_per_rank failed"), lines
    assert lines[3].startswith("  FAILED   peak_cuda_mb") and "peak_cuda_mb 2 below the 67.11 MB" in lines[3]
    no_peak = gpu_paths.path_lines([case("test_peak_cuda_mb")], 2, None)[3]  # passed on a rank, nothing measured
    assert no_peak.startswith("  FAILED   peak_cuda_mb: 1 passed; FAILED: no peak_cuda_mb recorded"), no_peak
    assert lines[4].startswith("  FAILED   CUDA out-of-memory search: no case recorded"), lines
    one_rank = gpu_paths.path_lines(ALL_PASSED, 1, None)
    assert one_rank[1] == ("  not run  NCCL collectives between 2+ ranks: needs 2 ranks on 2 CUDA devices, "
                           "ran with 1")


def test_without_a_cuda_device_nothing_runs_and_the_report_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # the count is given (0, as this host has; counting in a new interpreter would import torch again)
    assert gpu_paths.main([], count_devices=lambda: 0) == 2
    out = capsys.readouterr().out
    assert "0 CUDA device(s)" in out and "`python -m studies.gpu_paths`" in out, out
    assert out.count("  not run  ") == len(gpu_paths.PATHS), out
    assert "no CUDA device on this host" in out
