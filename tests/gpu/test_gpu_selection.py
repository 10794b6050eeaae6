"""How the GPU tests are selected, without a GPU: collected on every host, run where the host has the CUDA
devices they need (NCCL between 2 ranks where it has 2), skipped with the reason elsewhere. The device count of
a GPU host is mocked here (a fake driver folder and counter): there is no GPU on the machines that run this."""

from __future__ import annotations

import os
from pathlib import Path

from tests import gpu_host
from tests.gpu_host import HOST_VISIBLE_VAR, UNSET, count_host_devices, host_env, remember_host_setting, skip_reason


def driver_with(tmp_path: Path, gpus: int) -> Path:
    """A stand-in for /proc/driver/nvidia/gpus with ``gpus`` entries (mock: no GPU here)."""
    folder = tmp_path / "gpus"
    folder.mkdir()
    for index in range(gpus):
        (folder / f"0000:0{index}:00.0").mkdir()
    return folder


def counter(devices: int, calls: list[dict[str, str]]) -> object:
    def count(env: dict[str, str]) -> int:  # mock of torch.cuda.device_count() in a subprocess
        calls.append(env)
        return devices
    return count


def test_a_host_with_devices_runs_the_tests_and_one_without_skips_them_with_the_reason(tmp_path: Path) -> None:
    calls: list[dict[str, str]] = []
    two = count_host_devices({}, driver_with(tmp_path, 2), counter(2, calls))  # type: ignore[arg-type]
    assert two == 2 and len(calls) == 1
    assert skip_reason(1, two) is None and skip_reason(2, two) is None  # NCCL between 2 ranks runs
    one_reason = skip_reason(2, 1)
    assert one_reason is not None and "needs 2 CUDA devices (NCCL between 2 ranks); this host has 1" in one_reason
    none_reason = skip_reason(1, 0)
    assert none_reason is not None and none_reason.startswith("needs a CUDA device; this host has 0")


def test_no_driver_or_hidden_devices_count_zero_without_starting_a_process(tmp_path: Path) -> None:
    calls: list[dict[str, str]] = []
    count = counter(4, calls)
    assert count_host_devices({}, tmp_path / "absent", count) == 0  # type: ignore[arg-type]
    assert count_host_devices({}, driver_with(tmp_path, 0), count) == 0  # type: ignore[arg-type]
    gpus = tmp_path / "gpus"
    for hidden in ("", "-1"):
        assert count_host_devices({"CUDA_VISIBLE_DEVICES": hidden}, gpus, count) == 0  # type: ignore[arg-type]
    assert calls == []
    # negative control: the same driver folder with GPUs in it and the devices not hidden is counted
    (gpus / "0000:01:00.0").mkdir()
    assert count_host_devices({"CUDA_VISIBLE_DEVICES": "0,1"}, gpus, count) == 4  # type: ignore[arg-type]


def test_the_host_setting_survives_the_suite_hiding_the_gpus_and_is_given_back_to_gpu_subprocesses() -> None:
    environ = {"CUDA_VISIBLE_DEVICES": "0,1"}
    remember_host_setting(environ)
    environ["CUDA_VISIBLE_DEVICES"] = ""  # what tests/conftest.py does next
    remember_host_setting(environ)  # an xdist worker inherits the record and keeps it
    assert environ[HOST_VISIBLE_VAR] == "0,1"
    assert host_env(environ)["CUDA_VISIBLE_DEVICES"] == "0,1"
    unset: dict[str, str] = {}
    remember_host_setting(unset)
    unset["CUDA_VISIBLE_DEVICES"] = ""
    assert unset[HOST_VISIBLE_VAR] == UNSET and "CUDA_VISIBLE_DEVICES" not in host_env(unset)


def test_this_suite_hides_gpus_from_itself_but_not_from_the_gpu_tests() -> None:
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    assert HOST_VISIBLE_VAR in os.environ  # recorded before the hiding, so the GPU tests can see the host's GPUs


def test_the_gpu_tests_are_collected_here_and_skipped_with_the_reason_when_the_host_lacks_devices() -> None:
    from tests.gpu import test_nccl_paths
    from tests.studies import test_gpu_paths
    from tests.sweeps import test_sweeps_cuda

    found = gpu_host.host_devices()
    for module, needed in ((test_nccl_paths, 1), (test_sweeps_cuda, 1), (test_gpu_paths, 2)):
        mark = module.pytestmark
        assert mark.name == "skipif", module.__name__
        assert mark.args == (found < needed,), (module.__name__, mark.args)
        if found < needed:
            assert mark.kwargs["reason"] == skip_reason(needed, found)
